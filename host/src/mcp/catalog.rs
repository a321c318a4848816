//! The tool list, built once per plugin generation (at start and after each reload that
//! changed the plugins) rather than per request: `tools/list` and every `tools/call` look a
//! tool up in it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde_json::Value;

use super::tools;
use super::tools::plugin::PluginTool;
use crate::server::ServerState;

/// The tools offered now.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Their definitions, in listing order.
    pub tools: Vec<Value>,
    /// Each tool's definition by name.
    by_name: HashMap<String, usize>,
    /// The plugins' tools, by name.
    pub plugin_tools: HashMap<String, PluginTool>,
}

impl Catalog {
    /// The definition of tool `name`, if offered.
    pub fn definition(&self, name: &str) -> Option<&Value> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// The tools `server` offers: the process tools unless processes are off, the file tools if
    /// a plugin serves `fs/*`, `fetch` if one serves `http/request`, then the plugins' tools.
    fn build(server: &ServerState) -> Self {
        let ceiling = &server.processes.ceiling;
        let serves = |method| server.runtime.plugin_for(method).is_some();
        let mut catalog = Self::default();
        if ceiling.processes {
            catalog.extend(tools::process::definitions(ceiling.process_network));
        }
        if serves(crate::protocol::FS_READ_FILE) {
            catalog.extend(tools::files::definitions());
        }
        if serves(crate::protocol::HTTP_REQUEST) {
            catalog.extend([tools::fetch::tool_definition()]);
        }
        for plugin in server.runtime.plugins() {
            for tool in &plugin.tools {
                // wexec's own names stay wexec's, listed or not (`--no-processes` leaves
                // `run_command` unlisted, not free): a call by that name never reaches a plugin.
                if is_builtin(&tool.name) || catalog.by_name.contains_key(&tool.name) {
                    tracing::warn!(
                        plugin = plugin.name,
                        tool = tool.name,
                        "a plugin's tool is not listed: wexec's own tools or an earlier plugin's have its name"
                    );
                    continue;
                }
                catalog.extend([tool.definition.clone()]);
                let served = PluginTool {
                    plugin: plugin.name.clone(),
                    method: tool.method.clone(),
                    structured: tool.structured,
                };
                catalog.plugin_tools.insert(tool.name.clone(), served);
            }
        }
        catalog
    }

    fn extend(&mut self, definitions: impl IntoIterator<Item = Value>) {
        for definition in definitions {
            let name = definition
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.by_name.insert(name.to_owned(), self.tools.len());
            self.tools.push(definition);
        }
    }
}

/// Whether `name` is one of wexec's own tools.
pub fn is_builtin(name: &str) -> bool {
    static NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
        (tools::process::definitions(false).into_iter())
            .chain(tools::files::definitions())
            .chain([tools::fetch::tool_definition()])
            .filter_map(|tool| tool.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    });
    NAMES.iter().any(|builtin| builtin == name)
}

/// A face's catalog, rebuilt when the plugins' generation moves on.
#[derive(Debug, Default)]
pub struct Cached(Mutex<Option<(u64, Arc<Catalog>)>>);

impl Cached {
    /// The catalog for `server`'s plugins as they are now.
    pub fn get(&self, server: &ServerState) -> Arc<Catalog> {
        let generation = *server.plugins_changed.borrow();
        let mut cached = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cached {
            Some((built, catalog)) if *built == generation => Arc::clone(catalog),
            _ => {
                let catalog = Arc::new(Catalog::build(server));
                *cached = Some((generation, Arc::clone(&catalog)));
                catalog
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wexecs_own_tool_names_are_known() {
        for name in [
            "run_command",
            "list_processes",
            "read_text_file",
            "edit_file",
            "fetch",
        ] {
            assert!(is_builtin(name), "{name}");
        }
        assert!(!is_builtin("grep"));
    }
}
