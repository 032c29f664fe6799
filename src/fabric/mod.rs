//! The network interface card (ARCHITECTURE.md layer 1).
//!
//! One trait, [`Endpoint`], is one worker's view of the NIC: it posts
//! one-sided verbs (READ, WRITE, CAS, FETCH_AND_ADD) against any node's
//! registered [`Region`], sends and receives RPC [`Message`]s, and tells time.
//! Backends: `threads` (here: nodes and workers are OS threads of one
//! process); `sim` (deterministic simulation) and `ucx` (real networks) come
//! in later issues behind the same trait.
//!
//! Semantics every backend keeps — those of an RC queue pair:
//! * verbs from one worker to one node take effect in issue order (FIFO), and
//!   so do RPCs from one worker to one worker;
//! * the completion of a later verb implies the earlier ones completed, so a
//!   round need only wait for its last verb per node (passive ACK);
//! * CAS/FAA are 8-byte, 8-byte-aligned and atomic against each other and
//!   against the handlers' local atomics (`threads` shares one cache-coherent
//!   memory; real NICs need `local_atomics = nic`, see the `ucx` issue);
//! * READ/WRITE are atomic per word only: a multi-word READ can be torn.
//!
//! Every verb is counted by type and bytes ([`VerbCounters`]).

pub mod region;
pub mod threads;
pub mod verbs;

pub use region::Region;
pub use verbs::{Batch, CallId, Message, Verb, VerbCounters, VerbId, VerbKind};

/// A node's index in the cluster.
pub type NodeId = u16;

/// One worker's network endpoint. Not shared between threads: each worker
/// owns its own, as each RDMA thread owns its own QPs (DrTM+H §3.1).
pub trait Endpoint {
    fn node(&self) -> NodeId;
    fn worker(&self) -> u16;

    /// Monotonic time of this fabric, ns (wall time on `threads`, virtual
    /// time on `sim`).
    fn now_ns(&self) -> u64;

    /// Posts one doorbell batch: `verbs`, all to the same node, executed in
    /// order. READ/CAS/FAA results go to `results[verb.buf..]`. Returns the
    /// time at which the whole batch has completed.
    fn post(&mut self, verbs: &[Verb], write_data: &[u64], results: &mut [u64]) -> u64;

    /// Sends an RPC request or reply to `msg.dst_node`/`msg.dst_worker`.
    fn send(&mut self, msg: Message);

    /// Appends every message that has arrived and is due to `out`.
    fn receive(&mut self, out: &mut Vec<Message>);

    /// Spends `ns` of CPU time on transaction logic (real work on `threads`).
    fn spend_cpu(&mut self, ns: u64);

    /// Nothing is runnable: wait until a message may have arrived or
    /// `wake_at_ns` passes. Spins briefly, then yields, then parks, so idle
    /// workers leave the cores to their peers.
    fn idle(&mut self, wake_at_ns: Option<u64>);

    fn counters(&self) -> &VerbCounters;
}
