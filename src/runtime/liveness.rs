//! What a worker may know of the cluster's health, and nothing of how it is
//! decided (docs/ARCHITECTURE.md, layer 4: the runtime asks a narrow interface
//! and knows no replication or fault policy).
//!
//! Three views, each implemented by the recovery layer above and handed to
//! a worker when it is built:
//! * [`Liveness`], a node's membership: whether a peer is still a member,
//!   and how many peers it has declared dead (the epoch). A round to a
//!   non-member fails; an outstanding one that bounced is held until the
//!   peer stops being a member.
//! * [`Monitor`], the failure detector one worker per node runs: it posts
//!   its own probes under the reserved coroutine id [`MONITOR_CO`] and is
//!   told of their completions; the worker never interprets them.
//! * [`ClusterState`], a replicated run's failover as the data path sees
//!   it: which node serves a partition now, which nodes are fenced, and
//!   whether the survivors are paused for a recovery.
//!
//! Invariants the implementations keep, and the worker relies on: a node
//! that stops being a member never becomes one again, and `epoch` only
//! grows (so a worker that saw no change of epoch need not look at its
//! held failures again); a fenced node stays fenced.

use std::any::Any;

use crate::fabric::{Endpoint, Message, NodeId};

/// The coroutine id a node's [`Monitor`] posts its probes under: no
/// transaction coroutine has it (at most `config::MAX_COROUTINES`).
pub const MONITOR_CO: u16 = u16::MAX - 1;

/// A node's view of which peers are still members.
pub trait Liveness: Send + Sync {
    /// Whether `node` is still a member as this node sees it.
    fn is_alive(&self, node: NodeId) -> bool;
    /// How many peers this node has declared dead so far.
    fn epoch(&self) -> u64;
}

/// The failure detector a node runs on one of its workers' event loops.
pub trait Monitor: Send {
    /// One turn of the event loop at `now_ns`: posts whatever probes are
    /// due through `endpoint`. Returns whether it did any work.
    fn tick(&mut self, endpoint: &mut dyn Endpoint, now_ns: u64) -> bool;
    /// A completion (or failure) of one of its probes, [`MONITOR_CO`]'s.
    fn on_completion(&mut self, msg: &Message, now_ns: u64);
    /// When it next has something to do, so an idle worker wakes for it.
    fn next_tick_ns(&self) -> u64;
}

/// A replicated run's failover, as the data path needs it.
pub trait ClusterState: Send + Sync {
    /// The node that serves `partition` now: its own, or after a failover
    /// its promoted backup.
    fn serving(&self, partition: NodeId) -> NodeId;
    /// Whether `node` was declared failed (it is then fenced for good).
    fn is_failed(&self, node: NodeId) -> bool;
    /// Whether the survivors are paused for a recovery.
    fn paused(&self) -> bool;
    /// The implementation, for the layer that built it and needs more than
    /// this view (the recovery steps a program's coroutines take part in).
    fn as_any(&self) -> &dyn Any;
}
