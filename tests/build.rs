//! Builds the test guests (`plugins/test-guests/*`) and the example plugins
//! (`plugins/examples/*`) for `wasm32-wasip2` and tells the tests where they are
//! (`WEXEC_PROBE_WASM`, `WEXEC_HOSTILE_WASM`, `WEXEC_HELLO_WASM`, `WEXEC_GREP_WASM`).

use wexec_wasm_build::Profile;

const GUESTS: [(&str, &str); 4] = [
    ("wexec-probe", "WEXEC_PROBE_WASM"),
    ("wexec-hostile", "WEXEC_HOSTILE_WASM"),
    ("wexec-example-hello", "WEXEC_HELLO_WASM"),
    ("wexec-example-grep", "WEXEC_GREP_WASM"),
];

fn main() {
    let packages = GUESTS.map(|(package, _)| package);
    let watch = [
        "plugins/test-guests",
        "plugins/examples",
        "wit",
        "guest-sdk",
        "host/protocol",
    ];
    let dir = wexec_wasm_build::build(&packages, Profile::Release, &watch);
    for (package, variable) in GUESTS {
        let wasm = dir.join(format!("{}.wasm", package.replace('-', "_")));
        println!("cargo:rustc-env={variable}={}", wasm.display());
    }
}
