//! The MCP server handler: lists and calls the tools over one [`Door`]. The SDK (`rmcp`) speaks
//! the protocol itself, in both eras: the `initialize` handshake of 2024-11-05 to 2025-11-25 and
//! the stateless requests of 2026-07-28 (`server/discover`, `_meta`, `resultType`).

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
    SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::catalog::{Cached, Catalog};
use super::door::Door;
use super::progress::Progress;
use super::subscriptions::Subscriptions;
use super::tools::{self, Answer, Call, Failure, Outcome, schema};

/// What the MCP face tells clients about itself.
const INSTRUCTIONS: &str = "wexec runs commands and reaches files and the network on this \
machine under the operator's grants: processes run in wexec's sandbox, files are reached only \
inside the allowed directories (list_allowed_directories), URLs only on the allowed hosts. A \
refusal is a tool error that says what was refused and why.";

/// One MCP client's handler (over HTTP, every request's: they share the listener's door).
#[derive(Debug, Clone)]
pub struct Face {
    door: Arc<Door>,
    subscriptions: Arc<Subscriptions>,
    catalog: Arc<Cached>,
}

impl Face {
    /// A handler calling tools through `door`.
    pub fn new(door: Arc<Door>) -> Self {
        Self {
            door,
            subscriptions: Arc::default(),
            catalog: Arc::default(),
        }
    }

    /// The tools offered now.
    fn catalog(&self) -> Arc<Catalog> {
        self.catalog.get(self.door.server())
    }

    async fn run(&self, catalog: &Catalog, name: &str, call: &Call, arguments: &Value) -> Outcome {
        if let Some(tool) = catalog.plugin_tools.get(name) {
            return tools::plugin::call(tool, call, arguments).await;
        }
        if let Some(outcome) = tools::process::call(name, call, arguments).await {
            return outcome;
        }
        if let Some(outcome) = tools::files::call(name, call, arguments).await {
            return outcome;
        }
        if name == "fetch" {
            return tools::fetch::fetch(call, arguments).await;
        }
        Err(Failure(format!("tool {name} has no handler")))
    }
}

/// An SDK result from the JSON the MCP face builds.
fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|err| McpError::internal_error(err.to_string(), None))
}

/// The tool result of `outcome`; `resultType` as the SDK's constructors set it (it leaves it
/// out for legacy clients).
fn result(outcome: Outcome) -> Result<CallToolResult, McpError> {
    let value = match outcome {
        Ok(Answer {
            content,
            structured,
        }) => {
            let mut value = json!({"content": content, "isError": false, "resultType": "complete"});
            if let Some(structured) = structured {
                value["structuredContent"] = structured;
            }
            value
        }
        Err(Failure(text)) => json!({
            "content": [tools::text_block(text)],
            "isError": true,
            "resultType": "complete",
        }),
    };
    serde_json::from_value(value).map_err(|err| McpError::internal_error(err.to_string(), None))
}

impl ServerHandler for Face {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("wexec", crate::VERSION))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // `resultType` as the SDK's constructors set it; it leaves it out for legacy clients.
        decode(json!({"tools": self.catalog().tools, "resultType": "complete"}))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request
            .as_ref()
            .and_then(|request| request.cursor.as_deref());
        decode(super::resources::list(&self.door, cursor).await?)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        decode(super::resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let read = super::resources::read(&self.door, &request.uri).await?;
        decode::<ReadResourceResult>(read).map(ReadResourceResponse::from)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let door = Arc::clone(&self.door);
        self.subscriptions
            .subscribe(door, request.uri, context.peer)
            .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        serde_json::from_value(self.catalog().definition(name)?.clone()).ok()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let CallToolRequestParams {
            name, arguments, ..
        } = request;
        let name = name.as_ref();
        let catalog = self.catalog();
        let Some(definition) = catalog.definition(name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool: {name}"),
                None,
            ));
        };
        let arguments = Value::Object(arguments.unwrap_or_default());
        if let Err(reason) = schema::check(&definition["inputSchema"], &arguments) {
            return result(Err(Failure(format!(
                "invalid arguments for {name}: {reason}"
            ))))
            .map(CallToolResponse::from);
        }
        let progress = (context.meta.get_progress_token())
            .map(|token| Progress::new(context.peer.clone(), token));
        let call = Call {
            door: Arc::clone(&self.door),
            progress,
            cancelled: context.ct.clone(),
        };
        let outcome = self.run(&catalog, name, &call, &arguments).await;
        result(outcome).map(CallToolResponse::from)
    }
}
