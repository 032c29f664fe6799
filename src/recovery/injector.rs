//! The one crash injector (`--fault crash:N@S`), for every fabric: it owns
//! the run's crash schedule (`config::faults::crash_times_ns`) and, when a
//! crash is due, asks the backend to stop the node. How a node stops is the
//! backend's: on `sim` and `threads`, whose nodes share this process, the
//! fabric's `crash_node` (from then on the node's verbs and messages are
//! lost and its workers stop); on `ucx` a rank hosts only itself, and stops
//! by sending itself SIGKILL (`cluster`), losing its memory with it, as a
//! machine that dies does (FaRM's failure model; DrTM §4.5's leases are
//! how the survivors notice).
//!
//! Invariants: a node crashes at most once, at the earliest time the
//! configuration names for it; a pause (`pause:N@S+D`, `sim` only) is no
//! crash and is not this injector's; the times count from the run's start
//! as every backend defines it (its barrier `Go`).

use std::time::Duration;

use crate::config::faults::{crash_times_ns, RunFault};
use crate::fabric::NodeId;

/// The crashes a run plans, and how they are injected.
#[derive(Clone, Debug)]
pub struct CrashInjector {
    /// Per node: crash time, ns since the run's start (`u64::MAX`: never).
    after_ns: Vec<u64>,
    /// Every configured crash in the order the configuration gives them:
    /// `(node, ns since the start)`. A fabric that stops a node once per
    /// call is asked in this order, as the configuration was read.
    planned: Vec<(NodeId, u64)>,
}

impl CrashInjector {
    /// The crashes `faults` plan for a cluster of `nodes` nodes.
    pub fn new(faults: &[RunFault], nodes: u32) -> CrashInjector {
        let planned = faults
            .iter()
            .filter_map(|fault| match *fault {
                RunFault::Crash { node, at_s } => Some((node as NodeId, (at_s * 1e9) as u64)),
                RunFault::Pause { .. } => None,
            })
            .collect();
        CrashInjector {
            after_ns: crash_times_ns(faults, nodes),
            planned,
        }
    }

    /// When `node` crashes, ns after the run's start (`None`: never).
    pub fn crash_after_ns(&self, node: NodeId) -> Option<u64> {
        let after = self.after_ns[node as usize];
        (after != u64::MAX).then_some(after)
    }

    /// Whether `node` crashes during the run.
    pub fn crashes(&self, node: NodeId) -> bool {
        self.crash_after_ns(node).is_some()
    }

    /// For a fabric that hosts every node in this process: asks
    /// `stop(node, at_ns)` for each planned crash before the run starts,
    /// with its time on the fabric's clock, whose run starts at `start_ns`;
    /// the fabric stops the node when its clock gets there.
    pub fn inject_all(&self, start_ns: u64, mut stop: impl FnMut(NodeId, u64)) {
        for &(node, after) in &self.planned {
            stop(node, start_ns.saturating_add(after));
        }
    }

    /// For a process that hosts `node` alone (a `ucx` rank), at the run's
    /// start: when the node crashes, `stop` runs on a thread of its own at
    /// its crash time (`stop` ends the process: it does not return).
    /// Nothing happens for a node that does not crash.
    pub fn arm_own(&self, node: NodeId, stop: fn() -> !) -> std::io::Result<()> {
        let Some(after_ns) = self.crash_after_ns(node) else {
            return Ok(());
        };
        let after = Duration::from_nanos(after_ns);
        std::thread::Builder::new()
            .name("verbena-crash".into())
            .spawn(move || {
                std::thread::sleep(after);
                stop()
            })
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injects_each_configured_crash_and_schedules_the_earliest() {
        let faults = [
            RunFault::Crash { node: 2, at_s: 1.5 },
            RunFault::Pause {
                node: 1,
                at_s: 0.5,
                for_s: 0.1,
            },
            RunFault::Crash { node: 2, at_s: 0.5 },
        ];
        let injector = CrashInjector::new(&faults, 3);
        assert_eq!(injector.crash_after_ns(2), Some(500_000_000));
        assert!(!injector.crashes(1) && !injector.crashes(0));
        let mut stopped = Vec::new();
        injector.inject_all(1_000, |node, at| stopped.push((node, at)));
        assert_eq!(stopped, vec![(2, 1_500_001_000), (2, 500_001_000)]);
    }
}
