//! No file inside a root can wedge the server: writes (and reads) open only regular files,
//! non-blocking, checked on the opened descriptor. A FIFO, a socket or a device gets a clear
//! error naming the path and what it is, at once; the server stays responsive and still ends
//! on SIGTERM (docs/plugins.md, "Filesystem").

use pretty_assertions::assert_eq;
use serde_json::json;
use wexec_tests::{TempDir, rpc_error, spawn_stdio};

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(status.success());
}

#[tokio::test]
async fn writes_onto_fifos_sockets_and_devices_are_refused_at_once() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind socket");
    std::fs::write(dir.path().join("source.txt"), "source").expect("write");
    // A character device needs CAP_MKNOD: made when the tests run as root, as on CI.
    let device = dir.path().join("null");
    let have_device = std::process::Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !have_device {
        eprintln!("not root: the character-device case is skipped");
    }
    let (mut server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;

    let mut specials = vec![(fifo.clone(), "a FIFO"), (socket.clone(), "a socket")];
    if have_device {
        specials.push((device.clone(), "a character device"));
    }
    for (special, what) in &specials {
        let path = special.display().to_string();
        let refused = rpc_error(
            -32600,
            &format!("path `{path}` is {what}, not a regular file; only regular files are written"),
        );
        assert_eq!(
            client
                .call_err("fs/writeFile", json!({"path": path, "dataBase64": "eA=="}))
                .await,
            refused,
            "fs/writeFile"
        );
        assert_eq!(
            client
                .call_err(
                    "fs/open",
                    json!({"handleId": "h", "path": path, "mode": "replace"})
                )
                .await,
            refused,
            "fs/open replace"
        );
        let source = dir.path().join("source.txt").display().to_string();
        assert_eq!(
            client
                .call_err(
                    "fs/copy",
                    json!({"sourcePath": source, "destinationPath": path, "recursive": false})
                )
                .await,
            refused,
            "fs/copy onto it"
        );
        assert_eq!(
            client.call_err("fs/readFile", json!({"path": path})).await,
            rpc_error(-32600, &format!("path `{path}` is not a file")),
            "fs/readFile"
        );
    }
    // Through a symlink inside the root too.
    std::os::unix::fs::symlink(&fifo, dir.path().join("link")).expect("symlink");
    let link = dir.path().join("link").display().to_string();
    let fifo_path = fifo.display().to_string();
    assert_eq!(
        client
            .call_err("fs/writeFile", json!({"path": link, "dataBase64": "eA=="}))
            .await,
        rpc_error(
            -32600,
            &format!("path `{link}` is a FIFO, not a regular file; only regular files are written")
        ),
    );
    // A FIFO source is no regular file, directory or symlink.
    let copy = dir.path().join("copy").display().to_string();
    assert_eq!(
        client
            .call_err(
                "fs/copy",
                json!({"sourcePath": fifo_path, "destinationPath": copy, "recursive": false})
            )
            .await,
        rpc_error(
            -32600,
            "fs/copy only supports regular files, directories, and symlinks"
        )
    );
    if have_device {
        let data = std::fs::metadata(&device).expect("device is still there");
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(
            &data.file_type()
        ));
    }
    // Nothing is stuck: the server answers and ends on SIGTERM.
    assert_eq!(
        client.call("environment/status", json!({})).await,
        json!({"status": "ready"})
    );
    server.kill_with("TERM").await;
    assert!(server.wait().await.success());
}
