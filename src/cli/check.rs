//! `verbena check`: the seeded correctness matrix on `sim`, run on every
//! core, with its case lists parsed and its recorded hashes compared.
//!
//! Invariant: a run fails (exit 3) when a case fails its check or its
//! hashes differ from the recorded ones; bad choices are usage errors.

use std::io::Write as _;

use super::terminal::print_out;
use super::{args, check_output_path, usage, write_file, CliError, EXIT_CHECK_FAILED, EXIT_OK};
use crate::base::ProtocolKind;
use crate::config::WorkloadKind;
use crate::experiments::matrix::{self, Case, CaseOutcome, Failure};

/// The protocols of `verbena check --protocol`: a list of protocol names.
pub(super) fn parse_check_protocols(text: &str) -> Result<Vec<ProtocolKind>, CliError> {
    text.split(',')
        .map(|name| {
            ProtocolKind::parse(name.trim()).ok_or_else(|| {
                usage(format!(
                    "unknown protocol `{name}`; protocols: {}",
                    ProtocolKind::ALL.map(|p| p.name()).join(", ")
                ))
            })
        })
        .collect()
}

/// `verbena check`: the seeded correctness matrix on `sim`.
pub(super) fn command_check(a: args::CheckArgs) -> Result<i32, CliError> {
    let seeds = a.seeds.unwrap_or(10);
    let failures = match &a.failover {
        Some(list) => parse_check_failures(list)?,
        None => vec![Failure::None],
    };
    let first_seed = a.seed.unwrap_or(1);
    let protocols: Vec<ProtocolKind> = match &a.protocol {
        Some(list) => parse_check_protocols(list)?,
        None => ProtocolKind::ALL.to_vec(),
    };
    let hybrid = a.hybrid;
    let workloads = match &a.workload {
        Some(list) => parse_check_workloads(list)?,
        None => vec![WorkloadKind::Ycsb],
    };
    let hashes_out = a.hashes.clone();
    if let Some(path) = &hashes_out {
        check_output_path("--hashes", path)?;
    }
    let hashes_expected = match &a.expect_hashes {
        Some(path) => {
            let recorded = std::fs::read_to_string(path).map_err(|e| {
                usage(format!(
                    "--expect-hashes {path}: cannot read the recorded hashes: {e}"
                ))
            })?;
            Some((path.clone(), recorded))
        }
        None => None,
    };
    if seeds == 0 {
        return Err(usage("--seeds 0 runs nothing; allowed: 1 or more"));
    }
    skip_pairs_that_cannot_run(&workloads, &protocols)?;
    let seed_range = first_seed..first_seed.saturating_add(seeds);
    if let Some(code) = hybrid {
        hybrid_fits_every_protocol(code, &protocols)?;
    }
    let cases = matrix_cases(&workloads, &protocols, seed_range, &failures, hybrid)?;
    let started = std::time::Instant::now();
    let outcomes = run_cases_in_parallel(&cases);
    let mut failed = report_failed_cases(&outcomes, cases.len() == 1);
    if let Some(path) = &hashes_out {
        let text = matrix::hash_file(&outcomes);
        write_file(path, |out| out.write_all(text.as_bytes()))?;
    }
    if let Some((path, recorded)) = &hashes_expected {
        failed += compare_recorded_hashes(&outcomes, path, recorded)?;
    }
    let committed: u64 = outcomes.iter().map(|o| o.committed).sum();
    print_out(&format!(
        "check: {} cases ({} workload(s) × {} protocol(s) × seeds {}..={} × plans), {} failed, {} transactions committed and checked, {:.1} s\n",
        outcomes.len(),
        workloads.len(),
        protocols.len(),
        first_seed,
        first_seed + seeds - 1,
        failed,
        committed,
        started.elapsed().as_secs_f64()
    ))?;
    Ok(if failed == 0 {
        EXIT_OK
    } else {
        EXIT_CHECK_FAILED
    })
}

/// Pairs a protocol cannot run are left out, with a line saying which
/// (none since CALVIN runs TPC-C; `WorkloadKind::runs_under` keeps the
/// place for new ones); a usage error when no pair is left.
fn skip_pairs_that_cannot_run(
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
) -> Result<(), CliError> {
    let skipped: Vec<String> = workloads
        .iter()
        .flat_map(|&w| protocols.iter().map(move |&p| (w, p)))
        .filter(|&(w, p)| !w.runs_under(p))
        .map(|(w, p)| format!("{} on {}", p.name(), w.name()))
        .collect();
    if !skipped.is_empty() {
        eprintln!(
            "check: skipping {} (cannot run this workload yet)",
            skipped.join(", ")
        );
    }
    if !workloads
        .iter()
        .any(|&w| protocols.iter().any(|&p| w.runs_under(p)))
    {
        return Err(usage("no chosen protocol can run these workloads"));
    }
    Ok(())
}

/// `--hybrid CODE` must name only stages every chosen protocol has.
fn hybrid_fits_every_protocol(code: u16, protocols: &[ProtocolKind]) -> Result<(), CliError> {
    for &protocol in protocols {
        if code & !protocol.stage_bits() != 0 {
            return Err(usage(format!(
                "--hybrid {code} has bits for stages protocol {} lacks; its stages are {}",
                protocol.name(),
                protocol
                    .stages()
                    .iter()
                    .map(|s| format!("{}={}", s.name(), s.bit()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

/// The cases to run: the one `--hybrid` code, or every plan of the
/// matrix, or the pure plans under each failure; only pairs that run. A
/// usage error when that leaves none.
fn matrix_cases(
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
    seed_range: std::ops::Range<u64>,
    failures: &[Failure],
    hybrid: Option<u16>,
) -> Result<Vec<Case>, CliError> {
    let cases: Vec<Case> = match hybrid {
        Some(code) => {
            let only = |_, _| vec![code];
            matrix::cases_where(workloads, protocols, seed_range, failures, only)
        }
        None if failures == [Failure::None] => matrix::cases_of(workloads, protocols, seed_range),
        None => matrix::failover_cases(workloads, protocols, seed_range, failures),
    };
    let cases: Vec<Case> = cases
        .into_iter()
        .filter(|case| case.workload.runs_under(case.protocol))
        .collect();
    if cases.is_empty() {
        return Err(usage(
            "these choices leave no case to run (CALVIN's failover cases are crashes only: crash-r2, crash-r3)",
        ));
    }
    Ok(cases)
}

/// Prints a `FAIL` line, with its replay command, per failed case (and
/// the report's table when it is the only case); returns how many failed.
fn report_failed_cases(outcomes: &[CaseOutcome], only_case: bool) -> usize {
    let mut failed = 0;
    for outcome in outcomes {
        if !outcome.passed {
            failed += 1;
            eprintln!(
                "FAIL {} {} seed {} code {}{} ({}): {}\n  replay: {}",
                outcome.case.workload.name(),
                outcome.case.protocol.name(),
                outcome.case.seed,
                outcome.case.code,
                match outcome.case.failure {
                    Failure::None => String::new(),
                    failure => format!(" {}", failure.name()),
                },
                matrix::plan_of(outcome.case.protocol, outcome.case.code).describe(),
                outcome.detail,
                matrix::replay_command(outcome.case)
            );
            if only_case {
                eprint!("{}", outcome.report_table);
            }
        }
    }
    failed
}

/// Compares the cases' hashes with those recorded in `path`, printing a
/// `HASH` line per difference and a summary; returns how many differ.
fn compare_recorded_hashes(
    outcomes: &[CaseOutcome],
    path: &str,
    recorded: &str,
) -> Result<usize, CliError> {
    let differences = matrix::compare_hashes(outcomes, recorded);
    for difference in &differences {
        eprintln!("HASH {difference}");
    }
    print_out(&format!(
        "check: hashes of {} cases compared with {path}: {} differ\n",
        outcomes.len(),
        differences.len()
    ))?;
    Ok(differences.len())
}

/// The failures of `verbena check --failover`: a list, or `all`.
pub(super) fn parse_check_failures(text: &str) -> Result<Vec<Failure>, CliError> {
    let names = Failure::FAILOVER.map(|f| f.name());
    parse_named_list(
        text,
        "failure",
        "check --failover",
        &Failure::FAILOVER,
        &names,
        Failure::parse,
    )
}

/// The workloads of `verbena check --workload`: a list, or `all`.
pub(super) fn parse_check_workloads(text: &str) -> Result<Vec<WorkloadKind>, CliError> {
    let all = WorkloadKind::NAMED.map(|(_, kind)| kind);
    let names = WorkloadKind::NAMED.map(|(name, _)| name);
    parse_named_list(text, "workload", "check", &all, &names, WorkloadKind::parse)
}

/// A comma-separated list of `what`s named as in `names` (each once, in
/// the order given), or `all` of them; an unknown name is refused with
/// the allowed ones.
fn parse_named_list<T: Copy + PartialEq, N: std::fmt::Display>(
    text: &str,
    what: &str,
    flag_of: &str,
    all: &[T],
    names: &[N],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, CliError> {
    if text.trim() == "all" {
        return Ok(all.to_vec());
    }
    let mut chosen = Vec::new();
    for name in text.split(',') {
        let item = parse(name).ok_or_else(|| {
            let allowed: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            usage(format!(
                "unknown {what} `{}` for {flag_of}; allowed: {}, or all",
                name.trim(),
                allowed.join(", ")
            ))
        })?;
        if !chosen.contains(&item) {
            chosen.push(item);
        }
    }
    Ok(chosen)
}

/// Runs the cases on every core (each `sim` run is one thread), printing a
/// dot per case; the outcomes come back in case order.
fn run_cases_in_parallel(cases: &[Case]) -> Vec<CaseOutcome> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::with_capacity(cases.len()));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(cases.len()) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(&case) = cases.get(index) else {
                    return;
                };
                let outcome = matrix::run_case(case, |_| {});
                let mut all = outcomes.lock().expect("a check thread panicked");
                all.push((index, outcome));
                if all.len() % 50 == 0 {
                    eprintln!("  {} / {} cases", all.len(), cases.len());
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().expect("a check thread panicked");
    outcomes.sort_by_key(|(index, _)| *index);
    outcomes.into_iter().map(|(_, outcome)| outcome).collect()
}
