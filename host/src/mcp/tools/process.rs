//! Process tools: `run_command` and the long-running set (`start_process`,
//! `read_process_output`, `write_process_input`, `terminate_process`, `list_processes`). Each
//! starts, reads and ends processes with the Codex face's `process/*` methods, so every one
//! runs under the effective sandbox exactly as `process/start` runs it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::{Answer, Call, Failure, Outcome, definition, hints, object, string, unsigned};
use crate::mcp::door::Door;
use crate::process::ProcessEvent;
use crate::protocol::OutputStream;

/// `run_command`'s default limit on how long a command runs.
const DEFAULT_TIMEOUT_MS: u64 = 120_000;

/// `run_command`'s default limit on the output kept per stream.
const DEFAULT_MAX_OUTPUT_BYTES: u64 = 256 * 1024;

/// The most output kept per stream, whatever the client asks.
const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// After the exit, how long `run_command` waits for output held by descendants that keep the
/// pipes open (a daemon): their output is left out after it.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// After terminating a command (timeout, cancellation), how long to wait for its end.
const TERMINATE_WAIT: Duration = Duration::from_secs(5);

/// At most one progress notification per this interval.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// `read_process_output`'s longest wait.
const MAX_WAIT_MS: u64 = 60_000;

/// `read_process_output`'s default output budget.
const DEFAULT_READ_BYTES: u64 = 64 * 1024;

/// A schema for `kind` or `null`, spelled as one type per branch (portable to clients that map
/// schemas onto single-type dialects).
fn nullable(kind: &str) -> Value {
    json!({"anyOf": [{"type": kind}, {"type": "null"}]})
}

/// The tools' definitions; `open_world`: processes may use the network.
pub fn definitions(open_world: bool) -> Vec<Value> {
    let command =
        json!({"type": "string", "description": "A shell command line, run by /bin/sh -c."});
    let argv = json!({"type": "array", "items": {"type": "string"}, "minItems": 1,
        "description": "The program and its arguments, run without a shell (instead of `command`)."});
    let cwd = json!({"type": "string", "description": "Working directory: absolute, or relative to the first allowed directory (the default)."});
    let env = json!({"type": "object", "additionalProperties": {"type": "string"},
        "description": "Variables set on top of the inherited environment (wexec's own, without names matching *KEY*, *SECRET*, *TOKEN*)."});
    let process_id = json!({"type": "string", "description": "The id start_process returned."});
    let run_output = json!({
        "type": "object",
        "properties": {
            "process_id": {"type": "string"},
            "exit_code": nullable("integer"),
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "stdout_truncated": {"type": "boolean"},
            "stderr_truncated": {"type": "boolean"},
            "timed_out": {"type": "boolean"},
            "sandbox_denied": {"type": "boolean"},
            "failure": nullable("string"),
            "duration_ms": {"type": "integer"},
        },
        "required": ["process_id", "exit_code", "stdout", "stderr", "stdout_truncated",
            "stderr_truncated", "timed_out", "sandbox_denied", "failure", "duration_ms"],
    });
    let read_output = json!({
        "type": "object",
        "properties": {
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "next_seq": {"type": "integer"},
            "exited": {"type": "boolean"},
            "exit_code": nullable("integer"),
            "closed": {"type": "boolean"},
            "sandbox_denied": {"type": "boolean"},
            "failure": nullable("string"),
        },
        "required": ["stdout", "stderr", "next_seq", "exited", "exit_code", "closed",
            "sandbox_denied", "failure"],
    });
    vec![
        definition(
            "run_command",
            "Run a command",
            "Runs a command to completion in wexec's process sandbox and returns its exit code, \
             stdout and stderr. Give `command` (a shell line) or `argv`. Output beyond \
             `max_output_bytes` per stream keeps its beginning and end. A command still running \
             after `timeout_ms` is terminated with everything it started.",
            object(
                json!({
                    "command": command,
                    "argv": argv,
                    "cwd": cwd,
                    "env": env,
                    "stdin": {"type": "string", "description": "Text written to the command's stdin, which is then closed."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Default 120000."},
                    "max_output_bytes": {"type": "integer", "minimum": 1, "description": "Output kept per stream; default 262144."},
                }),
                &[],
            ),
            Some(run_output),
            hints(false, true, false, open_world),
        ),
        definition(
            "start_process",
            "Start a process",
            "Starts a long-running process in wexec's process sandbox and returns its id at once; \
             read its output with read_process_output, write to it with write_process_input, \
             end it with terminate_process.",
            object(
                json!({
                    "command": command,
                    "argv": argv,
                    "cwd": cwd,
                    "env": env,
                    "tty": {"type": "boolean", "description": "Run it on a pseudo-terminal (default false)."},
                }),
                &[],
            ),
            Some(object(
                json!({"process_id": {"type": "string"}, "sandbox_type": {"type": "string"}}),
                &["process_id", "sandbox_type"],
            )),
            hints(false, true, false, open_world),
        ),
        definition(
            "read_process_output",
            "Read a process's output",
            "Returns the output a process wrote after `after_seq` (0 = from the start; pass \
             back `next_seq` to continue), waiting up to `wait_ms` for some, and whether it \
             exited.",
            object(
                json!({
                    "process_id": process_id,
                    "after_seq": {"type": "integer", "minimum": 0},
                    "wait_ms": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS},
                    "max_bytes": {"type": "integer", "minimum": 1},
                }),
                &["process_id"],
            ),
            Some(read_output),
            hints(true, false, false, false),
        ),
        definition(
            "write_process_input",
            "Write to a process's stdin",
            "Writes text to a process's stdin (a process started with start_process); with \
             `close_stdin`, then ends its input.",
            object(
                json!({
                    "process_id": process_id,
                    "input": {"type": "string"},
                    "close_stdin": {"type": "boolean"},
                }),
                &["process_id", "input"],
            ),
            Some(object(json!({"status": {"type": "string"}}), &["status"])),
            hints(false, true, false, false),
        ),
        definition(
            "terminate_process",
            "Terminate a process",
            "Ends a process and everything it started (SIGTERM, then SIGKILL after 2 s).",
            object(json!({"process_id": process_id}), &["process_id"]),
            Some(object(
                json!({"running": {"type": "boolean"}}),
                &["running"],
            )),
            hints(false, true, true, false),
        ),
        definition(
            "list_processes",
            "List processes",
            "Lists the processes started by this client that wexec still knows (a closed one \
             is kept 30 s).",
            object(json!({}), &[]),
            Some(json!({
                "type": "object",
                "properties": {"processes": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "process_id": {"type": "string"},
                        "command": {"type": "string"},
                        "cwd": {"type": "string"},
                        "exited": {"type": "boolean"},
                        "exit_code": nullable("integer"),
                        "closed": {"type": "boolean"},
                    },
                    "required": ["process_id", "command", "cwd", "exited", "exit_code", "closed"],
                }}},
                "required": ["processes"],
            })),
            hints(true, false, false, false),
        ),
    ]
}

/// Runs process tool `name`, if it is one.
pub async fn call(name: &str, call: &Call, arguments: &Value) -> Option<Outcome> {
    Some(match name {
        "run_command" => run_command(call, arguments).await,
        "start_process" => start_process(call, arguments).await,
        "read_process_output" => read_output(call, arguments).await,
        "write_process_input" => write_input(call, arguments).await,
        "terminate_process" => terminate(&call.door, arguments).await,
        "list_processes" => list(&call.door).await,
        _ => return None,
    })
}

/// What to run: `argv`, or `command` through `/bin/sh -c`.
fn argv(arguments: &Value) -> Result<(Vec<String>, String), Failure> {
    let argv = arguments.get("argv").and_then(Value::as_array).map(|argv| {
        argv.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    match (string(arguments, "command"), argv) {
        (Some(_), Some(_)) => Err("give either `command` or `argv`, not both".into()),
        (None, None) => Err("give `command` (a shell line) or `argv`".into()),
        (Some(command), None) => Ok((
            vec!["/bin/sh".to_owned(), "-c".to_owned(), command.to_owned()],
            command.to_owned(),
        )),
        (None, Some(argv)) if argv.is_empty() => Err("`argv` must not be empty".into()),
        (None, Some(argv)) => {
            let shown = argv.join(" ");
            Ok((argv, shown))
        }
    }
}

/// `process/start` params for the tool's arguments.
fn start_params(
    door: &Door,
    id: &str,
    arguments: &Value,
    argv: Vec<String>,
) -> Result<(Value, String), Failure> {
    let cwd = door.resolve(string(arguments, "cwd").unwrap_or("."))?;
    let set = arguments.get("env").cloned().unwrap_or_else(|| json!({}));
    let tty = arguments
        .get("tty")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let params = json!({
        "processId": id,
        "argv": argv,
        "cwd": cwd,
        "env": {},
        "envPolicy": {
            "inherit": "all",
            "ignoreDefaultExcludes": false,
            "exclude": [],
            "set": set,
            "includeOnly": [],
        },
        "tty": tty,
        "pipeStdin": !tty,
    });
    Ok((params, cwd))
}

/// Output kept from one stream: its beginning and its end, within a budget.
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    total: u64,
}

impl Capture {
    fn new(budget: u64) -> Self {
        let half = usize::try_from(budget / 2).unwrap_or(usize::MAX).max(1);
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            half,
            total: 0,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        let room = self.half.saturating_sub(self.head.len());
        let (first, rest) = data.split_at(room.min(data.len()));
        self.head.extend_from_slice(first);
        data = rest;
        if data.len() >= self.half {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.half..]);
            return;
        }
        let excess = (self.tail.len() + data.len()).saturating_sub(self.half);
        self.tail.drain(..excess);
        self.tail.extend(data);
    }

    fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    fn text(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if !self.truncated() {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let omitted = self.total - (self.head.len() + tail.len()) as u64;
        format!(
            "{}\n[... {omitted} bytes omitted ...]\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&tail)
        )
    }
}

async fn run_command(call: &Call, arguments: &Value) -> Outcome {
    let door = &call.door;
    let (argv, shown) = argv(arguments)?;
    let id = door.new_process_id();
    let (params, cwd) = start_params(door, &id, arguments, argv)?;
    let timeout =
        Duration::from_millis(unsigned(arguments, "timeout_ms").unwrap_or(DEFAULT_TIMEOUT_MS));
    let budget = unsigned(arguments, "max_output_bytes")
        .unwrap_or(DEFAULT_MAX_OUTPUT_BYTES)
        .min(MAX_OUTPUT_BYTES);
    let started = Instant::now();
    let mut events = door.watch_process(&id);
    let start = door.call("process/start", params).await;
    if let Err(error) = start {
        door.unwatch_process(&id);
        return Err(Failure(format!("cannot run `{shown}`: {}", error.message)));
    }
    door.remember(&id, &shown, &cwd);
    if let Some(input) = string(arguments, "stdin") {
        let write = json!({"processId": id, "chunk": BASE64.encode(input), "closeStdin": true});
        if let Err(error) = door.call("process/write", write).await {
            tracing::debug!(process = id, "stdin not written: {}", error.message);
        }
    }
    let (mut stdout, mut stderr) = (Capture::new(budget), Capture::new(budget));
    let (mut exit, mut timed_out) = (None, false);
    let mut last_progress: Option<Instant> = None;
    let mut deadline = tokio::time::Instant::now() + timeout;
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = tokio::time::sleep_until(deadline) => {
                if exit.is_some() || timed_out {
                    break;
                }
                timed_out = true;
                door.terminate(&id).await;
                deadline = tokio::time::Instant::now() + TERMINATE_WAIT;
                continue;
            }
            () = call.cancelled.cancelled() => {
                door.terminate(&id).await;
                door.unwatch_process(&id);
                return Err(Failure(format!("`{shown}` was cancelled and terminated")));
            }
        };
        match event {
            Some(ProcessEvent::Output { stream, chunk, .. }) => {
                match stream {
                    OutputStream::Stderr => stderr.push(&chunk),
                    OutputStream::Stdout | OutputStream::Pty => stdout.push(&chunk),
                }
                if let Some(progress) = &call.progress
                    && last_progress.is_none_or(|at| at.elapsed() >= PROGRESS_INTERVAL)
                {
                    last_progress = Some(Instant::now());
                    let bytes = stdout.total + stderr.total;
                    progress
                        .report(bytes as f64, format!("{bytes} bytes of output"))
                        .await;
                }
            }
            Some(ProcessEvent::Exited {
                exit_code,
                sandbox_denied,
                failure,
                ..
            }) => {
                exit = Some((exit_code, sandbox_denied, failure));
                let grace = tokio::time::Instant::now() + CLOSE_GRACE;
                deadline = deadline.min(grace);
            }
            Some(ProcessEvent::Closed { .. }) | None => break,
        }
    }
    door.unwatch_process(&id);
    let (exit_code, sandbox_denied, failure) = match exit {
        Some((code, denied, failure)) => (Some(code), denied, failure),
        None => (None, false, None),
    };
    Ok(Answer::structured(json!({
        "process_id": id,
        "exit_code": exit_code,
        "stdout": stdout.text(),
        "stderr": stderr.text(),
        "stdout_truncated": stdout.truncated(),
        "stderr_truncated": stderr.truncated(),
        "timed_out": timed_out,
        "sandbox_denied": sandbox_denied,
        "failure": failure,
        "duration_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })))
}

async fn start_process(call: &Call, arguments: &Value) -> Outcome {
    let door = &call.door;
    let (argv, shown) = argv(arguments)?;
    let id = door.new_process_id();
    let (params, cwd) = start_params(door, &id, arguments, argv)?;
    let started = door
        .call("process/start", params)
        .await
        .map_err(|error| Failure(format!("cannot start `{shown}`: {}", error.message)))?;
    door.remember(&id, &shown, &cwd);
    let sandbox_type = started.get("sandboxType").cloned().unwrap_or(Value::Null);
    Ok(Answer::structured(
        json!({"process_id": id, "sandbox_type": sandbox_type}),
    ))
}

fn process_id(arguments: &Value) -> Result<&str, Failure> {
    string(arguments, "process_id").ok_or_else(|| "missing required argument `process_id`".into())
}

async fn read_output(call: &Call, arguments: &Value) -> Outcome {
    let id = process_id(arguments)?;
    let params = json!({
        "processId": id,
        "afterSeq": unsigned(arguments, "after_seq").unwrap_or(0),
        "maxBytes": unsigned(arguments, "max_bytes").unwrap_or(DEFAULT_READ_BYTES),
        "waitMs": unsigned(arguments, "wait_ms").unwrap_or(0).min(MAX_WAIT_MS),
    });
    let read = tokio::select! {
        read = call.door.call("process/read", params) => read,
        () = call.cancelled.cancelled() => return Err("the read was cancelled".into()),
    };
    let read = read.map_err(|error| Failure::of(format!("process {id}"), &error))?;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for chunk in (read.get("chunks").and_then(Value::as_array))
        .into_iter()
        .flatten()
    {
        let bytes = (chunk.get("chunk").and_then(Value::as_str))
            .and_then(|data| wexec_base64::decode(data).ok())
            .unwrap_or_default();
        match chunk.get("stream").and_then(Value::as_str) {
            Some("stderr") => stderr.extend(bytes),
            _ => stdout.extend(bytes),
        }
    }
    Ok(Answer::structured(json!({
        "stdout": String::from_utf8_lossy(&stdout),
        "stderr": String::from_utf8_lossy(&stderr),
        "next_seq": read.get("nextSeq").cloned().unwrap_or(json!(0)),
        "exited": read.get("exited").cloned().unwrap_or(json!(false)),
        "exit_code": read.get("exitCode").cloned().unwrap_or(Value::Null),
        "closed": read.get("closed").cloned().unwrap_or(json!(false)),
        "sandbox_denied": read.get("sandboxDenied").cloned().unwrap_or(json!(false)),
        "failure": read.get("failure").cloned().unwrap_or(Value::Null),
    })))
}

async fn write_input(call: &Call, arguments: &Value) -> Outcome {
    let id = process_id(arguments)?;
    let input = string(arguments, "input").unwrap_or_default();
    let close = arguments
        .get("close_stdin")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let params = json!({"processId": id, "chunk": BASE64.encode(input), "closeStdin": close});
    let written = tokio::select! {
        written = call.door.call("process/write", params) => written,
        () = call.cancelled.cancelled() => return Err("the write was cancelled".into()),
    };
    let written = written.map_err(|error| Failure::of(format!("process {id}"), &error))?;
    let status = written.get("status").and_then(Value::as_str).unwrap_or("");
    match status {
        "accepted" => Ok(Answer::structured(json!({"status": status}))),
        "unknownProcess" => Err(Failure(format!("no process {id}"))),
        "starting" => Err(Failure(format!(
            "process {id} is still starting; try again"
        ))),
        _ => Err(Failure(format!("process {id} no longer reads its stdin"))),
    }
}

async fn terminate(door: &Door, arguments: &Value) -> Outcome {
    let id = process_id(arguments)?;
    let ended = door
        .call("process/terminate", json!({"processId": id}))
        .await
        .map_err(|error| Failure::of(format!("process {id}"), &error))?;
    Ok(Answer::structured(
        json!({"running": ended.get("running").cloned().unwrap_or(json!(false))}),
    ))
}

async fn list(door: &Door) -> Outcome {
    let mut processes = Vec::new();
    for (id, command, cwd) in door.remembered() {
        let status = json!({"processId": id, "afterSeq": u64::MAX, "maxBytes": 1});
        match door.call("process/read", status).await {
            Ok(state) => processes.push(json!({
                "process_id": id,
                "command": command,
                "cwd": cwd,
                "exited": state.get("exited").cloned().unwrap_or(json!(false)),
                "exit_code": state.get("exitCode").cloned().unwrap_or(Value::Null),
                "closed": state.get("closed").cloned().unwrap_or(json!(false)),
            })),
            // No longer retained.
            Err(_) => door.forget(&id),
        }
    }
    Ok(Answer::structured(json!({"processes": processes})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_keep_the_beginning_and_the_end() {
        let mut capture = Capture::new(8);
        capture.push(b"ab");
        assert_eq!(
            (capture.text().as_str(), capture.truncated()),
            ("ab", false)
        );
        capture.push(b"cdefgh");
        assert_eq!(
            (capture.text().as_str(), capture.truncated()),
            ("abcdefgh", false)
        );
        capture.push(b"ijklmnopqrstuvwxyz");
        assert!(capture.truncated());
        assert_eq!(capture.text(), "abcd\n[... 18 bytes omitted ...]\nwxyz");
        capture.push(b"1");
        assert_eq!(capture.text(), "abcd\n[... 19 bytes omitted ...]\nxyz1");
    }

    #[test]
    fn commands_and_argv_are_exclusive() {
        assert!(argv(&json!({})).is_err());
        assert!(argv(&json!({"command": "x", "argv": ["y"]})).is_err());
        assert!(argv(&json!({"argv": []})).is_err());
        assert_eq!(
            argv(&json!({"command": "echo hi"})).unwrap().0,
            ["/bin/sh", "-c", "echo hi"]
        );
    }
}
