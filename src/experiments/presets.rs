//! `verbena reproduce`: the papers' experiments, each at the paper's scale
//! by default and at a small scale with `--small` (what CI runs).
//!
//! Each preset is a sweep (or a hybrid enumeration) with the paper's knob
//! and values on the `sim` fabric with the paper's network (`cx4-edr`,
//! RCC §6.1 and DrTM+H §4's ConnectX-4 EDR cluster; Deneva ran on a
//! 1 ms-RTT cloud LAN, but its contention shapes show on any network and
//! `cx4-edr` keeps the presets fast). Any run flag after the name
//! overrides the preset's base at either scale (e.g. `--fabric threads
//! --duration 1`), and `--vary` replaces a preset knob of the same key.
//!
//! Paper scale is the cluster the paper states: RCC §6.1's 4 nodes × 10
//! threads (1 coroutine in §6.2, 10 in §6.4–6.6) with 3-way replication,
//! and Fig. 20's emulated clusters of up to 160 nodes (§6.6); Deneva §4's
//! 16 servers of 4 worker threads; DrTM+H §4.1's 16 machines × 24 threads
//! with 3-way replication. What a simulation of that cluster cannot afford
//! on a 2-core machine within 15 minutes per preset is scaled down, and
//! each preset's `deviation` says what: the virtual time per point
//! (milliseconds, where the papers measured seconds), the rows (Deneva's
//! 16 M per partition would need 256 GB) and Deneva's 1 KB records (64 B
//! here, as in RCC and DrTM+H). RCC sizes YCSB "proportional to the
//! cluster size and the number of transaction threads" without the
//! constant; the presets give 10,000 rows per worker thread at both
//! scales. Each scale's `wall_time` is the whole preset's measured wall
//! time on the 2-core reference machine (`--jobs 1`), under the load
//! docs/REPRODUCTION.md states.
//!
//! At paper scale the RCC sweeps (rcc-coroutines, rcc-contention,
//! rcc-compute) run RCC's six protocols, the ones its Fig. 16–19 show;
//! `--vary protocol=all` (or any list) runs the others too, and `--small`
//! keeps all eleven. In rcc-contention and rcc-compute CALVIN's clients
//! keep 10 requests in flight per worker (`--calvin-inflight 10`), as many
//! as the other protocols' 10 coroutines have transactions: with the
//! default 100, the 4,000 requests of RCC's cluster queue on the 400 hot
//! rows' locks longer than a run at hot probability 0.6–0.9, and CALVIN
//! by RPC committed nothing there.
//!
//! Small scale is 4 nodes × 1 worker, 10,000 rows per node and 4 ms of
//! virtual time per point: the shapes of the figures in seconds to a
//! minute, not their absolute numbers. YCSB stands in for SmallBank and
//! TPC-C at both scales.
//!
//! CALVIN's points run 200 µs epochs (`--calvin-epoch-us 200`, ignored by
//! the other protocols): a few dozen epochs per run, where its 5 ms
//! default (Deneva §3.4) would close at most one before a few-ms run ends,
//! and so commit nothing (the report's `notes` then say so). A
//! `--duration` given after the name keeps the 200 µs unless
//! `--calvin-epoch-us` is given too.

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

/// Which of a preset's two configurations runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The paper's cluster (the default).
    Paper,
    /// 4 nodes × 1 worker for a few ms (`--small`, what CI runs).
    Small,
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Paper => "paper",
            Scale::Small => "small",
        }
    }
}

/// One configuration of a preset.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Run flags of every point, before the user's.
    pub args: &'static [&'static str],
    /// The whole preset's wall time on the 2-core reference machine with
    /// `--jobs 1`, as the list states it (measured, see the module docs).
    pub wall_time: &'static str,
}

#[derive(Clone, Debug)]
pub struct Preset {
    pub name: &'static str,
    /// Paper and figure.
    pub source: &'static str,
    pub title: &'static str,
    /// The paper's configuration, scaled only where `deviation` says.
    pub paper: Setup,
    /// Where the paper-scale setup departs from the paper's, in words.
    pub deviation: &'static str,
    pub small: Setup,
    pub kind: Kind,
    /// At paper scale, the values of the sweep's `protocol` knob in place
    /// of its own (`--vary protocol=...` still replaces either).
    pub paper_protocols: Option<&'static str>,
    /// The knob on the x axis of the line figures.
    pub x: Option<&'static str>,
}

impl Preset {
    pub fn setup(&self, scale: Scale) -> &Setup {
        match scale {
            Scale::Paper => &self.paper,
            Scale::Small => &self.small,
        }
    }

    /// The sweep's knobs at `scale`: the kind's, with the `protocol` knob
    /// replaced by `paper_protocols` at paper scale; none for a hybrid
    /// enumeration.
    pub fn knobs(&self, scale: Scale) -> Vec<String> {
        let Kind::Sweep(knobs) = &self.kind else {
            return Vec::new();
        };
        knobs
            .iter()
            .map(|k| match (scale, self.paper_protocols) {
                (Scale::Paper, Some(list)) if k.starts_with("protocol=") => {
                    format!("protocol={list}")
                }
                _ => k.to_string(),
            })
            .collect()
    }

    /// The value of run flag `name` in `scale`'s base, if it sets one.
    pub fn flag(&self, scale: Scale, name: &str) -> Option<&'static str> {
        let args = self.setup(scale).args;
        // The last occurrence wins, as on the command line.
        args.windows(2).rev().find(|w| w[0] == name).map(|w| w[1])
    }
}

/// How the RCC presets' paper scale departs from RCC §6.1.
const RCC_TIME: &str = "virtual time: 1 ms warm-up + 6 ms measured per point (RCC: seconds)";

/// How the Deneva presets' paper scale departs from Deneva §4.
const DENEVA_SCALED: &str = "100,000 rows of 64 B per server (Deneva: ~16 M of 10 × 100 B; 1 KB records cost the simulator 5× the events, since it copies a READ word by word between other events to produce torn reads); 8 coroutines per worker (Deneva: 10,000 open client connections per server); virtual time: 1 ms warm-up + 6 ms measured per point (Deneva: 60 s + 60 s)";

/// RCC's six protocols (RCC §4; Fig. 16–19 show these): what the RCC
/// sweeps run at paper scale, where all eleven would not fit the
/// 15-minute budget; `--vary protocol=all` runs the others too.
const RCC_PROTOCOLS: &str = "no_wait,wait_die,occ,mvcc,sundial,calvin";

/// CALVIN's epoch in the presets, µs (see the module docs).
const CALVIN_EPOCH_US: &str = "200";

/// CALVIN's requests in flight per worker in rcc-contention and
/// rcc-compute at paper scale: the 10 transactions each worker of the
/// other protocols has in flight (10 coroutines). With the default 100,
/// 4,000 requests queue on the 400 hot rows' locks at hot probability
/// 0.6–0.9, each waits longer than the 7 ms run, and CALVIN by RPC
/// commits nothing there.
const RCC_CALVIN_INFLIGHT: &str = "10";

/// Base flags of every small-scale preset.
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

/// A cluster on the sim fabric: `$nodes` nodes of `$workers` workers ×
/// `$coroutines` coroutines on `$profile`, `$rows` rows per node and a
/// 16,384-entry location cache per worker; then `$extra` flags.
macro_rules! sim_cluster {
    ($profile:expr, $nodes:expr, $workers:expr, $coroutines:expr, $rows:expr
     $(, $extra:expr)* $(,)?) => {
        &[
            "--fabric", "sim", "--profile", $profile, "--nodes", $nodes, "--workers", $workers,
            "--coroutines", $coroutines, "--rows-per-node", $rows, "--location-cache", "16384",
            $($extra),*
        ]
    };
}

/// RCC §6.1's cluster: 4 nodes × 10 threads, 3-way replication, 64-byte
/// records (the YCSB default), 10,000 rows per thread; measured for
/// `$duration` virtual seconds after `$warmup`.
macro_rules! rcc_paper {
    ($duration:expr, $warmup:expr $(, $extra:expr)* $(,)?) => {
        sim_cluster!(
            "cx4-edr", "4", "10", "10", "100000",
            "--replication", "3", "--duration", $duration, "--warmup", $warmup, "--check",
            "--calvin-epoch-us", CALVIN_EPOCH_US,
            $($extra),*
        )
    };
}

/// Deneva §4's cluster: 16 servers × 4 worker threads; the rows, the
/// record size and the virtual time scaled (`DENEVA_SCALED`).
macro_rules! deneva_paper {
    ($rows:expr, $duration:expr, $warmup:expr $(, $extra:expr)* $(,)?) => {
        sim_cluster!(
            "cx4-edr", "16", "4", "8", $rows,
            "--duration", $duration, "--warmup", $warmup, "--check",
            "--calvin-epoch-us", CALVIN_EPOCH_US,
            $($extra),*
        )
    };
}

pub const PRESETS: [Preset; 9] = [
    Preset {
        name: "rcc-coroutines",
        source: "RCC §6.3, Fig. 16 (YCSB)",
        title: "throughput and latency as coroutines grow, one-sided vs RPC",
        paper: Setup {
            args: rcc_paper!("0.006", "0.001"),
            wall_time: "~2.5 min",
        },
        deviation: RCC_TIME,
        small: Setup {
            args: small_sim!(),
            wall_time: "~9 s",
        },
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc", "coroutines=1,3,5,7,9,11"]),
        paper_protocols: Some(RCC_PROTOCOLS),
        x: Some("coroutines"),
    },
    Preset {
        name: "rcc-contention",
        source: "RCC §6.4, Fig. 18",
        title: "throughput vs the probability of touching the 0.1 % hot area",
        paper: Setup {
            args: rcc_paper!(
                "0.006", "0.001", "--distribution", "hot", "--hot-fraction", "0.001",
                "--calvin-inflight", RCC_CALVIN_INFLIGHT,
            ),
            wall_time: "~2 min",
        },
        deviation: RCC_TIME,
        small: Setup {
            args: small_sim!("--distribution", "hot", "--hot-fraction", "0.001"),
            wall_time: "~6 s",
        },
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc", "hot_probability=0,0.2,0.4,0.6,0.8,0.9"]),
        paper_protocols: Some(RCC_PROTOCOLS),
        x: Some("hot_probability"),
    },
    Preset {
        name: "rcc-compute",
        source: "RCC §6.5, Fig. 19",
        title: "throughput vs execution-phase computation (1–256 µs)",
        paper: Setup {
            args: rcc_paper!("0.006", "0.001", "--calvin-inflight", RCC_CALVIN_INFLIGHT),
            wall_time: "~2 min",
        },
        deviation: RCC_TIME,
        small: Setup {
            args: small_sim!(),
            wall_time: "~7 s",
        },
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc", "compute_us=1,4,16,64,256"]),
        paper_protocols: Some(RCC_PROTOCOLS),
        x: Some("compute_us"),
    },
    Preset {
        name: "rcc-stage-latency",
        source: "RCC §5.1, Fig. 13",
        title: "per-stage latency of the pure forms with one coroutine",
        // RCC §6.1 runs 3-way replication; without it the log stage is
        // empty. One coroutine, as RCC §6.2 runs.
        paper: Setup {
            args: rcc_paper!("0.01", "0.001", "--coroutines", "1"),
            wall_time: "~40 s",
        },
        deviation: "virtual time: 1 ms warm-up + 10 ms measured per point (RCC: seconds)",
        small: Setup {
            args: small_sim!("--coroutines", "1", "--replication", "3"),
            wall_time: "~2 s",
        },
        kind: Kind::Sweep(&["protocol=all", "primitive=onesided,rpc"]),
        paper_protocols: None,
        x: None,
    },
    Preset {
        name: "rcc-hybrid-occ",
        source: "RCC §5.1, Fig. 14",
        title: "every OCC hybrid code ranked; the latency-breakdown pick tested",
        // 3-way replication as in RCC §6.1, so the log bit of a code matters.
        paper: Setup {
            args: rcc_paper!("0.006", "0.001", "--protocol", "occ"),
            wall_time: "~2.5 min",
        },
        deviation: "virtual time: 1 ms warm-up + 6 ms measured per code (RCC: seconds)",
        small: Setup {
            args: small_sim!("--protocol", "occ", "--coroutines", "8", "--replication", "3"),
            wall_time: "~6 s",
        },
        kind: Kind::Hybrid(Method::Both),
        paper_protocols: None,
        x: None,
    },
    Preset {
        name: "rcc-qp-scaling",
        source: "RCC §6.6, Fig. 20",
        title: "throughput on emulated clusters of 4–160 nodes, one-sided vs RPC",
        // RCC's emulation: 4 real nodes whose workers spread their verbs
        // over as many connections as a larger cluster needs, on a NIC
        // that caches 512 of them (`cx4-edr-qp`, see `config::profile`);
        // 10 workers × 10 coroutines per node as in RCC §6.1, so 160
        // emulated nodes give each NIC 1,600 connections. Four of RCC's
        // protocols (CALVIN's epochs do not use the connections this
        // models).
        paper: Setup {
            args: rcc_paper!(
                "0.02", "0.001", "--profile", "cx4-edr-qp", "--distribution", "hot",
                "--hot-fraction", "0.001", "--hot-probability", "0.9",
            ),
            wall_time: "~2 min",
        },
        deviation: "virtual time: 1 ms warm-up + 20 ms measured per point (RCC: seconds), long enough that the 90 % hot points commit thousands",
        // The small scale keeps the NIC's 1,600 connections at 160
        // emulated nodes: the cluster RCC emulates, for 3 ms.
        small: Setup {
            args: sim_cluster!(
                "cx4-edr-qp", "4", "10", "10", "10000",
                "--distribution", "hot", "--hot-fraction", "0.001", "--hot-probability", "0.9",
                "--duration", "0.003", "--warmup", "0.0005",
            ),
            wall_time: "~5 s",
        },
        kind: Kind::Sweep(&["protocol=no_wait,occ,mvcc,sundial", "primitive=onesided,rpc", "emulated_nodes=4,16,40,80,160"]),
        paper_protocols: None,
        x: Some("emulated_nodes"),
    },
    Preset {
        name: "deneva-contention",
        source: "Deneva §4.2, Fig. 2",
        title: "throughput vs Zipf skew θ, 50 % writes",
        paper: Setup {
            args: deneva_paper!("100000", "0.006", "0.001", "--distribution", "zipf", "--write-ratio", "0.5"),
            wall_time: "~5 min",
        },
        deviation: DENEVA_SCALED,
        small: Setup {
            args: small_sim!("--distribution", "zipf", "--write-ratio", "0.5"),
            wall_time: "~5 s",
        },
        kind: Kind::Sweep(&["protocol=all", "theta=0,0.3,0.6,0.7,0.8,0.9,0.99"]),
        paper_protocols: None,
        x: Some("theta"),
    },
    Preset {
        name: "deneva-update-rate",
        source: "Deneva §4.3, Fig. 3",
        title: "throughput vs the share of update transactions, medium contention (θ 0.6)",
        // Deneva's mix: an update transaction reads 5 records and updates
        // 5 (here read-modify-writes), the rest read 10; 2PL takes shared
        // read locks (Deneva §3.1, §4.3).
        paper: Setup {
            args: deneva_paper!(
                "100000", "0.006", "0.001", "--distribution", "zipf", "--theta", "0.6",
                "--lock-mode", "shared",
            ),
            wall_time: "~5 min",
        },
        deviation: DENEVA_SCALED,
        small: Setup {
            args: small_sim!("--distribution", "zipf", "--theta", "0.6", "--lock-mode", "shared"),
            wall_time: "~7 s",
        },
        kind: Kind::Sweep(&["protocol=all", "update_txn_ratio=0,0.1,0.2,0.4,0.6,0.8,1"]),
        paper_protocols: None,
        x: Some("update_txn_ratio"),
    },
    Preset {
        name: "drtmh-phases",
        source: "DrTM+H §5, Fig. 7–10",
        title: "OCC with each phase switched between one-sided and RPC",
        // DrTM+H §4.1: 16 machines × 24 threads, 8 coroutines (its §3's
        // typical count), 3-way replication (logs to 2 backups).
        paper: Setup {
            args: sim_cluster!(
                "cx4-edr", "16", "24", "8", "240000",
                "--replication", "3", "--duration", "0.006", "--warmup", "0.001", "--check",
                "--protocol", "occ",
            ),
            wall_time: "~4 min",
        },
        deviation: "YCSB (10 operations of 64 B, 10,000 rows per thread) for TPC-C and SmallBank; a 16,384-entry location cache per worker (DrTM+H: 300 MB per machine, warm); virtual time: 1 ms warm-up + 6 ms measured per point (DrTM+H: seconds)",
        small: Setup {
            args: small_sim!("--protocol", "occ", "--replication", "3"),
            wall_time: "~1 s",
        },
        kind: Kind::Sweep(&[
            "stages=read=onesided|read=rpc|lock=rpc+validate=rpc|commit=rpc|log=rpc|read=rpc+lock=rpc+validate=rpc+log=rpc+commit=rpc+release=rpc",
        ]),
        paper_protocols: None,
        x: None,
    },
];

pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// A setup's cluster in a few words: nodes × workers × coroutines, rows.
fn cluster_text(p: &Preset, scale: Scale) -> String {
    let flag = |name: &str, default: &'static str| p.flag(scale, name).unwrap_or(default);
    let coroutines = match &p.kind {
        Kind::Sweep(knobs) => knobs
            .iter()
            .find_map(|k| k.strip_prefix("coroutines="))
            .map_or_else(
                || flag("--coroutines", "8").to_string(),
                |v| v.replace(',', "/"),
            ),
        Kind::Hybrid(_) => flag("--coroutines", "8").to_string(),
    };
    let mut text = format!(
        "{} nodes × {} workers × {coroutines} coroutines, {} rows/node",
        flag("--nodes", "2"),
        flag("--workers", "1"),
        flag("--rows-per-node", "100000"),
    );
    let _ = write!(
        text,
        ", replication {}, {} + {} virtual s",
        flag("--replication", "1"),
        flag("--warmup", "0.5"),
        flag("--duration", "2"),
    );
    text
}

/// `verbena reproduce --list`.
pub fn list_text() -> String {
    let mut out =
        String::from("presets (verbena reproduce NAME [--small] [RUN FLAGS] [--out DIR]):\n");
    for p in &PRESETS {
        let what = match &p.kind {
            Kind::Sweep(_) => {
                let (paper, small) = (p.knobs(Scale::Paper), p.knobs(Scale::Small));
                if paper == small {
                    format!("sweep {}", paper.join(" × "))
                } else {
                    format!(
                        "sweep {}; --small: {}",
                        paper.join(" × "),
                        small.join(" × ")
                    )
                }
            }
            Kind::Hybrid(_) => "hybrid enumeration + latency-breakdown pick".to_string(),
        };
        let _ = writeln!(out, "  {:<20} {:<28} {}", p.name, p.source, p.title);
        let indent = " ".repeat(24);
        let _ = writeln!(out, "{indent}({what})");
        let _ = writeln!(
            out,
            "{indent}paper scale, {} on 2 cores: {}",
            p.paper.wall_time,
            cluster_text(p, Scale::Paper)
        );
        let _ = writeln!(out, "{indent}  scaled down: {}", p.deviation);
        let _ = writeln!(
            out,
            "{indent}--small, {} on 2 cores: {}",
            p.small.wall_time,
            cluster_text(p, Scale::Small)
        );
    }
    out.push_str("Each writes results/NAME/ (results/NAME-small/ with --small: rows, CSV, figures, report.html) on --fabric sim, cx4-edr;\ntimes are whole presets with --jobs 1 on a 2-core machine (docs/REPRODUCTION.md).\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::sweep::parse_knob;

    const SCALES: [Scale; 2] = [Scale::Paper, Scale::Small];

    fn number(p: &Preset, scale: Scale, name: &str) -> Option<f64> {
        p.flag(scale, name).map(|v| v.parse().expect("a number"))
    }

    fn runs_calvin(p: &Preset, scale: Scale) -> bool {
        match &p.kind {
            Kind::Sweep(_) => p
                .knobs(scale)
                .iter()
                .any(|k| k.starts_with("protocol=") && (k.contains("all") || k.contains("calvin"))),
            Kind::Hybrid(_) => p.flag(scale, "--protocol") == Some("calvin"),
        }
    }

    #[test]
    fn every_preset_has_valid_knobs_and_a_paper() {
        for p in &PRESETS {
            assert!(
                p.source.contains('§') && p.source.contains("Fig."),
                "{}",
                p.name
            );
            for scale in SCALES {
                for knob in p.knobs(scale) {
                    parse_knob(&knob).unwrap_or_else(|e| panic!("{}: {e}", p.name));
                }
                assert_eq!(p.flag(scale, "--fabric"), Some("sim"), "{}", p.name);
            }
        }
        assert!(find("rcc-coroutines").is_some() && find("nope").is_none());
    }

    #[test]
    fn calvin_gets_a_dozen_epochs_or_more_at_both_scales() {
        let mut with_calvin = 0;
        for p in &PRESETS {
            for scale in SCALES {
                if !runs_calvin(p, scale) {
                    continue;
                }
                with_calvin += 1;
                let run_us = (number(p, scale, "--duration").unwrap()
                    + number(p, scale, "--warmup").unwrap())
                    * 1e6;
                let epoch_us = number(p, scale, "--calvin-epoch-us").unwrap_or(5_000.0);
                assert!(
                    run_us / epoch_us >= 12.0,
                    "{} ({:?}): {epoch_us} µs epochs in a {run_us} µs run",
                    p.name,
                    scale
                );
            }
        }
        assert!(with_calvin >= 10, "{with_calvin} preset scales run CALVIN");
    }

    /// The cluster each paper states: RCC §6.1 (4 nodes × 10 threads, 10
    /// coroutines, 1 in §6.2's per-stage figure; 3-way replication), RCC
    /// §6.6 (emulated clusters up to 160 nodes), Deneva §4 (16 servers ×
    /// 4 worker threads), DrTM+H §4.1 (16 machines ×
    /// 24 threads, 3-way replication).
    #[test]
    fn paper_scale_is_the_papers_cluster() {
        let paper = |name: &str, flag: &str| find(name).unwrap().flag(Scale::Paper, flag);
        for name in [
            "rcc-coroutines",
            "rcc-contention",
            "rcc-compute",
            "rcc-stage-latency",
            "rcc-hybrid-occ",
            "rcc-qp-scaling",
        ] {
            assert_eq!(paper(name, "--nodes"), Some("4"), "{name}");
            assert_eq!(paper(name, "--workers"), Some("10"), "{name}");
            assert_eq!(paper(name, "--replication"), Some("3"), "{name}");
            let coroutines = if name == "rcc-stage-latency" {
                "1"
            } else {
                "10"
            };
            assert_eq!(paper(name, "--coroutines"), Some(coroutines), "{name}");
        }
        let coroutines = find("rcc-coroutines").unwrap();
        assert!(
            matches!(&coroutines.kind, Kind::Sweep(k) if k.contains(&"coroutines=1,3,5,7,9,11"))
        );
        let qp = find("rcc-qp-scaling").unwrap();
        assert_eq!(qp.flag(Scale::Paper, "--profile"), Some("cx4-edr-qp"));
        assert!(
            matches!(&qp.kind, Kind::Sweep(k) if k.iter().any(|k| k.starts_with("emulated_nodes=") && k.ends_with(",160")))
        );
        for name in ["deneva-contention", "deneva-update-rate"] {
            assert_eq!(paper(name, "--nodes"), Some("16"), "{name}");
            assert_eq!(paper(name, "--workers"), Some("4"), "{name}");
        }
        assert_eq!(paper("deneva-update-rate", "--lock-mode"), Some("shared"));
        assert_eq!(paper("deneva-update-rate", "--theta"), Some("0.6"));
        assert_eq!(paper("drtmh-phases", "--nodes"), Some("16"));
        assert_eq!(paper("drtmh-phases", "--workers"), Some("24"));
        assert_eq!(paper("drtmh-phases", "--replication"), Some("3"));
        // Every paper-scale setup that departs from its paper says how.
        for p in &PRESETS {
            assert!(p.deviation.contains("virtual time"), "{}", p.name);
        }
    }

    /// At paper scale the RCC sweeps run RCC's six protocols (the small
    /// scale keeps all), and CALVIN keeps as many requests in flight per
    /// worker as the others have transactions where hot rows would queue
    /// more than a run's length (rcc-contention) or compute would.
    #[test]
    fn rcc_sweeps_run_rccs_protocols_at_paper_scale() {
        for name in ["rcc-coroutines", "rcc-contention", "rcc-compute"] {
            let p = find(name).unwrap();
            let paper = p.knobs(Scale::Paper);
            let protocols = paper.iter().find(|k| k.starts_with("protocol=")).unwrap();
            let list = parse_knob(protocols).unwrap().values;
            assert_eq!(
                list,
                ["no_wait", "wait_die", "occ", "mvcc", "sundial", "calvin"],
                "{name}"
            );
            assert!(p.knobs(Scale::Small).contains(&"protocol=all".to_string()));
            assert_eq!(paper.len(), p.knobs(Scale::Small).len(), "{name}");
        }
        for name in ["rcc-contention", "rcc-compute"] {
            let p = find(name).unwrap();
            assert_eq!(
                p.flag(Scale::Paper, "--calvin-inflight"),
                p.flag(Scale::Paper, "--coroutines"),
                "{name}"
            );
            assert_eq!(p.flag(Scale::Small, "--calvin-inflight"), None, "{name}");
        }
        assert!(list_text().contains("--small: protocol=all"));
    }

    /// `--small` keeps the configuration CI has always run.
    #[test]
    fn small_scale_is_four_single_worker_nodes_for_a_few_ms() {
        for p in &PRESETS {
            assert_eq!(p.flag(Scale::Small, "--nodes"), Some("4"), "{}", p.name);
            let run_s = number(p, Scale::Small, "--duration").unwrap()
                + number(p, Scale::Small, "--warmup").unwrap();
            assert!(run_s <= 0.005, "{}: {run_s} s", p.name);
            if p.name != "rcc-qp-scaling" {
                assert_eq!(p.flag(Scale::Small, "--workers"), None, "{}", p.name);
                assert_eq!(p.flag(Scale::Small, "--rows-per-node"), Some("10000"));
            }
        }
        for name in ["rcc-stage-latency", "rcc-hybrid-occ", "drtmh-phases"] {
            assert_eq!(
                find(name).unwrap().flag(Scale::Small, "--replication"),
                Some("3")
            );
        }
    }

    /// The list states each scale's measured wall time and cluster.
    #[test]
    fn the_list_states_each_scales_wall_time() {
        let text = list_text();
        for p in &PRESETS {
            for scale in SCALES {
                let time = p.setup(scale).wall_time;
                let (number, unit) = time
                    .strip_prefix('~')
                    .and_then(|t| t.split_once(' '))
                    .unwrap_or_else(|| panic!("{}: `{time}` is not `~N s` or `~N min`", p.name));
                let number: f64 = number.parse().unwrap_or(f64::NAN);
                let minutes = if unit == "min" { number } else { number / 60.0 };
                assert!(unit == "s" || unit == "min", "{}: {time}", p.name);
                // The budget a paper-scale preset is cut to fit.
                assert!(minutes > 0.0 && minutes <= 15.0, "{}: {time}", p.name);
            }
            let paper = format!("paper scale, {} on 2 cores", p.paper.wall_time);
            let small = format!("--small, {} on 2 cores", p.small.wall_time);
            assert!(
                text.contains(&paper) && text.contains(&small),
                "{}: {text}",
                p.name
            );
        }
        assert!(
            text.contains("4 nodes × 10 workers × 1/3/5/7/9/11 coroutines"),
            "{text}"
        );
        assert!(
            text.contains("16 nodes × 24 workers × 8 coroutines"),
            "{text}"
        );
    }
}
