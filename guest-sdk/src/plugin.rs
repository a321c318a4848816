//! The [`Plugin`] trait and the values it exchanges with the host.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::exports::wexec::plugin::handler::PluginInfo;
use crate::bindings::wexec::plugin::types::Capability as WitCapability;
use crate::error::RpcError;

/// The plugin contract (`wit/plugin.wit`, package `wexec:plugin`) this SDK implements: 0.2.0,
/// 0.1.0's interfaces plus the MCP tools a plugin declares ([`Info::tool`]).
pub const CONTRACT: &str = "0.2.0";

/// The method wexec calls once at load to read a plugin's tools (answered by the SDK).
pub const TOOLS_METHOD: &str = "wexec:tools";

/// A wexec plugin: what it is, and how it answers a call.
pub trait Plugin {
    /// Name, version, methods and the capabilities it asks for. Called once when wexec loads
    /// the plugin.
    fn info() -> Info;

    /// Answers one call of a method listed in [`Plugin::info`]. Params decode with
    /// [`Call::params`]; an `Err` reaches the client as a JSON-RPC error, unchanged.
    fn handle(call: Call) -> Result<Response, RpcError>;
}

/// A capability a plugin asks for. wexec grants the intersection of what a plugin asks for and
/// what the operator configured for it; everything else is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// The [`crate::fs`] roots.
    Filesystem,
    /// The [`crate::http`] hosts.
    Http,
    /// Reading the listed environment variables ([`crate::env::var`]).
    EnvironmentVars,
}

/// What a plugin declares about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    name: String,
    version: String,
    methods: Vec<String>,
    capabilities: Vec<Capability>,
    env_vars: Vec<String>,
    tools: Vec<Tool>,
}

impl Info {
    /// A plugin named `name` (`[a-z][a-z0-9-]{0,31}`) at `version`, with no methods yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            methods: Vec::new(),
            capabilities: Vec::new(),
            env_vars: Vec::new(),
            tools: Vec::new(),
        }
    }

    /// Declares an MCP tool, served by one of the plugin's methods: `wexec mcp` lists it and
    /// calls that method with the tool's arguments as params (docs/plugins.md, "MCP tools").
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// The tool declaration wexec reads at load, as JSON text.
    pub(crate) fn tools_json(&self) -> String {
        let tools: Vec<serde_json::Value> = self.tools.iter().map(Tool::to_json).collect();
        serde_json::Value::Array(tools).to_string()
    }

    /// Adds a method; it must be `<name>/<method>` (bundled plugins may serve wexec's own
    /// families).
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.methods.push(method.into());
        self
    }

    /// Asks for a capability.
    pub fn capability(mut self, capability: Capability) -> Self {
        if !self.capabilities.contains(&capability) {
            self.capabilities.push(capability);
        }
        self
    }

    /// Asks to read an environment variable (implies [`Capability::EnvironmentVars`]).
    pub fn env_var(mut self, name: impl Into<String>) -> Self {
        self.env_vars.push(name.into());
        self.capability(Capability::EnvironmentVars)
    }

    pub(crate) fn into_wit(self) -> PluginInfo {
        PluginInfo {
            name: self.name,
            version: self.version,
            contract: CONTRACT.to_owned(),
            methods: self.methods,
            capabilities: (self.capabilities.into_iter())
                .map(|capability| match capability {
                    Capability::Filesystem => WitCapability::Filesystem,
                    Capability::Http => WitCapability::Http,
                    Capability::EnvironmentVars => WitCapability::EnvironmentVars,
                })
                .collect(),
            env_vars: self.env_vars,
        }
    }
}

/// An MCP tool a plugin declares: its name, the method serving it, and what agents read about
/// it. wexec checks the declaration when it loads the plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    name: String,
    method: String,
    title: Option<String>,
    description: Option<String>,
    input_schema: serde_json::Value,
    output_schema: Option<serde_json::Value>,
    annotations: serde_json::Map<String, serde_json::Value>,
}

impl Tool {
    /// Tool `name` (1 to 128 of `A-Za-z0-9_-.`) served by `method` (one of the plugin's), with
    /// any object as arguments until [`Tool::input_schema`] says more.
    pub fn new(name: impl Into<String>, method: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            method: method.into(),
            title: None,
            description: None,
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            annotations: serde_json::Map::new(),
        }
    }

    /// A title for people.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the tool does, for the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The JSON Schema of its arguments (an object schema); wexec checks arguments against it
    /// before the method is called.
    pub fn input_schema(mut self, schema: serde_json::Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// The JSON Schema of its result (an object schema): the method's result becomes the tool
    /// result's structured content. Without one, the result is returned as text.
    pub fn output_schema(mut self, schema: serde_json::Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// `readOnlyHint`: it changes nothing.
    pub fn read_only(self, value: bool) -> Self {
        self.hint("readOnlyHint", value)
    }

    /// `destructiveHint`: a change it makes may destroy something.
    pub fn destructive(self, value: bool) -> Self {
        self.hint("destructiveHint", value)
    }

    /// `idempotentHint`: calling it twice with the same arguments does no more than once.
    pub fn idempotent(self, value: bool) -> Self {
        self.hint("idempotentHint", value)
    }

    /// `openWorldHint`: it reaches beyond the machine (the network).
    pub fn open_world(self, value: bool) -> Self {
        self.hint("openWorldHint", value)
    }

    fn hint(mut self, name: &str, value: bool) -> Self {
        self.annotations
            .insert(name.to_owned(), serde_json::Value::Bool(value));
        self
    }

    fn to_json(&self) -> serde_json::Value {
        let mut tool = serde_json::json!({
            "name": self.name,
            "method": self.method,
            "inputSchema": self.input_schema,
        });
        let optional = [
            ("title", self.title.clone().map(serde_json::Value::String)),
            (
                "description",
                self.description.clone().map(serde_json::Value::String),
            ),
            ("outputSchema", self.output_schema.clone()),
            (
                "annotations",
                (!self.annotations.is_empty())
                    .then(|| serde_json::Value::Object(self.annotations.clone())),
            ),
        ];
        for (member, value) in optional {
            if let Some(value) = value {
                tool[member] = value;
            }
        }
        tool
    }
}

/// One call: the method and its params as JSON text (`null` when the client sent none).
#[derive(Debug, Clone)]
pub struct Call {
    method: String,
    params: String,
}

impl Call {
    pub(crate) fn new(method: String, params: String) -> Self {
        Self { method, params }
    }

    /// The method called.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The params as JSON text.
    pub fn raw_params(&self) -> &str {
        &self.params
    }

    /// Decodes the params, straight from the text; failure is -32602 with serde's description
    /// as the host gives it for its own methods, without a line and column (e.g.
    /// `` missing field `name` ``).
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
        serde_json::from_str(&self.params).or_else(|err| {
            // Described again from a `Value`, which has no positions; text that is not JSON
            // at all keeps the first description.
            let value = serde_json::from_str::<serde_json::Value>(&self.params)
                .map_err(|_| RpcError::invalid_params(err.to_string()))?;
            serde_json::from_value(value).map_err(|err| RpcError::invalid_params(err.to_string()))
        })
    }

    /// For parameterless methods: accepts absent/`null` params or any object, else -32602.
    pub fn no_params(&self) -> Result<(), RpcError> {
        let params = serde_json::from_str::<serde_json::Value>(&self.params)
            .map_err(|err| RpcError::invalid_params(err.to_string()))?;
        wexec_protocol::NoParams::check(&params)
            .map(drop)
            .map_err(RpcError::invalid_params)
    }
}

/// A successful result: JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response(String);

impl Response {
    /// Serializes `value` as the result.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self, RpcError> {
        serde_json::to_string(value)
            .map(Self)
            .map_err(|err| RpcError::internal_error(format!("cannot encode the result: {err}")))
    }

    /// `{}`.
    pub fn empty() -> Self {
        Self("{}".to_owned())
    }

    /// What to return once the result was sent early ([`crate::respond::early`],
    /// [`crate::respond::early_base64`]): the host discards it.
    pub fn sent() -> Self {
        Self("null".to_owned())
    }

    /// Already-encoded JSON text (the host refuses a result that is not JSON).
    pub fn raw(json: String) -> Self {
        Self(json)
    }

    pub(crate) fn into_json(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_are_declared_as_wexec_reads_them() {
        let info = Info::new("grep", "1.0.0").method("grep/search").tool(
            Tool::new("grep", "grep/search")
                .title("Search")
                .input_schema(json!({"type": "object", "required": ["pattern"]}))
                .read_only(true)
                .open_world(false),
        );
        let declared: serde_json::Value = serde_json::from_str(&info.tools_json()).expect("JSON");
        assert_eq!(
            declared,
            json!([{
                "name": "grep",
                "method": "grep/search",
                "title": "Search",
                "inputSchema": {"type": "object", "required": ["pattern"]},
                "annotations": {"readOnlyHint": true, "openWorldHint": false},
            }])
        );
        assert_eq!(Info::new("x", "1").tools_json(), "[]");
        assert_eq!(info.into_wit().contract, CONTRACT);
    }
}
