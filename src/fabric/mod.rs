//! The network interface card (docs/ARCHITECTURE.md, layer 2).
//!
//! One trait, [`Endpoint`], is one worker's view of the NIC: it posts
//! one-sided verbs (READ, WRITE, CAS, FETCH_AND_ADD) against any node's
//! registered [`Region`], sends and receives RPC [`Message`]s, and tells time.
//! Backends: `threads` (here: nodes and workers are OS threads of one
//! process); `sim` (deterministic simulation in virtual time, one thread for
//! the whole cluster); `ucx` (real networks: one process per node over
//! UCX, cargo feature `ucx`). [`NetworkProfile`]s model a network for both.
//!
//! Semantics every backend keeps — those of an RC queue pair:
//! * verbs from one worker to one node take effect in issue order (FIFO), and
//!   so do RPCs from one worker to one worker;
//! * the completion of a later verb implies the earlier ones completed, so a
//!   round need only wait for its last verb per node (passive ACK);
//! * CAS/FAA are 8-byte, 8-byte-aligned and atomic against each other and
//!   against the handlers' local atomics (`threads` shares one cache-coherent
//!   memory; on a real NIC they are not — `ucx`'s `local_atomics` option);
//! * READ/WRITE are atomic per word only: a multi-word READ can be torn.
//!
//! Every verb is counted by type and bytes ([`VerbCounters`]).
//!
//! Completion: a backend either completes a doorbell batch when it is
//! posted ([`Posted::At`]: `threads`, whose verbs are memory operations, with
//! an optional injected completion time) or later ([`Posted::Deferred`]:
//! `sim`, which applies a verb at its modeled arrival time, and `ucx`, whose
//! completions come from the UCP worker's progress), delivering the results
//! through `receive` like an RPC reply. The runtime handles both, so no
//! layer above the fabric knows which backend it runs on.

mod event_queue;
pub mod region;
pub mod sim;
pub mod threads;
// One process per node over UCX (cargo feature `ucx`); documented by its
// own module doc (an outer doc here would make rustdoc resolve that doc's
// links from this module).
#[cfg(feature = "ucx")]
pub mod ucx;
pub mod verbs;

pub use crate::config::profile::NetworkProfile;
pub use region::Region;
pub use verbs::{
    Batch, CallId, Doorbell, Message, Verb, VerbCounters, VerbId, VerbKind, MSG_COMPLETION,
    MSG_FAILED,
};

/// When a posted doorbell batch completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// The results are in place; the batch counts as complete at this time
    /// (0: already). `threads` executes verbs at once and answers this.
    At(u64),
    /// The backend completes the batch later — `sim` at its modeled
    /// completion time, `ucx` when the worker's progress reports it — by
    /// delivering through [`Endpoint::receive`] a [`Message`] with flags
    /// [`verbs::MSG_COMPLETION`], `coroutine` the poster, `call` the `tag`,
    /// `kind` the number of verbs, and `payload` the result words of the
    /// batch's READ/CAS/FAA verbs in verb order. `dst_node`/`dst_worker` are
    /// the poster's own.
    Deferred,
}

/// Classes of CPU work a backend may charge time for (the `sim` fabric's
/// CPU model); real backends spend the real time and ignore them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuOp {
    /// One turn of the event loop.
    Turn,
    /// Resuming one coroutine.
    Switch,
    /// Transaction logic on one record access.
    Access,
    /// A failover's recovery visiting one tuple of a live copy (comparing
    /// its version with the other copies', resetting its header).
    RecoveryTuple,
}

pub use crate::base::NodeId;

/// One worker's network endpoint. Not shared between threads: each worker
/// owns its own, as each RDMA thread owns its own QPs (DrTM+H §3.1).
pub trait Endpoint {
    fn node(&self) -> NodeId;
    fn worker(&self) -> u16;

    /// Monotonic time of this fabric, ns (wall time on `threads`, virtual
    /// time on `sim`).
    fn now_ns(&self) -> u64;

    /// Posts one doorbell batch for coroutine `coroutine`: `verbs`, all to
    /// the same node, executed in order. READ/CAS/FAA results go to
    /// `results[verb.buf..]` — now, if the backend returns [`Posted::At`],
    /// or through a completion message later ([`Posted::Deferred`]).
    /// `tag` is echoed in that message (the runtime passes the index of the
    /// batch's first verb).
    #[inline]
    fn post(
        &mut self,
        coroutine: u16,
        tag: u16,
        verbs: &[Verb],
        write_data: &[u64],
        results: &mut [u64],
    ) -> Posted {
        let doorbell = Doorbell {
            coroutine,
            tag,
            verbs,
            write_data,
        };
        self.post_doorbell(doorbell, results)
    }

    /// [`Endpoint::post`] with the batch gathered into one [`Doorbell`]:
    /// what each backend implements (`post` is its callers' form).
    fn post_doorbell(&mut self, doorbell: Doorbell<'_>, results: &mut [u64]) -> Posted;

    /// Sends an RPC request or reply to `msg.dst_node`/`msg.dst_worker`.
    fn send(&mut self, msg: Message);

    /// Appends every message that has arrived and is due to `out`.
    fn receive(&mut self, out: &mut Vec<Message>);

    /// Spends `ns` of CPU time on transaction logic (real work on `threads`).
    fn spend_cpu(&mut self, ns: u64);

    /// Charges `count` operations of class `op` of modeled CPU time (`sim`);
    /// a no-op where CPU time is real.
    #[inline]
    fn charge(&mut self, _op: CpuOp, _count: u32) {}

    /// Nothing is runnable: wait until a message may have arrived or
    /// `wake_at_ns` passes. Spins briefly, then yields, then parks, so idle
    /// workers leave the cores to their peers.
    fn idle(&mut self, wake_at_ns: Option<u64>);

    fn counters(&self) -> &VerbCounters;

    /// Takes back a message payload the runtime no longer needs, for the
    /// backend to reuse: completions carry buffers the backend allocated,
    /// and a worker whose coroutines only post verbs would otherwise hold
    /// one more of them per completion for the rest of the run. The default
    /// frees it.
    #[inline]
    fn recycle(&mut self, buffer: Vec<u64>) {
        drop(buffer);
    }

    /// This endpoint's own node has crashed (an injected fault): its worker
    /// must stop running coroutines. Until then, and on backends without
    /// fault injection, `false`.
    ///
    /// The failure contract every backend keeps towards the survivors: a
    /// verb batch or RPC that cannot reach a crashed node never completes
    /// normally; the backend hands it back to the poster or sender as a
    /// message flagged [`verbs::MSG_FAILED`] (or loses it), and the runtime
    /// turns that into a failed round once the membership declares the
    /// node dead (`recovery`, `runtime`).
    #[inline]
    fn crashed(&self) -> bool {
        false
    }
}
