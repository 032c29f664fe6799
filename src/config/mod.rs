//! Run configuration: every knob of a run, resolved and validated at run time.
//!
//! A run is described by one [`Config`]. It is built from defaults, then an
//! optional TOML file, then command-line flags (flags win), and finally
//! [`Config::validate`] checks every value and names the allowed range when
//! one is wrong. The resolved config is written verbatim into the JSON report,
//! so a result always carries what produced it.
//!
//! Invariants after `validate` succeeds: every count is within the limits the
//! lower layers encode into ids (see `txn::ids`), every probability is in its
//! range, and the stage plan names only stages the protocol has.
//!
//! Configuration is data and value checks only (layer 1 of the crate's
//! map): each section's type lives here, in a submodule of its own where
//! it is more than a few fields ([`profile`], [`sim`], [`faults`],
//! [`smallbank`], [`pps`], [`tpce`], [`tpcc`], [`ucx`]), and the layers above read their own
//! sections. What only a workload can judge, the memory its tables need,
//! it checks itself (`workloads::check_footprint`); `engine::validate`
//! runs both, and every entry point that starts a run goes through it.

use serde::{Deserialize, Serialize};

use crate::base::{Primitive, ProtocolKind, StagePlan};
pub mod faults;
pub mod mix;
pub mod pps;
pub mod profile;
pub mod sim;
pub mod smallbank;
pub mod tpcc;
pub mod tpce;
pub mod ucx;

pub use pps::PpsConfig;
pub use profile::LatencyConfig;
use profile::{deserialize_profile, NetworkProfile};
use sim::SimConfig;
pub use smallbank::SmallBankConfig;
pub use tpcc::{TpccConfig, TpccMix, MAX_TPCC_WAREHOUSES};
pub use tpce::TpceConfig;
pub use ucx::{LocalAtomics, UcxConfig, UcxTransport, UCX_MISSING};

/// Upper bounds that the id packing of `txn::ids` relies on.
pub const MAX_NODES: u32 = 4096;
pub const MAX_WORKERS: u32 = 256;
pub const MAX_COROUTINES: u32 = 255;
pub const MAX_OPS_PER_TXN: u32 = 64;
/// Worker threads one `threads` run may start in all: beyond this, thread
/// creation and memory, not the protocol, would be measured.
pub const MAX_THREADS_WORKERS: u32 = 1024;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Fabric backend: `threads` (OS threads, wall time) or `sim`
    /// (deterministic simulation, virtual time).
    pub fabric: FabricKind,
    pub nodes: u32,
    pub workers: u32,
    pub coroutines: u32,
    pub protocol: ProtocolKind,
    /// Primitive of every stage not named in `stages`.
    pub primitive: Primitive,
    /// Primitive per stage. Before `validate`: only the stages the user
    /// named (`--stages`, or a `[stages]` table); after: every stage of the
    /// protocol, resolved against `primitive`.
    pub stages: StagePlan,
    pub workload: WorkloadKind,
    /// Measured interval, seconds.
    pub duration_s: f64,
    /// Warm-up before the measured interval, seconds (not measured).
    pub warmup_s: f64,
    pub seed: u64,
    /// Record the committed history and run the serializability checker and
    /// workload invariants after the run.
    pub check: bool,
    /// The network model: `sim` runs on it; `threads` injects its round
    /// trips (a built-in name, or a table with every field).
    #[serde(deserialize_with = "deserialize_profile")]
    pub profile: NetworkProfile,
    /// The `sim` fabric's CPU model, jitter, swarm and faults.
    pub sim: SimConfig,
    pub backoff: BackoffConfig,
    /// Entries of each worker's location cache (DrTM+H §5.1); 0 disables it.
    pub location_cache_entries: u32,
    /// Start every worker's location cache holding the slots of the rows
    /// loaded on every node (as many as fit), as after a long run, instead
    /// of empty. RCC fetches a tuple's offset once and caches it (RCC §3),
    /// over runs of seconds; a simulated run of a few ms otherwise starts
    /// cold. Needs every node's rows in one process (`sim`, `threads`).
    pub location_cache_warm: bool,
    pub ycsb: YcsbConfig,
    /// `[smallbank]`, `[pps]`, `[tpce]`: the knobs of those workloads
    /// (each module documents its own).
    pub smallbank: SmallBankConfig,
    pub pps: PpsConfig,
    pub tpce: TpceConfig,
    /// TPC-C knobs (`[tpcc]`).
    pub tpcc: TpccConfig,
    /// Per-protocol knobs (`[protocol_options]`).
    pub protocol_options: ProtocolOptions,
    /// The `ucx` fabric's knobs (`[ucx]`).
    pub ucx: UcxConfig,
    /// Copies of every partition, primary included (`--replication R`,
    /// 1..=3 and at most `nodes`; 1: no replication). See `replication`.
    pub replication: u32,
    /// `[replication_options]`: the coordinator log's knobs.
    pub replication_options: ReplicationOptions,
    /// Faults the run injects (`--fault crash:NODE@SECONDS`, repeatable;
    /// `faults = ["crash:2@1.5"]`), see `recovery`.
    pub faults: Vec<faults::RunFault>,
    /// `[failure_detector]`: heartbeat interval and timeout (`recovery`).
    pub failure_detector: faults::FailureDetectorConfig,
    /// Test-only: OCC skips read-set validation. Exists to prove the checker
    /// catches a broken protocol; not reachable from the command line.
    #[serde(skip)]
    pub unsafe_skip_occ_validation: bool,
}

/// Lock modes of the 2PL family (RCBench §6.2.1, §7.6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockMode {
    /// Every access takes an exclusive lock (RCC's implementation).
    Exclusive,
    /// Reads take shared locks, writes exclusive ones.
    Shared,
}

/// Knobs of individual protocols; each is ignored by the other protocols.
/// CALVIN's requests in flight per worker by default. Deneva's clients
/// keep many transactions outstanding each (Deneva §2.3: "multiple
/// outstanding transactions per client process", a bound per client
/// thread in its code); 100 per worker keeps every executor coroutine
/// busy at the default 5 ms epochs without sizing the buffers for
/// Deneva's 10,000 connections per server (§4).
pub const DEFAULT_CALVIN_INFLIGHT: u32 = 100;

/// DRTM's read lease where the fabric's round trips take microseconds
/// (`sim`'s RDMA profiles, `threads`, `ucx` over shared memory or RDMA):
/// DrTM §4.2's 0.4 ms for read-write transactions.
pub const DRTM_LEASE_NS: u64 = 400_000;

/// DRTM's read lease over TCP (`ucx` with `transport = tcp`), where a
/// transaction of Deneva's medium-contention YCSB takes 0.7–1.3 ms at its
/// median on loopback: a lease must outlast the transaction that reads
/// under it, or it aborts at its commit point (`lease_expired`). Two
/// milliseconds is about twice that median; 400 µs commits almost
/// nothing there (docs/performance-archive.md, "DRTM's lease over TCP").
pub const DRTM_LEASE_TCP_NS: u64 = 2_000_000;

/// The most requests a worker's CALVIN client may keep outstanding: each
/// is a slot of every request and forward buffer's epoch ring.
pub const MAX_CALVIN_INFLIGHT: u32 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProtocolOptions {
    /// NO_WAIT, WAIT_DIE, WOUND_WAIT: exclusive-only or shared/exclusive.
    pub lock_mode: LockMode,
    /// WAIT_DIE: RCC §4.3's starvation fix (a FETCH_AND_ADD counter).
    pub wait_die_starvation_fix: bool,
    /// OCC: a read that finds the record locked takes the committed
    /// version anyway and leaves the conflict to commit-time validation,
    /// as RCC's OCC does (RCC §4 bases it on DrTM+H; its code reads only
    /// the version, never the lock, in the execution phase); off: the read
    /// aborts at once (`read_locked`).
    pub occ_read_through_locks: bool,
    /// SUNDIAL: lock a record when the transaction first writes it, in the
    /// execution phase, and wait for a younger holder WAIT_DIE-style (an
    /// older requester waits, a younger one dies), as RCC's SUNDIAL does
    /// (RCC §4.5: "when accessing a record in WS, the transaction tries to
    /// lock the tuple"); off: the write set is locked at commit and any
    /// held lock aborts (`lock_conflict`).
    pub sundial_lock_at_access: bool,
    /// TIMESTAMP: readers may see uncommitted writes and abort in cascade
    /// (RCBench §7.6.3); off = the no-cascading-abort variant.
    pub timestamp_cascading_aborts: bool,
    /// TIMESTAMP, MVCC: how long a read that meets an older writer's
    /// pending write waits for it, ns, before it aborts (`read_locked`):
    /// Deneva's blocking (§4.2). Unset: RCC's short bounded retries
    /// (`protocols::timestamp`'s `wait` module).
    pub pending_write_wait_ns: Option<u64>,
    /// MVCC: version slots per tuple (RCC §4.4).
    pub mvcc_versions: u32,
    /// CICADA: version slots per tuple (RCBench Alg. 11).
    pub cicada_versions: u32,
    /// MAAT: reader and writer list entries per tuple (abort on overflow).
    pub maat_list_capacity: u32,
    /// DRTM: length of a read lease, ns (DrTM §4.3). Unset: by the fabric
    /// ([`Config::drtm_lease_ns`]).
    pub drtm_lease_ns: Option<u64>,
    /// DRTM: bound on clock skew between nodes, ns (DrTM §4.3's DELTA).
    pub drtm_delta_ns: u64,
    /// CALVIN: length of a sequencing epoch, µs (Deneva §3.4 used 5 ms).
    pub calvin_epoch_us: u64,
    /// CALVIN: requests each worker's client keeps outstanding (Deneva's
    /// client threads keep many in flight each; `engine::calvin`), so a
    /// node has `workers × calvin_inflight` in flight and every epoch
    /// sequences all that arrived during it. 0: the lockstep clients —
    /// one request per executor coroutine per epoch, each epoch closed
    /// once the last one's completed — whose input depends on the seed
    /// and configuration alone, never on timing.
    pub calvin_inflight: u32,
}

impl Default for ProtocolOptions {
    fn default() -> Self {
        ProtocolOptions {
            lock_mode: LockMode::Exclusive,
            wait_die_starvation_fix: false,
            occ_read_through_locks: false,
            sundial_lock_at_access: false,
            timestamp_cascading_aborts: false,
            pending_write_wait_ns: None,
            mvcc_versions: 4,
            cicada_versions: 4,
            maat_list_capacity: 8,
            drtm_lease_ns: None,
            drtm_delta_ns: 10_000,
            calvin_epoch_us: 5_000,
            calvin_inflight: DEFAULT_CALVIN_INFLIGHT,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricKind {
    Threads,
    Sim,
    /// One process per node over UCX (`verbena node` / `verbena launch`).
    Ucx,
}

impl FabricKind {
    pub fn name(self) -> &'static str {
        match self {
            FabricKind::Threads => "threads",
            FabricKind::Sim => "sim",
            FabricKind::Ucx => "ucx",
        }
    }

    pub fn parse(text: &str) -> Option<FabricKind> {
        match text {
            "threads" => Some(FabricKind::Threads),
            "sim" => Some(FabricKind::Sim),
            "ucx" => Some(FabricKind::Ucx),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Ycsb,
    #[serde(rename = "smallbank")]
    SmallBank,
    Pps,
    Tpcc,
    /// TPC-E customer-position (DrTM+H §5.5).
    #[serde(rename = "tpce-cp", alias = "tpce_cp")]
    TpceCp,
}

impl WorkloadKind {
    /// The workloads `--workload` accepts, by name.
    pub const NAMED: [(&'static str, WorkloadKind); 5] = [
        ("ycsb", WorkloadKind::Ycsb),
        ("tpcc", WorkloadKind::Tpcc),
        ("smallbank", WorkloadKind::SmallBank),
        ("pps", WorkloadKind::Pps),
        ("tpce-cp", WorkloadKind::TpceCp),
    ];

    pub fn name(self) -> &'static str {
        WorkloadKind::NAMED
            .iter()
            .find(|(_, kind)| *kind == self)
            .map_or("?", |(name, _)| name)
    }

    pub fn parse(text: &str) -> Option<WorkloadKind> {
        let text = text.trim().to_ascii_lowercase().replace('_', "-");
        WorkloadKind::NAMED
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, kind)| *kind)
    }
}

impl WorkloadKind {
    /// Whether `protocol` can run this workload. Every built-in workload
    /// now runs under every protocol (CALVIN included: each implements the
    /// deterministic part of `Workload`); the check stays for the callers
    /// that filter pairs.
    pub fn runs_under(self, _protocol: ProtocolKind) -> bool {
        true
    }
}

/// Back-off after an abort: `min(base · 2^n, cap)` with jitter, `n` the
/// number of aborts of this transaction so far.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackoffConfig {
    pub base_ns: u64,
    pub cap_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyDistribution {
    Uniform,
    /// Zipfian with skew `theta` (YCSB's generator, Gray et al.).
    Zipf,
    /// RCC's hot area: `hot_fraction` of the rows receive `hot_probability`
    /// of the accesses.
    Hot,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct YcsbConfig {
    pub rows_per_node: u64,
    pub record_bytes: u32,
    pub ops_per_txn: u32,
    /// Fraction of operations that are read-modify-writes.
    pub write_ratio: f64,
    /// Deneva's transaction mix (Deneva §4.1, Fig. 3) instead of
    /// `write_ratio`: with this probability a transaction is an update
    /// transaction (half its operations, rounded down, are
    /// read-modify-writes: 5 reads and 5 updates of 10), else it is
    /// read-only. `None`: every operation is a write with `write_ratio`.
    pub update_txn_ratio: Option<f64>,
    pub distribution: KeyDistribution,
    /// Zipf skew, in [0, 1).
    pub theta: f64,
    pub hot_fraction: f64,
    pub hot_probability: f64,
    /// Computation in the execution phase, per transaction, µs.
    pub compute_us: f64,
    /// Partitions (nodes) a transaction touches; `None` resolves to
    /// `min(2, nodes)`.
    pub partitions_per_txn: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            fabric: FabricKind::Threads,
            nodes: 2,
            workers: 1,
            coroutines: 8,
            protocol: ProtocolKind::NoWait,
            primitive: Primitive::OneSided,
            stages: StagePlan::empty(),
            workload: WorkloadKind::Ycsb,
            duration_s: 2.0,
            warmup_s: 0.5,
            seed: 1,
            check: false,
            profile: NetworkProfile::none(),
            sim: SimConfig::default(),
            backoff: BackoffConfig::default(),
            location_cache_entries: 1 << 18,
            location_cache_warm: false,
            ycsb: YcsbConfig::default(),
            smallbank: SmallBankConfig::default(),
            pps: PpsConfig::default(),
            tpce: TpceConfig::default(),
            tpcc: TpccConfig::default(),
            protocol_options: ProtocolOptions::default(),
            ucx: UcxConfig::default(),
            replication: 1,
            replication_options: ReplicationOptions::default(),
            faults: Vec::new(),
            failure_detector: faults::FailureDetectorConfig::default(),
            unsafe_skip_occ_validation: false,
        }
    }
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            base_ns: 1_000,
            cap_ns: 100_000,
        }
    }
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            rows_per_node: 100_000,
            record_bytes: 64,
            ops_per_txn: 10,
            write_ratio: 0.2,
            update_txn_ratio: None,
            distribution: KeyDistribution::Hot,
            theta: 0.99,
            hot_fraction: 0.001,
            hot_probability: 0.1,
            compute_us: 5.0,
            partitions_per_txn: None,
        }
    }
}

/// A configuration value that is out of range, unknown or inconsistent. The
/// message names the value and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Largest registered memory a run may allocate in all (every node's
/// region together), so a typo in `rows_per_node` fails with a message
/// instead of exhausting the machine.
pub const MAX_REGION_BYTES: u64 = 16 << 30;

/// Header words per tuple the protocol lays out (for the footprint check):
/// the version slots of CICADA, the lists of MAAT, else one.
fn header_words_estimate(protocol: ProtocolKind, o: &ProtocolOptions, record_words: u64) -> u64 {
    match protocol {
        ProtocolKind::Cicada => 2 + o.cicada_versions as u64 * (record_words + 4),
        ProtocolKind::Maat => 3 + 2 * o.maat_list_capacity as u64,
        // A copy of the record and 2 words per version slot (RCC §4.4).
        ProtocolKind::Mvcc => 2 + o.mvcc_versions as u64 * (record_words + 2),
        _ => 1,
    }
}

/// `name = value` lies in `low..=high` (any whole-number knob).
fn check_count<T: PartialOrd + std::fmt::Display>(
    name: &str,
    value: T,
    low: T,
    high: T,
) -> Result<(), ConfigError> {
    if value < low || value > high {
        return Err(ConfigError(format!(
            "{name} = {value} is out of range; allowed: {low}..={high}"
        )));
    }
    Ok(())
}

fn check_real(
    name: &str,
    value: f64,
    low: f64,
    high: f64,
    high_open: bool,
) -> Result<(), ConfigError> {
    let above = if high_open {
        value >= high
    } else {
        value > high
    };
    if !value.is_finite() || value < low || above {
        let close = if high_open { ")" } else { "]" };
        return Err(ConfigError(format!(
            "{name} = {value} is out of range; allowed: [{low}, {high}{close}"
        )));
    }
    Ok(())
}

impl Config {
    /// Checks every value and resolves the stage plan against the protocol.
    /// Idempotent: a validated config validates again unchanged.
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        check_count("nodes", self.nodes, 1, MAX_NODES)?;
        check_count("workers", self.workers, 1, MAX_WORKERS)?;
        check_count("coroutines", self.coroutines, 1, MAX_COROUTINES)?;
        if self.fabric == FabricKind::Threads && self.total_workers() > MAX_THREADS_WORKERS {
            return Err(ConfigError(format!(
                "nodes × workers = {} × {} = {} worker threads; allowed: at most {MAX_THREADS_WORKERS} on the threads fabric (use --fabric sim to emulate larger clusters)",
                self.nodes,
                self.workers,
                self.total_workers()
            )));
        }
        self.resolve_stages()?;
        check_real("duration_s", self.duration_s, 0.001, 86_400.0, false)?;
        check_real("warmup_s", self.warmup_s, 0.0, 86_400.0, false)?;
        self.profile.validate().map_err(ConfigError)?;
        if !self.sim.jitter.is_finite() || !(0.0..=10.0).contains(&self.sim.jitter) {
            return Err(ConfigError(format!(
                "sim.jitter = {} is out of range; allowed: [0, 10] (a fraction of each one-way time)",
                self.sim.jitter
            )));
        }
        self.sim.validate().map_err(ConfigError)?;
        for fault in &self.sim.faults {
            fault.validate(self.nodes).map_err(ConfigError)?;
        }
        if !self.sim.faults.is_empty() && self.fabric != FabricKind::Sim {
            return Err(ConfigError(
                "sim.faults need fabric = sim; the threads fabric injects no faults".into(),
            ));
        }
        if self.backoff.cap_ns > 1_000_000_000 || self.backoff.base_ns > self.backoff.cap_ns {
            return Err(ConfigError(format!(
                "backoff base_ns = {} and cap_ns = {} are inconsistent; allowed: base_ns <= cap_ns <= 1000000000",
                self.backoff.base_ns, self.backoff.cap_ns
            )));
        }
        if self.location_cache_entries > 1 << 24 {
            return Err(ConfigError(format!(
                "location_cache_entries = {} is out of range; allowed: 0..={}",
                self.location_cache_entries,
                1 << 24
            )));
        }
        if self.location_cache_warm && self.fabric == FabricKind::Ucx {
            return Err(ConfigError(
                "location_cache_warm = true needs every node's rows in one process; allowed: fabric = sim or threads (a ucx rank holds only its own node's rows)".into(),
            ));
        }
        self.validate_protocol_options()?;
        self.validate_replication()?;
        self.validate_ucx()?;
        faults::validate(self).map_err(ConfigError)?;
        self.validate_ycsb()?;
        self.validate_tpcc()?;
        self.validate_workload_sections()
    }

    /// The sections of the SmallBank, PPS and TPC-E workloads: every value
    /// in range, whichever workload runs. The memory their tables need is
    /// the workloads' own check (`workloads::check_footprint`).
    fn validate_workload_sections(&self) -> Result<(), ConfigError> {
        self.smallbank.validate(self.workers)?;
        self.pps.validate()?;
        self.tpce.validate(self.nodes)
    }

    fn validate_protocol_options(&self) -> Result<(), ConfigError> {
        let o = &self.protocol_options;
        check_count("protocol_options.mvcc_versions", o.mvcc_versions, 2, 64)?;
        check_count("protocol_options.cicada_versions", o.cicada_versions, 2, 64)?;
        check_count(
            "protocol_options.maat_list_capacity",
            o.maat_list_capacity,
            1,
            64,
        )?;
        for (name, value) in [
            ("protocol_options.drtm_lease_ns", self.drtm_lease_ns()),
            ("protocol_options.drtm_delta_ns", o.drtm_delta_ns),
        ] {
            if value > 1_000_000_000 {
                return Err(ConfigError(format!(
                    "{name} = {value} is out of range; allowed: 0..=1000000000 (1 s)"
                )));
            }
        }
        if !(1..=1_000_000).contains(&o.calvin_epoch_us) {
            return Err(ConfigError(format!(
                "protocol_options.calvin_epoch_us = {} is out of range; allowed: 1..=1000000 (1 s)",
                o.calvin_epoch_us
            )));
        }
        if o.calvin_inflight > MAX_CALVIN_INFLIGHT {
            return Err(ConfigError(format!(
                "protocol_options.calvin_inflight = {} is out of range; allowed: 0..={MAX_CALVIN_INFLIGHT} (requests outstanding per worker; 0: lockstep clients, one per coroutine per epoch)",
                o.calvin_inflight
            )));
        }
        if o.drtm_lease_ns == Some(0) {
            return Err(ConfigError(
                "protocol_options.drtm_lease_ns = 0 is out of range; allowed: 1..=1000000000"
                    .into(),
            ));
        }
        if let Some(wait_ns) = o.pending_write_wait_ns {
            if !(1..=1_000_000_000).contains(&wait_ns) {
                return Err(ConfigError(format!(
                    "protocol_options.pending_write_wait_ns = {wait_ns} is out of range; allowed: 1..=1000000000 (1 s; leave it unset for RCC's short bounded waits)"
                )));
            }
        }
        Ok(())
    }

    fn resolve_stages(&mut self) -> Result<(), ConfigError> {
        let protocol_bits = self.protocol.stage_bits();
        for stage in self.stages.stages() {
            if protocol_bits & stage.bit() == 0 {
                return Err(ConfigError(format!(
                    "protocol {} has no stage `{}`; its stages are {}",
                    self.protocol.name(),
                    stage.name(),
                    self.protocol
                        .stages()
                        .iter()
                        .map(|s| s.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let mut plan = StagePlan::uniform(self.primitive).restrict_to(protocol_bits);
        for stage in self.stages.stages() {
            plan = plan.with(stage, self.stages.get(stage));
        }
        self.stages = plan;
        Ok(())
    }

    fn validate_ycsb(&mut self) -> Result<(), ConfigError> {
        let y = &mut self.ycsb;
        check_count("ycsb.ops_per_txn", y.ops_per_txn, 1, MAX_OPS_PER_TXN)?;
        if y.record_bytes < 8 || y.record_bytes > 4096 || y.record_bytes % 8 != 0 {
            return Err(ConfigError(format!(
                "ycsb.record_bytes = {} is not allowed; allowed: a multiple of 8 in 8..=4096",
                y.record_bytes
            )));
        }
        check_real("ycsb.write_ratio", y.write_ratio, 0.0, 1.0, false)?;
        if let Some(ratio) = y.update_txn_ratio {
            check_real("ycsb.update_txn_ratio", ratio, 0.0, 1.0, false)?;
        }
        check_real("ycsb.theta", y.theta, 0.0, 1.0, true)?;
        check_real("ycsb.hot_probability", y.hot_probability, 0.0, 1.0, false)?;
        if !(y.hot_fraction > 0.0 && y.hot_fraction <= 1.0) {
            return Err(ConfigError(format!(
                "ycsb.hot_fraction = {} is out of range; allowed: (0, 1]",
                y.hot_fraction
            )));
        }
        check_real("ycsb.compute_us", y.compute_us, 0.0, 1_000_000.0, false)?;
        let partitions = y.partitions_per_txn.unwrap_or(self.nodes.min(2));
        let most = self.nodes.min(y.ops_per_txn);
        if partitions < 1 || partitions > most {
            return Err(ConfigError(format!(
                "ycsb.partitions_per_txn = {partitions} is out of range; allowed: 1..={most} (at most nodes and ops_per_txn)"
            )));
        }
        y.partitions_per_txn = Some(partitions);
        // Each partition must hold the distinct keys a transaction draws there.
        let keys_per_partition = y.ops_per_txn.div_ceil(partitions) as u64;
        if y.rows_per_node < keys_per_partition || y.rows_per_node > 1 << 40 {
            return Err(ConfigError(format!(
                "ycsb.rows_per_node = {} is out of range; allowed: {}..={} (a transaction draws {} distinct keys per partition)",
                y.rows_per_node,
                keys_per_partition,
                1u64 << 40,
                keys_per_partition
            )));
        }
        let (rows_per_node, record_bytes) = (y.rows_per_node, y.record_bytes);
        let total = self
            .row_bytes_estimate(record_bytes as u64 / 8)
            .saturating_mul(rows_per_node)
            .saturating_mul(self.nodes as u64);
        if total > MAX_REGION_BYTES {
            return Err(ConfigError(format!(
                "ycsb.rows_per_node = {} × record_bytes = {} on {} nodes needs about {} MiB of registered memory with {}'s tuple header; allowed: at most {} MiB",
                rows_per_node,
                record_bytes,
                self.nodes,
                total >> 20,
                self.protocol.name(),
                MAX_REGION_BYTES >> 20
            )));
        }
        Ok(())
    }

    /// The injected latency of the `threads` fabric: the profile's round
    /// trips (its per-byte cost and op-rate cap are modeled by `sim` only).
    pub fn threads_latency(&self) -> LatencyConfig {
        LatencyConfig {
            onesided_ns: self.profile.onesided_rtt_ns,
            atomic_ns: self.profile.atomic_rtt_ns,
            rpc_ns: self.profile.rpc_rtt_ns,
        }
    }

    /// DRTM's read lease, ns: `protocol_options.drtm_lease_ns` when given,
    /// else [`DRTM_LEASE_TCP_NS`] for `ucx` over TCP and [`DRTM_LEASE_NS`]
    /// everywhere else. `ucx` with `transport = auto` takes the latter:
    /// which transport UCX picks is known only once it runs.
    pub fn drtm_lease_ns(&self) -> u64 {
        self.protocol_options.drtm_lease_ns.unwrap_or(
            if self.fabric == FabricKind::Ucx && self.ucx.transport == UcxTransport::Tcp {
                DRTM_LEASE_TCP_NS
            } else {
                DRTM_LEASE_NS
            },
        )
    }

    /// Whether a multi-process (`ucx`) run survives the death of a rank:
    /// it needs a failure detector and a copy of every partition to fail
    /// over to; otherwise a dead rank ends the run with an error.
    pub fn tolerates_rank_loss(&self) -> bool {
        faults::DetectorSettings::of(self).is_some() && self.replication > 1
    }

    /// The cluster's shape as reports and logs print it:
    /// `N node(s) × W worker(s) × C coroutine(s)`.
    pub fn shape(&self) -> String {
        format!(
            "{} node(s) × {} worker(s) × {} coroutine(s)",
            self.nodes, self.workers, self.coroutines
        )
    }

    /// The protocol's stages with their bits in a hybrid code, as
    /// `name=bit, …` (for messages about a code that does not fit).
    pub fn stage_bits_text(&self) -> String {
        self.protocol
            .stages()
            .iter()
            .map(|s| format!("{}={}", s.name(), s.bit()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Rough registered-memory bytes one row of `record_words` takes on
    /// its node with this run's protocol: the tuple (the store's words,
    /// the protocol's header, the record) plus its index entry (about 32
    /// bytes at ≤ 50 % load). The footprint checks of YCSB here and of
    /// the other workloads (`workloads::check_footprint`) both use it.
    pub fn row_bytes_estimate(&self, record_words: u64) -> u64 {
        let header = header_words_estimate(self.protocol, &self.protocol_options, record_words);
        8 * (3 + header + record_words) + 32
    }

    /// Worker threads of the whole run.
    pub fn total_workers(&self) -> u32 {
        self.nodes.saturating_mul(self.workers)
    }
}

/// `[replication_options]`: knobs of the coordinator log (`replication`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplicationOptions {
    /// Bytes of each coordinator worker's log ring on each backup node
    /// (a multiple of 8). A record larger than the ring goes by RPC.
    pub ring_bytes: u64,
}

impl Default for ReplicationOptions {
    fn default() -> Self {
        ReplicationOptions {
            ring_bytes: 64 * 1024,
        }
    }
}

/// Most copies of a partition (the papers run with 3: RCC §6.1, DrTM+H §5.4).
pub const MAX_REPLICATION: u32 = 3;

impl Config {
    fn validate_replication(&self) -> Result<(), ConfigError> {
        check_count("replication", self.replication, 1, MAX_REPLICATION)?;
        if self.replication > self.nodes {
            return Err(ConfigError(format!(
                "replication = {} needs at least as many nodes, but nodes = {}; allowed: 1..={}",
                self.replication,
                self.nodes,
                self.nodes.min(MAX_REPLICATION)
            )));
        }
        let ring = self.replication_options.ring_bytes;
        if ring % 8 != 0 || !(256..=1 << 30).contains(&ring) {
            return Err(ConfigError(format!(
                "replication_options.ring_bytes = {ring} is out of range; allowed: a multiple of 8 in 256..={}",
                1u64 << 30
            )));
        }
        Ok(())
    }

    /// Words of one log ring (`replication_options.ring_bytes / 8`).
    pub fn ring_words(&self) -> u64 {
        self.replication_options.ring_bytes / 8
    }
}
