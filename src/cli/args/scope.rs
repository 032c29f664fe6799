//! Which run flags each command takes. `run`, `launch` and `node` share
//! one set of run flags (`RunFlags`), but a sim flag means nothing to a
//! ucx rank and a ucx flag nothing to `run`: such a flag is hidden from
//! that command's help and refused when given there, with why and what
//! to use instead — never silently ignored.
//!
//! Invariant: a flag listed here for a command is one that command would
//! otherwise ignore; every other flag keeps its meaning everywhere.

use super::super::{usage, CliError};

/// A run flag (by clap id) a command does not take, and why.
struct Inapplicable {
    id: &'static str,
    why: &'static str,
}

const SIM_ONLY: &str = "it shapes the sim fabric, and this command runs fabric ucx; for a simulated cluster use `verbena run --fabric sim`";

const UCX_ONLY: &str = "it configures the ucx fabric, one process per node, which `verbena run` does not start; use `verbena launch` or `verbena node`";

/// The flags a ucx rank (`launch`, `node`) ignores.
const NOT_FOR_RANKS: [Inapplicable; 5] = [
    Inapplicable {
        id: "profile",
        why: "a profile models a network on the sim and threads fabrics, and this command runs fabric ucx over the real one",
    },
    Inapplicable {
        id: "jitter",
        why: SIM_ONLY,
    },
    Inapplicable {
        id: "swarm",
        why: SIM_ONLY,
    },
    Inapplicable {
        id: "emulated_nodes",
        why: SIM_ONLY,
    },
    Inapplicable {
        id: "warm_location_cache",
        why:
            "a ucx rank holds only its own node's rows; it applies to `verbena run` (sim, threads)",
    },
];

/// The flags `run` (one process: sim or threads) ignores.
const NOT_FOR_RUN: [Inapplicable; 5] = [
    Inapplicable {
        id: "transport",
        why: UCX_ONLY,
    },
    Inapplicable {
        id: "local_atomics",
        why: UCX_ONLY,
    },
    Inapplicable {
        id: "join_timeout",
        why: UCX_ONLY,
    },
    Inapplicable {
        id: "stall_timeout",
        why: UCX_ONLY,
    },
    Inapplicable {
        id: "lease_ms",
        why: UCX_ONLY,
    },
];

/// The commands that always run fabric ucx: `--fabric` is hidden there,
/// and only `ucx` allowed (`multiprocess` checks it).
pub const UCX_COMMANDS: [&str; 2] = ["launch", "node"];

fn inapplicable(command: &str) -> &'static [Inapplicable] {
    match command {
        "launch" | "node" => &NOT_FOR_RANKS,
        "run" => &NOT_FOR_RUN,
        _ => &[],
    }
}

/// `sub` with the flags it does not take hidden from its help.
pub(super) fn hide_inapplicable(mut sub: clap::Command) -> clap::Command {
    let name = sub.get_name().to_string();
    for flag in inapplicable(&name) {
        sub = sub.mut_arg(flag.id, |arg| arg.hide(true));
    }
    if UCX_COMMANDS.contains(&name.as_str()) {
        sub = sub.mut_arg("fabric", |arg| arg.hide(true));
    }
    sub
}

/// Refuses a flag given to `command` that it does not take, naming the
/// flag, why, and what to use instead.
pub fn refuse_inapplicable(
    command: &clap::Command,
    matches: &clap::ArgMatches,
) -> Result<(), CliError> {
    for flag in inapplicable(command.get_name()) {
        if matches.value_source(flag.id) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let long = command
            .get_arguments()
            .find(|a| a.get_id() == flag.id)
            .and_then(|a| a.get_long())
            .unwrap_or(flag.id);
        return Err(usage(format!(
            "--{long} does not apply to `verbena {}`: {}",
            command.get_name(),
            flag.why
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every id listed names a run flag, so a renamed flag cannot slip out
    /// of its command's refusal.
    #[test]
    fn every_listed_flag_exists() {
        let command = super::super::command();
        for name in ["run", "launch", "node"] {
            let sub = command.find_subcommand(name).expect("a command");
            for flag in inapplicable(name) {
                let arg = sub.get_arguments().find(|a| a.get_id() == flag.id);
                assert!(arg.is_some_and(|a| a.is_hide_set()), "{name} {}", flag.id);
            }
        }
    }
}
