//! A plugin's component, linked and ready to instantiate.
//!
//! Linking (deserializing the compiled artifact, or compiling, then type-checking its imports)
//! is most of what a start costs after the engine. A bundled plugin whose description the
//! compile cache remembers from an earlier start (its component, the engine configuration and
//! wexec's version unchanged: the same cache key) need not be linked before wexec answers: it is
//! validated from that description, and linked in the background while wexec already serves.
//! Its first call waits for the link if it has not finished. Only bundled plugins take this
//! path: wexec knows their `describe` is a constant; an operator's plugin is described by
//! running it, every start.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::bindings::exports::wexec::plugin::handler::PluginInfo;
use super::bindings::wexec::plugin::types::Capability;
use super::bindings::{self, PluginPre};
use super::cache::{Cache, Entry};
use super::engine::{Built, Core};
use super::state::HostState;
#[cfg(test)]
use crate::spec::CONTRACT_VERSION;
use crate::spec::{LoadError, PluginSpec, WIT_PACKAGE, invalid};

/// What linking needs, shared by the runtime and the background links it starts.
#[derive(Clone)]
pub struct Linking {
    pub core: Core,
    pub cache: Option<Cache>,
    /// The engine configuration's fingerprint, part of every cache key.
    pub fingerprint: String,
}

impl Linking {
    /// The cache key of `spec`'s component, if there is a cache.
    pub fn key(&self, spec: &PluginSpec) -> Option<String> {
        self.cache.as_ref().map(|_| self.key_of(spec))
    }

    fn key_of(&self, spec: &PluginSpec) -> String {
        super::cache::key(&self.fingerprint, &spec.bytes, spec.sha256)
    }

    /// Compiles `spec` on `built`'s engine (or loads what `entry`, or a lookup now, finds in
    /// the cache) and links it.
    pub fn link(
        &self,
        built: &Built,
        spec: &PluginSpec,
        entry: Option<Entry>,
    ) -> Result<PluginPre<HostState>, LoadError> {
        let engine = &built.engine;
        let compiled = match (&self.cache, entry) {
            (Some(cache), Some(entry)) => cache.load_or_compile(engine, &spec.bytes, entry),
            (Some(cache), None) => {
                let entry = cache.lookup(&self.key_of(spec));
                cache.load_or_compile(engine, &spec.bytes, entry)
            }
            (None, _) => wasmtime::component::Component::new(engine, &spec.bytes),
        };
        let component = compiled
            .map_err(|err| invalid(spec, format!("not a valid WebAssembly component: {err:#}")))?;
        built
            .linker
            .instantiate_pre(&component)
            .and_then(bindings::PluginPre::new)
            .map_err(|err| {
                invalid(
                    spec,
                    format!("does not fit wexec's plugin contract {WIT_PACKAGE}: {err:#}"),
                )
            })
    }
}

/// The nice value of background links: on a small machine they share the CPUs with the first
/// requests, which should win.
pub const BACKGROUND_NICE: i32 = 10;

/// The linked component: at hand, or being linked.
///
/// A call that needs it before its background link is done links it too and takes whichever
/// link finishes first: a call that waited for its own link while the background one was
/// already done answered later than it could have. A background
/// link not yet begun leaves a plugin a call is linking alone.
pub struct Linked<P = PluginPre<HostState>> {
    pre: tokio::sync::OnceCell<P>,
    /// A background link's result, which a call linking meanwhile may take.
    background: watch::Sender<Option<P>>,
    /// A call is linking it.
    on_call: AtomicBool,
}

impl<P: Clone> Linked<P> {
    /// Linked already.
    pub fn ready(pre: P) -> Self {
        Self::with(tokio::sync::OnceCell::new_with(Some(pre)))
    }

    /// To be linked (by [`Self::get`], or a background link that got there first).
    pub fn pending() -> Self {
        Self::with(tokio::sync::OnceCell::new())
    }

    fn with(pre: tokio::sync::OnceCell<P>) -> Self {
        Self {
            pre,
            background: watch::Sender::new(None),
            on_call: AtomicBool::new(false),
        }
    }

    /// Whether a background link should begin: not once linked, nor while a call links.
    fn wanted_in_background(&self) -> bool {
        !self.pre.initialized() && !self.on_call.load(Ordering::Acquire)
    }

    /// A background link is done: kept, and offered to a call linking meanwhile.
    fn linked_in_background(&self, pre: P) {
        self.background.send_replace(Some(pre.clone()));
        // Already set, or being set by a call (which takes `background` if its own link is
        // not done yet).
        let _ = self.pre.set(pre);
    }

    /// The linked component: `own` links it unless it is linked or being linked already by
    /// another call (then this waits for that); a background link that finishes first is taken
    /// instead. A failure is not kept: the next call tries again (a link cut short by shutdown
    /// is no verdict on the plugin).
    async fn get_or_link(
        &self,
        own: impl Future<Output = Result<P, String>>,
    ) -> Result<&P, String> {
        self.pre
            .get_or_try_init(|| {
                self.on_call.store(true, Ordering::Release);
                let mut background = self.background.subscribe();
                let theirs = async move {
                    let linked = background.wait_for(Option::is_some).await.ok()?;
                    linked.clone()
                };
                async move {
                    tokio::select! {
                        linked = own => linked,
                        Some(pre) = theirs => Ok(pre),
                    }
                }
            })
            .await
    }
}

impl Linked {
    /// Links `spec` on a thread of its own at a lower priority (nice [`BACKGROUND_NICE`]), and
    /// keeps the result unless a call linked it first. It never holds up a call: one that needs
    /// the plugin meanwhile links it too and takes the first link done ([`Self::get`]).
    pub async fn link_in_background(
        &self,
        linking: &Linking,
        spec: &PluginSpec,
    ) -> Result<(), String> {
        if !self.wanted_in_background() {
            return Ok(());
        }
        let built = (linking.core.get().await)
            .map_err(|err| format!("the WebAssembly engine could not be built: {err}"))?;
        let (linking, spec) = (linking.clone(), spec.clone());
        let (send, linked) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("wexec-link".into())
            .spawn(move || {
                // This thread's own priority (Linux's nice is per thread); it ends with the link.
                let _ = rustix::process::setpriority_process(None, BACKGROUND_NICE);
                let _ = send.send(linking.link(&built, &spec, None));
            })
            .map_err(|err| format!("cannot start a thread to link it: {err}"))?;
        let pre = (linked.await)
            .map_err(|_| "its link did not finish".to_owned())?
            .map_err(|err| err.to_string())?;
        self.linked_in_background(pre);
        Ok(())
    }

    /// The linked component, linking `spec` on the blocking pool if need be
    /// ([`Self::get_or_link`]).
    pub async fn get(
        &self,
        linking: &Linking,
        spec: &PluginSpec,
    ) -> Result<&PluginPre<HostState>, String> {
        // Nothing is cloned unless a link is needed: this runs on every call.
        self.get_or_link(async {
            let built = (linking.core.get().await)
                .map_err(|err| format!("the WebAssembly engine could not be built: {err}"))?;
            let (linking, spec) = (linking.clone(), spec.clone());
            tokio::task::spawn_blocking(move || linking.link(&built, &spec, None))
                .await
                .map_err(|err| format!("its link did not finish: {err}"))?
                .map_err(|err| err.to_string())
        })
        .await
    }
}

/// A plugin's description as the compile cache remembers it (`<key>.describe.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Description {
    name: String,
    version: String,
    contract: String,
    methods: Vec<String>,
    capabilities: Vec<String>,
    env_vars: Vec<String>,
    /// Its tool declaration (contract 0.2.0), as it gave it.
    #[serde(default)]
    tools: Option<String>,
}

impl Description {
    /// What `info` and its tool declaration say, to remember.
    pub fn of(info: &PluginInfo, tools: Option<&str>) -> Self {
        Self {
            name: info.name.clone(),
            version: info.version.clone(),
            contract: info.contract.clone(),
            methods: info.methods.clone(),
            capabilities: info
                .capabilities
                .iter()
                .map(|capability| capability_name(*capability).to_owned())
                .collect(),
            env_vars: info.env_vars.clone(),
            tools: tools.map(str::to_owned),
        }
    }

    /// The description (and tool declaration) back, if every capability it names is one this
    /// contract has.
    pub fn into_info(self) -> Option<(PluginInfo, Option<String>)> {
        let capabilities = self
            .capabilities
            .iter()
            .map(|name| {
                [
                    Capability::Filesystem,
                    Capability::Http,
                    Capability::EnvironmentVars,
                ]
                .into_iter()
                .find(|capability| capability_name(*capability) == name)
            })
            .collect::<Option<Vec<_>>>()?;
        let info = PluginInfo {
            name: self.name,
            version: self.version,
            contract: self.contract,
            methods: self.methods,
            capabilities,
            env_vars: self.env_vars,
        };
        Some((info, self.tools))
    }
}

fn capability_name(capability: Capability) -> &'static str {
    match capability {
        Capability::Filesystem => "filesystem",
        Capability::Http => "http",
        Capability::EnvironmentVars => "environment-vars",
    }
}

/// The cached description of the component with cache key `key`, if one was remembered.
pub fn remembered(cache: &Cache, key: &str) -> Option<(PluginInfo, Option<String>)> {
    let data = cache.memo(&format!("{key}.describe.json"))?;
    serde_json::from_slice::<Description>(&data)
        .ok()?
        .into_info()
}

/// Remembers `description` as that of the component with cache key `key`.
pub fn remember(cache: &Cache, key: &str, description: &Description) {
    if let Ok(data) = serde_json::to_vec(description) {
        cache.remember(&format!("{key}.describe.json"), &data);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_description_round_trips_and_an_unknown_capability_is_refused() {
        let info = PluginInfo {
            name: "fs".into(),
            version: "1.0.0".into(),
            contract: CONTRACT_VERSION.into(),
            methods: vec!["fs/readFile".into()],
            capabilities: vec![Capability::Filesystem, Capability::EnvironmentVars],
            env_vars: vec!["HOME".into()],
        };
        let text = serde_json::to_string(&Description::of(&info, Some("[]"))).unwrap();
        let (back, tools) = serde_json::from_str::<Description>(&text)
            .unwrap()
            .into_info()
            .unwrap();
        assert_eq!(tools.as_deref(), Some("[]"));
        assert_eq!(back.name, "fs");
        assert_eq!(back.capabilities, info.capabilities);
        assert_eq!(back.env_vars, info.env_vars);
        let forged = text
            .replace("\"http\"", "\"x\"")
            .replace("\"filesystem\"", "\"root\"");
        assert!(
            serde_json::from_str::<Description>(&forged)
                .unwrap()
                .into_info()
                .is_none()
        );
    }

    fn never<T>() -> impl Future<Output = Result<T, String>> {
        std::future::pending()
    }

    /// A call that began its own link takes a background link that finishes first.
    #[tokio::test]
    async fn a_call_takes_the_first_link_done() {
        let linked = std::sync::Arc::new(Linked::<u32>::pending());
        let calling = std::sync::Arc::clone(&linked);
        let call = tokio::spawn(async move { calling.get_or_link(never()).await.copied() });
        // The call begins its own link: no longer wanted in the background.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while linked.wanted_in_background() {
            assert!(
                std::time::Instant::now() < deadline,
                "no call began linking"
            );
            tokio::task::yield_now().await;
        }
        linked.linked_in_background(7);
        let got = tokio::time::timeout(Duration::from_secs(5), call).await;
        assert_eq!(got.expect("not left waiting").expect("joined"), Ok(7));
    }

    /// A call's own link that finishes first is kept; a later background link changes nothing.
    #[tokio::test]
    async fn a_call_keeps_its_own_link_when_it_is_first() {
        let linked = Linked::<u32>::pending();
        assert!(linked.wanted_in_background());
        assert_eq!(linked.get_or_link(async { Ok(1) }).await, Ok(&1));
        assert!(!linked.wanted_in_background(), "linked already");
        linked.linked_in_background(2);
        assert_eq!(linked.get_or_link(never()).await, Ok(&1));
    }

    /// A failed link is no verdict: the next call links again, or takes a background link.
    #[tokio::test]
    async fn a_failed_link_is_not_kept() {
        let linked = Linked::<u32>::pending();
        let failed = linked
            .get_or_link(async { Err("cut short".to_owned()) })
            .await;
        assert_eq!(failed, Err("cut short".to_owned()));
        linked.linked_in_background(3);
        assert_eq!(linked.get_or_link(never()).await, Ok(&3));
    }

    /// A background link done before any call is what calls get, without linking.
    #[tokio::test]
    async fn a_background_link_serves_later_calls() {
        let linked = Linked::<u32>::pending();
        linked.linked_in_background(4);
        assert!(!linked.wanted_in_background());
        assert_eq!(linked.get_or_link(never()).await, Ok(&4));
    }
}
