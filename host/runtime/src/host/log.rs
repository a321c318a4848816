//! The `log` interface: plugin diagnostics into wexec's log, tagged with the plugin's name,
//! each message on one line, and at most the plugin's log limit per call (docs/plugins.md,
//! "Calls, limits and failures"): later lines are dropped, and how many is logged once the call
//! ends.

use crate::bindings::wexec::plugin::log::{Host, Level};
use crate::state::HostState;

/// Longest message logged; the rest is cut so a plugin cannot flood the log with one line.
const MAX_MESSAGE_CHARS: usize = 4_096;

/// What each line costs beyond its message: wexec's timestamp, level, target and plugin name.
/// Charged so that empty messages cannot flood the log either.
const LINE_BYTES: usize = 128;

/// `message` on one line: control characters and Unicode's line and paragraph separators (a
/// newline could forge a log line of its own) shown escaped, and cut at [`MAX_MESSAGE_CHARS`].
fn one_line(message: &str) -> String {
    let mut line = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS));
    for c in message.chars().take(MAX_MESSAGE_CHARS) {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line
}

impl Host for HostState {
    async fn log(&mut self, level: Level, message: String) {
        let limit = self.plugin.limits.log_bytes;
        let budget = &mut self.log;
        // Charged as written: escaped, cut, and with the line's own cost.
        let cost = |line: &str| line.len() + LINE_BYTES;
        let line = (budget.used + LINE_BYTES <= limit).then(|| one_line(&message));
        let Some(message) = line.filter(|line| budget.used + cost(line) <= limit) else {
            budget.dropped_lines += 1;
            budget.dropped_bytes += message.len();
            return;
        };
        budget.used += cost(&message);
        let plugin = self.plugin.name.as_str();
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

impl crate::bindings::wexec::plugin::types::Host for HostState {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_stays_on_one_line() {
        assert_eq!(
            one_line("first\n2026-12-01T00:00:00Z ERROR forged\r\tend"),
            "first\\n2026-12-01T00:00:00Z ERROR forged\\r\\tend"
        );
        assert_eq!(
            one_line("a\u{2028}b\u{2029}c\u{85}"),
            "a\\u{2028}b\\u{2029}c\\u{85}"
        );
        assert_eq!(
            one_line(&"é".repeat(5_000)).chars().count(),
            MAX_MESSAGE_CHARS
        );
    }
}
