//! The faults a run is told to inject (`--fault`, `faults = [...]`) and
//! the `[failure_detector]` section, with their value checks: node numbers
//! in range, times finite, a detector timeout the fabric can keep, and the
//! combinations a run refuses (a pause on a real fabric, a crash nobody
//! detects).
//!
//! Data only: detection and recovery themselves live in `recovery`,
//! which reads these.

use serde::{Deserialize, Serialize};

use super::profile::NetworkProfile;
use super::{Config, FabricKind};
use crate::base::NodeId;

/// A fault the run injects, from `--fault` or `faults = [...]` in a config
/// file. Times are seconds since the run started (warm-up included):
/// virtual seconds on `sim`, wall seconds on `threads` and `ucx`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RunFault {
    /// `crash:NODE@SECONDS`: the node stops for good — its workers stop,
    /// its memory and handlers become unreachable (on `ucx` the process
    /// kills itself with SIGKILL).
    Crash { node: u32, at_s: f64 },
    /// `pause:NODE@SECONDS+DURATION` (`sim` only): the node's CPUs stop for
    /// `for_s`, its memory still serves one-sided verbs. A pause longer
    /// than the detector's timeout gets the node declared dead.
    Pause { node: u32, at_s: f64, for_s: f64 },
}

/// The forms `--fault` accepts, for error messages.
pub const FAULT_FORMS: &str =
    "crash:NODE@SECONDS or pause:NODE@SECONDS+DURATION (e.g. crash:2@1.5)";

impl RunFault {
    /// Parses `crash:NODE@SECONDS` or `pause:NODE@SECONDS+DURATION`.
    pub fn parse(text: &str) -> Result<RunFault, String> {
        let bad = |why: &str| format!("--fault `{text}`: {why}; allowed: {FAULT_FORMS}");
        let (kind, rest) = text.split_once(':').ok_or_else(|| bad("no `:`"))?;
        let (node, time) = rest.split_once('@').ok_or_else(|| bad("no `@`"))?;
        let node: u32 = node
            .trim()
            .parse()
            .map_err(|_| bad("the node is not a non-negative integer"))?;
        let seconds = |s: &str, what: &str| -> Result<f64, String> {
            let value: f64 = s
                .trim()
                .parse()
                .map_err(|_| bad(&format!("the {what} is not a number of seconds")))?;
            if !value.is_finite() || value < 0.0 {
                return Err(bad(&format!("the {what} must be finite and >= 0")));
            }
            Ok(value)
        };
        match kind.trim() {
            "crash" => Ok(RunFault::Crash {
                node,
                at_s: seconds(time, "time")?,
            }),
            "pause" => {
                let (at, length) = time
                    .split_once('+')
                    .ok_or_else(|| bad("a pause needs `+DURATION`"))?;
                let for_s = seconds(length, "duration")?;
                if for_s == 0.0 {
                    return Err(bad("the duration must be > 0"));
                }
                Ok(RunFault::Pause {
                    node,
                    at_s: seconds(at, "time")?,
                    for_s,
                })
            }
            other => Err(bad(&format!("unknown fault kind `{other}`"))),
        }
    }

    pub fn node(&self) -> u32 {
        match *self {
            RunFault::Crash { node, .. } | RunFault::Pause { node, .. } => node,
        }
    }

    pub fn at_s(&self) -> f64 {
        match *self {
            RunFault::Crash { at_s, .. } | RunFault::Pause { at_s, .. } => at_s,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            RunFault::Crash { .. } => "crash",
            RunFault::Pause { .. } => "pause",
        }
    }
}

impl std::fmt::Display for RunFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            RunFault::Crash { node, at_s } => write!(f, "crash:{node}@{at_s}"),
            RunFault::Pause { node, at_s, for_s } => write!(f, "pause:{node}@{at_s}+{for_s}"),
        }
    }
}

impl TryFrom<String> for RunFault {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        RunFault::parse(&text)
    }
}

impl From<RunFault> for String {
    fn from(fault: RunFault) -> String {
        fault.to_string()
    }
}

/// The `[failure_detector]` section: heartbeats every `heartbeat_interval_us`,
/// a peer whose heartbeat has not advanced for `timeout_us` is dead. Unset
/// values resolve per fabric and network profile ([`DetectorSettings`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FailureDetectorConfig {
    /// Run the detector. Unset: on exactly when the run injects a fault
    /// (`--failure-detector on` turns it on without one). Off, a crashed
    /// peer is waited for forever (`sim`) or stops the run with an error
    /// (`ucx`); on, with replication ≥ 2, a `ucx` run fails a dead rank
    /// over and goes on.
    pub enabled: Option<bool>,
    pub heartbeat_interval_us: Option<f64>,
    pub timeout_us: Option<f64>,
    /// A `ucx` rank's lease, ms (`lease_of`): it posts nothing once the
    /// lease rank 0 last renewed has run out, and rank 0 fails it over
    /// only then. Unset: the transport's default.
    pub lease_ms: Option<f64>,
}

/// How long a `ucx` rank's lease lasts from the heartbeat that renewed it
/// (`cluster::bootstrap`'s leases; DrTM §4.5, FaRM's leases): the
/// `[failure_detector] lease_ms` key, or the transport's default. A frozen
/// rank is failed over about one lease after it froze, and not before
/// (it could still write until then), so the lease is the floor of a
/// failover's detection; too short, and a live rank that the OS held
/// back on a loaded host loses its lease and is declared failed.
pub fn lease_of(config: &Config) -> std::time::Duration {
    let ms = config
        .failure_detector
        .lease_ms
        .unwrap_or_else(|| default_lease_ms(config.ucx.transport));
    std::time::Duration::from_secs_f64(ms / 1e3)
}

/// The default lease over `transport`, ms. Over `shm` every rank is on
/// one host: 100 ms is the shortest that held with no false declaration
/// on the project's 2-core host loaded by two CPU hogs besides the three
/// ranks (50 ms and 20 ms did not; docs/PERFORMANCE.md). Across hosts
/// (`tcp`, `rdma`, and `auto`, which may pick either) the renewals cross
/// a network not measured here: 500 ms, as before the lease was a knob.
fn default_lease_ms(transport: crate::config::UcxTransport) -> f64 {
    match transport {
        crate::config::UcxTransport::Shm => 100.0,
        _ => 500.0,
    }
}

/// The detector's resolved timing, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DetectorSettings {
    pub heartbeat_interval_ns: u64,
    pub timeout_ns: u64,
}

impl DetectorSettings {
    /// Defaults: on `sim`, 20 network round trips (at least 20 µs) between
    /// heartbeats and 10 intervals to declare a death — fast enough for
    /// millisecond-long simulated runs, far above the modeled jitter, and
    /// above the longest stretch a loaded worker's event loop goes without
    /// a turn in the modeled CPU (TPC-C's local scans; 5 intervals let a
    /// survivor that had taken over a failed partition be suspected). On
    /// `threads`, 2 ms and 50 ms: worker threads time-share the cores, and
    /// an OS scheduler may hold a runnable thread back for tens of ms on a
    /// loaded host, which must not count as a death. On `ucx`, 5 ms and
    /// 200 ms (separate processes, possibly a TCP network, FaRM's leases
    /// are of that order on a real cluster).
    pub fn defaults(fabric: FabricKind, profile: &NetworkProfile) -> DetectorSettings {
        let rtt = profile
            .onesided_rtt_ns
            .max(profile.rpc_rtt_ns)
            .max(profile.atomic_rtt_ns);
        match fabric {
            FabricKind::Sim => {
                let interval = (20 * rtt).max(20_000);
                DetectorSettings {
                    heartbeat_interval_ns: interval,
                    timeout_ns: 10 * interval,
                }
            }
            FabricKind::Threads => DetectorSettings {
                heartbeat_interval_ns: (20 * rtt).max(2_000_000),
                timeout_ns: (100 * rtt).max(50_000_000),
            },
            FabricKind::Ucx => DetectorSettings {
                heartbeat_interval_ns: (20 * rtt).max(5_000_000),
                timeout_ns: (100 * rtt).max(200_000_000),
            },
        }
    }

    /// The settings of `config`: its `[failure_detector]` values over the
    /// defaults. `None` when the detector is off.
    pub fn of(config: &Config) -> Option<DetectorSettings> {
        let section = &config.failure_detector;
        if !section.enabled.unwrap_or(!config.faults.is_empty()) {
            return None;
        }
        let mut settings = DetectorSettings::defaults(config.fabric, &config.profile);
        if config.fabric == FabricKind::Ucx {
            // A rank is failed over once its lease is out and its detector
            // suspects it, so a lease shorter than the detector's timeout
            // brings the timeout down with it: a frozen rank is declared
            // about one lease after it froze.
            let lease_ns = lease_of(config).as_nanos() as u64;
            settings.timeout_ns = settings.timeout_ns.min(lease_ns);
            settings.heartbeat_interval_ns = settings.heartbeat_interval_ns.min(lease_ns / 10);
        }
        if let Some(us) = section.heartbeat_interval_us {
            settings.heartbeat_interval_ns = (us * 1_000.0) as u64;
        }
        if let Some(us) = section.timeout_us {
            settings.timeout_ns = (us * 1_000.0) as u64;
        }
        Some(settings)
    }

    /// How long after the end of the measured interval a worker still
    /// waits for outstanding operations before it abandons them (see
    /// `runtime::Worker::set_give_up_at`): a bound on the run's end even
    /// when a survivor waits on a lock a dead coordinator left behind.
    pub fn give_up_after_ns(&self, duration_ns: u64) -> u64 {
        (4 * (self.timeout_ns + self.heartbeat_interval_ns)).max(duration_ns / 10)
    }
}

/// Checks the run-level faults and the detector knobs of `config`; called
/// by `Config::validate`.
pub fn validate(config: &Config) -> Result<(), String> {
    let section = &config.failure_detector;
    if let Some(ms) = section.lease_ms {
        if !ms.is_finite() || !(2.0..=60_000.0).contains(&ms) {
            return Err(format!(
                "failure_detector.lease_ms = {ms} is out of range; allowed: [2, 60000] ms"
            ));
        }
    }
    for (name, value) in [
        ("heartbeat_interval_us", section.heartbeat_interval_us),
        ("timeout_us", section.timeout_us),
    ] {
        if let Some(us) = value {
            if !us.is_finite() || !(1.0..=60_000_000.0).contains(&us) {
                return Err(format!(
                    "failure_detector.{name} = {us} is out of range; allowed: [1, 60000000] µs"
                ));
            }
        }
    }
    if let Some(settings) = DetectorSettings::of(config) {
        if settings.timeout_ns < 2 * settings.heartbeat_interval_ns {
            return Err(format!(
                "failure_detector.timeout_us = {} is too short for heartbeat_interval_us = {}; allowed: timeout >= 2 × interval",
                settings.timeout_ns as f64 / 1e3,
                settings.heartbeat_interval_ns as f64 / 1e3
            ));
        }
    }
    if config.faults.is_empty() {
        return Ok(());
    }
    if config.failure_detector.enabled == Some(false) {
        return Err(
            "--fault needs the failure detector; remove failure_detector.enabled = false".into(),
        );
    }
    if config.fabric == FabricKind::Ucx {
        if config.replication < 2 {
            return Err("--fault on the ucx fabric needs --replication 2 or 3: a killed process's memory dies with it, so its partitions must fail over to backups on the survivors (sim and threads also run --fault with replication 1)".into());
        }
        if config.faults.len() > 1 {
            return Err(format!(
                "--fault is given {} times; allowed on ucx: one crash (the survivors recover from one failure at a time)",
                config.faults.len()
            ));
        }
        if config.faults.iter().any(|f| f.node() == 0) {
            return Err("--fault crash:0@… on ucx: rank 0 runs the bootstrap and gathers the results, so it must survive; allowed: a node in 1..nodes".into());
        }
    }
    if config.protocol == crate::base::ProtocolKind::Calvin {
        // CALVIN's failover (`engine::calvin::failover`) moves a dead
        // node's partition to its promoted backup and resolves what it
        // sequenced or touched; that needs a backup, and it resolves one
        // failure.
        if config.replication < 2 {
            return Err("--fault with protocol calvin needs --replication 2 or 3: a sequenced transaction cannot abort, so a dead node's partition must go on from a backup copy".into());
        }
        let crashes = config
            .faults
            .iter()
            .filter(|f| matches!(f, RunFault::Crash { .. }))
            .count();
        if crashes != 1 || config.faults.len() != 1 {
            return Err(format!(
                "--fault is given {} time(s) with protocol calvin; allowed: exactly one crash:NODE@SECONDS (CALVIN's failover resolves one failure per run, and a pause would be failed over as a crash)",
                config.faults.len()
            ));
        }
    }
    let run_s = config.warmup_s + config.duration_s;
    let mut crashed = vec![false; config.nodes as usize];
    for fault in &config.faults {
        let node = fault.node();
        if node >= config.nodes {
            return Err(format!(
                "--fault {fault} names node {node}; allowed: 0..{} (the run has {} nodes)",
                config.nodes, config.nodes
            ));
        }
        if fault.at_s() >= run_s {
            return Err(format!(
                "--fault {fault} is at {} s, after the run ends; allowed: [0, {run_s}) s (warm-up + duration)",
                fault.at_s()
            ));
        }
        match fault {
            RunFault::Crash { .. } => crashed[node as usize] = true,
            RunFault::Pause { .. } if config.fabric != FabricKind::Sim => {
                return Err(format!(
                    "--fault {fault}: pause faults need --fabric sim; allowed on {}: crash:NODE@SECONDS",
                    config.fabric.name()
                ));
            }
            RunFault::Pause { .. } => {}
        }
    }
    if crashed.iter().all(|&c| c) {
        return Err(format!(
            "--fault crashes every node ({}); allowed: at least one node must survive",
            config.nodes
        ));
    }
    if config.replication > 1 && config.replication <= config.nodes {
        // Every partition must keep a live copy to fail over to.
        let placement = crate::base::placement::Placement::new(config.nodes, config.replication);
        for partition in 0..config.nodes {
            let lost = (0..config.replication)
                .all(|copy| crashed[placement.node_of(partition as NodeId, copy) as usize]);
            if lost {
                return Err(format!(
                    "--fault crashes every node holding partition {partition} (replication {}); allowed: at most {} crashed node(s) among any {} consecutive nodes",
                    config.replication,
                    config.replication - 1,
                    config.replication
                ));
            }
        }
    }
    Ok(())
}

/// When each node crashes, ns since the run's start (`u64::MAX`: never).
pub fn crash_times_ns(faults: &[RunFault], nodes: u32) -> Vec<u64> {
    let mut at = vec![u64::MAX; nodes as usize];
    for fault in faults {
        if let RunFault::Crash { node, at_s } = *fault {
            let ns = (at_s * 1e9) as u64;
            at[node as usize] = at[node as usize].min(ns);
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_specs_parse_and_print_back() {
        assert_eq!(
            RunFault::parse("crash:2@1.5").unwrap(),
            RunFault::Crash { node: 2, at_s: 1.5 }
        );
        assert_eq!(
            RunFault::parse("pause:0@0.25+0.5").unwrap(),
            RunFault::Pause {
                node: 0,
                at_s: 0.25,
                for_s: 0.5
            }
        );
        let fault = RunFault::parse("crash:1@0.001").unwrap();
        assert_eq!(RunFault::parse(&fault.to_string()).unwrap(), fault);
    }

    #[test]
    fn bad_fault_specs_say_what_is_allowed() {
        for (text, why) in [
            ("crash", "no `:`"),
            ("crash:1", "no `@`"),
            ("crash:x@1", "not a non-negative integer"),
            ("crash:-1@1", "not a non-negative integer"),
            ("crash:1@soon", "not a number"),
            ("crash:1@-2", ">= 0"),
            ("crash:1@inf", "finite"),
            ("explode:1@2", "unknown fault kind `explode`"),
            ("pause:1@2", "`+DURATION`"),
            ("pause:1@2+0", "> 0"),
        ] {
            let error = RunFault::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
            assert!(error.contains("allowed: crash:NODE@SECONDS"), "{error}");
        }
    }

    fn config_with(faults: &[&str]) -> Config {
        Config {
            nodes: 3,
            warmup_s: 0.5,
            duration_s: 1.0,
            faults: faults.iter().map(|f| RunFault::parse(f).unwrap()).collect(),
            ..Config::default()
        }
    }

    #[test]
    fn run_faults_are_checked_against_the_cluster_and_the_run() {
        assert!(validate(&config_with(&["crash:2@1.0"])).is_ok());
        let error = validate(&config_with(&["crash:3@1.0"])).unwrap_err();
        assert!(error.contains("names node 3; allowed: 0..3"), "{error}");
        let error = validate(&config_with(&["crash:1@1.5"])).unwrap_err();
        assert!(
            error.contains("after the run ends; allowed: [0, 1.5)"),
            "{error}"
        );
        let error =
            validate(&config_with(&["crash:0@0.6", "crash:1@0.7", "crash:2@1"])).unwrap_err();
        assert!(error.contains("at least one node must survive"), "{error}");
        let error = validate(&config_with(&["pause:1@0.6+0.1"])).unwrap_err();
        assert!(error.contains("need --fabric sim"), "{error}");
        let mut ucx = config_with(&["crash:1@1"]);
        ucx.fabric = FabricKind::Ucx;
        assert!(validate(&ucx)
            .unwrap_err()
            .contains("needs --replication 2 or 3"));
        ucx.replication = 2;
        assert!(validate(&ucx).is_ok());
        let mut ucx_rank0 = ucx.clone();
        ucx_rank0.faults = vec![RunFault::parse("crash:0@1").unwrap()];
        assert!(validate(&ucx_rank0)
            .unwrap_err()
            .contains("rank 0 runs the bootstrap"));
        let mut ucx_two = ucx.clone();
        ucx_two.faults.push(RunFault::parse("crash:2@1").unwrap());
        assert!(validate(&ucx_two).unwrap_err().contains("one crash"));
        let mut calvin = config_with(&["crash:1@1"]);
        calvin.protocol = crate::base::ProtocolKind::Calvin;
        assert!(validate(&calvin)
            .unwrap_err()
            .contains("calvin needs --replication 2 or 3"));
        calvin.replication = 2;
        assert!(validate(&calvin).is_ok());
        calvin.faults.push(RunFault::parse("crash:2@1.2").unwrap());
        assert!(validate(&calvin)
            .unwrap_err()
            .contains("allowed: exactly one crash"));
        calvin.fabric = FabricKind::Sim;
        calvin.faults = vec![RunFault::parse("pause:1@1+0.1").unwrap()];
        assert!(validate(&calvin)
            .unwrap_err()
            .contains("allowed: exactly one crash"));
        let mut off = config_with(&["crash:1@1"]);
        off.failure_detector.enabled = Some(false);
        assert!(validate(&off)
            .unwrap_err()
            .contains("needs the failure detector"));
        let mut tight = config_with(&["crash:1@1"]);
        tight.failure_detector.heartbeat_interval_us = Some(100.0);
        tight.failure_detector.timeout_us = Some(150.0);
        assert!(validate(&tight)
            .unwrap_err()
            .contains("timeout >= 2 × interval"));
        let mut zero = config_with(&[]);
        zero.failure_detector.timeout_us = Some(0.0);
        assert!(validate(&zero).unwrap_err().contains("timeout_us = 0"));
    }

    #[test]
    fn the_detector_is_on_exactly_when_asked_or_a_fault_is_injected() {
        let mut config = config_with(&[]);
        assert_eq!(DetectorSettings::of(&config), None);
        config.failure_detector.enabled = Some(true);
        let on = DetectorSettings::of(&config).unwrap();
        assert_eq!(on.heartbeat_interval_ns, 2_000_000);
        assert_eq!(on.timeout_ns, 50_000_000);
        let mut faulty = config_with(&["crash:1@1"]);
        faulty.fabric = FabricKind::Sim;
        faulty.failure_detector.timeout_us = Some(300.0);
        let settings = DetectorSettings::of(&faulty).unwrap();
        assert_eq!(settings.timeout_ns, 300_000);
        assert_eq!(settings.heartbeat_interval_ns, 20_000);
        faulty.failure_detector.timeout_us = None;
        assert_eq!(DetectorSettings::of(&faulty).unwrap().timeout_ns, 200_000);
    }
}
