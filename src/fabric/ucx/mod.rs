//! The `ucx` fabric: one OS process per node, on one host or many, over UCX's
//! UCP API (shared memory, TCP, InfiniBand/RoCE verbs). docs/ARCHITECTURE.md
//! layer 1; the mapping of verbs follows RCC §3 and DrTM+H §3 (one-sided
//! READ/WRITE/CAS/FAA plus two-sided RPCs), with UCP standing in for the
//! ibverbs those papers program directly.
//!
//! Built only with the cargo feature `ucx` (hand-written FFI in [`ffi`],
//! linked against `libucp`; see docs/guide/fabrics.md, "Real networks"). Pieces:
//!
//! * [`UcxContext`] — one per process: the `ucp_context` (features RMA,
//!   AMO64, AM; `UCX_TLS` set from `--transport`), this node's [`Region`]
//!   registered with `ucp_mem_map` (the region's own memory, so RPC handlers
//!   and one-sided verbs work on the same words) and its packed rkey.
//! * [`UcxWorkerHost`] — one per verbena worker thread, created on that
//!   thread: its own `ucp_worker` in single-thread mode (DrTM+H §3.1: each
//!   thread owns its QPs) and the worker address the bootstrap exchanges.
//! * [`UcxEndpoint`] — the [`Endpoint`] of that worker once the bootstrap
//!   delivered every node's addresses and rkeys: endpoints to the worker of
//!   the same index on every node (itself included: the loopback endpoint).
//!
//! Files: the context in `context`, the worker host in `host`, the
//! endpoint and its [`Endpoint`] in `endpoint`, posting one-sided verbs
//! in `post`, the verbs the CPU runs (mapped regions, emulation over
//! active messages) in `emulated`, coalesced active messages in `rpc`,
//! what UCX's callbacks reach in `callbacks`, and peer failures in
//! `failure` (the flag) and `peer_loss` (what an endpoint does about one).
//!
//! Mapping:
//! * READ → `ucp_get_nbx`, WRITE → `ucp_put_nbx`, CAS →
//!   `ucp_atomic_op_nbx(CSWAP)`, FAA → `ucp_atomic_op_nbx(ADD)` with a reply
//!   buffer (fetching). Results land in a per-batch staging buffer owned by
//!   the fabric (a passive round's batch may be reused before its verbs
//!   complete), and come back as a `MSG_COMPLETION` message
//!   ([`Posted::Deferred`](super::Posted::Deferred)); a batch whose every operation completed at once
//!   is copied out and answered with `Posted::At(0)`.
//! * RPC → `ucp_am_send_nbx` (eager protocol forced: one AM lane, no
//!   rendezvous), received by the target worker's AM handler during its
//!   `ucp_worker_progress`, i.e. inside its event loop's `receive`.
//!   Messages are coalesced: everything a worker sends to one node within
//!   one turn of its event loop (requests, replies, emulated verb batches
//!   and their answers, of all its coroutines) is queued and leaves as one
//!   active message at the start of the next turn's `receive` or when the
//!   worker goes idle; the receiver splits it and files the parts in
//!   order. Over TCP this is what bounds the system calls: one `sendmsg`
//!   per destination per turn instead of one per message; it is doorbell
//!   batching (DrTM+H §3.2: requests to one QP share one doorbell, which
//!   is why it pays for two-sided RPCs, all of one worker's going to one
//!   queue per peer) applied to the socket. The report keeps the logical
//!   counts and adds the wire messages.
//! * Over shared memory (`--transport shm`, or `auto` with every rank on
//!   one host) one-sided verbs do not go through UCX at all: each worker
//!   maps every node's region into its process (`ucp_rkey_ptr` on the
//!   region UCX allocated in a shared segment) and runs READ, WRITE, CAS
//!   and FAA as word-by-word CPU loads, stores and atomics there — the
//!   [`Region`] semantics of every other fabric, complete when `post`
//!   returns. The reason is correctness, not speed (though it is faster):
//!   UCX's shared-memory PUT is a `memcpy`, and glibc copies 8 or 16 bytes
//!   with two overlapping stores to the same words, so a lock word released
//!   by a WRITE was stored twice, and a peer's CAS that took the lock
//!   between the two stores was wiped out (two holders of one exclusive
//!   lock; `tests/ucx.rs::a_hot_lock_word_is_never_lost`).
//!   It is all nodes or none: if any node's region cannot be mapped,
//!   every verb goes through UCX, since CPU and NIC atomics are not atomic
//!   with each other. The report names this path `cpu/mapped` among the
//!   transports.
//! * Where UCX has no RMA or atomic lane to any other node (TCP) it would
//!   emulate each verb with active messages served by the target's worker,
//!   PUT again by `memcpy`, one round trip per verb plus flushes — and in
//!   UCX 1.13 a software GET whose reply finds the requester's endpoint
//!   failed aborts the *serving* process (`ucs_fatal` in
//!   `ucp_get_req_handler`), so a survivor died with the rank it served.
//!   verbena emulates instead: a doorbell batch travels as one active
//!   message (`MSG_VERBS`) to the target worker of the same index, whose
//!   fabric (`receive`) runs it on the region with the same word-atomic
//!   CPU operations and answers with the results, which become the batch's
//!   completion; a node's own verbs then run on its region directly. One
//!   round trip per batch; AMs of one endpoint arrive in order and are
//!   served in order, so FIFO and passive ACK hold as for RPCs; a batch to
//!   a peer declared dead fails like an RPC to it. The report names this
//!   path `am/verbs`. On RDMA UCX's own lanes carry the verbs.
//!
//! Ordering and completion (what UCP does not give by itself, and what this
//! module adds):
//! * UCP may reorder RMA/AMO operations, even on one endpoint: it may carry
//!   them on different lanes (on shared memory, READ/WRITE by `cma` while
//!   atomics are emulated with active messages), and in UCX 1.13
//!   `ucp_worker_fence` does not order across such lanes. FIFO is therefore
//!   kept by flushing: before a verb to a node, if an earlier operation to
//!   that node may still be incomplete and either of them writes
//!   (WRITE/CAS/FAA), the endpoint is flushed (`ucp_ep_flush_nbx`) and the
//!   flush awaited, progressing the worker meanwhile. READs after READs go
//!   at once. Where operations complete inside their UCX call nothing is
//!   ever pending and nothing waits; elsewhere (RDMA; shared memory and TCP
//!   no longer use this path) a lock round (CAS then READ of the tuple)
//!   costs two round trips where a NIC's QP needs one — the price of
//!   correctness without ordering.
//! * A PUT's completion only means its source buffer is free. A batch with
//!   WRITEs therefore ends with `ucp_ep_flush_nbx`, whose completion means
//!   every earlier operation on the endpoint is remotely complete; with the
//!   flushes above this gives passive ACK (a later batch's completion
//!   implies the earlier ones').
//! * Active messages of one endpoint are delivered in send order (UCP
//!   keeps AM order per endpoint on the eager path), which is the RPC FIFO.
//!
//! Atomic coherence (DrTM §4.2, DrTM+H §5.2): a NIC's atomics are not atomic
//! with the CPU's. With `local_atomics = nic` a node's own verbs go through
//! its loopback endpoint like everyone else's; with `cpu` they run on the
//! region directly — correct only where remote atomics are CPU atomics too
//! (shared memory, and TCP, where UCP emulates them on the target's CPU),
//! which `Config::validate` enforces. On mapped shared memory and with
//! verbena's emulation (TCP) every verb is a CPU operation, so both settings
//! are coherent there. RPC handlers always use CPU atomics, so on RDMA a
//! hybrid that locks the same tuples both one-sided and by RPC is not
//! coherent (the papers' reason to keep one primitive per lock).
//!
//! Faults: over TCP and RDMA endpoints use `UCP_ERR_HANDLING_MODE_PEER`
//! (UCX 1.13's shared-memory transports lack it, so `shm`/`auto` rely on
//! the bootstrap's detection alone); a peer's failure sets
//! the shared [`PeerFailure`] flag with its node, which the process's
//! bootstrap thread turns into an error naming the rank and host (the
//! bootstrap's TCP connections detect dead and hung peers too; see
//! `cluster`). Failed operations still complete their batch (with zeroed
//! results) so no worker waits forever; the run is then abandoned.
//!
//! In a fault-tolerant run (replicated, failure detector on;
//! [`PeerFailure::follow`]) a UCX error only reports its peer unreachable
//! (the fabric does not decide), and each endpoint tracks its outstanding
//! flights and awaited requests. Once the cluster declares a peer dead
//! (`cluster::failover`, read through [`PeerVerdicts`]) they complete at
//! once as `MSG_FAILED` —
//! what the `sim` and `threads` fabrics deliver for a crashed node — for
//! the runtime to fail their rounds, whether or not UCX would ever have
//! completed them (over shared memory it does not: the dead process's
//! mapped segment stays readable, its receive queue just fills); no
//! endpoint waits on a dead peer again (flushes and immediate verbs give
//! up), and later operations to it fail at once.
//!
//! Idle: a worker progresses UCX while it spins, then yields, then sleeps in
//! growing steps of at most 200 µs (UCX's wake-up feature would narrow the
//! transports UCX may choose, so it is not requested). How long it spins
//! depends on the host (`UcxContext::set_host_worker_threads`, which the
//! node calls with what its peers told it): where every worker thread of
//! the host has a core of its own, a worker spins up to
//! `IDLE_SPIN_NS` before it yields, because coalesced messages arrive in
//! bursts with gaps of tens of µs between them and a `sched_yield` per
//! check of a gap costs a system call and the reply's latency; where the
//! host's worker threads outnumber its cores, it spins only briefly, so
//! the peer it waits for gets the core.
//!
//! Invariants: every UCX call on a worker happens on the thread that owns
//! it; a staging buffer is neither moved nor reused while an operation
//! points into it (`Flight`s are boxed and recycled only once `remaining`
//! reaches 0); every request is freed exactly once, in its callback.

mod callbacks;
mod context;
mod emulated;
mod endpoint;
mod failure;
pub mod ffi;
mod host;
mod peer_loss;
mod post;
mod rpc;

use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::ffi::*;
use super::verbs::{VerbKind, MSG_COMPLETION, MSG_FAILED, MSG_REPLY};
use super::{Endpoint, Message, NodeId, Region, Verb, VerbCounters};

use self::callbacks::*;
pub use self::context::{PeerInfo, UcxContext};
pub use self::endpoint::UcxEndpoint;
pub use self::failure::{PeerFailure, PeerVerdicts};
pub use self::host::UcxWorkerHost;
use self::rpc::*;

/// Active-message id of verbena's coalesced messages.
const AM_RPC: u32 = 7;
/// Most payload buffers an endpoint keeps from the runtime
/// ([`Endpoint::recycle`]): a worker's batches and calls in flight at once.
const SPARE_PAYLOADS: usize = 1024;
// The layout of a coalesced message and its size cap are shared with the
// `sim` fabric, which models the same coalescing (`verbs`): the AM header
// (`HEADER_WORDS`: the number of frames), each frame's header
// (`FRAME_HEADER_WORDS`: route and call, then kind, flags and the
// payload's length in words; see `frame_header`), and the outbox size at
// which it leaves at once (`MAX_COALESCED_WORDS`, 64 KiB: one AM stays a
// size the eager protocol carries without a rendezvous).
use super::verbs::{
    COALESCED_HEADER_WORDS as HEADER_WORDS, FRAME_HEADER_WORDS, MAX_COALESCED_WORDS,
};
const SPIN_ROUNDS: u32 = 64;
/// How long an idle worker spins before it yields, where it has a core of
/// its own (module docs, "Idle").
const IDLE_SPIN_NS: u64 = 1_000_000;
const YIELD_BUDGET_NS: u64 = 50_000;
const MAX_SLEEP: Duration = Duration::from_micros(200);
/// Single verbs that skip the fast path after it did not complete at once.
const IMMEDIATE_BACKOFF: u32 = 4096;
/// Longest one `idle` call lasts.
const MAX_IDLE_NS: u64 = 2_000_000;
/// The name [`UcxEndpoint::transports_to`] gives the mapped-memory path of
/// one-sided verbs.
pub const MAPPED_TRANSPORT: &str = "cpu/mapped";
/// The name [`UcxEndpoint::transports_to`] gives one-sided verbs that the
/// target's fabric runs for the sender (see the module docs).
pub const AM_VERBS_TRANSPORT: &str = "am/verbs";
/// Flag of an active message that carries a doorbell batch of verbs to run
/// on the target's region (with `MSG_REPLY`: their results). Never reaches
/// the runtime: the fabric serves and completes these itself.
const MSG_VERBS: u8 = 0x80;
/// Verb codes of a `MSG_VERBS` request: per verb `[code | len << 8, addr]`,
/// then a WRITE's words, a CAS's compare and swap, or an FAA's addend.
const VERB_READ: u64 = 0;
const VERB_WRITE: u64 = 1;
const VERB_CAS: u64 = 2;
const VERB_FAA: u64 = 3;

/// Which transports UCX may use (`--transport`, sets `UCX_TLS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportChoice {
    Shm,
    Tcp,
    Rdma,
    Auto,
}

impl TransportChoice {
    /// Whether endpoints ask for peer-failure reports
    /// (`UCP_ERR_HANDLING_MODE_PEER`). UCX 1.13's shared-memory transports
    /// have no peer-failure handler, so that mode would exclude them: with
    /// `shm` and `auto` a dead peer is detected by the bootstrap alone.
    pub fn peer_errors(self) -> bool {
        matches!(self, TransportChoice::Tcp | TransportChoice::Rdma)
    }

    /// The `UCX_TLS` value; `None` leaves UCX's own choice.
    pub fn tls(self) -> Option<&'static str> {
        match self {
            // `self`: a worker's loopback endpoint.
            TransportChoice::Shm => Some("sm,self"),
            TransportChoice::Tcp => Some("tcp,self"),
            TransportChoice::Rdma => Some("ib,self"),
            TransportChoice::Auto => None,
        }
    }
}

fn check(status: ucs_status_t, what: &str) -> Result<(), String> {
    if status == UCS_OK {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", status_text(status)))
    }
}

/// The UCX version string of the loaded library.
pub fn ucx_version() -> String {
    // SAFETY: returns a static NUL-terminated string.
    unsafe {
        std::ffi::CStr::from_ptr(ucp_get_version_string())
            .to_string_lossy()
            .into_owned()
    }
}
