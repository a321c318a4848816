//! `fs/watchMissing` and its one `fs/missingChanged` (docs/protocol.md §9.6), served by the `fs`
//! plugin through the host's watch capability, against the real binary over stdio and WebSocket.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir, spawn_stdio, spawn_websocket};

/// Long enough for an inotify event to have become a notification, were one due. A bounded
/// wait, begun after the change: docs/protocol.md orders a watch's response before its
/// notification (§9.6) but no message after one, so nothing marks a notification that is not
/// coming.
const SETTLE: Duration = Duration::from_millis(300);

/// A temp dir with `root/` granted as the only fs root and `outside/` next to it.
struct Fixture {
    dir: TempDir,
    server: Server,
    client: Client,
}

impl Fixture {
    async fn new() -> Self {
        let dir = TempDir::new();
        std::fs::create_dir(dir.path().join("root")).expect("mkdir root");
        std::fs::create_dir(dir.path().join("outside")).expect("mkdir outside");
        let root = dir.path().join("root").display().to_string();
        let (server, mut client) = spawn_stdio(&["--fs-root", &root]);
        client.handshake().await;
        Self {
            dir,
            server,
            client,
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    fn uri(&self, relative: &str) -> String {
        format!("file://{}", self.path(relative).display())
    }

    async fn watch(&mut self, id: u64, missing: &[&str], present: Option<&str>) -> bool {
        let missing: Vec<String> = missing.iter().map(|path| self.uri(path)).collect();
        let present = present.map(|path| self.uri(path));
        watch_raw(&mut self.client, json!(id), json!(missing), json!(present)).await
    }

    /// The next notification, which must be `fs/missingChanged` of `id`.
    async fn fired(&mut self, id: u64) {
        fired(&mut self.client, id).await;
    }

    async fn quiet(&mut self) {
        quiet(&mut self.client).await;
    }
}

async fn watch_raw(client: &mut Client, id: Value, missing: Value, present: Value) -> bool {
    let result = client
        .call(
            "fs/watchMissing",
            json!({"watchId": id, "missing": missing, "present": present}),
        )
        .await;
    result["watching"]
        .as_bool()
        .unwrap_or_else(|| panic!("watching is a bool: {result}"))
}

async fn fired(client: &mut Client, id: u64) {
    let notification = client.next_notification().await;
    assert_eq!(
        notification,
        json!({"jsonrpc": "2.0", "method": "fs/missingChanged", "params": {"watchId": id}})
    );
}

/// Nothing was sent: after a pause, a request's reply comes with no notification before it.
async fn quiet(client: &mut Client) {
    tokio::time::sleep(SETTLE).await;
    client.call("environment/status", json!({})).await;
    assert_eq!(
        client.notifications.drain(..).collect::<Vec<_>>(),
        Vec::<Value>::new(),
        "no notification was due"
    );
}

fn mkdir(path: &Path) {
    std::fs::create_dir_all(path).expect("mkdir");
}

fn touch(path: &Path) {
    std::fs::write(path, "x").expect("write");
}

#[tokio::test]
async fn creating_the_path_fires_once_after_the_response_and_a_sibling_does_not() {
    let mut fx = Fixture::new().await;
    assert!(fx.watch(1, &["a"], None).await);
    touch(&fx.path("sibling"));
    fx.quiet().await;
    touch(&fx.path("a"));
    fx.fired(1).await;
    // The watch ended: further changes say nothing.
    std::fs::remove_file(fx.path("a")).expect("rm");
    touch(&fx.path("a"));
    fx.quiet().await;

    // A path created while the request is on its way: the response still comes first.
    let id = fx
        .client
        .send_request(
            "fs/watchMissing",
            json!({"watchId": 2, "missing": [fx.uri("b")], "present": null}),
        )
        .await;
    touch(&fx.path("b"));
    let first = fx.client.recv().await;
    assert_eq!(
        first["id"],
        json!(id),
        "the response precedes its notification: {first}"
    );
    // Unless `b` was created before the host looked, it fires now.
    if first["result"]["watching"] == json!(true) {
        fx.fired(2).await;
    }
}

#[tokio::test]
async fn a_missing_ancestor_created_fires_and_the_watch_ends() {
    let mut fx = Fixture::new().await;
    assert!(fx.watch(1, &["a/b/c"], None).await);
    touch(&fx.path("a-sibling"));
    fx.quiet().await;
    mkdir(&fx.path("a"));
    fx.fired(1).await;
    mkdir(&fx.path("a/b"));
    fx.quiet().await;
    // Its nearest existing ancestor removed fires as well (the path can no longer appear there).
    assert!(fx.watch(2, &["a/b/c"], None).await);
    std::fs::remove_dir(fx.path("a/b")).expect("rmdir");
    fx.fired(2).await;
    // Created as anything: a dangling symlink counts.
    assert!(fx.watch(3, &["link"], None).await);
    std::os::unix::fs::symlink("nowhere", fx.path("link")).expect("symlink");
    fx.fired(3).await;
}

#[tokio::test]
async fn present_fires_on_change_removal_or_replacement_not_on_its_entries() {
    let mut fx = Fixture::new().await;
    touch(&fx.path("file"));
    mkdir(&fx.path("dir"));
    assert!(fx.watch(1, &["x"], Some("file")).await);
    std::fs::read(fx.path("file")).expect("read");
    fx.quiet().await;
    std::fs::write(fx.path("file"), "changed").expect("write");
    fx.fired(1).await;

    assert!(fx.watch(2, &["x"], Some("dir")).await);
    touch(&fx.path("dir/entry"));
    fx.quiet().await;
    std::fs::remove_dir_all(fx.path("dir")).expect("rm dir");
    fx.fired(2).await;

    assert!(fx.watch(3, &["x"], Some("file")).await);
    touch(&fx.path("new"));
    fx.quiet().await;
    std::fs::rename(fx.path("new"), fx.path("file")).expect("replace");
    fx.fired(3).await;
}

#[tokio::test]
async fn unwatchable_requests_answer_false_and_keep_the_current_watch() {
    let mut fx = Fixture::new().await;
    touch(&fx.path("exists"));
    mkdir(&fx.path("d"));
    std::os::unix::fs::symlink(fx.path("d"), fx.path("to-d")).expect("symlink");
    assert!(fx.watch(10, &["a"], None).await);
    // Not above the highest id: `false`, watch 10 untouched.
    assert!(!fx.watch(10, &["b"], None).await);
    assert!(!fx.watch(3, &["b"], None).await);
    touch(&fx.path("a"));
    fx.fired(10).await;

    let many: Vec<String> = (0..65).map(|i| format!("m{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let deep = (0..70)
        .map(|i| format!("x{i}"))
        .collect::<Vec<_>>()
        .join("/");
    let deep = [deep.as_str()];
    let unwatchable: Vec<(&[&str], Option<&str>)> = vec![
        (&[], None),
        (&many, None),
        (&deep, None),
        (&["exists"], None),
        (&["ok", "exists"], None),
        (&["exists/below"], None),
        (&["to-d/below"], None),
        (&["to-d"], None),
        (&["ok"], Some("absent")),
        (&["ok"], Some("to-d")),
    ];
    for (id, (missing, present)) in (11..).zip(unwatchable) {
        assert!(
            !fx.watch(id, missing, present).await,
            "{missing:?} {present:?} is unwatchable"
        );
    }
    for (id, missing, present) in [
        (30, json!(["file:///proc/nothing"]), Value::Null),
        (31, json!(["file:///sys/nothing"]), Value::Null),
        (32, json!(["file://host/x"]), Value::Null),
        (33, json!([fx.uri("ok")]), json!("file:///proc/self")),
    ] {
        assert!(!watch_raw(&mut fx.client, json!(id), missing, present).await);
    }
    // 64 paths (duplicates count) still watch; so does an absent `present`.
    let sixty_four = vec!["same"; 64];
    assert!(fx.watch(40, &sixty_four, None).await);
    assert!(
        fx.client
            .call(
                "fs/watchMissing",
                json!({"watchId": 41, "missing": [fx.uri("y")]})
            )
            .await["watching"]
            == json!(true)
    );
    fx.quiet().await;
}

#[tokio::test]
async fn a_newer_watch_cancels_the_older_even_when_it_answers_false() {
    let mut fx = Fixture::new().await;
    assert!(fx.watch(1, &["a"], None).await);
    assert!(fx.watch(2, &["b"], None).await);
    touch(&fx.path("a"));
    fx.quiet().await;
    touch(&fx.path("b"));
    fx.fired(2).await;

    assert!(fx.watch(3, &["c"], None).await);
    assert!(!fx.watch(4, &[], None).await);
    touch(&fx.path("c"));
    fx.quiet().await;
}

#[tokio::test]
async fn paths_outside_the_roots_count_as_missing_and_never_fire() {
    let mut fx = Fixture::new().await;
    let outside = fx.dir.path().join("outside");
    let secret = outside.join("secret");
    touch(&secret);
    // An existing file outside reads as missing: nothing about it is revealed.
    let missing = json!([format!("file://{}", secret.display())]);
    assert!(watch_raw(&mut fx.client, json!(1), missing, Value::Null).await);
    std::fs::remove_file(&secret).expect("rm");
    touch(&secret);
    touch(&outside.join("other"));
    fx.quiet().await;
    // A `present` outside counts as absent.
    let present = json!(format!("file://{}", outside.display()));
    let missing = json!([fx.uri("x")]);
    assert!(!watch_raw(&mut fx.client, json!(2), missing, present).await);
    // An escaping symlink is outside too.
    std::os::unix::fs::symlink(&outside, fx.path("out")).expect("symlink");
    assert!(!fx.watch(3, &["out/new"], None).await);
}

#[tokio::test]
async fn bad_params_are_invalid_params() {
    let mut fx = Fixture::new().await;
    for (params, message) in [
        (json!({"watchId": 1}), "missing field `missing`"),
        (
            json!({"watchId": -1, "missing": []}),
            "invalid value: integer `-1`, expected u64",
        ),
        (
            json!({"watchId": 1, "missing": ["relative"]}),
            "expected a file:// URI or an absolute path, got `relative`",
        ),
    ] {
        let error = fx.client.call_err("fs/watchMissing", params).await;
        assert_eq!(error, json!({"code": -32602, "message": message}));
    }
    assert_eq!(fx.server.stderr().contains("panicked"), false);
}

/// The inotify watches wexec holds, from its inotify descriptor's fdinfo.
fn inotify_watches(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_to_string(fd.path()).ok())
        .map(|info| {
            info.lines()
                .filter(|line| line.starts_with("inotify wd:"))
                .count()
        })
        .sum()
}

async fn settle_to(pid: u32, expected: usize) -> usize {
    for _ in 0..50 {
        if inotify_watches(pid) == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    inotify_watches(pid)
}

#[tokio::test]
async fn watches_belong_to_their_connection_and_end_with_it() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let server = spawn_websocket(&["--fs-root", &root]).await;
    let uri = |name: &str| format!("file://{root}/{name}");
    let mut first = server.connect().await;
    first.handshake().await;
    let mut second = server.connect().await;
    second.handshake().await;
    // Ids are per connection: the second may use 1 although the first did.
    assert!(watch_raw(&mut first, json!(5), json!([uri("a")]), Value::Null).await);
    assert!(
        watch_raw(
            &mut second,
            json!(1),
            json!([uri("a"), uri("b/c")]),
            Value::Null
        )
        .await
    );
    // One kernel watch for the directory both watch (inotify has one per inode).
    assert_eq!(settle_to(server.pid(), 1).await, 1);
    touch(&dir.path().join("a"));
    fired(&mut first, 5).await;
    fired(&mut second, 1).await;
    assert_eq!(
        settle_to(server.pid(), 0).await,
        0,
        "fired watches are gone"
    );

    assert!(watch_raw(&mut first, json!(6), json!([uri("x")]), Value::Null).await);
    assert!(watch_raw(&mut second, json!(2), json!([uri("y")]), Value::Null).await);
    assert_eq!(settle_to(server.pid(), 1).await, 1);
    first.close().await;
    // Still held by the second connection's watch.
    touch(&dir.path().join("x"));
    quiet(&mut second).await;
    second.close().await;
    assert_eq!(
        settle_to(server.pid(), 0).await,
        0,
        "closed connections leave no watch behind"
    );
    // A resumed session does not get the watch back (watches belong to connections).
    let mut third = server.connect().await;
    third.handshake().await;
    assert!(watch_raw(&mut third, json!(1), json!([uri("z")]), Value::Null).await);
}
