//! The network of confined processes (docs/sandbox.md): off by default — no socket but
//! `AF_UNIX` pairs, no path connects, the host's loopback unreachable — and on only when the
//! request asks for it and the operator allows it.

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use wexec_tests::{TIMEOUT, TempDir, spawn_stdio};

use super::{codex_workspace_write, run};

const PY_CONNECT: &str = "import socket,sys; s=socket.socket(); s.settimeout(5); s.connect(('127.0.0.1', int(sys.argv[1]))); print('connected')";

/// Codex's read-only object, with the network.
fn read_only_with_network(cwd: &std::path::Path) -> serde_json::Value {
    super::managed(cwd, vec![super::special("root", None, "read")], "enabled")
}

/// The next connection `listener` (non-blocking) takes, waiting for one up to [`TIMEOUT`].
fn next_connection(listener: &TcpListener) -> Option<TcpStream> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Ok((stream, _)) = listener.accept() {
            return Some(stream);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a process that said it connected reached `listener`.
fn accepted(listener: &TcpListener) -> bool {
    next_connection(listener).is_some()
}

/// Whether anyone reached `listener` before now (call it once the process that must not have
/// connected has ended): a connection of the test's own comes after any earlier one, and the
/// listener hands them out in order, so the first it gives is the test's unless another came
/// before.
fn reached_before_now(listener: &TcpListener) -> bool {
    let own = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let first = next_connection(listener).expect("the test's own connection arrives");
    first.peer_addr().expect("peer") != own.local_addr().expect("local")
}

#[tokio::test]
async fn network_off_leaves_only_unix_socket_pairs() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
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
            !reached_before_now(&listener),
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
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
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
    assert!(!reached_before_now(&listener));
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
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
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
        let read_only_with_network = read_only_with_network(dir.path());
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

/// `tests/scripts/socket_reach.py`: every socket the kernel lets a process open, tried against
/// an HTTP listener.
const SOCKET_REACH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/socket_reach.py");

/// What `socket_reach.py` found: `[family, type, protocol]` triples.
#[derive(Debug, serde::Deserialize)]
struct Reach {
    opened: Vec<[i64; 3]>,
    reached: Vec<[i64; 3]>,
    /// What `setsockopt(TCP_ULP)` answered on each TCP socket.
    ulp: std::collections::BTreeMap<String, String>,
}

/// The sockets docs/sandbox.md allows a confined process with network: any `AF_UNIX`, TCP
/// streams and UDP and ICMP datagrams over IPv4 and IPv6, routing netlink.
fn allowed_socket([family, kind, protocol]: [i64; 3]) -> bool {
    matches!(
        (family, kind, protocol),
        (1, _, _) | (2 | 10, 1, 0 | 6) | (2, 2, 0 | 17 | 1) | (10, 2, 0 | 17 | 58) | (16, 2 | 3, 0)
    )
}

/// Landlock's TCP rules cover only `AF_INET`/`AF_INET6` streams of `IPPROTO_TCP` (and, before
/// 6.18.54, not their Fast Open): an MPTCP socket (which falls back to plain TCP) reached
/// wexec's listener without a token and wrote into the process's own read-only workspace
/// through `fs/writeFile`. Every family, type and protocol the kernel offers an unprivileged
/// process is tried here, by `connect` and by Fast Open, with a ULP (SMC's would turn a TCP
/// socket into one Landlock does not see), inside the sandbox; and, to show that the probe does
/// reach a listener when nothing stops it, outside (IPv4 and IPv6 only, in a user namespace of
/// its own: the kernel's answers to an unprivileged process without the filter; other families
/// would make the host load their modules for nothing).
#[tokio::test]
async fn no_socket_of_any_family_or_protocol_reaches_wexecs_own_listener() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    for ceiling in [
        vec!["--fs-root", &root, "--process-network"],
        vec!["--fs-root", &root, "--sandbox", "danger-full-access"],
    ] {
        let server = wexec_tests::spawn_websocket(&ceiling).await;
        let port = wexec_tests::port_of(&server.url.clone().expect("url"));
        let outside = std::process::Command::new("unshare")
            .args(["--user", "python3", SOCKET_REACH, &port, "2", "10"])
            .output()
            .expect("run unshare");
        assert!(outside.status.success(), "{outside:?}");
        let outside: Reach = serde_json::from_slice(&outside.stdout).expect("probe output");
        assert!(
            outside.reached.contains(&[2, 1, 0]),
            "the probe does not reach wexec from outside the sandbox: {outside:?}"
        );
        let mut client = server.connect().await;
        client.handshake().await;
        let inside = run(
            &mut client,
            "reach",
            &format!("python3 {SOCKET_REACH} {port}"),
            dir.path(),
            read_only_with_network(dir.path()),
        )
        .await;
        assert_eq!(inside.exit, 0, "{ceiling:?}: {inside:?}");
        let inside: Reach = serde_json::from_str(&inside.output).expect("probe output");
        assert_eq!(inside.reached, Vec::<[i64; 3]>::new(), "{ceiling:?}");
        let unlisted: Vec<_> = inside
            .opened
            .iter()
            .filter(|triple| !allowed_socket(**triple))
            .collect();
        assert!(unlisted.is_empty(), "{ceiling:?}: opened {unlisted:?}");
        assert!(!inside.ulp.is_empty());
        assert!(
            inside.ulp.values().all(|answer| answer == "EPERM"),
            "{ceiling:?}: {:?}",
            inside.ulp
        );
        // TCP over both IP versions is still there (other ports are reached: the test above).
        assert!(
            inside.opened.contains(&[2, 1, 0]) && inside.opened.contains(&[10, 1, 6]),
            "{inside:?}"
        );
    }
}

/// With network, a confined process shares the host's network namespace, but neither its
/// abstract unix sockets (the host's X11 or D-Bus, another sandbox's: Landlock's scope, where the
/// kernel has it) nor wexec's port at another address (`[::1]`, `127.0.0.2`: a client that
/// connects to wexec by name would hand its token to whatever listens there).
#[tokio::test]
async fn nor_the_hosts_abstract_sockets_nor_wexecs_port_elsewhere() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let name = format!("wexec-test-abstract-{}", std::process::id());
    let abstract_address =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            name.as_bytes(),
        )
        .expect("abstract name");
    let _abstract = std::os::unix::net::UnixListener::bind_addr(&abstract_address).expect("bind");
    let script = dir.path().join("probe.py");
    std::fs::write(
        &script,
        r#"
import errno, socket, sys
name, port = sys.argv[1], int(sys.argv[2])
def attempt(label, make, act):
    s = make()
    try:
        act(s)
        print(label, "ok")
    except OSError as e:
        print(label, errno.errorcode[e.errno])
attempt("abstract", lambda: socket.socket(socket.AF_UNIX), lambda s: s.connect("\0" + name))
attempt("bind6", lambda: socket.socket(socket.AF_INET6), lambda s: s.bind(("::1", port)))
attempt("bind4", lambda: socket.socket(), lambda s: s.bind(("127.0.0.2", port)))
attempt("other", lambda: socket.socket(), lambda s: s.bind(("127.0.0.2", 0)))
"#,
    )
    .expect("write probe");
    let server = wexec_tests::spawn_websocket(&["--fs-root", &root, "--process-network"]).await;
    let port = wexec_tests::port_of(&server.url.clone().expect("url"));
    let mut client = server.connect().await;
    client.handshake().await;
    let sandbox = read_only_with_network(dir.path());
    let probe = run(
        &mut client,
        "probe",
        &format!("python3 {} {name} {port}", script.display()),
        dir.path(),
        sandbox,
    )
    .await;
    let landlock_abi = landlock_abi();
    let abstract_answer = if landlock_abi >= 6 {
        "abstract EPERM"
    } else {
        "abstract ok"
    };
    assert_eq!(
        probe.output,
        format!("{abstract_answer}\nbind6 EACCES\nbind4 EACCES\nother ok\n"),
        "Landlock ABI {landlock_abi}: {probe:?}"
    );
}

/// The kernel's Landlock ABI version (0: none).
fn landlock_abi() -> i64 {
    const CREATE_RULESET_VERSION: libc::c_uint = 1;
    #[expect(unsafe_code, reason = "the ABI query is a raw system call")]
    // SAFETY: with a null attribute, size 0 and this flag the call only returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    version.max(0)
}
