//! Unknown keys of a `--config` TOML file, all reported at once, each
//! with the key it most likely meant: a typo's nearest key in its own
//! table, or, for a flag's name or a key in the wrong table (`duration`,
//! `theta`), the key it names.
//!
//! The file is read by serde, which stops at its first unknown key; this
//! looks again only when serde refused the file, so a key it accepts is
//! never reported here.

use super::args::closest;
use crate::experiments::sweep;

/// One line per unknown key of the TOML `text`, or `None` when every key
/// is known (or the text is no TOML table: serde's message says why).
pub(super) fn unknown_keys(text: &str) -> Option<Vec<String>> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let known = known_keys();
    let mut unknown = Vec::new();
    find_unknown(&table, "", &known, &mut unknown);
    if unknown.is_empty() {
        return None;
    }
    Some(unknown.iter().map(|path| explain(path, &known)).collect())
}

/// Every key path a config file may hold: a leaf (`ycsb.theta`, or a value
/// set whole such as `profile` or `sim.faults`).
fn known_keys() -> Vec<String> {
    let mut keys: Vec<String> = sweep::config_keys()
        .into_iter()
        .filter(|k| k != "hybrid")
        .collect();
    keys.push("sim.faults".into());
    keys
}

/// Collects the paths in `table` (under `prefix`) that are neither a key
/// nor a table of keys; a known key's value is serde's to judge.
fn find_unknown(table: &toml::Table, prefix: &str, known: &[String], out: &mut Vec<String>) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if known.contains(&path) {
            continue;
        }
        let section = format!("{path}.");
        if !known.iter().any(|k| k.starts_with(&section)) {
            out.push(path);
        } else if let toml::Value::Table(inner) = value {
            find_unknown(inner, &path, known, out);
        }
    }
}

/// `path` and what the user likely meant.
fn explain(path: &str, known: &[String]) -> String {
    let (table, leaf) = match path.rsplit_once('.') {
        Some((table, leaf)) => (table, leaf),
        None => ("", path),
    };
    // A flag's name or a leaf in the wrong table names one key.
    if let Ok(key) = sweep::canonical_key(leaf) {
        if key != path && key != "hybrid" {
            let flag = leaf.replace('_', "-");
            let role = if flag == key.replace('_', "-") || key.ends_with(&format!(".{leaf}")) {
                "its key is".to_string()
            } else {
                format!("it is the flag --{flag}'s name; its key is")
            };
            return format!("`{path}`: {role} `{key}`{}", section_note(&key));
        }
    }
    let siblings: Vec<&str> = known
        .iter()
        .filter_map(|k| match (table, k.rsplit_once('.')) {
            ("", None) => Some(k.as_str()),
            ("", Some(_)) => None,
            (_, Some((t, leaf))) if t == table => Some(leaf),
            _ => None,
        })
        .collect();
    match closest(leaf, siblings) {
        Some(near) if table.is_empty() => format!("`{path}`: did you mean `{near}`?"),
        Some(near) => format!("`{path}`: did you mean `{table}.{near}`?"),
        None => format!("`{path}`: no such key (docs/guide/running.md lists them)"),
    }
}

/// How to write `key` in a file when it sits in a table: `[ycsb] theta`.
fn section_note(key: &str) -> String {
    match key.rsplit_once('.') {
        Some((table, leaf)) => format!(" (`{leaf}` under `[{table}]`)"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_known_keys_has_none_unknown() {
        let text = "nodes = 2\nduration_s = 0.1\n[ycsb]\ntheta = 0.5\n";
        assert_eq!(unknown_keys(text), None);
    }

    #[test]
    fn every_unknown_key_is_reported_with_its_nearest() {
        let text = "duraton_s = 0.2\nnods = 2\n[ycsb]\nthetaa = 0.5\n";
        let lines = unknown_keys(text).expect("three unknown keys");
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("`duraton_s`: did you mean `duration_s`?"));
        assert!(lines[1].contains("`nods`: did you mean `nodes`?"));
        assert!(lines[2].contains("`ycsb.thetaa`: did you mean `ycsb.theta`?"));
    }

    #[test]
    fn a_flag_name_points_at_its_key() {
        let lines = unknown_keys("duration = 0.2\n").expect("unknown");
        assert_eq!(
            lines,
            ["`duration`: it is the flag --duration's name; its key is `duration_s`"]
        );
        let lines = unknown_keys("theta = 0.5\n").expect("unknown");
        assert_eq!(
            lines,
            ["`theta`: its key is `ycsb.theta` (`theta` under `[ycsb]`)"]
        );
    }
}
