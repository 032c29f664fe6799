//! The `[sim]` section: what the deterministic simulator models beyond the
//! network profile (each operation's CPU cost, jitter, swarm scaling, the
//! emulated cluster size) and the faults it injects at virtual times.
//!
//! Data and value checks only; `fabric::sim` reads it.

use serde::{Deserialize, Serialize};

/// Modeled CPU cost of each class of operation, ns. The defaults are of
/// the order verbena measures on the `threads` fabric (docs/PERFORMANCE.md:
/// a coroutine switch is about 20 ns) and of the posting costs DrTM+H §3.2
/// discusses (an MMIO per doorbell): a doorbell batch costs `post_ns` plus
/// `verb_ns` per verb, a wire message of RPCs `send_ns` plus `frame_ns`
/// per message in it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuModel {
    /// One turn of a worker's event loop (polling its queues).
    pub event_loop_ns: u64,
    /// Resuming one coroutine.
    pub switch_ns: u64,
    /// Posting one doorbell batch.
    pub post_ns: u64,
    /// Each verb of a batch.
    pub verb_ns: u64,
    /// Sending one wire message: the doorbell or system call that puts
    /// the RPC messages one worker queued for one node within one turn on
    /// the wire (see "RPC messages" in the module docs).
    pub send_ns: u64,
    /// Each RPC message of a wire message: writing its frame (header and
    /// payload) into the outbox; also the whole cost of a message to a
    /// worker of the sender's own node, which never reaches the wire.
    pub frame_ns: u64,
    /// Serving one RPC request, plus `handler_word_ns` per payload word.
    pub handler_ns: u64,
    pub handler_word_ns: u64,
    /// Filing one reply or completion.
    pub completion_ns: u64,
    /// Transaction logic per record accessed (read, update, write).
    pub access_ns: u64,
    /// A failover's recovery, per tuple of a live copy it visits (a
    /// version compared across copies, a header read and reset): the
    /// recovery is real work on the worker that runs it, whose event loop
    /// (and heartbeat) stops meanwhile, as on `threads`.
    pub recovery_tuple_ns: u64,
}

impl Default for CpuModel {
    fn default() -> Self {
        CpuModel {
            event_loop_ns: 30,
            switch_ns: 20,
            post_ns: 100,
            verb_ns: 20,
            send_ns: 150,
            frame_ns: 20,
            handler_ns: 150,
            handler_word_ns: 1,
            completion_ns: 20,
            access_ns: 40,
            recovery_tuple_ns: 10,
        }
    }
}

/// A fault injected at a virtual time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultSpec {
    /// The node's workers do not run during `[at_us, at_us + for_us)`.
    Pause { node: u32, at_us: f64, for_us: f64 },
    /// The node stops for good at `at_us`.
    Crash { node: u32, at_us: f64 },
    /// Messages and verbs from `from` to `to` take `extra_ns` longer.
    Delay {
        from: u32,
        to: u32,
        at_us: f64,
        for_us: f64,
        extra_ns: u64,
    },
    /// Messages and verbs from `from` to `to` are lost with `probability`.
    Drop {
        from: u32,
        to: u32,
        at_us: f64,
        for_us: f64,
        probability: f64,
    },
}

impl FaultSpec {
    /// Checks node numbers against `nodes` and times and probabilities.
    pub fn validate(&self, nodes: u32) -> Result<(), String> {
        let (kind, mut node_list, times, probability) = match self {
            FaultSpec::Pause {
                node,
                at_us,
                for_us,
            } => ("pause", vec![*node], vec![*at_us, *for_us], None),
            FaultSpec::Crash { node, at_us } => ("crash", vec![*node], vec![*at_us], None),
            FaultSpec::Delay {
                from,
                to,
                at_us,
                for_us,
                ..
            } => ("delay", vec![*from, *to], vec![*at_us, *for_us], None),
            FaultSpec::Drop {
                from,
                to,
                at_us,
                for_us,
                probability,
            } => (
                "drop",
                vec![*from, *to],
                vec![*at_us, *for_us],
                Some(*probability),
            ),
        };
        node_list.retain(|&n| n >= nodes);
        if let Some(node) = node_list.first() {
            return Err(format!(
                "sim fault `{kind}` names node {node}; allowed: 0..{nodes}"
            ));
        }
        if times.iter().any(|t| !t.is_finite() || *t < 0.0) {
            return Err(format!(
                "sim fault `{kind}` has a negative or non-finite time; allowed: µs >= 0"
            ));
        }
        if let Some(p) = probability {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!(
                    "sim fault `drop` probability = {p} is out of range; allowed: [0, 1]"
                ));
            }
        }
        Ok(())
    }
}

/// The `[sim]` section of a config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    pub cpu: CpuModel,
    /// Random extra delay of each one-way time, as a fraction of it.
    pub jitter: f64,
    /// Scale each latency class of the profile per seed (swarm testing).
    pub swarm: bool,
    pub faults: Vec<FaultSpec>,
    /// Emulate the connections of a cluster this large (RCC §6.6, DrTM+H
    /// §4.2): each worker spreads its doorbell batches to a node
    /// round-robin over `ceil(emulated_nodes / nodes)` connections, so each
    /// NIC serves as many as it would there. Matters only with a profile
    /// whose `qp_cache` is set; 0 = the real cluster's size.
    pub emulated_nodes: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cpu: CpuModel::default(),
            jitter: 0.1,
            swarm: false,
            faults: Vec::new(),
            emulated_nodes: 0,
        }
    }
}

impl SimConfig {
    /// Checks the fields `Config::validate` does not (it checks jitter and
    /// faults itself).
    pub fn validate(&self) -> Result<(), String> {
        if self.emulated_nodes > MAX_EMULATED_NODES {
            return Err(format!(
                "sim.emulated_nodes = {} is out of range; allowed: 0 (the real cluster) to {MAX_EMULATED_NODES}",
                self.emulated_nodes
            ));
        }
        Ok(())
    }
}

/// Bound on `SimConfig::emulated_nodes`: each NIC's connection cache keeps
/// a few words per emulated connection (workers × emulated nodes).
pub const MAX_EMULATED_NODES: u32 = 10_000;
