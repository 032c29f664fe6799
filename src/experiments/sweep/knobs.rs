//! Knobs: what a knob may name (a config key by TOML path, a unique leaf
//! name, a run flag's name, or `hybrid` / `stages`), how its values are
//! parsed, and how a point's values land in a config.
//!
//! Invariant: every point is resolved and validated before the first run,
//! so a bad value fails at once, naming the point.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::base::{Primitive, ProtocolKind, Stage, StagePlan};
use crate::config::profile::NetworkProfile;
use crate::config::Config;
use crate::experiments::matrix::plan_of;

/// One varied key and its values, as given.
#[derive(Clone, Debug, PartialEq)]
pub struct Knob {
    pub key: String,
    pub values: Vec<String>,
}

/// Names of run flags whose config key is not found by the leaf rule.
const FLAG_ALIASES: [(&str, &str); 6] = [
    ("duration", "duration_s"),
    ("warmup", "warmup_s"),
    ("location_cache", "location_cache_entries"),
    ("warm_location_cache", "location_cache_warm"),
    ("backoff_base_ns", "backoff.base_ns"),
    ("backoff_cap_ns", "backoff.cap_ns"),
];

/// Parses `KEY=V1,V2,…` (or `KEY=V1|V2|…`).
pub fn parse_knob(text: &str) -> Result<Knob, String> {
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| format!("--vary `{text}` is not KEY=V1,V2,… (e.g. coroutines=1,2,4,8)"))?;
    let key = canonical_key(key.trim())?;
    let separator = if values.contains('|') { '|' } else { ',' };
    let mut list: Vec<String> = values
        .split(separator)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if key == "protocol" && list.iter().any(|v| v == "all") {
        list = ProtocolKind::names()
            .into_iter()
            .map(String::from)
            .collect();
    }
    if list.is_empty() {
        return Err(format!("--vary {key} has no values; give at least one"));
    }
    let mut seen = BTreeSet::new();
    for value in &list {
        if !seen.insert(value.as_str()) {
            return Err(format!("--vary {key} lists `{value}` twice"));
        }
    }
    Ok(Knob { key, values: list })
}

/// Every leaf key path of a config, for lookups and error messages.
fn leaf_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                // A profile or plan is set whole (by name / by code).
                if prefix.is_empty() && (key == "profile" || key == "stages") {
                    out.push(path);
                } else {
                    leaf_paths(inner, &path, out);
                }
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// The config keys a knob may name, by TOML path.
pub fn config_keys() -> Vec<String> {
    let mut keys = Vec::new();
    let json = serde_json::to_value(Config::default()).expect("a config serializes");
    leaf_paths(&json, "", &mut keys);
    keys.retain(|k| !k.starts_with("sim.faults"));
    keys.push("hybrid".into());
    keys.sort();
    keys
}

/// Resolves a knob's name to its TOML path (or `hybrid`).
pub fn canonical_key(name: &str) -> Result<String, String> {
    let normalized = name.replace('-', "_");
    if normalized == "hybrid" {
        return Ok(normalized);
    }
    if let Some((_, path)) = FLAG_ALIASES.iter().find(|(alias, _)| *alias == normalized) {
        return Ok(path.to_string());
    }
    let keys = config_keys();
    if keys.contains(&normalized) {
        return Ok(normalized);
    }
    let by_leaf: Vec<&String> = keys
        .iter()
        .filter(|k| k.rsplit('.').next() == Some(normalized.as_str()))
        .collect();
    match by_leaf.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(format!(
            "--vary: unknown config key `{name}`; keys: {}",
            keys.join(", ")
        )),
        many => Err(format!(
            "--vary: `{name}` is ambiguous; name one of {}",
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Parses `read=rpc+lock=onesided` (items separated by `+`, `,` or `;`).
fn parse_stage_list(text: &str) -> Result<StagePlan, String> {
    let mut plan = StagePlan::empty();
    for part in text.split(['+', ',', ';']).filter(|p| !p.trim().is_empty()) {
        let (stage, primitive) = part
            .split_once('=')
            .ok_or_else(|| format!("stages entry `{part}` is not STAGE=PRIMITIVE"))?;
        let stage_value = Stage::parse(stage.trim()).ok_or_else(|| {
            format!(
                "unknown stage `{stage}`; stages: {}",
                Stage::ALL.map(|s| s.name()).join(", ")
            )
        })?;
        let primitive_value = Primitive::parse(primitive.trim())
            .ok_or_else(|| format!("unknown primitive `{primitive}`; allowed: onesided, rpc"))?;
        plan = plan.with(stage_value, primitive_value);
    }
    Ok(plan)
}

/// An RCC hybrid code, decimal or `0b…`.
pub fn parse_code(text: &str) -> Result<u16, String> {
    let text = text.trim();
    match text.strip_prefix("0b").or_else(|| text.strip_prefix("0B")) {
        Some(binary) => u16::from_str_radix(binary, 2),
        None => text.parse(),
    }
    .map_err(|_| {
        format!("hybrid `{text}` is not a code; allowed: decimal (28) or binary (0b11100)")
    })
}

/// Sets `key` (a canonical path) to `value` in an unresolved config.
pub fn apply_knob(config: &mut Config, key: &str, value: &str) -> Result<(), String> {
    match key {
        "stages" => {
            let given = parse_stage_list(value)?;
            for stage in given.stages() {
                config.stages = config.stages.with(stage, given.get(stage));
            }
            return Ok(());
        }
        "profile" => {
            config.profile = NetworkProfile::resolve(value)?;
            return Ok(());
        }
        _ => {}
    }
    let mut json = serde_json::to_value(&*config).map_err(|e| e.to_string())?;
    let mut at = &mut json;
    for part in key.split('.') {
        at = at
            .get_mut(part)
            .ok_or_else(|| format!("unknown config key `{key}`"))?;
    }
    let parsed = match at {
        Value::Bool(_) => Value::Bool(match value {
            "true" | "on" | "yes" | "1" => true,
            "false" | "off" | "no" | "0" => false,
            _ => {
                return Err(format!(
                    "{key} = `{value}` is not a boolean; allowed: true, false"
                ))
            }
        }),
        Value::Number(_) | Value::Null => match serde_json::from_str::<Value>(value) {
            Ok(number @ Value::Number(_)) => number,
            _ if at.is_null() => Value::String(value.to_string()),
            _ => return Err(format!("{key} = `{value}` is not a number")),
        },
        _ => Value::String(value.to_string()),
    };
    *at = parsed;
    *config = serde_json::from_value(json).map_err(|e| format!("{key} = `{value}`: {e}"))?;
    Ok(())
}

/// The config of one point: `base` (unresolved, as flags and file left
/// it) with the knob values set, the hybrid code applied, validated.
pub fn resolve_point(
    base: &Config,
    base_hybrid: Option<u16>,
    knobs: &[(String, String)],
) -> Result<Config, String> {
    let mut config = base.clone();
    let mut hybrid = base_hybrid;
    for (key, value) in knobs {
        if key == "hybrid" {
            hybrid = Some(parse_code(value)?);
        } else {
            apply_knob(&mut config, key, value)?;
        }
    }
    if let Some(code) = hybrid {
        let present = config.protocol.stage_bits();
        if code & !present != 0 {
            return Err(format!(
                "hybrid code {code} has bits for stages protocol {} lacks; its stages are {}",
                config.protocol.name(),
                config.stage_bits_text()
            ));
        }
        config.stages = plan_of(config.protocol, code);
    }
    crate::engine::validate(&mut config).map_err(|e| e.0)?;
    Ok(config)
}
