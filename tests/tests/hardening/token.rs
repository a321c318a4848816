//! The bearer token stays wexec's: no child inherits `WEXEC_TOKEN`, and neither wexec's nor its
//! supervisor's `/proc/<pid>/environ` shows it, even to a reader allowed to open it (as root
//! is; others are kept out because wexec is not dumpable).

use serde_json::json;
use wexec_tests::{command, spawn_websocket_with};

const TOKEN: &str = "wexec-test-token-d1f9a4";

#[tokio::test]
async fn no_child_and_no_environ_file_shows_the_token() {
    let mut wexec = command(&["--listen", "ws://127.0.0.1:0"]);
    wexec.env("WEXEC_TOKEN", TOKEN);
    let server = spawn_websocket_with(wexec).await;
    let mut client = server
        .connect_with(Some(TOKEN))
        .await
        .expect("upgrade with the token");
    client.handshake().await;
    let pid = server.pid();
    let script = format!("env; cat /proc/{pid}/environ; echo done");
    let params = json!({
        "processId": "reader",
        "argv": ["sh", "-c", script],
        "cwd": "/",
        "env": {},
        "envPolicy": {"inherit": "all", "ignoreDefaultExcludes": true, "exclude": [], "set": {}, "includeOnly": []},
        "tty": false,
    });
    client.call("process/start", params).await;
    let mut output = Vec::new();
    loop {
        let notification = client.next_notification().await;
        match notification["method"].as_str() {
            Some("process/output") => {
                let chunk = notification["params"]["chunk"].as_str().expect("chunk");
                output.extend(
                    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, chunk)
                        .expect("base64"),
                );
            }
            Some("process/closed") => break,
            _ => {}
        }
    }
    let output = String::from_utf8_lossy(&output);
    assert!(output.contains("done"), "{output}");
    assert!(!output.contains(TOKEN), "the token leaked: {output}");
    // Read from outside too, wexec's and its children's (the supervisor): the test may be
    // allowed to read them.
    let mut readers = vec![pid];
    readers.extend(children(pid));
    assert!(
        readers.len() >= 2,
        "the supervisor's zygote is a child: {readers:?}"
    );
    for reader in readers {
        if let Ok(environ) = std::fs::read(format!("/proc/{reader}/environ")) {
            assert!(
                !String::from_utf8_lossy(&environ).contains(TOKEN),
                "pid {reader}"
            );
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let dumpable = std::fs::metadata(format!("/proc/{pid}/environ")).expect("environ");
    // Not dumpable: its per-process files belong to root.
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&dumpable),
        0,
        "{status}"
    );
}

/// The children of `pid`, from `/proc`'s parent links.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}
