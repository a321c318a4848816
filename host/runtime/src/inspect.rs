//! What `wexec plugin inspect` reports: a component's declared identity, methods and
//! capability requests, the WIT packages it was built against, and whether this wexec would
//! load it (the same checks as startup, without grants).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use wasmtime::component::Component;

use crate::bindings;
use crate::bindings::wexec::plugin::types::Capability;
use crate::engine::Core;
use crate::facts::EnvironmentFacts;
use crate::grants::Grants;
use crate::limits::Limits;
use crate::linked::Linked;
use crate::plugin::validate;
use crate::pool::describe;
use crate::spec::{LoadError, PluginSpec, WIT_PACKAGE};
use crate::state::Shared;

/// The report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// WIT packages in the component's imports and exports (`wexec:plugin@0.1.0`,
    /// `wasi:io@0.2.6`, ...).
    pub packages: BTreeSet<String>,
    /// What `describe` returned, when the component could be instantiated.
    pub described: Option<Described>,
    /// `Ok` when this wexec would load it, else why not.
    pub verdict: Result<(), String>,
}

/// A plugin's self-description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// The contract version it reports.
    pub contract: String,
    /// Methods.
    pub methods: Vec<String>,
    /// Requested capabilities (`filesystem`, `http`, `environment-vars`).
    pub capabilities: Vec<&'static str>,
    /// Requested environment variables.
    pub env_vars: Vec<String>,
    /// The MCP tools it declares.
    pub tools: Vec<String>,
}

/// Inspects `bytes` (from `origin`, for messages).
pub async fn inspect(origin: &str, bytes: bytes::Bytes) -> Result<Inspection, LoadError> {
    let limits = Limits::default();
    let (built, ticker) = Core::build_here(limits.memory_bytes).map_err(LoadError::Engine)?;
    let (engine, linker) = (&built.engine, &built.linker);
    let component = match Component::new(engine, &bytes) {
        Ok(component) => component,
        Err(err) => {
            return Ok(Inspection {
                packages: BTreeSet::new(),
                described: None,
                verdict: Err(one_line(format!(
                    "not a valid WebAssembly component: {err:#}"
                ))),
            });
        }
    };
    let kind = component.component_type();
    let packages = (kind.imports(engine).map(|(name, _)| name))
        .chain(kind.exports(engine).map(|(name, _)| name))
        .filter_map(package_of)
        .collect();
    let pre = match linker
        .instantiate_pre(&component)
        .and_then(bindings::PluginPre::new)
    {
        Ok(pre) => pre,
        Err(err) => {
            let reason = format!("does not fit wexec's plugin contract {WIT_PACKAGE}: {err:#}");
            return Ok(Inspection {
                packages,
                described: None,
                verdict: Err(one_line(reason)),
            });
        }
    };
    let shared = Arc::new(Shared {
        facts: Arc::new(EnvironmentFacts::gather()),
        plugins: Mutex::new(Vec::new()),
        http: crate::net::Client::default(),
        ticker,
        stores: Arc::default(),
    });
    let spec = PluginSpec {
        origin: origin.to_owned(),
        bytes,
        grants: Grants::default(),
        limits,
        builtin: false,
        sha256: None,
    };
    let (info, tools) = match describe(engine, &pre, &spec, &shared).await {
        Ok(described) => described,
        Err(reason) => {
            return Ok(Inspection {
                packages,
                described: None,
                verdict: Err(one_line(reason)),
            });
        }
    };
    let described = Described {
        name: info.name.clone(),
        version: info.version.clone(),
        contract: info.contract.clone(),
        methods: info.methods.clone(),
        capabilities: (info.capabilities.iter())
            .map(|capability| match capability {
                Capability::Filesystem => "filesystem",
                Capability::Http => "http",
                Capability::EnvironmentVars => "environment-vars",
            })
            .collect(),
        env_vars: info.env_vars.clone(),
        tools: Vec::new(),
    };
    let verdict =
        validate(info, tools.as_deref(), &spec, Linked::ready(pre), None, &[]).map_err(one_line);
    let described = Described {
        tools: (verdict.iter())
            .flat_map(|plugin| plugin.tools.iter().map(|tool| tool.name.clone()))
            .collect(),
        ..described
    };
    Ok(Inspection {
        packages,
        described: Some(described),
        verdict: verdict.map(drop),
    })
}

/// `wexec:plugin/log@0.1.0` → `wexec:plugin@0.1.0`; names without a package give `None`.
fn package_of(name: &str) -> Option<String> {
    let (path, version) = name.split_once('@')?;
    let package = path.split('/').next()?;
    package
        .contains(':')
        .then(|| format!("{package}@{version}"))
}

fn one_line(text: String) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_come_from_interface_names() {
        assert_eq!(
            package_of("wexec:plugin/log@0.1.0").as_deref(),
            Some("wexec:plugin@0.1.0")
        );
        assert_eq!(
            package_of("wasi:cli/environment@0.2.6").as_deref(),
            Some("wasi:cli@0.2.6")
        );
        assert_eq!(package_of("plain"), None);
    }
}
