//! `plugin/list` (docs/protocol.md §11.4).

use serde::{Deserialize, Serialize};

/// `plugin/list` request.
pub const PLUGIN_LIST: &str = "plugin/list";

/// Result of `plugin/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginList {
    /// Every loaded plugin, bundled ones first.
    pub plugins: Vec<PluginListing>,
}

/// One plugin in `plugin/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginListing {
    /// The plugin's name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// The methods it serves.
    pub methods: Vec<String>,
    /// Its effective grants; empty members are omitted.
    pub grants: PluginGrants,
}

/// The effective grants of a plugin (declared ∩ granted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginGrants {
    /// PathUris of the filesystem roots it may reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fs_roots: Vec<String>,
    /// Host patterns it may connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<String>,
    /// Environment variables it may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_vars: Vec<String>,
}

/// The variable name a plugin declares (`plugin-info.env-vars`) to take whichever environment
/// variables the operator grants it, instead of naming them (the `http` plugin's `valueEnvVar`
/// headers read the variables the operator lists with `--allow-header-env`).
pub const ANY_GRANTED_VAR: &str = "*";
