//! The flags' value parsers: [`Parse`] turns a flag's text into a value
//! with the project's own message, and [`closest`] is the one "did you
//! mean" rule every typed name uses (flags, values, commands, config keys,
//! `--vary` keys).
//!
//! Invariant: a parser only turns text into a value and reports text that
//! names nothing; value ranges are `Config::validate`'s.

use std::ffi::OsStr;

use clap::builder::{PossibleValue, TypedValueParser};

use super::super::run_config::parse_number;
use super::super::{usage, CliError};
use crate::base::{Primitive, ProtocolKind};
use crate::config::faults::RunFault;
use crate::config::profile::{NetworkProfile, BUILTIN_PROFILES};
use crate::config::{
    FabricKind, KeyDistribution, LocalAtomics, LockMode, UcxTransport, WorkloadKind,
};
use crate::experiments::sweep::{self, Knob};

/// Turns a flag's text into a `T` with the project's own message, adding a
/// "did you mean" hint when the flag takes one of a closed set of names.
#[derive(Clone)]
pub struct Parse<T> {
    parse: fn(&str, &str) -> Result<T, CliError>,
    /// The names a closed set allows (hints, help, completions).
    names: fn() -> Vec<&'static str>,
    /// Whether `names` is every value (a profile may also be a file path).
    closed: bool,
}

pub(super) fn no_names() -> Vec<&'static str> {
    Vec::new()
}

/// A flag whose text is parsed by `parse(flag, text)`: open text, with no
/// names to hint or complete.
pub(super) fn parse<T>(parse: fn(&str, &str) -> Result<T, CliError>) -> Parse<T> {
    one_of_or_more(parse, no_names)
}

/// A flag that takes one of `names` (aliases allowed by `parse`).
pub(super) fn one_of<T>(
    parse: fn(&str, &str) -> Result<T, CliError>,
    names: fn() -> Vec<&'static str>,
) -> Parse<T> {
    Parse {
        parse,
        names,
        closed: true,
    }
}

/// A flag that takes one of `names` or other text `parse` accepts (a
/// profile's TOML path): the names hint and complete, but are not all.
pub(super) fn one_of_or_more<T>(
    parse: fn(&str, &str) -> Result<T, CliError>,
    names: fn() -> Vec<&'static str>,
) -> Parse<T> {
    Parse {
        closed: false,
        ..one_of(parse, names)
    }
}

/// The closest of `names` to `text`, if one is close: the command line's
/// one "did you mean" rule, for flags' values, commands, config keys and
/// `--vary` keys alike. Close is clap's own rule for flag names (Jaro
/// similarity above 0.7) or one edit away (a letter dropped, added,
/// changed or two swapped), which Jaro undervalues in short names (`rn`
/// for `run`); the most similar close name wins.
pub fn closest<'a>(text: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|name| (strsim::jaro(text, name), name))
        .filter(|(similarity, name)| {
            *similarity > 0.7 || strsim::damerau_levenshtein(text, name) == 1
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Parse<T> {
    type Value = T;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg
            .and_then(|a| a.get_long())
            .map_or_else(|| "value".to_string(), |long| format!("--{long}"));
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::InvalidUtf8,
                format!("{flag}: the value is not UTF-8\n"),
            )
        })?;
        (self.parse)(&flag, text).map_err(|error| {
            let mut message = error.message;
            // A list (`occ,nowiat`) is hinted at by its first unknown name.
            let names = (self.names)();
            let unknown = text
                .split(',')
                .map(str::trim)
                .find(|part| !names.contains(part))
                .unwrap_or(text);
            if let Some(near) = closest(unknown, names) {
                message.push_str(&format!("; did you mean `{near}`?"));
            }
            message.push('\n');
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, message)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        if !self.closed {
            return None;
        }
        Some(Box::new((self.names)().into_iter().map(PossibleValue::new)))
    }
}

pub(super) fn count<T: std::str::FromStr + Clone + Send + Sync + 'static>() -> Parse<T> {
    parse(|flag, text| parse_number(flag, text, "a whole number"))
}

pub(super) fn real() -> Parse<f64> {
    parse(|flag, text| parse_number(flag, text, "a number"))
}

pub(super) fn protocol_names() -> Vec<&'static str> {
    ProtocolKind::names()
}

pub(super) fn parse_protocol(_flag: &str, v: &str) -> Result<ProtocolKind, CliError> {
    ProtocolKind::parse(v.trim()).ok_or_else(|| {
        usage(format!(
            "unknown protocol `{v}`; protocols: {}",
            protocol_names().join(", ")
        ))
    })
}

pub(super) fn parse_primitive(_flag: &str, v: &str) -> Result<Primitive, CliError> {
    Primitive::parse(v)
        .ok_or_else(|| usage(format!("unknown primitive `{v}`; allowed: onesided, rpc")))
}

pub(super) fn workload_names() -> Vec<&'static str> {
    WorkloadKind::NAMED.map(|(name, _)| name).to_vec()
}

pub(super) fn parse_workload(_flag: &str, v: &str) -> Result<WorkloadKind, CliError> {
    WorkloadKind::parse(v).ok_or_else(|| {
        usage(format!(
            "unknown workload `{v}`; workloads in this build: {}",
            workload_names().join(", ")
        ))
    })
}

pub(super) fn failure_names() -> Vec<&'static str> {
    vec!["crash-r2", "crash-r3", "pause-r2", "pause-r3", "all"]
}

pub(super) fn check_workload_names() -> Vec<&'static str> {
    let mut names = workload_names();
    names.push("all");
    names
}

pub(super) fn parse_fabric(_flag: &str, v: &str) -> Result<FabricKind, CliError> {
    FabricKind::parse(v)
        .ok_or_else(|| usage(format!("unknown fabric `{v}`; allowed: threads, sim, ucx")))
}

pub(super) fn parse_transport(_flag: &str, v: &str) -> Result<UcxTransport, CliError> {
    UcxTransport::parse(v).ok_or_else(|| {
        usage(format!(
            "unknown transport `{v}`; allowed: shm, tcp, rdma, auto"
        ))
    })
}

pub(super) fn parse_local_atomics(_flag: &str, v: &str) -> Result<LocalAtomics, CliError> {
    LocalAtomics::parse(v)
        .ok_or_else(|| usage(format!("unknown local atomics `{v}`; allowed: nic, cpu")))
}

pub(super) fn parse_distribution(_flag: &str, v: &str) -> Result<KeyDistribution, CliError> {
    match v {
        "uniform" => Ok(KeyDistribution::Uniform),
        "zipf" => Ok(KeyDistribution::Zipf),
        "hot" => Ok(KeyDistribution::Hot),
        other => Err(usage(format!(
            "unknown distribution `{other}`; allowed: uniform, zipf, hot"
        ))),
    }
}

pub(super) fn parse_lock_mode(_flag: &str, v: &str) -> Result<LockMode, CliError> {
    match v {
        "exclusive" => Ok(LockMode::Exclusive),
        "shared" => Ok(LockMode::Shared),
        other => Err(usage(format!(
            "unknown lock mode `{other}`; allowed: exclusive, shared"
        ))),
    }
}

pub(super) fn parse_starvation_fix(_flag: &str, v: &str) -> Result<bool, CliError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(usage(format!(
            "--wait-die-starvation-fix = `{other}` is not allowed; allowed: true, false"
        ))),
    }
}

pub(super) fn parse_detector(_flag: &str, v: &str) -> Result<bool, CliError> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(usage(format!(
            "--failure-detector `{other}`; allowed: on, off"
        ))),
    }
}

pub(super) fn parse_switch(flag: &str, v: &str) -> Result<bool, CliError> {
    match v.trim() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        other => Err(usage(format!(
            "{flag} `{other}` is not a switch; allowed: true, false"
        ))),
    }
}

pub(super) fn parse_profile(_flag: &str, v: &str) -> Result<NetworkProfile, CliError> {
    NetworkProfile::resolve(v).map_err(usage)
}

pub(super) fn profile_names() -> Vec<&'static str> {
    BUILTIN_PROFILES.to_vec()
}

pub(super) fn parse_fault(_flag: &str, v: &str) -> Result<RunFault, CliError> {
    RunFault::parse(v).map_err(usage)
}

pub(super) fn parse_knob(_flag: &str, v: &str) -> Result<Knob, CliError> {
    sweep::parse_knob(v).map_err(|message| usage(unknown_knob(v).unwrap_or(message)))
}

/// The message for a `--vary` knob whose key names nothing: the closest
/// key by TOML path, leaf or flag name, instead of every key there is.
/// `None` when the key is known (the knob's trouble is elsewhere).
pub(super) fn unknown_knob(knob: &str) -> Option<String> {
    let key = knob.split('=').next().unwrap_or(knob).trim();
    match sweep::canonical_key(key) {
        Err(message) if message.contains("unknown config key") => {}
        _ => return None,
    }
    let paths = sweep::config_keys();
    let mut names: Vec<&str> = paths.iter().map(String::as_str).collect();
    names.extend(
        paths
            .iter()
            .filter_map(|p| p.rsplit_once('.').map(|(_, leaf)| leaf)),
    );
    names.push("stages");
    let hint = match closest(&key.replace('-', "_"), names) {
        Some(near) => format!("did you mean `{near}`?"),
        None => "a key is a config key's TOML path (ycsb.theta), its leaf name (theta) or its flag's name (hot-probability); docs/guide/running.md lists them".to_string(),
    };
    Some(format!("--vary: unknown config key `{key}`; {hint}"))
}

pub(super) fn mix_text(_flag: &str, v: &str) -> Result<String, CliError> {
    Ok(v.to_string())
}
