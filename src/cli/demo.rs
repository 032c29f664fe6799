//! `verbena demo`: NO_WAIT and OCC, each one-sided and over RPC, under the
//! checker, and the table that compares them.

use std::fmt::Write as _;

use super::{args, check_exit, check_output_path, failed, usage, write_json, CliError};
use crate::base::{Primitive, ProtocolKind};
use crate::config::Config;
use crate::engine::report::{describe_keys, describe_writes, percent};
use crate::engine::{self, Report};

pub(super) fn command_demo(a: args::DemoArgs) -> Result<i32, CliError> {
    let (duration_s, warmup_s) = (a.duration.unwrap_or(2.0), a.warmup.unwrap_or(0.5));
    let mut configs = demo_configs(duration_s, warmup_s);
    for config in &mut configs {
        crate::engine::validate(config).map_err(|e| usage(e.0))?;
    }
    if let Some(path) = &a.json {
        check_output_path("--json", path)?;
    }
    let mut reports = Vec::new();
    for config in configs {
        eprintln!(
            "running {} with {} verbs for {:.1} s (+{:.1} s warm-up), checker on…",
            config.protocol.name(),
            config.primitive.name(),
            duration_s,
            warmup_s
        );
        let output = engine::run(&config).map_err(|e| failed(e.to_string()))?;
        reports.push(output.report);
    }
    super::terminal::print_out(&demo_table(&reports))?;
    if let Some(path) = &a.json {
        write_json(path, &reports)?;
    }
    Ok(check_exit(&reports.iter().collect::<Vec<_>>()))
}

/// The configurations `verbena demo` compares.
pub fn demo_configs(duration_s: f64, warmup_s: f64) -> Vec<Config> {
    let mut configs = Vec::new();
    for protocol in [ProtocolKind::NoWait, ProtocolKind::Occ] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            configs.push(Config {
                protocol,
                primitive,
                duration_s,
                warmup_s,
                check: true,
                ..Config::default()
            });
        }
    }
    configs
}

/// One row per report: the comparison `verbena demo` prints.
pub fn demo_table(reports: &[Report]) -> String {
    let mut out = String::new();
    if let Some(first) = reports.first() {
        let c = &first.config;
        let _ = writeln!(
            out,
            "\nYCSB, {} nodes × {} worker × {} coroutines, {} ops/txn, {}, {}, {:.0} µs compute",
            c.nodes,
            c.workers,
            c.coroutines,
            c.ycsb.ops_per_txn,
            describe_writes(&c.ycsb),
            describe_keys(&c.ycsb),
            c.ycsb.compute_us
        );
        if first.oversubscribed {
            let _ = writeln!(
                out,
                "(more worker threads than the {} cores: time-shared)",
                first.cores
            );
        }
    }
    let _ = writeln!(
        out,
        "{:<9} {:<9} {:>11} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>5}  check",
        "protocol",
        "primitive",
        "txn/s",
        "abort",
        "p50 µs",
        "p99 µs",
        "reads",
        "cas",
        "rpcs",
        "dbell",
    );
    for r in reports {
        let verdict = match &r.check {
            None => "off".to_string(),
            Some(c) if c.passed() => format!("serializable, invariants ok ({} txns)", c.txn_count),
            Some(c) => format!(
                "FAILED (serializable: {}, invariants: {})",
                c.serializable, c.invariants_ok
            ),
        };
        let v = &r.verbs_per_txn;
        let _ = writeln!(
            out,
            "{:<9} {:<9} {:>11.0} {:>8} {:>8.1} {:>8.1} {:>6.2} {:>6.2} {:>6.2} {:>5.2}  {}",
            r.config.protocol.name(),
            r.config.primitive.name(),
            r.throughput_txn_per_s,
            percent(r.abort_rate),
            r.latency_us.p50,
            r.latency_us.p99,
            v.read,
            v.cas,
            v.rpc,
            v.doorbells,
            verdict
        );
    }
    out
}
