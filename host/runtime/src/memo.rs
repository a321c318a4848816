//! Values the server derives from a bundled plugin and inputs of its own, remembered in the
//! compile cache beside the plugin: `<plugin key>.<name>`, one file rewritten when the inputs
//! change. A start whose inputs are unchanged then needs no answer from a plugin that is still
//! being linked. The file is the cache's keyed memo, so only wexec could have written it.

use super::cache::{self, Cache};
use super::plugin::LoadedPlugin;
use super::table::Runtime;

/// One remembered value of one plugin, for one set of inputs.
pub struct Memo<'a> {
    cache: &'a Cache,
    file: String,
    inputs: String,
}

impl Runtime {
    /// The memo `name` of `plugin` for `inputs` (the plugin's own identity is always among
    /// them). `None` when the plugin is not bundled or there is no compile cache.
    pub fn memo(&self, plugin: &LoadedPlugin, name: &str, inputs: &[&[u8]]) -> Option<Memo<'_>> {
        let (Some(cache), Some(key)) = (&self.linking.cache, &plugin.cache_key) else {
            return None;
        };
        if !plugin.source.builtin {
            return None;
        }
        let parts: Vec<&[u8]> = std::iter::once(key.as_bytes())
            .chain(inputs.iter().copied())
            .collect();
        Some(Memo {
            cache,
            file: format!("{key}.{name}"),
            inputs: cache::derived_key(&parts),
        })
    }

    /// The host facts the plugins see.
    pub fn facts(&self) -> &crate::facts::EnvironmentFacts {
        &self.shared.facts
    }
}

/// What the file holds: the value and the key of the inputs it was derived from.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    inputs: String,
    value: serde_json::Value,
}

impl Memo<'_> {
    /// What was remembered for these inputs, if anything.
    pub fn recall(&self) -> Option<serde_json::Value> {
        let data = self.cache.memo(&self.file)?;
        let stored = serde_json::from_slice::<Stored>(&data).ok()?;
        (stored.inputs == self.inputs).then_some(stored.value)
    }

    /// Remembers `value` for these inputs, in place of what was remembered before.
    pub fn remember(&self, value: serde_json::Value) {
        let stored = Stored {
            inputs: self.inputs.clone(),
            value,
        };
        if let Ok(data) = serde_json::to_vec(&stored) {
            self.cache.remember(&self.file, &data);
        }
    }
}

impl std::fmt::Debug for Memo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}
