//! Host bindings generated from `wit/`. They stay inside the runtime: the rest of the host uses
//! its own types, converted at the edge.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "plugin",
    imports: { default: async },
    exports: { default: async },
    with: {
        "wexec:plugin/http.body": crate::resources::Body,
        "wexec:plugin/filesystem.contents": crate::resources::Contents,
    },
});
