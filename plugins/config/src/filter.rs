//! The part of a config file a client asked for: for each key path, the value it names, or the
//! first non-table value on its way, inside the tables leading to it (kept even when empty, as
//! Codex's server keeps them).

use toml::{Table, Value};

/// `table` cut down to `paths` (none empty); an empty table when no path's first key exists.
pub fn select(table: &Table, paths: &[Vec<String>]) -> Table {
    let mut out = Table::new();
    for path in paths {
        if let Some((first, rest)) = path.split_first() {
            select_into(&mut out, table, first, rest);
        }
    }
    out
}

fn select_into(out: &mut Table, table: &Table, key: &str, rest: &[String]) {
    let Some(value) = table.get(key) else {
        return;
    };
    match (value, rest.split_first()) {
        (Value::Table(inner), Some((next, rest))) => {
            let entry = out
                .entry(key.to_owned())
                .or_insert_with(|| Value::Table(Table::new()));
            // Another path took the whole table already: nothing to add.
            if let Value::Table(entry) = entry {
                select_into(entry, inner, next, rest);
            }
        }
        _ => {
            out.insert(key.to_owned(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(paths: &[&[&str]]) -> Vec<Vec<String>> {
        paths
            .iter()
            .map(|path| path.iter().map(|key| (*key).to_owned()).collect())
            .collect()
    }

    fn selected(text: &str, wanted: &[&[&str]]) -> String {
        let table: Table = text.parse().expect("TOML");
        toml::to_string(&select(&table, &paths(wanted))).expect("serialize")
    }

    #[test]
    fn keeps_the_requested_keys_in_document_order() {
        let text =
            "model = \"o3\"\n[mcp_servers.user]\ncommand = \"c\"\nargs = [\"a\"]\n[other]\nx = 1\n";
        assert_eq!(
            selected(text, &[&["mcp_servers"]]),
            "[mcp_servers.user]\ncommand = \"c\"\nargs = [\"a\"]\n"
        );
        assert_eq!(selected(text, &[&["nothing"]]), "");
    }

    #[test]
    fn keeps_tables_on_the_way_and_values_that_end_a_path_early() {
        let text = "model = \"o3\"\n[mcp_servers.sys]\ncommand = \"s\"\n";
        // Codex's server: `[mcp_servers]` stays although it has no `user`; `model` is no table.
        assert_eq!(
            selected(text, &[&["model", "x"], &["mcp_servers", "user"]]),
            "model = \"o3\"\n\n[mcp_servers]\n"
        );
        assert_eq!(
            selected("[a.b]\nc = { d = 1 }\n", &[&["a", "b", "c"]]),
            "[a.b.c]\nd = 1\n"
        );
    }
}
