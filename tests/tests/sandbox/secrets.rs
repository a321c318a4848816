//! Read confinement keeps the host's secrets out (docs/sandbox.md, "The minimal set"): with
//! `--readable-root`, a confined process reads its roots and what programs need from `/etc`
//! (the loader's cache, the name service, TLS trust, locale), never all of `/etc`. wexec usually
//! runs as root in a container, where ownership stops nothing: a root-owned `0600` file in each
//! place secrets live stays out of reach, while `sh`, `python3`, `git` and `curl` (to a TLS
//! server on loopback) still work.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use wexec_tests::{TempDir, spawn_stdio};

use super::run;

/// Files (and the directories made for them) planted for the test, removed when dropped.
#[derive(Default)]
struct Planted {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl Planted {
    /// Writes a root-owned `0600` file at `path` holding `text`, unless something is there
    /// already (a real keytab is left as it is: it is just as secret).
    fn secret(&mut self, path: &str, text: &str) {
        use std::os::unix::fs::OpenOptionsExt;
        let path = Path::new(path);
        let mut missing: Vec<PathBuf> = path
            .ancestors()
            .skip(1)
            .take_while(|dir| !dir.exists())
            .map(Path::to_path_buf)
            .collect();
        missing.reverse();
        for dir in missing {
            std::fs::create_dir(&dir).expect("mkdir in /etc");
            self.dirs.push(dir);
        }
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
        if let Ok(mut file) = created {
            std::io::Write::write_all(&mut file, text.as_bytes()).expect("write secret");
            self.files.push(path.to_path_buf());
        }
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
        for dir in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A TLS server on loopback answering `tls-ok` with a certificate for `localhost` made for the
/// test; returns the server, its port and the certificate's path (for `curl --cacert`).
async fn tls_server(dir: &Path) -> (tokio::process::Child, u16, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("run openssl");
    assert!(made.success(), "openssl could not make a certificate");
    let script = format!(
        r#"
import http.server, ssl
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"tls-ok")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("{}", "{}")
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#,
        cert.display(),
        key.display()
    );
    let mut server = tokio::process::Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the TLS server");
    let stdout = server.stdout.take().expect("stdout");
    let line = BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .expect("read the port")
        .expect("a port line");
    (server, line.trim().parse().expect("a port"), cert)
}

#[tokio::test]
async fn read_confinement_hides_the_hosts_secrets_and_programs_still_run() {
    if !wexec_tests::running_as_root("planting root-owned secrets in /etc") {
        return;
    }
    let mut planted = Planted::default();
    let marker = "wexec-planted-secret";
    for path in [
        "/etc/sudoers.d/wexec-test",
        "/etc/ssh/ssh_host_wexectest_ed25519_key",
        "/etc/ssl/private/wexec-test.key",
        "/etc/krb5.keytab",
        "/etc/wexec-test/credentials",
    ] {
        planted.secret(path, marker);
    }
    let dir = TempDir::new();
    let visible = dir.path().join("visible");
    std::fs::create_dir(&visible).expect("mkdir");
    let (_tls, port, cert) = tls_server(&visible).await;
    let visible_arg = visible.display().to_string();
    let (_server, mut client) = spawn_stdio(&[
        "--fs-root",
        &visible_arg,
        "--writable-root",
        &visible_arg,
        "--readable-root",
        &visible_arg,
        "--process-network",
    ]);
    client.handshake().await;
    let secrets = [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/sudoers.d/wexec-test",
        "/etc/ssh/ssh_host_wexectest_ed25519_key",
        "/etc/ssl/private/wexec-test.key",
        "/etc/krb5.keytab",
        "/etc/wexec-test/credentials",
    ];
    let script = format!(
        r#"exec 2>&1
for secret in {secrets}; do cat "$secret" >/dev/null 2>&1 && echo "LEAK $secret"; done
ls /etc/ssl/private /etc/sudoers.d >/dev/null 2>&1 && echo "LEAK a secret directory"
echo sh-ok
test -r /etc/ssl/certs/ca-certificates.crt -o ! -e /etc/ssl/certs/ca-certificates.crt && echo trust-store-ok
python3 -c 'import json, socket, ssl; socket.getaddrinfo("localhost", 443); print("python-ok")'
git init -q repo && git -C repo -c user.name=w -c user.email=w@example.com commit -q --allow-empty -m m && echo git-ok
curl -sS --cacert {cert} https://localhost:{port}/ && echo
"#,
        secrets = secrets.join(" "),
        cert = cert.display(),
    );
    let run = run(
        &mut client,
        "programs",
        &script,
        &visible,
        serde_json::Value::Null,
    )
    .await;
    assert!(!run.output.contains("LEAK"), "{run:?}");
    assert!(!run.output.contains(marker), "{run:?}");
    for works in ["sh-ok", "trust-store-ok", "python-ok", "git-ok", "tls-ok"] {
        assert!(run.output.contains(works), "{works}: {run:?}");
    }
    assert_eq!(run.exit, 0, "{run:?}");
    drop(planted);
}

/// An `/etc` whose entries lie behind symbolic links (NixOS keeps `/etc/ssl` and most of `/etc`
/// as links into its store): the minimal set holds the links and what they lead to, so that
/// programs find their files, and no start is refused for a link on the way. Here wexec runs in
/// a mount namespace of its own where `/etc` is a copy of the host's with `ssl` moved to
/// `ssl.real` and linked back.
#[tokio::test]
async fn an_etc_behind_symbolic_links_is_followed() {
    if !wexec_tests::running_as_root("mounting over /etc") {
        return;
    }
    let dir = TempDir::new();
    let etc = dir.path().join("etc");
    let copied = std::process::Command::new("cp")
        .args(["-a", "/etc"])
        .arg(&etc)
        .status()
        .expect("copy /etc");
    assert!(copied.success());
    if !etc.join("ssl").is_dir() {
        eprintln!("skipped: this host has no /etc/ssl to link");
        return;
    }
    std::fs::rename(etc.join("ssl"), etc.join("ssl.real")).expect("move ssl");
    std::os::unix::fs::symlink("ssl.real", etc.join("ssl")).expect("link ssl");
    let visible = dir.path().join("visible");
    std::fs::create_dir(&visible).expect("mkdir");
    let visible_arg = visible.display().to_string();
    let mount = format!("mount --bind {} /etc && exec \"$0\" \"$@\"", etc.display());
    let command = wexec_tests::command_under(
        &[
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &mount,
        ],
        &[
            "--fs-root",
            &visible_arg,
            "--writable-root",
            &visible_arg,
            "--readable-root",
            &visible_arg,
        ],
    );
    let (_server, mut client) = wexec_tests::spawn_stdio_with(command);
    client.handshake().await;
    let run = run(
        &mut client,
        "linked",
        "exec 2>&1; readlink /etc/ssl; test -r /etc/ssl/openssl.cnf && echo cnf; ls /etc/ssl/private >/dev/null 2>&1 || echo private-hidden",
        &visible,
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(
        (run.exit, run.output.as_str()),
        (0, "ssl.real\ncnf\nprivate-hidden\n"),
        "{run:?}"
    );
}
