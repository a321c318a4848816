//! The trust boundary against the real binary, attacked from outside as a hostile client, a
//! hostile plugin (the `hostile` test guest) and a hostile file inside a root would: each
//! module is one defect class that must stay fixed.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

mod busy;
mod cache;
mod copy;
mod descendants;
mod discovery;
mod forgery;
mod handles;
mod limits;
mod paths;
mod redirects;
mod special_files;
mod token;
mod watches;

use wexec_tests::{Client, HOSTILE_WASM, Server, TempDir, spawn_stdio};

/// wexec with the `hostile` guest loaded from a config file in `dir`, its `[[plugins]]` entry
/// granting `grants` (TOML), plus `args`, after the handshake.
pub async fn spawn_hostile(dir: &TempDir, grants: &str, args: &[&str]) -> (Server, Client) {
    let config = dir.path().join("wexec.toml");
    std::fs::write(
        &config,
        format!("[[plugins]]\nfile = \"{HOSTILE_WASM}\"\n{grants}\n"),
    )
    .expect("write config");
    let config = config.display().to_string();
    let mut full = vec!["--config", config.as_str()];
    full.extend_from_slice(args);
    let (server, mut client) = spawn_stdio(&full);
    client.handshake().await;
    (server, client)
}
