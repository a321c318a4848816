//! wexec's own listening ports, out of reach of confined processes that have the network, and
//! the host's abstract unix sockets with them.
//!
//! A confined process with network shares the host's network namespace, so without more it
//! could connect to wexec's WebSocket listener — on loopback no token is needed — and start a
//! process with less confinement than its own (found attacking the release binary: a read-only
//! process started an unconfined one through `ws://127.0.0.1`). Landlock (ABI 4) restricts TCP
//! `connect` and `bind` by port, as an allow-list: the spares of that kind come from a zygote of
//! their own that, once wexec has bound its listeners, allows every port but theirs and
//! restricts itself (with `no_new_privs`), once; every helper it forks, and every program,
//! inherits the domain. Built once (an allow-list of every other port: tens of milliseconds and
//! some kernel memory, once), the domain costs a start nothing. `bind` too: a process listening on wexec's port at another address
//! (`[::1]`, `127.0.0.2`) would receive the clients, and the tokens, of those that connect by
//! name. What else could open a TCP connection past the rule is refused by the seccomp filter
//! (`confine/filter.rs`).
//!
//! The port is blocked towards every address, not only wexec's: such a process cannot reach
//! port P of another host either while wexec listens on P (docs/sandbox.md).
//!
//! The same domain is scoped (Landlock ABI 6, where the kernel has it): a process in it cannot
//! connect to an abstract unix socket made outside it (the host's X11 or D-Bus, another
//! sandbox), which a process without network cannot reach either (its network namespace is its
//! own).

use std::io::Read;
use std::os::fd::OwnedFd;

use landlock::{
    AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetError, Scope,
};

use super::confine::SetupError;

/// What a failure names.
const MECHANISM: &str = "Landlock TCP rules (ABI 4), to keep processes off wexec's listeners";

/// Reads the ports wexec listens on from `listeners` (a line of decimal ports, empty when it
/// listens on none; end of file when wexec is gone) and restricts this process so that it and
/// its descendants cannot connect to them. Nothing to guard: no restriction.
pub fn guard(listeners: OwnedFd) -> Result<(), SetupError> {
    let mut text = String::new();
    let read = std::fs::File::from(listeners)
        .take(4096)
        .read_to_string(&mut text);
    if read.is_err() || !text.ends_with('\n') {
        // wexec went away before it listened: nothing will be started.
        super::child::exit(0);
    }
    let ports: Vec<u16> = text
        .split_ascii_whitespace()
        .filter_map(|port| port.parse().ok())
        .collect();
    if ports.is_empty() {
        // Nothing to guard: the scope alone, where the kernel has it.
        if let Err(err) = restrict(&[]) {
            tracing::debug!("abstract unix sockets are not scoped: {err}");
        }
        return Ok(());
    }
    restrict(&ports).map_err(|err| {
        let errno = match &err {
            RulesetError::CreateRuleset(_) | RulesetError::HandleAccesses(_) => {
                rustix::io::Errno::NOSYS
            }
            _ => rustix::io::Errno::PERM,
        };
        SetupError {
            errno: errno.raw_os_error(),
            mechanism: MECHANISM,
        }
    })
}

/// Allows TCP `connect` and `bind` to every port but `ports` (none: TCP is not restricted) and,
/// where the kernel has it, scopes abstract unix sockets, for this process and its
/// descendants.
fn restrict(ports: &[u16]) -> Result<(), RulesetError> {
    let mut ruleset = Ruleset::default();
    if !ports.is_empty() {
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::ConnectTcp | AccessNet::BindTcp)?;
    }
    let ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::AbstractUnixSocket)?;
    let allowed = (0..=u16::MAX)
        .filter(|port| !ports.is_empty() && !ports.contains(port))
        .map(|port| {
            Ok::<_, RulesetError>(NetPort::new(
                port,
                AccessNet::ConnectTcp | AccessNet::BindTcp,
            ))
        });
    ruleset.create()?.add_rules(allowed)?.restrict_self()?;
    Ok(())
}
