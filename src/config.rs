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

use serde::{Deserialize, Serialize};

use crate::protocols::{Primitive, ProtocolKind, StagePlan};

/// Upper bounds that the id packing of `txn::ids` relies on.
pub const MAX_NODES: u32 = 4096;
pub const MAX_WORKERS: u32 = 256;
pub const MAX_COROUTINES: u32 = 255;
pub const MAX_OPS_PER_TXN: u32 = 64;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Fabric backend: only `threads` exists so far.
    pub fabric: FabricKind,
    pub nodes: u32,
    pub workers: u32,
    pub coroutines: u32,
    pub protocol: ProtocolKind,
    /// Primitive per stage. Built from `primitive` and `stages` flags.
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
    pub latency: LatencyConfig,
    pub backoff: BackoffConfig,
    /// Entries of each worker's location cache (DrTM+H §5.1); 0 disables it.
    pub location_cache_entries: u32,
    pub ycsb: YcsbConfig,
    /// Test-only: OCC skips read-set validation. Exists to prove the checker
    /// catches a broken protocol; not reachable from the command line.
    #[serde(skip)]
    pub unsafe_skip_occ_validation: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricKind {
    Threads,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Ycsb,
}

/// Injected latency of the `threads` fabric, per verb class, in ns. Remote
/// verbs only: a node's accesses to itself take no injected latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LatencyConfig {
    /// Round trip of a one-sided READ or WRITE.
    pub onesided_ns: u64,
    /// Round trip of a CAS or FETCH_AND_ADD.
    pub atomic_ns: u64,
    /// Round trip of an RPC, excluding the handler's own (real) CPU time.
    pub rpc_ns: u64,
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
            stages: StagePlan::uniform(Primitive::OneSided),
            workload: WorkloadKind::Ycsb,
            duration_s: 2.0,
            warmup_s: 0.5,
            seed: 1,
            check: false,
            latency: LatencyConfig::default(),
            backoff: BackoffConfig::default(),
            location_cache_entries: 1 << 16,
            ycsb: YcsbConfig::default(),
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
            distribution: KeyDistribution::Hot,
            theta: 0.99,
            hot_fraction: 0.001,
            hot_probability: 0.1,
            compute_us: 5.0,
            partitions_per_txn: None,
        }
    }
}
