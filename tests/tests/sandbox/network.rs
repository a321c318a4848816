//! The network of confined processes (docs/sandbox.md): off by default — no socket but
//! `AF_UNIX` pairs, no path connects, the host's loopback unreachable — and on only when the
//! request asks for it and the operator allows it.

use std::time::Duration;

use wexec_tests::{TempDir, spawn_stdio};

use super::{codex_workspace_write, run};

const PY_CONNECT: &str = "import socket,sys; s=socket.socket(); s.settimeout(5); s.connect(('127.0.0.1', int(sys.argv[1]))); print('connected')";

fn accepted(listener: &std::net::TcpListener) -> bool {
    std::thread::sleep(Duration::from_millis(100));
    listener.accept().is_ok()
}

#[tokio::test]
async fn network_off_leaves_only_unix_socket_pairs() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let unix_path = dir.path().join("host.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&unix_path).expect("unix bind");
    // Even with --process-network, a request for a restricted network gets none.
    for args in [
        vec!["--fs-root", &root],
        vec!["--fs-root", &root, "--process-network"],
    ] {
        let (_server, mut client) = spawn_stdio(&args);
        client.handshake().await;
        let sandbox = codex_workspace_write(dir.path(), "restricted", true);
        let tcp = run(
            &mut client,
            "tcp",
            &format!("python3 -c \"{PY_CONNECT}\" {port}"),
            dir.path(),
            sandbox.clone(),
        )
        .await;
        assert_eq!(tcp.exit, 1, "{tcp:?}");
        assert!(
            tcp.output
                .contains("PermissionError: [Errno 1] Operation not permitted"),
            "{tcp:?}"
        );
        assert!(tcp.denied, "{tcp:?}");
        assert!(
            !accepted(&listener),
            "the host's loopback listener saw a connection"
        );
        let unix = run(
            &mut client,
            "unix",
            &format!(
                "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{}')\"",
                unix_path.display()
            ),
            dir.path(),
            sandbox.clone(),
        )
        .await;
        assert!(unix.output.contains("Operation not permitted"), "{unix:?}");
        let pair = run(
            &mut client,
            "pair",
            "python3 -c \"import socket; a,b=socket.socketpair(); a.send(b'x'); print(b.recv(1))\"",
            dir.path(),
            sandbox,
        )
        .await;
        assert_eq!((pair.exit, pair.output.as_str()), (0, "b'x'\n"), "{pair:?}");
    }
}

#[tokio::test]
async fn network_on_needs_both_the_request_and_the_operator() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let script = format!("python3 -c \"{PY_CONNECT}\" {port}");
    let sandbox = codex_workspace_write(dir.path(), "enabled", true);
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let refused = run(&mut client, "off", &script, dir.path(), sandbox.clone()).await;
    assert!(
        refused.output.contains("Operation not permitted"),
        "{refused:?}"
    );
    assert!(!accepted(&listener));
    drop(client);
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root, "--process-network"]);
    client.handshake().await;
    let on = run(&mut client, "on", &script, dir.path(), sandbox).await;
    assert_eq!((on.exit, on.output.as_str()), (0, "connected\n"), "{on:?}");
    assert!(accepted(&listener));
}

/// A confined process with network shares the host's network namespace, but never reaches
/// wexec's own listener: on loopback no token is needed, and through it the process could
/// start another with less confinement than its own. Other local ports stay reachable.
#[tokio::test]
async fn a_confined_process_with_network_cannot_reach_wexecs_own_listener() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let other = listener.local_addr().expect("addr").port();
    for ceiling in [
        vec!["--fs-root", &root, "--process-network"],
        vec!["--fs-root", &root, "--sandbox", "danger-full-access"],
    ] {
        let server = wexec_tests::spawn_websocket(&ceiling).await;
        let url = server.url.clone().expect("url");
        let own: u16 = url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("port");
        let mut client = server.connect().await;
        client.handshake().await;
        let read_only_with_network = super::managed(
            dir.path(),
            vec![super::special("root", None, "read")],
            "enabled",
        );
        let own_port = run(
            &mut client,
            "own",
            &format!("python3 -c \"{PY_CONNECT}\" {own}"),
            dir.path(),
            read_only_with_network.clone(),
        )
        .await;
        assert_eq!(own_port.exit, 1, "{ceiling:?}: {own_port:?}");
        assert!(
            own_port.output.contains("PermissionError: [Errno 13]"),
            "{ceiling:?}: {own_port:?}"
        );
        let other_port = run(
            &mut client,
            "other",
            &format!("python3 -c \"{PY_CONNECT}\" {other}"),
            dir.path(),
            read_only_with_network,
        )
        .await;
        assert_eq!(
            (other_port.exit, other_port.output.as_str()),
            (0, "connected\n"),
            "{ceiling:?}: {other_port:?}"
        );
        assert!(accepted(&listener));
    }
}
