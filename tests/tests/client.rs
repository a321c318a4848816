//! `wexec_client` against the real binary, over stdio and WebSocket.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers of a test fail the test on any error"
)]

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use wexec_client::{
    Client, ClientError, ClientOptions, ProcessEvent, StdioCommand, WebSocketTarget,
};
use wexec_protocol::{
    FsOpenMode, FsOpenParams, FsPathParams, HttpRequestParams, OutputStream, ProcessStartParams,
};
use wexec_tests::{TIMEOUT, TempDir, http_server, spawn_websocket};

/// wexec with `args`, its processes unconfined (these tests look at their host pids).
fn wexec(args: &[&str]) -> StdioCommand {
    let mut all = vec!["--sandbox", "danger-full-access"];
    all.extend_from_slice(args);
    wexec_tests::client_command(&all)
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .expect("in time")
}

#[tokio::test]
async fn a_stdio_client_drives_processes_files_and_plugins() {
    let dir = TempDir::new();
    let root = dir.path().to_str().unwrap().to_owned();
    let client = Client::connect_stdio(wexec(&["--fs-root", &root]), ClientOptions::new("e2e"))
        .await
        .unwrap();

    let info = client.environment_info().await.unwrap();
    assert_eq!(info.executor_version, wexec::VERSION);
    let plugins = &info.wexec.as_ref().unwrap().plugins;
    assert!(plugins.iter().any(|plugin| plugin.name == "fs"));
    // `initialize` embeds what wexec knew at startup, before its sandbox probe answered.
    let mut asked = info.clone();
    if let Some(wexec) = asked.wexec.as_mut() {
        wexec.sandbox = None;
    }
    let mut embedded = client.initialize_environment().unwrap().ok();
    if let Some(wexec) = embedded.as_mut().and_then(|info| info.wexec.as_mut()) {
        wexec.sandbox = None;
    }
    assert_eq!(Some(asked), embedded);
    assert_eq!(client.environment_status().await.unwrap().status, "ready");
    let list = client.plugin_list().await.unwrap();
    let fs = list
        .plugins
        .iter()
        .find(|plugin| plugin.name == "fs")
        .unwrap();
    assert_eq!(fs.grants.fs_roots.len(), 1);

    // A process with stdout, stderr and an exit code.
    let script = "echo out; echo err >&2; exit 3";
    let start = ProcessStartParams::new("sh", argv(&["sh", "-c", script]), root.as_str());
    let output = within(client.start_process(start).await.unwrap().wait())
        .await
        .unwrap();
    assert_eq!(
        (output.stdout, output.stderr),
        (b"out\n".to_vec(), b"err\n".to_vec())
    );
    assert_eq!(output.exit_code, Some(3));

    // stdin through process/write, output read back through the handle's events.
    let mut start = ProcessStartParams::new("cat", argv(&["cat"]), root.as_str());
    start.pipe_stdin = true;
    let cat = client.start_process(start).await.unwrap();
    use wexec_protocol::WriteStatus;
    assert_eq!(
        cat.write_once(b"ping\n", "w1").await.unwrap(),
        WriteStatus::Accepted
    );
    assert_eq!(
        cat.write_once(b"ping\n", "w1").await.unwrap(),
        WriteStatus::Accepted
    );
    match within(cat.next_event()).await.unwrap() {
        ProcessEvent::Output {
            seq: 1,
            stream: OutputStream::Stdout,
            data,
        } => {
            assert_eq!(data, b"ping\n");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(cat.terminate().await.unwrap());
    let events: Vec<_> = within(async {
        let mut events = Vec::new();
        while let Some(event) = cat.next_event().await {
            events.push(event);
        }
        events
    })
    .await;
    assert_eq!(
        events,
        [
            ProcessEvent::Exited {
                seq: 2,
                exit_code: 143
            },
            ProcessEvent::Closed { seq: 3 }
        ]
    );
    let read = cat.read(Some(0), None, None).await.unwrap();
    assert_eq!(
        (read.chunks.len(), read.closed, read.next_seq),
        (1, true, 4)
    );

    // A start the server refuses leaves no route behind; the id can be used again.
    let refused = ProcessStartParams::new("x", Vec::new(), root.as_str());
    let err = client.start_process(refused).await.unwrap_err();
    assert_eq!(err.code(), Some(-32602), "{err}");
    let again = ProcessStartParams::new("x", argv(&["true"]), root.as_str());
    assert_eq!(
        client
            .start_process(again)
            .await
            .unwrap()
            .wait()
            .await
            .unwrap()
            .exit_code,
        Some(0)
    );

    // Files, through the fs plugin.
    let file = format!("{root}/notes.txt");
    client
        .write_file(file.as_str(), b"hello wexec")
        .await
        .unwrap();
    assert_eq!(
        client
            .read_file(FsPathParams::new(file.as_str()))
            .await
            .unwrap(),
        b"hello wexec"
    );
    let meta = client
        .get_metadata(FsPathParams::new(file.as_str()))
        .await
        .unwrap();
    assert!(meta.is_file && meta.size == 11);
    let entries = client
        .read_directory(FsPathParams::new(root.as_str()))
        .await
        .unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].file_name, "notes.txt");
    let handle = client
        .open(FsOpenParams {
            handle_id: "h".into(),
            path: file.clone(),
            mode: Some(FsOpenMode::Read),
            sandbox: None,
        })
        .await
        .unwrap();
    assert_eq!(
        client.read_block(&handle, 6, 100).await.unwrap(),
        (b"wexec".to_vec(), true)
    );
    client.close(&handle).await.unwrap();
    let err = client
        .read_file(FsPathParams::new("/etc/passwd"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(-32600), "{err}");
    assert!(
        err.to_string().contains("outside the allowed roots"),
        "{err}"
    );
}

#[tokio::test]
async fn dropping_a_stdio_client_ends_wexec_and_its_processes() {
    let client = Client::connect_stdio(wexec(&[]), ClientOptions::new("e2e"))
        .await
        .unwrap();
    let script = "echo $PPID $$; exec sleep 1000";
    let start = ProcessStartParams::new("s", argv(&["sh", "-c", script]), "/");
    let process = client.start_process(start).await.unwrap();
    let Some(ProcessEvent::Output { data, .. }) = within(process.next_event()).await else {
        panic!("no pids");
    };
    let pids: Vec<u32> = String::from_utf8(data)
        .unwrap()
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect();
    drop(process);
    drop(client);
    let deadline = std::time::Instant::now() + TIMEOUT;
    for pid in pids {
        while std::path::Path::new(&format!("/proc/{pid}")).exists() && !zombie(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "{pid} outlived the client"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[tokio::test]
async fn a_websocket_client_streams_http_bodies_with_a_bearer_token() {
    const SIZE: usize = 3 * 1024 * 1024 + 17;
    let (origin, _) = http_server(|_, mut stream| async move {
        let body: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\nX-A: 1\r\nConnection: close\r\n\r\n"
        );
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(&body).await;
    })
    .await;
    let mut command = wexec_tests::command(&[
        "--listen",
        "ws://127.0.0.1:0",
        "--allow-host",
        "127.0.0.1:*",
    ]);
    command.env("WEXEC_TOKEN", "s3cret");
    let server = wexec_tests::spawn_websocket_with(command).await;
    let url = server.url.clone().unwrap();

    let err = Client::connect_websocket(
        WebSocketTarget::new(url.as_str()),
        ClientOptions::new("e2e"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ClientError::Connect { reason, .. } if reason.contains("401")),
        "{err}"
    );

    let target = WebSocketTarget::new(url.as_str()).bearer_token("s3cret");
    let client = Client::connect_websocket(target, ClientOptions::new("e2e"))
        .await
        .unwrap();
    let expected: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let url = format!("http://{origin}/big");

    let reply = client
        .http_request(HttpRequestParams::new("GET", url.as_str()))
        .await
        .unwrap();
    assert_eq!((reply.status, reply.header("x-a")), (200, Some("1")));
    assert!(reply.body == expected);

    let (head, body) = client
        .http_request_streamed(HttpRequestParams::new("GET", url.as_str()))
        .await
        .unwrap();
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    let streamed = within(body.collect()).await.unwrap();
    assert!(streamed == expected, "{} bytes streamed", streamed.len());

    let err = client
        .http_request(HttpRequestParams::new("GET", "http://example.com/"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(-32600), "{err}");
}

#[tokio::test]
async fn a_remote_client_resumes_after_the_server_drops_the_socket() {
    let server = spawn_websocket(&[]).await;
    let client = Client::remote(
        WebSocketTarget::new(server.url.clone().unwrap()),
        ClientOptions::new("e2e"),
    );
    // The second half waits for the disconnect, so that it is recovered across the resume
    // however long sending 65 MiB takes on a busy machine.
    let dir = TempDir::new();
    let marker = dir.path().join("disconnected");
    let script = format!(
        "for i in 1 2 3 4; do echo line$i; done; while [ ! -e {} ]; do sleep 0.05; done; for i in 5 6 7 8; do echo line$i; sleep 0.1; done",
        marker.display()
    );
    let start = ProcessStartParams::new("ticker", argv(&["sh", "-c", &script]), "/");
    let process = client.start_process(start).await.unwrap();
    let session = client.session_id().unwrap();
    let Some(ProcessEvent::Output {
        seq: 1,
        data: first,
        ..
    }) = within(process.next_event()).await
    else {
        panic!("no first line");
    };
    // A message over the server's 64 MiB limit makes it close the socket (1009). The call
    // is not idempotent, so it fails instead of being replayed.
    let huge = "x".repeat(65 * 1024 * 1024);
    let err = client
        .call::<_, serde_json::Value>("probe/echo", &serde_json::json!({"pad": huge}))
        .await
        .unwrap_err();
    assert!(err.is_disconnect(), "{err}");
    std::fs::write(&marker, "").unwrap();
    // The rest arrives — some as notifications after the resume, the part sent while
    // detached recovered with process/read — in order and without gaps.
    let mut stdout = first;
    let mut last_seq = 1;
    let mut exit_code = None;
    while let Some(event) = within(process.next_event()).await {
        let seq = event.seq().unwrap_or_else(|| panic!("{event:?}"));
        assert_eq!(seq, last_seq + 1);
        last_seq = seq;
        match event {
            ProcessEvent::Output { data, .. } => stdout.extend(data),
            ProcessEvent::Exited {
                exit_code: code, ..
            } => exit_code = Some(code),
            _ => {}
        }
    }
    let expected: String = (1..=8).map(|i| format!("line{i}\n")).collect();
    assert_eq!(String::from_utf8(stdout).unwrap(), expected);
    assert_eq!(exit_code, Some(0));
    assert_eq!(client.session_id(), Some(session));
    assert!(client.is_connected());
    assert_eq!(client.environment_status().await.unwrap().status, "ready");
}

/// The chain that keeps the client complete: the server serves nothing of the protocol outside
/// `wexec_protocol::METHODS` (its own table: a unit test of `server::methods`; the bundled
/// plugins' claims: below), and this test sends every method of that list through the client's
/// typed calls, as the server's input shows. A method added to the list without a typed call
/// fails here.
#[tokio::test]
async fn the_client_has_a_typed_call_for_every_method_of_the_protocol() {
    use wexec_protocol::{
        CapabilitiesDiscoverParams, CapabilityRootRequest, CapabilityRootsDiscoverParams,
        EnvironmentConfigReadParams, FsCopyParams, FsCreateDirectoryParams, FsRemoveParams,
        FsWalkOptions, FsWalkParams, FsWatchMissingParams, METHODS, ProcessReadParams,
    };

    let dir = TempDir::new();
    let root = dir.path().to_str().unwrap().to_owned();
    let input = dir.path().join("input.jsonl");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let work = work.to_str().unwrap().to_owned();
    let path = |name: &str| format!("{work}/{name}");
    // wexec's stdin, recorded on its way in. tee writes wexec's copy of a line before the
    // file's, and the client's SIGTERM to the group when it is dropped must not cut the file
    // short: tee ignores it and ends at the end of its input.
    let recorded = StdioCommand::new("sh")
        .args([
            "-c",
            r#"input="$1"; shift; (trap '' TERM; exec tee "$input") | exec "$@""#,
            "sh",
            input.to_str().unwrap(),
            wexec_tests::wexec_bin().to_str().unwrap(),
            "--sandbox",
            "danger-full-access",
            "--fs-root",
            &root,
        ])
        .env(
            "XDG_CACHE_HOME",
            wexec_tests::plugin_cache().display().to_string(),
        )
        .env("RUST_LOG", "wexec=warn");
    let client = Client::connect_stdio(recorded, ClientOptions::new("every-method"))
        .await
        .unwrap();

    client.environment_info().await.unwrap();
    client.environment_status().await.unwrap();
    let listing = client.plugin_list().await.unwrap();
    client
        .environment_config_read(EnvironmentConfigReadParams {
            cwd: work.clone(),
            config_paths: vec![vec!["model".into()]],
            requirements_paths: Vec::new(),
        })
        .await
        .unwrap();
    client
        .discover_capability_roots(CapabilityRootsDiscoverParams {
            roots: vec![CapabilityRootRequest {
                id: "work".into(),
                path: work.clone(),
                sandbox: None,
            }],
        })
        .await
        .unwrap();
    client
        .discover_capabilities(CapabilitiesDiscoverParams {
            cwd: work.clone(),
            sandbox: None,
        })
        .await
        .unwrap();

    let cat = ProcessStartParams::new("cat", argv(&["cat"]), work.as_str());
    let process = client.start_process(cat).await.unwrap();
    process.write(b"x").await.unwrap();
    let read = ProcessReadParams {
        process_id: process.id().to_owned(),
        after_seq: None,
        max_bytes: None,
        wait_ms: Some(0),
    };
    client.process_read(read).await.unwrap();
    process.interrupt().await.unwrap();
    process.terminate().await.unwrap();

    // The watch fires when the file it waits for is written.
    let watch = client
        .watch_missing(FsWatchMissingParams {
            watch_id: 1,
            missing: vec![path("a")],
            present: None,
        })
        .await
        .unwrap()
        .expect("a missing path under a root is watched");
    assert_eq!(watch.id(), 1);
    client.write_file(path("a"), b"abc").await.unwrap();
    within(watch.changed()).await.unwrap();
    assert_eq!(
        client
            .read_file(FsPathParams::new(path("a")))
            .await
            .unwrap(),
        b"abc"
    );
    client
        .create_directory(FsCreateDirectoryParams {
            path: path("d"),
            recursive: None,
            follow_symlinks: None,
            sandbox: None,
        })
        .await
        .unwrap();
    client
        .get_metadata(FsPathParams::new(path("a")))
        .await
        .unwrap();
    client
        .canonicalize(FsPathParams::new(path("d")))
        .await
        .unwrap();
    client
        .read_directory(FsPathParams::new(work.clone()))
        .await
        .unwrap();
    client
        .walk(FsWalkParams {
            path: work.clone(),
            options: FsWalkOptions {
                max_depth: 1,
                max_directories: 10,
                max_entries: 10,
                follow_directory_symlinks: false,
                prune_hidden_directories: false,
            },
            sandbox: None,
        })
        .await
        .unwrap();
    client
        .copy(FsCopyParams {
            source_path: path("a"),
            destination_path: path("b"),
            recursive: false,
            sandbox: None,
        })
        .await
        .unwrap();
    let open = |handle_id: &str, path: String, mode| FsOpenParams {
        handle_id: handle_id.into(),
        path,
        mode: Some(mode),
        sandbox: None,
    };
    let reader = client
        .open(open("r", path("b"), FsOpenMode::Read))
        .await
        .unwrap();
    let (bytes, _) = client.read_block(&reader, 0, 3).await.unwrap();
    assert_eq!(bytes, b"abc");
    let writer = client
        .open(open("w", path("c"), FsOpenMode::Replace))
        .await
        .unwrap();
    client.write_block(&writer, 0, b"xyz").await.unwrap();
    client.close(reader).await.unwrap();
    client.close(writer).await.unwrap();
    client
        .remove(FsRemoveParams {
            path: path("b"),
            recursive: None,
            force: None,
            follow_symlinks: None,
            sandbox: None,
        })
        .await
        .unwrap();
    // No host is granted: the request is sent, and refused.
    let refused = client
        .http_request(HttpRequestParams::new("GET", "http://127.0.0.1:9/"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(-32600), "{refused}");
    drop(process);
    drop(client);

    let recorded = within(async {
        loop {
            // tee has written everything once wexec saw the end of its input.
            let text = std::fs::read_to_string(&input).unwrap_or_default();
            if text.contains("http/request") {
                break text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let sent: std::collections::BTreeSet<String> = recorded
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message.get("id").is_some())
        .filter_map(|message| message["method"].as_str().map(str::to_owned))
        .collect();
    let unsent: Vec<_> = METHODS
        .iter()
        .filter(|method| !sent.contains(**method))
        .collect();
    assert!(unsent.is_empty(), "no typed call sent {unsent:?}");
    for plugin in &listing.plugins {
        for method in &plugin.methods {
            assert!(
                METHODS.contains(&method.as_str()),
                "bundled plugin {} serves {method}, which is not in wexec_protocol::METHODS",
                plugin.name
            );
        }
    }
}
