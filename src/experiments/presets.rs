//! `verbena reproduce`: small-scale versions of the papers' experiments.
//! Each preset is a sweep (or a hybrid enumeration) with the paper's knob
//! and values, scaled to run in a minute or two on the `sim` fabric with
//! the paper's network (`cx4-edr`, RCC §6.1 and DrTM+H §4's ConnectX-4 EDR
//! cluster; Deneva ran on a 1 ms-RTT cloud LAN, but its contention shapes
//! show on any network and `cx4-edr` keeps the presets fast). Any run flag
//! after the name overrides the preset's base (e.g. `--fabric threads
//! --duration 1`), and `--vary` replaces a preset knob of the same key.
//!
//! Small scale means: 4 nodes × 1 worker, 10,000 rows per node, a few ms of
//! virtual time per point — the shapes of the figures, not their absolute
//! numbers (the papers used 8–16 machines of 10–20 cores). YCSB stands in
//! for SmallBank and TPC-C, which this build lacks.
//!
//! CALVIN's points run 200 µs epochs (`--calvin-epoch-us 200`, ignored by
//! the other protocols): 25 epochs in the 5 ms of virtual time, where its
//! 5 ms default (Deneva §3.4) would close none before the run ends, and so
//! commit nothing (the report's `notes` then say so). A `--duration`
//! given after the name keeps the 200 µs unless `--calvin-epoch-us` is
//! given too.

use std::fmt::Write as _;

use super::hybrid::Method;

/// What a preset runs.
#[derive(Clone, Debug)]
pub enum Kind {
    /// A sweep over these `--vary` knobs.
    Sweep(&'static [&'static str]),
    /// `verbena hybrid` with this method (the protocol from the base).
    Hybrid(Method),
}

#[derive(Clone, Debug)]
pub struct Preset {
    pub name: &'static str,
    /// Paper and figure.
    pub source: &'static str,
    pub title: &'static str,
    /// Run flags of every point.
    pub base_args: &'static [&'static str],
    pub kind: Kind,
    /// The knob on the x axis of the line figures.
    pub x: Option<&'static str>,
}

/// CALVIN's epoch in the presets, µs (see the module docs).
const CALVIN_EPOCH_US: &str = "200";

/// Base flags every preset shares.
macro_rules! small_sim {
    ($($extra:expr),* $(,)?) => {
        &[
            "--fabric", "sim", "--profile", "cx4-edr", "--nodes", "4", "--rows-per-node", "10000",
            "--location-cache", "16384", "--duration", "0.004", "--warmup", "0.001", "--check",
            "--calvin-epoch-us", CALVIN_EPOCH_US,
            $($extra),*
        ]
    };
}

pub const PRESETS: [Preset; 9] = [
    Preset {
        name: "rcc-coroutines",
        source: "RCC §6.3, Fig. 16 (YCSB)",
        title: "throughput and latency as coroutines grow, one-sided vs RPC",
        base_args: small_sim!(),
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc", "coroutines=1,3,5,7,9,11"]),
        x: Some("coroutines"),
    },
    Preset {
        name: "rcc-contention",
        source: "RCC §6.4, Fig. 18",
        title: "throughput vs the probability of touching the 0.1 % hot area",
        base_args: small_sim!("--distribution", "hot", "--hot-fraction", "0.001"),
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc", "hot_probability=0,0.2,0.4,0.6,0.8,0.9"]),
        x: Some("hot_probability"),
    },
    Preset {
        name: "rcc-compute",
        source: "RCC §6.5, Fig. 19",
        title: "throughput vs execution-phase computation (1–256 µs)",
        base_args: small_sim!(),
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc", "compute_us=1,4,16,64,256"]),
        x: Some("compute_us"),
    },
    Preset {
        name: "rcc-stage-latency",
        source: "RCC §5.1, Fig. 13",
        title: "per-stage latency of the pure forms with one coroutine",
        // RCC §6.1 runs 3-way replication; without it the log stage is empty.
        base_args: small_sim!("--coroutines", "1", "--replication", "3"),
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc"]),
        x: None,
    },
    Preset {
        name: "rcc-hybrid-occ",
        source: "RCC §5.1, Fig. 14",
        title: "every OCC hybrid code ranked; the latency-breakdown pick tested",
        // 3-way replication as in RCC §6.1, so the log bit of a code matters.
        base_args: small_sim!("--protocol", "occ", "--coroutines", "8", "--replication", "3"),
        kind: Kind::Hybrid(Method::Both),
        x: None,
    },
    Preset {
        name: "rcc-qp-scaling",
        source: "RCC §6.6, Fig. 20",
        title: "throughput on emulated clusters of 4–160 nodes, one-sided vs RPC",
        // RCC's emulation: 4 real nodes whose workers spread their verbs
        // over as many connections as a larger cluster needs, on a NIC
        // that caches 512 of them (`cx4-edr-qp`, see `fabric::profile`);
        // 10 workers × 10 coroutines per node as in RCC §6.1, so 160
        // emulated nodes give each NIC 1,600 connections. Four of RCC's
        // protocols (CALVIN's epochs do not use the connections this
        // models), 3 ms of virtual time per point.
        base_args: &[
            "--fabric", "sim", "--profile", "cx4-edr-qp", "--nodes", "4", "--workers", "10",
            "--coroutines", "10", "--rows-per-node", "10000", "--location-cache", "16384",
            "--distribution", "hot", "--hot-fraction", "0.001", "--hot-probability", "0.9",
            "--duration", "0.003", "--warmup", "0.0005",
        ],
        kind: Kind::Sweep(&["protocol=no_wait,occ,mvcc,sundial", "primitive=onesided,rpc", "emulated_nodes=4,16,40,80,160"]),
        x: Some("emulated_nodes"),
    },
    Preset {
        name: "deneva-contention",
        source: "Deneva §4.2, Fig. 2",
        title: "throughput vs Zipf skew θ, 50 % writes",
        base_args: small_sim!("--distribution", "zipf", "--write-ratio", "0.5"),
        kind: Kind::Sweep(&["protocol=all", "theta=0,0.3,0.6,0.7,0.8,0.9,0.99"]),
        x: Some("theta"),
    },
    Preset {
        name: "deneva-update-rate",
        source: "Deneva §4.3, Fig. 3",
        title: "throughput vs the share of update transactions, medium contention (θ 0.6)",
        // Deneva's mix: an update transaction reads 5 records and updates
        // 5 (here read-modify-writes), the rest read 10; 2PL takes shared
        // read locks (Deneva §3.1, §4.3).
        base_args: small_sim!("--distribution", "zipf", "--theta", "0.6", "--lock-mode", "shared"),
        kind: Kind::Sweep(&["protocol=all", "update_txn_ratio=0,0.1,0.2,0.4,0.6,0.8,1"]),
        x: Some("update_txn_ratio"),
    },
    Preset {
        name: "drtmh-phases",
        source: "DrTM+H §5, Fig. 7–10",
        title: "OCC with each phase switched between one-sided and RPC",
        // DrTM+H §4.1 logs to 2 backups (3-way replication).
        base_args: small_sim!("--protocol", "occ", "--replication", "3"),
        kind: Kind::Sweep(&[
            "stages=read=onesided|read=rpc|lock=rpc+validate=rpc|commit=rpc|log=rpc|read=rpc+lock=rpc+validate=rpc+log=rpc+commit=rpc+release=rpc",
        ]),
        x: None,
    },
];

pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// `verbena reproduce --list`.
pub fn list_text() -> String {
    let mut out = String::from("presets (verbena reproduce NAME [RUN FLAGS] [--out DIR]):\n");
    for p in &PRESETS {
        let what = match &p.kind {
            Kind::Sweep(knobs) => format!("sweep {}", knobs.join(" × ")),
            Kind::Hybrid(_) => "hybrid enumeration + latency-breakdown pick".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<20} {:<28} {}\n  {:<20} {:<28} ({what})",
            p.name, p.source, p.title, "", ""
        );
    }
    out.push_str("Each writes results/NAME/ (rows, CSV, figures, report.html); small scale on --fabric sim, cx4-edr.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::sweep::parse_knob;

    fn flag_is(p: &Preset, name: &str, value: &str) -> bool {
        p.base_args
            .windows(2)
            .any(|w| w[0] == name && w[1] == value)
    }

    #[test]
    fn every_preset_has_valid_knobs_and_a_paper() {
        for p in &PRESETS {
            assert!(
                p.source.contains('§') && p.source.contains("Fig."),
                "{}",
                p.name
            );
            if let Kind::Sweep(knobs) = &p.kind {
                for knob in *knobs {
                    parse_knob(knob).unwrap_or_else(|e| panic!("{}: {e}", p.name));
                }
            }
        }
        assert!(find("rcc-coroutines").is_some() && find("nope").is_none());
        // Every preset that runs CALVIN gives it a dozen epochs or more.
        let flag = |p: &Preset, name: &str| -> Option<f64> {
            let at = p.base_args.iter().position(|a| *a == name)?;
            Some(p.base_args[at + 1].parse().expect("a number"))
        };
        let mut with_calvin = 0;
        for p in &PRESETS {
            let runs_calvin = match &p.kind {
                Kind::Sweep(knobs) => knobs.iter().any(|k| {
                    k.starts_with("protocol=") && (k.contains("all") || k.contains("calvin"))
                }),
                Kind::Hybrid(_) => flag_is(p, "--protocol", "calvin"),
            };
            if !runs_calvin {
                continue;
            }
            with_calvin += 1;
            let run_us = (flag(p, "--duration").unwrap() + flag(p, "--warmup").unwrap()) * 1e6;
            let epoch_us = flag(p, "--calvin-epoch-us").unwrap_or(5_000.0);
            assert!(
                run_us / epoch_us >= 12.0,
                "{}: {epoch_us} µs epochs in a {run_us} µs run",
                p.name
            );
        }
        assert!(with_calvin >= 5, "{with_calvin} presets run CALVIN");
        // The papers' replication and Deneva's update mix.
        for name in ["rcc-stage-latency", "rcc-hybrid-occ", "drtmh-phases"] {
            assert!(flag_is(find(name).unwrap(), "--replication", "3"), "{name}");
        }
        let update = find("deneva-update-rate").unwrap();
        assert!(flag_is(update, "--lock-mode", "shared"));
        assert!(
            matches!(&update.kind, Kind::Sweep(k) if k.iter().any(|k| k.starts_with("update_txn_ratio=")))
        );
        let qp = find("rcc-qp-scaling").unwrap();
        assert!(qp.base_args.contains(&"cx4-edr-qp"), "the NIC cache on");
    }
}
