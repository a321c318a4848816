//! README's "From Rust" program, exactly as README.md gives it: its `Cargo.toml` and
//! `src/main.rs` are written to a scratch crate (with the `wexec-client` path pointed at this
//! checkout), built with this workspace's lockfile, and run against the wexec under test. This
//! also holds the client to its promise: `wexec-client` builds without wasmtime and without the
//! wasm target (the scratch crate's dependency tree is checked for both).

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use wexec_tests::{TempDir, nested_cargo, wexec_bin};

/// The text of the first fenced block of `language` after `heading` in README.md.
fn block<'a>(readme: &'a str, heading: &str, language: &str) -> &'a str {
    let section = &readme[readme.find(heading).expect("README has the section")..];
    let fence = format!("```{language}\n");
    let start = section.find(&fence).expect("the section has the block") + fence.len();
    let len = section[start..].find("```").expect("the block is closed");
    &section[start..start + len]
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

#[test]
fn the_readme_client_program_builds_and_runs_as_given() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let manifest = block(&readme, "## From Rust", "toml");
    let main = block(&readme, "## From Rust", "rust");
    let client_dir = root.join("host/client");
    let dependency = r#"path = "../wexec/host/client""#;
    assert!(
        manifest.contains(dependency),
        "README's Cargo.toml names the client as {dependency}"
    );
    let manifest = manifest.replace(
        dependency,
        &format!("path = {:?}", client_dir.display().to_string()),
    );

    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    // Outside any workspace; the lockfile keeps the versions this checkout builds with, so the
    // build needs no registry index.
    std::fs::write(
        dir.path().join("Cargo.toml"),
        format!("{manifest}\n[workspace]\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("src/main.rs"), main).unwrap();
    std::fs::copy(root.join("Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();
    let target = wexec_bin()
        .parent()
        .and_then(Path::parent)
        .map(|target| target.join("readme-client"))
        .unwrap();

    let tree = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "tree",
            "--offline",
            "--prefix",
            "none",
            "-e",
            "normal,build",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&tree.stdout);
    assert!(tree.contains("wexec-client"), "cargo tree failed: {tree}");
    for heavy in ["wasmtime", "cranelift", "wit-bindgen", "reqwest", "wexec v"] {
        assert!(
            !tree.lines().any(|line| line.starts_with(heavy)),
            "wexec-client pulls in {heavy}:\n{tree}"
        );
    }

    nested_cargo(dir.path(), &target, &["build", "--offline", "--quiet"]);
    let bin_dir = wexec_bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let output = Command::new(target.join("debug/my-agent"))
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the README program failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "hello\n");
}
