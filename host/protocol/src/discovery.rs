//! Capability discovery (docs/protocol.md §7.6), served by the `discovery` plugin:
//! `capabilityRoots/discoverV1` hands the client the raw files of plugin and skill roots it
//! names; `capabilities/discoverV2` parses the executor's own user and system skills and its
//! installed plugins.

use serde::{Deserialize, Serialize};

use crate::sandbox::SandboxContext;

/// `capabilityRoots/discoverV1`.
pub const CAPABILITY_ROOTS_DISCOVER_V1: &str = "capabilityRoots/discoverV1";
/// `capabilities/discoverV2`.
pub const CAPABILITIES_DISCOVER_V2: &str = "capabilities/discoverV2";

/// Params of `capabilityRoots/discoverV1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityRootsDiscoverParams {
    /// The roots to scan, answered in this order.
    pub roots: Vec<CapabilityRootRequest>,
}

/// One root to scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityRootRequest {
    /// The client's name for the root, echoed.
    pub id: String,
    /// The root directory (PathUri).
    pub path: String,
    /// Confines the reads for this root (§7.3); the host enforces it.
    #[serde(default)]
    pub sandbox: Option<SandboxContext>,
}

/// Result of `capabilityRoots/discoverV1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityRootsDiscoverResponse {
    /// One per requested root, in order.
    pub roots: Vec<CapabilityRootDiscovery>,
}

/// What one root holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityRootDiscovery {
    /// The request's id.
    pub id: String,
    /// The request's path.
    pub path: String,
    /// The plugin rooted here, when the root has a manifest.
    pub plugin: Option<DiscoveredPluginFiles>,
    /// Every `SKILL.md` below the root, by path.
    pub skills: Vec<DiscoveredSkillFiles>,
    /// The manifests of the plugins the root is in or holds, nearest first.
    pub namespace_manifests: Vec<CapabilityTextFile>,
    /// What could not be read; the rest of the root is still answered.
    pub warnings: Vec<String>,
    /// Why the root could not be scanned at all (everything else empty).
    pub error: Option<String>,
}

/// A text file, verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityTextFile {
    /// Where it is (PathUri).
    pub path: String,
    /// Its UTF-8 contents.
    pub contents: String,
}

/// A plugin's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredPluginFiles {
    /// `.codex-plugin/plugin.json`.
    pub manifest: CapabilityTextFile,
    /// `.mcp.json`, or the file the manifest's `mcpServers` names.
    pub mcp_config: Option<CapabilityTextFile>,
    /// `.app.json`, or the file the manifest's `apps` names.
    pub apps_config: Option<CapabilityTextFile>,
}

/// A skill's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredSkillFiles {
    /// `SKILL.md`.
    pub instructions: CapabilityTextFile,
    /// `agents/openai.yaml` beside it.
    pub metadata: Option<CapabilityTextFile>,
}

/// Params of `capabilities/discoverV2`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilitiesDiscoverParams {
    /// The client's working directory (PathUri); required, though only user and system
    /// locations are scanned.
    pub cwd: String,
    /// Confines the reads (§7.3); the host enforces it.
    #[serde(default)]
    pub sandbox: Option<SandboxContext>,
}

/// Result of `capabilities/discoverV2`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilitiesDiscoverResponse {
    /// Installed plugins, by id.
    pub plugins: Vec<ExecutorPlugin>,
    /// Standalone skills, by location, then path.
    pub skills: Vec<ExecutorSkill>,
    /// At most one per location that could not be fully loaded.
    pub warnings: Vec<String>,
}

/// An installed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorPlugin {
    /// `<plugin>@<marketplace>`.
    pub id: String,
    /// The manifest's `interface.displayName`, else its `name`, else the root's name.
    pub display_name: String,
    /// Always `null` on an executor.
    pub remote_plugin_id: Option<String>,
    /// The version directory's name.
    pub version: String,
    /// The version directory (PathUri).
    pub root: String,
    /// Its files, as `discoverV1` finds them.
    pub files: DiscoveredPluginFiles,
    /// Its skills, named `<plugin>:<skill>`.
    pub skills: Vec<ExecutorSkill>,
}

/// A skill, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorSkill {
    /// The front matter's `name` (else the directory's), prefixed with its plugin's namespace.
    pub name: String,
    /// The front matter's `description`, on one line.
    pub description: String,
    /// The front matter's `metadata.short-description`.
    pub short_description: Option<String>,
    /// The `SKILL.md` (PathUri).
    pub path: String,
    /// The location it was found in; absent for a plugin's skills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery_root: Option<DiscoveryRoot>,
    /// `agents/openai.yaml`'s tool dependencies.
    pub dependencies: Option<SkillDependencies>,
    /// `agents/openai.yaml`'s policy.
    pub policy: Option<SkillPolicy>,
}

/// A standalone skill location.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryRoot {
    /// `codex-home-skills`, `user-agent-skills` or `system-skills`.
    pub id: String,
    /// The location (PathUri).
    pub path: String,
}

/// A skill's dependencies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillDependencies {
    /// The tools it needs (never empty).
    pub tools: Vec<SkillToolDependency>,
}

/// One tool a skill needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillToolDependency {
    /// `mcp`, `env_var`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The tool's name.
    pub value: String,
    /// What it is for.
    pub description: Option<String>,
    /// An MCP server's transport.
    pub transport: Option<String>,
    /// An MCP server's command.
    pub command: Option<String>,
    /// An MCP server's URL.
    pub url: Option<String>,
    /// Not read from `openai.yaml` by Codex's server 0.169: always `null`.
    pub oauth_callback_port: Option<u16>,
}

/// A skill's invocation policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillPolicy {
    /// Whether the model may invoke it unasked.
    pub allow_implicit_invocation: Option<bool>,
    /// `codex`, `chatgpt`, `atlas`.
    pub products: Vec<String>,
}
