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
//! Mapping:
//! * READ → `ucp_get_nbx`, WRITE → `ucp_put_nbx`, CAS →
//!   `ucp_atomic_op_nbx(CSWAP)`, FAA → `ucp_atomic_op_nbx(ADD)` with a reply
//!   buffer (fetching). Results land in a per-batch staging buffer owned by
//!   the fabric (a passive round's batch may be reused before its verbs
//!   complete), and come back as a `MSG_COMPLETION` message
//!   ([`Posted::Deferred`]); a batch whose every operation completed at once
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
//! [`PeerFailure::tolerate`]) a UCX error only makes its peer suspected,
//! and each endpoint tracks its outstanding flights and awaited requests.
//! Once the cluster declares a peer dead (`cluster::failover`,
//! [`PeerFailure::mark_dead`]) they complete at once as `MSG_FAILED` —
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

pub mod ffi;

use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::ffi::*;
use super::verbs::{VerbKind, MSG_COMPLETION, MSG_FAILED, MSG_PASSIVE, MSG_REPLY};
use super::{Endpoint, Message, NodeId, Posted, Region, Verb, VerbCounters};

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

/// Peer failures as this process's endpoints see them.
///
/// Without fault tolerance, set once by the first endpoint whose peer
/// failed (`node + 1`, 0 = none) and the run is abandoned. In a
/// fault-tolerant run ([`PeerFailure::tolerate`]) a UCX error only makes
/// its peer *suspected* (the cluster decides; see `cluster::failover`),
/// and once the cluster declares a peer dead ([`PeerFailure::mark_dead`])
/// every endpoint fails what it still has outstanding to it and never
/// waits on it again.
pub struct PeerFailure {
    node_plus_one: AtomicU32,
    status: AtomicU32,
    abandoned: AtomicBool,
    tolerant: AtomicBool,
    /// Per node (bit `node % 64` of word `node / 64`): declared dead.
    dead: Box<[AtomicU64]>,
    /// Bumped by every `mark_dead`; endpoints compare it with what they saw.
    dead_epoch: AtomicU64,
    /// Per node: a UCX error named it (tolerant mode).
    suspected: Box<[AtomicU64]>,
    /// Until when (ns on the endpoints' clock) this process may post, in a
    /// fault-tolerant run (`cluster::bootstrap::Bootstrap::enable_leases`);
    /// `u64::MAX`: no lease.
    lease_until_ns: AtomicU64,
    /// This process was declared failed by its peers (it stops).
    declared_failed: AtomicBool,
}

/// Nodes a [`PeerFailure`] can name (`config::MAX_NODES`).
const DEAD_WORDS: usize = 64;

impl Default for PeerFailure {
    fn default() -> PeerFailure {
        PeerFailure {
            node_plus_one: AtomicU32::new(0),
            status: AtomicU32::new(0),
            abandoned: AtomicBool::new(false),
            tolerant: AtomicBool::new(false),
            dead: (0..DEAD_WORDS).map(|_| AtomicU64::new(0)).collect(),
            dead_epoch: AtomicU64::new(0),
            suspected: (0..DEAD_WORDS).map(|_| AtomicU64::new(0)).collect(),
            lease_until_ns: AtomicU64::new(u64::MAX),
            declared_failed: AtomicBool::new(false),
        }
    }
}

impl PeerFailure {
    /// Makes UCX errors suspicions rather than the end of the run.
    pub fn tolerate(&self) {
        self.tolerant.store(true, Ordering::SeqCst);
    }

    pub fn tolerant(&self) -> bool {
        self.tolerant.load(Ordering::Relaxed)
    }

    /// The cluster declared `node` dead: endpoints fail what they have
    /// outstanding to it and stop waiting on it.
    pub fn mark_dead(&self, node: NodeId) {
        let (word, bit) = (node as usize / 64, node as u64 % 64);
        self.dead[word].fetch_or(1 << bit, Ordering::SeqCst);
        self.dead_epoch.fetch_add(1, Ordering::SeqCst);
    }

    #[inline]
    pub fn is_dead(&self, node: NodeId) -> bool {
        let (word, bit) = (node as usize / 64, node as u64 % 64);
        self.dead[word].load(Ordering::Relaxed) & (1 << bit) != 0
    }

    fn dead_epoch(&self) -> u64 {
        self.dead_epoch.load(Ordering::Acquire)
    }

    /// The nodes a UCX error named (tolerant mode), not yet declared dead.
    pub fn suspected(&self) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        for (word, bits) in self.suspected.iter().enumerate() {
            let bits = bits.load(Ordering::SeqCst);
            for bit in 0..64 {
                let node = (word * 64 + bit) as NodeId;
                if bits & (1 << bit) != 0 && !self.is_dead(node) {
                    nodes.push(node);
                }
            }
        }
        nodes
    }

    /// Sets this process's lease (`u64::MAX`: none). Endpoints post
    /// nothing past it: they wait for a renewal, or for the run to be
    /// abandoned (this rank declared failed), and then fail what they
    /// were to post.
    pub fn set_lease_until(&self, until_ns: u64) {
        self.lease_until_ns.store(until_ns, Ordering::Release);
    }

    #[inline]
    pub fn lease_until_ns(&self) -> u64 {
        self.lease_until_ns.load(Ordering::Acquire)
    }

    /// This process learnt that its peers declared it failed.
    pub fn declare_self_failed(&self) {
        self.declared_failed.store(true, Ordering::SeqCst);
    }

    pub fn declared_failed(&self) -> bool {
        self.declared_failed.load(Ordering::SeqCst)
    }

    /// The run is off: no worker may wait on UCX any more.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::SeqCst);
    }

    pub fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// The failed node and UCX's description, if any failed.
    pub fn get(&self) -> Option<(NodeId, String)> {
        let node = self.node_plus_one.load(Ordering::SeqCst);
        (node != 0).then(|| {
            let status = self.status.load(Ordering::SeqCst) as u8 as i8;
            ((node - 1) as NodeId, status_text(status))
        })
    }

    fn set(&self, node: NodeId, status: ucs_status_t) {
        if self.tolerant() {
            let (word, bit) = (node as usize / 64, node as u64 % 64);
            self.suspected[word].fetch_or(1 << bit, Ordering::SeqCst);
            return;
        }
        if self
            .node_plus_one
            .compare_exchange(0, node as u32 + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.status.store(status as u8 as u32, Ordering::SeqCst);
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

/// The `ucp_context`, cleaned up when the last user (the context, or the
/// registered memory a region still lives in) goes.
struct ContextHandle(ucp_context_h);

// SAFETY: created with `mt_workers_shared`; only init/cleanup touch it
// directly, mem_map/unmap are thread-safe in UCP's MT build.
unsafe impl Send for ContextHandle {}
unsafe impl Sync for ContextHandle {}

impl Drop for ContextHandle {
    fn drop(&mut self) {
        // SAFETY: the last reference: no worker or mapping uses it.
        unsafe { ucp_cleanup(self.0) }
    }
}

/// Memory UCX allocated and registered; unmapped when the region that
/// lives in it is dropped.
struct Mapping {
    context: Arc<ContextHandle>,
    memh: ucp_mem_h,
}

// SAFETY: the handle is only used to unmap, once, on drop.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the region using the memory is being dropped.
        unsafe {
            ucp_mem_unmap(self.context.0, self.memh);
        }
    }
}

/// One process's UCP context and its node's registered region.
pub struct UcxContext {
    context: Arc<ContextHandle>,
    rkey: Vec<u8>,
    region: Arc<Region>,
    pub failure: Arc<PeerFailure>,
    pub epoch: Instant,
    peer_errors: bool,
    /// Whether one-sided verbs may run on peers' regions mapped into this
    /// process (`--transport shm` or `auto`; see the module docs).
    map_peers: bool,
    /// How long this node's idle workers spin before yielding, ns (module
    /// docs, "Idle"); read by each endpoint when it connects.
    idle_spin_ns: AtomicU64,
}

// SAFETY: see `ContextHandle`; the rest is plain data.
unsafe impl Send for UcxContext {}
unsafe impl Sync for UcxContext {}

impl UcxContext {
    /// Initializes UCP for `endpoints` endpoints in all and allocates this
    /// node's region of `region_words` words through `ucp_mem_map`
    /// (`UCP_MEM_MAP_ALLOCATE`): UCX places it where its transports reach
    /// it best — a System V or POSIX shared segment first, so peers on
    /// the same host map it and access it with loads, stores and CPU
    /// atomics, with no CPU of this node involved (true one-sided).
    pub fn new(
        transport: TransportChoice,
        region_words: u64,
        endpoints: usize,
    ) -> Result<UcxContext, String> {
        // SAFETY: plain FFI calls with valid, zero-initialized parameter
        // structs whose layouts `ffi` asserts.
        unsafe {
            let mut config = null_mut();
            check(
                ucp_config_read(null(), null(), &mut config),
                "reading the UCX configuration (ucp_config_read)",
            )?;
            if let Some(tls) = transport.tls() {
                let name = CString::new("TLS").expect("no NUL");
                let value = CString::new(tls).expect("no NUL");
                let status = ucp_config_modify(config, name.as_ptr(), value.as_ptr());
                if status != UCS_OK {
                    ucp_config_release(config);
                    return Err(format!(
                        "setting UCX_TLS={tls} failed: {}",
                        status_text(status)
                    ));
                }
            }
            let mut params: ucp_params_t = std::mem::zeroed();
            params.field_mask = UCP_PARAM_FIELD_FEATURES
                | UCP_PARAM_FIELD_MT_WORKERS_SHARED
                | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
            params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM;
            params.mt_workers_shared = 1;
            params.estimated_num_eps = endpoints;
            let mut raw = null_mut();
            let status = ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &mut raw);
            ucp_config_release(config);
            check(status, "initializing UCX (ucp_init)").map_err(|e| {
                format!(
                    "{e}; transports asked for: {}",
                    transport.tls().unwrap_or("UCX's default")
                )
            })?;
            let context = Arc::new(ContextHandle(raw));
            let bytes = (region_words as usize * 8).max(8);
            let mut map: ucp_mem_map_params_t = std::mem::zeroed();
            map.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
            map.length = bytes;
            map.flags = UCP_MEM_MAP_ALLOCATE;
            let mut memh = null_mut();
            check(
                ucp_mem_map(context.0, &map, &mut memh),
                &format!("allocating {bytes} bytes of registered memory (ucp_mem_map)"),
            )?;
            let mapping = Mapping {
                context: context.clone(),
                memh,
            };
            let mut attr: ucp_mem_attr_t = std::mem::zeroed();
            attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
            check(
                ucp_mem_query(memh, &mut attr),
                "querying the registered memory (ucp_mem_query)",
            )?;
            if attr.address.is_null() || attr.length < bytes || attr.address as usize % 8 != 0 {
                return Err(format!(
                    "UCX allocated {} bytes at {:p}; needed {bytes}, 8-byte aligned",
                    attr.length, attr.address
                ));
            }
            let region = Arc::new(Region::external(
                attr.address as *mut std::sync::atomic::AtomicU64,
                region_words as usize,
                Box::new(mapping),
            ));
            let mut buffer = null_mut();
            let mut size = 0usize;
            check(
                ucp_rkey_pack(context.0, memh, &mut buffer, &mut size),
                "packing the rkey (ucp_rkey_pack)",
            )?;
            let rkey = std::slice::from_raw_parts(buffer as *const u8, size).to_vec();
            ucp_rkey_buffer_release(buffer);
            Ok(UcxContext {
                context,
                rkey,
                region,
                failure: Arc::new(PeerFailure::default()),
                epoch: Instant::now(),
                peer_errors: transport.peer_errors(),
                map_peers: matches!(transport, TransportChoice::Shm | TransportChoice::Auto),
                idle_spin_ns: AtomicU64::new(0),
            })
        }
    }

    /// This node's region (in UCX-registered memory).
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// The packed rkey of this node's region (sent to every peer).
    pub fn rkey(&self) -> &[u8] {
        &self.rkey
    }

    /// The worker threads of every rank on this host, this one's included,
    /// which sets how long the endpoints connected from now on spin when
    /// idle before they yield (module docs, "Idle"): `IDLE_SPIN_NS` (1 ms) where
    /// each has a core, a brief spin only where they outnumber the cores.
    /// Called by the node before its workers connect.
    pub fn set_host_worker_threads(&self, threads: usize) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spin_ns = if threads <= cores { IDLE_SPIN_NS } else { 0 };
        self.idle_spin_ns.store(spin_ns, Ordering::Relaxed);
    }

    /// The virtual address of word 0 of this node's region.
    pub fn base_address(&self) -> u64 {
        self.region.base_ptr() as u64
    }
}

/// What the bootstrap tells each worker about one node.
#[derive(Clone, Debug)]
pub struct PeerInfo {
    /// Address of the worker with this worker's index on that node.
    pub worker_address: Vec<u8>,
    pub rkey: Vec<u8>,
    pub base_address: u64,
}

/// Where callbacks deliver (boxed: its address is handed to UCX).
struct CbState {
    node: NodeId,
    worker: u16,
    inbox: Vec<Message>,
    done: Vec<*mut Flight>,
    pool: Vec<Vec<u64>>,
    sends_done: Vec<*mut SendFlight>,
}

/// What is in flight from one worker to one node, for FIFO (see `order`).
#[derive(Clone, Copy, Debug, Default)]
struct LinkOrder {
    /// An operation that may not have taken effect at the target yet.
    pending: bool,
    /// One of those writes (WRITE, CAS, FAA).
    writes: bool,
}

/// One doorbell batch in flight.
struct Flight {
    state: *mut CbState,
    /// The node its verbs go to.
    target: NodeId,
    /// Failed by `fail_dead_peers` while UCX still held it: leaked, never
    /// delivered again.
    abandoned: bool,
    coroutine: u16,
    tag: u16,
    verbs: u16,
    remaining: u32,
    failed: bool,
    /// Result words of the READ/CAS/FAA verbs in verb order.
    results: Vec<u64>,
    /// WRITE payloads and atomic operands.
    staging: Vec<u64>,
}

/// What the fast path of a single verb did.
enum Immediate {
    Done,
    /// Not taken: the general path posts the verb.
    NotTaken,
    /// Its peer failed (fault-tolerant run): the batch completes as failed.
    Failed,
}

/// One AM send whose buffers UCX still uses.
struct SendFlight {
    state: *mut CbState,
    header: [u64; HEADER_WORDS],
    payload: Vec<u64>,
}

/// Error-handler argument of one endpoint.
struct EpErr {
    node: NodeId,
    failure: Arc<PeerFailure>,
}

unsafe extern "C" fn on_ep_error(arg: *mut c_void, _ep: ucp_ep_h, status: ucs_status_t) {
    // SAFETY: `arg` is the endpoint's boxed `EpErr`, alive while the ep is.
    let err = &*(arg as *const EpErr);
    err.failure.set(err.node, status);
}

unsafe extern "C" fn on_verb_done(request: *mut c_void, status: ucs_status_t, user: *mut c_void) {
    // SAFETY: `user` is the flight the operation belongs to; it is not
    // recycled before `remaining` reaches 0, which only happens here or in
    // `post` after the last immediate completion.
    let flight = &mut *(user as *mut Flight);
    if status != UCS_OK {
        flight.failed = true;
    }
    flight.remaining -= 1;
    if flight.remaining == 0 && !flight.abandoned {
        (*flight.state).done.push(flight);
    }
    ucp_request_free(request);
}

unsafe extern "C" fn on_send_done(request: *mut c_void, _status: ucs_status_t, user: *mut c_void) {
    // SAFETY: `user` is the boxed send flight of this request.
    let send = user as *mut SendFlight;
    (*(*send).state).sends_done.push(send);
    ucp_request_free(request);
}

/// The two header words of one frame (see [`UcxEndpoint::send_am`]).
fn frame_header(msg: &Message) -> [u64; FRAME_HEADER_WORDS] {
    debug_assert!(msg.payload.len() <= u32::MAX as usize);
    [
        ((msg.src_node as u64) << 48)
            | ((msg.src_worker as u64) << 32)
            | ((msg.coroutine as u64) << 16)
            | msg.call as u64,
        ((msg.payload.len() as u64) << 32) | ((msg.kind as u64) << 8) | msg.flags as u64,
    ]
}

unsafe extern "C" fn on_rpc(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const ucp_am_recv_param_t,
) -> ucs_status_t {
    // SAFETY: `arg` is the worker's CbState, used only on its thread (AM
    // callbacks run inside that worker's `ucp_worker_progress`); header and
    // data are valid for the call (read unaligned: UCX does not align them).
    let state = &mut *(arg as *mut CbState);
    if header_length != HEADER_WORDS * 8
        || (*param).recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV != 0
        || length % 8 != 0
    {
        // Not a verbena message (eager is forced on the sending side).
        return UCS_OK;
    }
    let frames = std::ptr::read_unaligned(header as *const u64);
    let words = data as *const u64;
    let total = length / 8;
    let mut at = 0usize;
    for _ in 0..frames {
        if at + FRAME_HEADER_WORDS > total {
            break; // malformed: only a peer built otherwise sends this
        }
        let w0 = std::ptr::read_unaligned(words.add(at));
        let w1 = std::ptr::read_unaligned(words.add(at + 1));
        at += FRAME_HEADER_WORDS;
        let len = (w1 >> 32) as usize;
        if len > total - at {
            break;
        }
        let mut payload = state.pool.pop().unwrap_or_default();
        payload.clear();
        payload.resize(len, 0);
        std::ptr::copy_nonoverlapping(
            words.add(at) as *const u8,
            payload.as_mut_ptr() as *mut u8,
            len * 8,
        );
        at += len;
        state.inbox.push(Message {
            src_node: (w0 >> 48) as NodeId,
            src_worker: (w0 >> 32) as u16,
            dst_node: state.node,
            dst_worker: state.worker,
            coroutine: (w0 >> 16) as u16,
            call: w0 as u16,
            kind: (w1 >> 8) as u16,
            flags: w1 as u8,
            deliver_at_ns: 0,
            payload,
        });
    }
    UCS_OK
}

/// A verbena worker's `ucp_worker`, before the bootstrap connects it.
pub struct UcxWorkerHost {
    worker: ucp_worker_h,
    state: *mut CbState,
    address: Vec<u8>,
}

impl UcxWorkerHost {
    /// Creates the worker of `(node, worker)` on the calling thread.
    pub fn new(context: &UcxContext, node: NodeId, worker: u16) -> Result<UcxWorkerHost, String> {
        // SAFETY: valid parameter structs; the CbState outlives the worker
        // (freed in `UcxEndpoint::drop` after the worker is destroyed).
        unsafe {
            let mut params: ucp_worker_params_t = std::mem::zeroed();
            params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
            params.thread_mode = UCS_THREAD_MODE_SINGLE;
            let mut handle = null_mut();
            check(
                ucp_worker_create(context.context.0, &params, &mut handle),
                "creating a UCX worker (ucp_worker_create)",
            )?;
            let state = Box::into_raw(Box::new(CbState {
                node,
                worker,
                inbox: Vec::with_capacity(64),
                done: Vec::with_capacity(64),
                pool: Vec::new(),
                sends_done: Vec::new(),
            }));
            let mut am: ucp_am_handler_param_t = std::mem::zeroed();
            am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID
                | UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                | UCP_AM_HANDLER_PARAM_FIELD_CB
                | UCP_AM_HANDLER_PARAM_FIELD_ARG;
            am.id = AM_RPC;
            am.flags = UCP_AM_FLAG_WHOLE_MSG;
            am.cb = Some(on_rpc);
            am.arg = state as *mut c_void;
            let status = ucp_worker_set_am_recv_handler(handle, &am);
            if status != UCS_OK {
                ucp_worker_destroy(handle);
                drop(Box::from_raw(state));
                return Err(format!(
                    "registering the RPC handler failed: {}",
                    status_text(status)
                ));
            }
            let mut attr: ucp_worker_attr_t = std::mem::zeroed();
            attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
            let status = ucp_worker_query(handle, &mut attr);
            if status != UCS_OK {
                ucp_worker_destroy(handle);
                drop(Box::from_raw(state));
                return Err(format!(
                    "querying the worker address failed: {}",
                    status_text(status)
                ));
            }
            let address =
                std::slice::from_raw_parts(attr.address as *const u8, attr.address_length).to_vec();
            ucp_worker_release_address(handle, attr.address);
            Ok(UcxWorkerHost {
                worker: handle,
                state,
                address,
            })
        }
    }

    /// This worker's UCP address (sent to every peer).
    pub fn address(&self) -> &[u8] {
        &self.address
    }

    /// Connects to the worker of the same index on every node (`peers`,
    /// by node; this node's own entry gives the loopback endpoint).
    pub fn connect(
        self,
        context: &UcxContext,
        peers: &[PeerInfo],
        local_atomics_cpu: bool,
    ) -> Result<UcxEndpoint, String> {
        let (node, worker) = unsafe { ((*self.state).node, (*self.state).worker) };
        let mut endpoint = UcxEndpoint {
            worker: self.worker,
            state: self.state,
            node,
            worker_index: worker,
            eps: Vec::with_capacity(peers.len()),
            ep_errs: Vec::with_capacity(peers.len()),
            rkeys: Vec::with_capacity(peers.len()),
            bases: peers.iter().map(|p| p.base_address).collect(),
            region: context.region.clone(),
            local_on_cpu: local_atomics_cpu,
            mapped: Vec::new(),
            emulate: false,
            arrivals: Vec::new(),
            failure: context.failure.clone(),
            epoch: context.epoch,
            counters: VerbCounters::default(),
            flights: Vec::new(),
            sends: Vec::new(),
            outbox: vec![Vec::new(); peers.len()],
            outbox_frames: vec![0; peers.len()],
            outstanding: 0,
            links: vec![LinkOrder::default(); peers.len()],
            immediate: vec![0; peers.len()],
            track: context.failure.tolerant(),
            idle_spin_ns: context.idle_spin_ns.load(Ordering::Relaxed),
            in_flight: Vec::new(),
            awaiting: Vec::new(),
            seen_dead_epoch: 0,
        };
        std::mem::forget(self);
        for (peer, info) in peers.iter().enumerate() {
            let err = Box::new(EpErr {
                node: peer as NodeId,
                failure: context.failure.clone(),
            });
            // SAFETY: the address bytes are a UCP worker address from the
            // bootstrap; the error argument is boxed and kept in `ep_errs`.
            unsafe {
                let mut params: ucp_ep_params_t = std::mem::zeroed();
                params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
                params.address = info.worker_address.as_ptr() as *const c_void;
                if context.peer_errors {
                    params.field_mask |=
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
                    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
                    params.err_handler = ucp_err_handler_t {
                        cb: Some(on_ep_error),
                        arg: &*err as *const EpErr as *mut c_void,
                    };
                }
                let mut ep = null_mut();
                check(
                    ucp_ep_create(endpoint.worker, &params, &mut ep),
                    &format!("connecting worker {worker} to node {peer} (ucp_ep_create)"),
                )?;
                endpoint.eps.push(ep);
                endpoint.ep_errs.push(err);
                let mut rkey = null_mut();
                check(
                    ucp_ep_rkey_unpack(ep, info.rkey.as_ptr() as *const c_void, &mut rkey),
                    &format!("unpacking node {peer}'s rkey"),
                )?;
                endpoint.rkeys.push(rkey);
            }
        }
        if context.map_peers {
            endpoint.mapped = endpoint.map_regions();
        }
        endpoint.emulate = !endpoint.maps_regions() && endpoint.rma_is_emulated();
        // Coherent with every peer's verbs, which are CPU operations too.
        endpoint.local_on_cpu |= endpoint.maps_regions() || endpoint.emulate;
        Ok(endpoint)
    }
}

impl Drop for UcxWorkerHost {
    fn drop(&mut self) {
        // SAFETY: never connected (connect forgets self), so nothing else
        // refers to the worker or its state.
        unsafe {
            ucp_worker_destroy(self.worker);
            drop(Box::from_raw(self.state));
        }
    }
}

/// One worker's endpoint on the `ucx` fabric.
pub struct UcxEndpoint {
    worker: ucp_worker_h,
    state: *mut CbState,
    node: NodeId,
    worker_index: u16,
    eps: Vec<ucp_ep_h>,
    /// Boxed: UCX holds their addresses.
    #[allow(clippy::vec_box)]
    ep_errs: Vec<Box<EpErr>>,
    rkeys: Vec<ucp_rkey_h>,
    bases: Vec<u64>,
    region: Arc<Region>,
    /// This node's own verbs run on its region with CPU operations:
    /// `local_atomics = cpu`, or every node's verbs are CPU operations
    /// (mapped regions, verbena's emulation).
    local_on_cpu: bool,
    /// Per node, its region mapped into this process, when every node's is
    /// (one host, shared memory): one-sided verbs then run as CPU loads,
    /// stores and atomics (see the module docs). Empty otherwise.
    mapped: Vec<Region>,
    /// One-sided verbs to other nodes travel as active messages that the
    /// target's fabric runs on its region (TCP; see the module docs).
    emulate: bool,
    /// Scratch for `serve_verbs` (keeps its capacity).
    arrivals: Vec<Message>,
    failure: Arc<PeerFailure>,
    epoch: Instant,
    counters: VerbCounters,
    /// Recycled flights and send records (boxed: UCX holds their
    /// addresses while they are in flight).
    #[allow(clippy::vec_box)]
    flights: Vec<Box<Flight>>,
    #[allow(clippy::vec_box)]
    sends: Vec<Box<SendFlight>>,
    /// Per node: the frames bound for it this turn, sent as one active
    /// message by `flush_outbox` (see `send_am`), and their number.
    outbox: Vec<Vec<u64>>,
    outbox_frames: Vec<u64>,
    /// Flights posted and not yet delivered.
    outstanding: u32,
    /// Per target node: what a later verb may have to wait for.
    links: Vec<LinkOrder>,
    /// Per target node: single verbs to skip before trying the fast path
    /// again (0: try it).
    immediate: Vec<u32>,
    /// Fault-tolerant run: flights and awaited requests are tracked so
    /// that a peer declared dead fails them (`fail_dead_peers`).
    track: bool,
    /// See [`UcxContext::set_host_worker_threads`].
    idle_spin_ns: u64,
    /// Flights posted and not yet delivered (with `track`).
    in_flight: Vec<*mut Flight>,
    /// Requests sent and not yet answered (with `track`).
    awaiting: Vec<Awaited>,
    /// `PeerFailure::dead_epoch` as last handled.
    seen_dead_epoch: u64,
}

/// A request sent to a peer whose reply has not come yet.
#[derive(Clone, Copy, Debug)]
struct Awaited {
    node: NodeId,
    coroutine: u16,
    call: u16,
    kind: u16,
    /// The flags of the failure message that stands in for the answer.
    fail_flags: u8,
    /// A batch of verbs run by the target (`MSG_VERBS`), not an RPC.
    verbs: bool,
}

// SAFETY: an endpoint is created on its worker's thread and used there only;
// `Send` lets the engine hand it to that thread's `Worker` before running.
unsafe impl Send for UcxEndpoint {}

impl UcxEndpoint {
    /// The transports UCX chose for the endpoint to `node` (from
    /// `ucp_ep_print_info`), e.g. `["posix/memory", "cma/memory"]`.
    pub fn transports_to(&self, node: NodeId) -> Vec<String> {
        let text = self.ep_info(node);
        let mut names: Vec<String> = Vec::new();
        for line in text.lines().filter(|l| l.contains("lane[")) {
            // "...lane[0]:  2:posix/memory.0 md1 ..." → "posix/memory"
            for token in line.split_whitespace() {
                let token = token.split_once(':').map_or(token, |(_, t)| t);
                if let Some((tl, device)) = token.split_once('/') {
                    if !tl.is_empty() && tl.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        let device = device.split('.').next().unwrap_or(device);
                        let name = format!("{tl}/{device}");
                        if !names.contains(&name) {
                            names.push(name);
                        }
                        break;
                    }
                }
            }
        }
        if self.maps_regions() {
            // One-sided verbs bypass UCX's RMA lanes for this node.
            names.push(MAPPED_TRANSPORT.to_string());
        } else if self.emulate && node != self.node {
            names.push(AM_VERBS_TRANSPORT.to_string());
        }
        names
    }

    /// Every node's region mapped into this process (`ucp_rkey_ptr`), or
    /// nothing if any node's cannot be (another host, or a transport that
    /// does not map memory): all or none, so that every one-sided verb on a
    /// node's words is a CPU operation, or every one goes through UCX — CPU
    /// atomics and a NIC's are not atomic with each other.
    fn map_regions(&self) -> Vec<Region> {
        let words = self.region.len_words() as usize;
        let mut mapped = Vec::with_capacity(self.rkeys.len());
        for (node, &rkey) in self.rkeys.iter().enumerate() {
            let base = self.bases[node];
            let last = base + (words.max(1) as u64 - 1) * 8;
            let (mut first_ptr, mut last_ptr) = (null_mut(), null_mut());
            // SAFETY: the rkey was unpacked on this worker's endpoint and
            // lives until `drop`, after the views are gone.
            let ok = unsafe {
                ucp_rkey_ptr(rkey, base, &mut first_ptr) == UCS_OK
                    && ucp_rkey_ptr(rkey, last, &mut last_ptr) == UCS_OK
            };
            let contiguous = last_ptr as usize == first_ptr as usize + (last - base) as usize;
            if !ok || first_ptr.is_null() || !contiguous || first_ptr as usize % 8 != 0 {
                return Vec::new();
            }
            // SAFETY: UCX mapped the node's whole registered region here
            // (checked at both ends) and keeps it mapped while the rkey
            // lives; the view is dropped before the rkey is destroyed.
            mapped.push(unsafe { Region::mapped(first_ptr as *mut AtomicU64, words) });
        }
        mapped
    }

    /// Whether one-sided verbs run on mapped memory (see the module docs).
    pub fn maps_regions(&self) -> bool {
        !self.mapped.is_empty()
    }

    /// Whether UCX has no RMA or atomic lane to any other node, so that it
    /// would emulate every one-sided verb with active messages (TCP): then
    /// verbena runs them itself (see the module docs). All or none, as for
    /// mapping.
    fn rma_is_emulated(&self) -> bool {
        let others: Vec<NodeId> = (0..self.eps.len() as NodeId)
            .filter(|&node| node != self.node)
            .collect();
        !others.is_empty()
            && others.iter().all(|&node| {
                let info = self.ep_info(node);
                !info.contains("amo#") && !info.contains(" rma#") && !info.contains(" rma ")
            })
    }

    /// One-sided verbs run for the sender, by this worker (a peer's
    /// `MSG_VERBS` requests), and results of its own (`MSG_VERBS` replies,
    /// turned into the batch's completion). Every other message in
    /// `out[first_new..]` stays, in order.
    fn serve_verbs(&mut self, out: &mut Vec<Message>, first_new: usize) {
        if !out[first_new..].iter().any(|m| m.flags & MSG_VERBS != 0) {
            return;
        }
        let mut arrivals = std::mem::take(&mut self.arrivals);
        arrivals.extend(out.drain(first_new..));
        for msg in arrivals.drain(..) {
            if msg.flags & MSG_VERBS == 0 {
                out.push(msg);
            } else if msg.flags & MSG_REPLY == 0 {
                self.run_for_peer(msg);
            } else {
                self.complete_verbs(msg, out);
            }
        }
        self.arrivals = arrivals;
    }

    /// Runs a peer's batch on this node's region and answers it with the
    /// results of its READs, CASes and FAAs, in verb order.
    fn run_for_peer(&mut self, msg: Message) {
        let mut results = self.state().pool.pop().unwrap_or_default();
        results.clear();
        let words = self.region.len_words();
        let request = &msg.payload;
        let mut at = 0;
        let mut well_formed = true;
        while at + 2 <= request.len() {
            let (code, len, addr) = (request[at] & 0xff, request[at] >> 8, request[at + 1]);
            at += 2;
            let operands = match code {
                VERB_WRITE => len as usize,
                VERB_CAS => 2,
                VERB_FAA => 1,
                _ => 0,
            };
            if code > VERB_FAA
                || at + operands > request.len()
                || addr.checked_add(len).is_none_or(|end| end > words)
            {
                well_formed = false;
                break;
            }
            match code {
                VERB_READ => {
                    let start = results.len();
                    results.resize(start + len as usize, 0);
                    self.region.read(addr, &mut results[start..]);
                }
                VERB_WRITE => self.region.write(addr, &request[at..at + operands]),
                VERB_CAS => results.push(self.region.cas(addr, request[at], request[at + 1])),
                _ => results.push(self.region.faa(addr, request[at])),
            }
            at += operands;
        }
        let well_formed = well_formed && at == request.len();
        let peer = msg.src_node;
        self.state().pool.push(msg.payload);
        if !well_formed {
            // Only a peer built otherwise (another verbena) sends this.
            self.failure.set(peer, UCS_ERR_INVALID_PARAM);
            self.state().pool.push(results);
            return;
        }
        if self.track && self.failure.is_dead(peer) {
            self.state().pool.push(results);
            return;
        }
        self.send_am(Message {
            src_node: self.node,
            src_worker: self.worker_index,
            dst_node: peer,
            dst_worker: msg.src_worker,
            coroutine: msg.coroutine,
            call: msg.call,
            kind: msg.kind,
            flags: MSG_VERBS | MSG_REPLY,
            deliver_at_ns: 0,
            payload: results,
        });
    }

    /// A peer's answer to one of this worker's batches: its completion,
    /// unless the batch was already failed (the peer declared dead).
    fn complete_verbs(&mut self, msg: Message, out: &mut Vec<Message>) {
        if self.track {
            let Some(index) = self.awaiting.iter().position(|a| {
                a.verbs
                    && a.node == msg.src_node
                    && a.coroutine == msg.coroutine
                    && a.call == msg.call
            }) else {
                self.state().pool.push(msg.payload);
                return;
            };
            self.awaiting.swap_remove(index);
        }
        out.push(Message {
            src_node: self.node,
            src_worker: self.worker_index,
            dst_node: self.node,
            dst_worker: self.worker_index,
            coroutine: msg.coroutine,
            call: msg.call,
            kind: msg.kind,
            flags: MSG_COMPLETION,
            deliver_at_ns: 0,
            payload: msg.payload,
        });
    }

    /// Sends a batch to `target` for its fabric to run (`emulate`).
    fn post_to_peer(
        &mut self,
        coroutine: u16,
        tag: u16,
        verbs: &[Verb],
        write_data: &[u64],
        target: NodeId,
    ) {
        let mut payload = self.state().pool.pop().unwrap_or_default();
        payload.clear();
        for verb in verbs {
            debug_assert_eq!(verb.node, target, "a doorbell batch targets one node");
            self.counters.count(verb);
            let len = verb.len as u64;
            let buf = verb.buf as usize;
            match verb.kind {
                VerbKind::Read => payload.extend_from_slice(&[VERB_READ | len << 8, verb.addr]),
                VerbKind::Write => {
                    payload.extend_from_slice(&[VERB_WRITE | len << 8, verb.addr]);
                    payload.extend_from_slice(&write_data[buf..buf + verb.len as usize]);
                }
                VerbKind::Cas => payload.extend_from_slice(&[
                    VERB_CAS | 1 << 8,
                    verb.addr,
                    verb.compare,
                    verb.swap,
                ]),
                VerbKind::Faa => {
                    payload.extend_from_slice(&[VERB_FAA | 1 << 8, verb.addr, verb.compare])
                }
            }
        }
        self.counters.doorbells += 1;
        if self.track {
            self.awaiting.push(Awaited {
                node: target,
                coroutine,
                call: tag,
                kind: verbs.len() as u16,
                fail_flags: MSG_COMPLETION | MSG_FAILED,
                verbs: true,
            });
        }
        self.send_am(Message {
            src_node: self.node,
            src_worker: self.worker_index,
            dst_node: target,
            dst_worker: self.worker_index,
            coroutine,
            call: tag,
            kind: verbs.len() as u16,
            flags: MSG_VERBS,
            deliver_at_ns: 0,
            payload,
        });
    }

    fn ep_info(&self, node: NodeId) -> String {
        // SAFETY: open_memstream/fclose/free from the C library; the ep is
        // live on this thread.
        unsafe {
            let mut buffer: *mut std::ffi::c_char = null_mut();
            let mut size = 0usize;
            let stream = open_memstream(&mut buffer, &mut size);
            if stream.is_null() {
                return String::new();
            }
            ucp_ep_print_info(self.eps[node as usize], stream);
            fclose(stream);
            if buffer.is_null() {
                return String::new();
            }
            let text =
                String::from_utf8_lossy(std::slice::from_raw_parts(buffer as *const u8, size))
                    .into_owned();
            free(buffer as *mut c_void);
            text
        }
    }

    fn state(&mut self) -> &mut CbState {
        // SAFETY: owned by this endpoint, used on its thread; callbacks only
        // run inside `progress`, when no such reference is live.
        unsafe { &mut *self.state }
    }

    fn progress(&mut self) -> u32 {
        let mut events = 0;
        for _ in 0..16 {
            // SAFETY: the worker belongs to this thread.
            let n = unsafe { ucp_worker_progress(self.worker) };
            if n == 0 {
                break;
            }
            events += n;
        }
        let state = self.state;
        // SAFETY: see `state`.
        let sends = unsafe { &mut (*state).sends_done };
        for send in sends.drain(..) {
            // SAFETY: a send flight completed by its callback; boxed by us.
            // Its buffer keeps its capacity for a later outbox.
            let mut send = unsafe { Box::from_raw(send) };
            send.payload.clear();
            self.sends.push(send);
        }
        events
    }

    /// Keeps FIFO towards `node` before posting an operation there: if an
    /// earlier operation to `node` may still be incomplete and either one
    /// writes (WRITE, CAS, FAA), the endpoint is flushed and the flush
    /// awaited first (see the module docs). READs after READs never wait.
    fn order(&mut self, node: NodeId, writes: bool) {
        if self.track && self.failure.is_dead(node) {
            // Nothing to it will ever complete; nothing to order behind.
            self.links[node as usize] = LinkOrder::default();
            return;
        }
        let link = self.links[node as usize];
        if link.pending && (link.writes || writes) {
            self.flush_and_wait(node);
            self.links[node as usize] = LinkOrder::default();
        }
    }

    /// Notes an operation just posted to `node` (`done`: UCX completed it
    /// at once, which for a PUT still only means locally).
    fn posted(&mut self, node: NodeId, writes: bool, done: bool, put: bool) {
        let link = &mut self.links[node as usize];
        if !done || put {
            link.pending = true;
            link.writes |= writes;
        }
    }

    fn flush_and_wait(&mut self, node: NodeId) {
        // SAFETY: the ep and worker belong to this thread; the request is
        // polled to completion (or given up when the run is abandoned,
        // after which the process ends) and freed once.
        unsafe {
            let param: ucp_request_param_t = std::mem::zeroed();
            let status = ucp_ep_flush_nbx(self.eps[node as usize], &param);
            match classify(status) {
                StatusPtr::Done => {}
                StatusPtr::Error(code) => self.failure.set(node, code),
                StatusPtr::Request(request) => {
                    while ucp_request_check_status(request) == UCS_INPROGRESS {
                        if self.failure.abandoned() || self.failure.is_dead(node) {
                            break;
                        }
                        ucp_worker_progress(self.worker);
                    }
                    let code = ucp_request_check_status(request);
                    if code != UCS_OK && code != UCS_INPROGRESS {
                        self.failure.set(node, code);
                    }
                    ucp_request_free(request);
                }
            }
        }
    }

    fn note(flight: &mut Flight, status: ucs_status_ptr_t, failure: &PeerFailure, node: NodeId) {
        match classify(status) {
            StatusPtr::Done => flight.remaining -= 1,
            StatusPtr::Request(_) => {}
            StatusPtr::Error(code) => {
                flight.failed = true;
                flight.remaining -= 1;
                failure.set(node, code);
            }
        }
    }

    /// The fast path of a batch of one READ, CAS or FAA: posted with
    /// `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL` straight into the caller's result
    /// slot, no staging, no completion message. Taken only while nothing
    /// to that node is pending (FIFO holds trivially) and while UCX keeps
    /// completing such operations at once (UCX's shared-memory lanes do,
    /// where they carry verbs). If UCX answers with a
    /// request anyway (a connection still being set up, a transport that
    /// completes later), it is awaited here — the caller's buffer must not
    /// outlive the call — and the fast path rests for that node for the
    /// next `IMMEDIATE_BACKOFF` single verbs.
    fn try_immediate(&mut self, verb: &Verb, results: &mut [u64]) -> Immediate {
        let node = verb.node as usize;
        if verb.kind == VerbKind::Write
            || self.links[node].pending
            || (verb.node == self.node && self.local_on_cpu)
        {
            return Immediate::NotTaken;
        }
        if self.immediate[node] > 0 {
            self.immediate[node] -= 1;
            return Immediate::NotTaken;
        }
        let ep = self.eps[node];
        let rkey = self.rkeys[node];
        let remote = self.bases[node] + verb.addr * 8;
        let buf = verb.buf as usize;
        // SAFETY: the result slot is the caller's and outlives this call,
        // which does not return before UCX is done with it.
        let status = unsafe {
            let mut param: ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
            match verb.kind {
                VerbKind::Read => {
                    let out = &mut results[buf..buf + verb.len as usize];
                    ucp_get_nbx(
                        ep,
                        out.as_mut_ptr() as *mut c_void,
                        out.len() * 8,
                        remote,
                        rkey,
                        &param,
                    )
                }
                _ => {
                    let operand = if verb.kind == VerbKind::Cas {
                        results[buf] = verb.swap;
                        verb.compare
                    } else {
                        verb.compare
                    };
                    param.op_attr_mask |=
                        UCP_OP_ATTR_FIELD_REPLY_BUFFER | UCP_OP_ATTR_FIELD_DATATYPE;
                    param.reply_buffer = &mut results[buf] as *mut u64 as *mut c_void;
                    param.datatype = DATATYPE_WORD;
                    let opcode = if verb.kind == VerbKind::Cas {
                        UCP_ATOMIC_OP_CSWAP
                    } else {
                        UCP_ATOMIC_OP_ADD
                    };
                    ucp_atomic_op_nbx(
                        ep,
                        opcode,
                        &operand as *const u64 as *const c_void,
                        1,
                        remote,
                        rkey,
                        &param,
                    )
                }
            }
        };
        match classify(status) {
            StatusPtr::Done => {}
            // Cannot complete at once now: take the general path.
            StatusPtr::Error(code) if code == UCS_ERR_NO_RESOURCE => return Immediate::NotTaken,
            // Anything else (e.g. the flag unsupported on this transport):
            // the general path, from now on; it reports real failures.
            StatusPtr::Error(_) => {
                self.immediate[node] = IMMEDIATE_BACKOFF;
                return Immediate::NotTaken;
            }
            StatusPtr::Request(request) => {
                self.immediate[node] = IMMEDIATE_BACKOFF;
                let mut code = UCS_INPROGRESS;
                // SAFETY: polled to completion on this thread, freed once
                // (a request given up on a dead peer is freed in progress:
                // UCX completes it, into a result slot the round no longer
                // reads, since the round fails).
                unsafe {
                    while code == UCS_INPROGRESS
                        && !self.failure.abandoned()
                        && !self.failure.is_dead(verb.node)
                    {
                        ucp_worker_progress(self.worker);
                        code = ucp_request_check_status(request);
                    }
                    ucp_request_free(request);
                }
                if code != UCS_OK {
                    // Never completed (a dead peer, an abandoned run) or
                    // failed: its result slot holds no answer.
                    self.counters.count(verb);
                    return Immediate::Failed;
                }
            }
        }
        self.counters.count(verb);
        self.counters.doorbells += 1;
        self.counters.wire_messages += 1;
        self.counters.wire_bytes += verb.wire_bytes();
        Immediate::Done
    }

    /// Completes a batch to a dead (or failing) `target` as failed.
    fn fail_now(&mut self, coroutine: u16, tag: u16, verbs: usize, target: NodeId) {
        let message = self.failed_completion(coroutine, tag, verbs as u16, target);
        self.state().inbox.push(message);
    }

    fn failed_completion(
        &mut self,
        coroutine: u16,
        tag: u16,
        verbs: u16,
        target: NodeId,
    ) -> Message {
        let payload = self.state().pool.pop().unwrap_or_default();
        Message {
            src_node: target,
            src_worker: self.worker_index,
            dst_node: self.node,
            dst_worker: self.worker_index,
            coroutine,
            call: tag,
            kind: verbs,
            flags: MSG_COMPLETION | MSG_FAILED,
            deliver_at_ns: 0,
            payload,
        }
    }

    /// Whether this process may post now: its lease (if it has one) has
    /// not run out, or was renewed while it waited here. `false` once the
    /// run is abandoned — this rank was declared failed, and must not act
    /// on the survivors' memory any more.
    #[inline]
    fn leased(&self) -> bool {
        let until = self.failure.lease_until_ns();
        until == u64::MAX || self.now_ns() < until || self.wait_for_lease()
    }

    #[cold]
    fn wait_for_lease(&self) -> bool {
        loop {
            if self.failure.abandoned() {
                return false;
            }
            if self.now_ns() < self.failure.lease_until_ns() {
                return true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Drops the messages in `out[first_new..]` that peers declared dead
    /// sent: a process the cluster failed over may still be running (it
    /// was frozen, or its connections stalled, long enough to be declared)
    /// and must not act on the survivors — its requests are not served,
    /// and its replies come to requests already failed (`awaiting` no
    /// longer has them) or about to be (`fail_dead_peers`). The failure
    /// completions this endpoint makes itself carry `MSG_FAILED` and stay.
    /// The order of the rest is kept.
    fn drop_from_dead_peers(&mut self, out: &mut Vec<Message>, first_new: usize) {
        let mut keep = first_new;
        for read in first_new..out.len() {
            let msg = &mut out[read];
            if msg.src_node != self.node
                && msg.flags & MSG_FAILED == 0
                && self.failure.is_dead(msg.src_node)
            {
                let payload = std::mem::take(&mut msg.payload);
                self.state().pool.push(payload);
            } else {
                out.swap(keep, read);
                keep += 1;
            }
        }
        out.truncate(keep);
    }

    /// After the cluster declared peers dead: every request still awaiting
    /// their reply and every flight still outstanding to them completes
    /// now, as failed (the runtime then fails the rounds); a flight UCX
    /// still holds is leaked rather than recycled under it.
    fn fail_dead_peers(&mut self) {
        let epoch = self.failure.dead_epoch();
        if !self.track || epoch == self.seen_dead_epoch {
            return;
        }
        self.seen_dead_epoch = epoch;
        let mut index = 0;
        while index < self.awaiting.len() {
            let awaited = self.awaiting[index];
            if !self.failure.is_dead(awaited.node) {
                index += 1;
                continue;
            }
            self.awaiting.swap_remove(index);
            let mut payload = self.state().pool.pop().unwrap_or_default();
            payload.clear();
            let message = Message {
                src_node: awaited.node,
                src_worker: self.worker_index,
                dst_node: self.node,
                dst_worker: self.worker_index,
                coroutine: awaited.coroutine,
                call: awaited.call,
                kind: awaited.kind,
                flags: awaited.fail_flags,
                deliver_at_ns: 0,
                payload,
            };
            self.state().inbox.push(message);
        }
        let mut index = 0;
        while index < self.in_flight.len() {
            let raw = self.in_flight[index];
            // SAFETY: a tracked flight is live until delivered or abandoned
            // (callbacks only run inside `progress`, not now).
            let (target, coroutine, tag, verbs) =
                unsafe { ((*raw).target, (*raw).coroutine, (*raw).tag, (*raw).verbs) };
            if !self.failure.is_dead(target) {
                index += 1;
                continue;
            }
            self.in_flight.swap_remove(index);
            // SAFETY: as above; from now on its callbacks never deliver it.
            unsafe { (*raw).abandoned = true };
            self.outstanding -= 1;
            let message = self.failed_completion(coroutine, tag, verbs, target);
            self.state().inbox.push(message);
        }
        for node in 0..self.links.len() {
            if self.failure.is_dead(node as NodeId) {
                self.links[node] = LinkOrder::default();
            }
        }
    }

    /// Runs a batch on `region` with CPU loads, stores and atomics, word by
    /// word (this node's own region with `local_atomics = cpu`, or a mapped
    /// one): complete when it returns.
    fn run_on(
        region: &Region,
        counters: &mut VerbCounters,
        verbs: &[Verb],
        write_data: &[u64],
        results: &mut [u64],
    ) {
        for verb in verbs {
            counters.count(verb);
            region.apply(verb, write_data, results);
        }
        counters.doorbells += 1;
    }

    /// Queues `msg` for its node (no bookkeeping: see `send`). Everything
    /// bound for one node within one turn of the event loop leaves as one
    /// active message (`flush_outbox`, at the next `receive` or `idle`):
    /// frames of `[frame_header, payload]`, which the receiver splits and
    /// files in order. One AM endpoint carries the frames in the order they
    /// were queued, so the FIFO of RPCs and of emulated verbs holds, and a
    /// failed peer fails every frame of the message alike (each request is
    /// tracked on its own in `awaiting`). The logical counts (RPCs,
    /// doorbells) are kept where the messages are made; `wire_messages`
    /// and `wire_bytes` count what leaves.
    fn send_am(&mut self, msg: Message) {
        let node = msg.dst_node as usize;
        let outbox = &mut self.outbox[node];
        outbox.extend_from_slice(&frame_header(&msg));
        outbox.extend_from_slice(&msg.payload);
        self.outbox_frames[node] += 1;
        self.state().pool.push(msg.payload);
        if self.outbox[node].len() >= MAX_COALESCED_WORDS {
            self.flush_node(node as NodeId);
        }
    }

    /// Sends every node's queued frames (see `send_am`).
    fn flush_outbox(&mut self) {
        for node in 0..self.outbox.len() {
            if self.outbox_frames[node] > 0 {
                self.flush_node(node as NodeId);
            }
        }
    }

    /// Sends the frames queued for `node` as one active message.
    fn flush_node(&mut self, node: NodeId) {
        let mut send = self.sends.pop().unwrap_or_else(|| {
            Box::new(SendFlight {
                state: self.state,
                header: [0; HEADER_WORDS],
                payload: Vec::new(),
            })
        });
        send.header = [std::mem::take(&mut self.outbox_frames[node as usize])];
        debug_assert!(send.payload.is_empty());
        std::mem::swap(&mut send.payload, &mut self.outbox[node as usize]);
        self.counters.wire_messages += 1;
        self.counters.wire_bytes += 8 * (HEADER_WORDS + send.payload.len()) as u64;
        let ep = self.eps[node as usize];
        let raw = Box::into_raw(send);
        // SAFETY: header and payload live in the boxed send flight until the
        // completion callback (or now, if it completed at once).
        let status = unsafe {
            let mut param: ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask =
                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
            param.cb = Some(on_send_done);
            param.user_data = raw as *mut c_void;
            param.flags = UCP_AM_SEND_FLAG_EAGER;
            ucp_am_send_nbx(
                ep,
                AM_RPC,
                (*raw).header.as_ptr() as *const c_void,
                HEADER_WORDS * 8,
                (*raw).payload.as_ptr() as *const c_void,
                (*raw).payload.len() * 8,
                &param,
            )
        };
        match classify(status) {
            StatusPtr::Request(_) => {}
            other => {
                if let StatusPtr::Error(code) = other {
                    self.failure.set(node, code);
                }
                // SAFETY: UCX no longer refers to the buffers.
                let mut send = unsafe { Box::from_raw(raw) };
                send.payload.clear();
                self.sends.push(send);
            }
        }
    }
}

impl Endpoint for UcxEndpoint {
    fn node(&self) -> NodeId {
        self.node
    }

    fn worker(&self) -> u16 {
        self.worker_index
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn post(
        &mut self,
        coroutine: u16,
        tag: u16,
        verbs: &[Verb],
        write_data: &[u64],
        results: &mut [u64],
    ) -> Posted {
        let Some(first) = verbs.first() else {
            return Posted::At(0);
        };
        let target = first.node;
        if target == self.node && self.local_on_cpu {
            Self::run_on(&self.region, &mut self.counters, verbs, write_data, results);
            return Posted::At(0);
        }
        if self.track && (self.failure.is_dead(target) || !self.leased()) {
            self.fail_now(coroutine, tag, verbs.len(), target);
            return Posted::Deferred;
        }
        if let Some(region) = self.mapped.get(target as usize) {
            Self::run_on(region, &mut self.counters, verbs, write_data, results);
            return Posted::At(0);
        }
        if self.emulate {
            self.post_to_peer(coroutine, tag, verbs, write_data, target);
            return Posted::Deferred;
        }
        if verbs.len() == 1 {
            match self.try_immediate(&verbs[0], results) {
                Immediate::Done => return Posted::At(0),
                Immediate::Failed => {
                    self.fail_now(coroutine, tag, 1, target);
                    return Posted::Deferred;
                }
                Immediate::NotTaken => {}
            }
        }
        let mut flight = self.flights.pop().unwrap_or_else(|| {
            Box::new(Flight {
                state: self.state,
                target,
                abandoned: false,
                coroutine: 0,
                tag: 0,
                verbs: 0,
                remaining: 0,
                failed: false,
                results: Vec::new(),
                staging: Vec::new(),
            })
        });
        // Size both buffers before any operation points into them.
        let mut result_words = 0usize;
        let mut staging_words = 0usize;
        let mut writes = false;
        for verb in verbs {
            debug_assert_eq!(verb.node, target, "a doorbell batch targets one node");
            match verb.kind {
                VerbKind::Read => result_words += verb.len as usize,
                VerbKind::Write => {
                    staging_words += verb.len as usize;
                    writes = true;
                }
                VerbKind::Cas | VerbKind::Faa => {
                    result_words += 1;
                    staging_words += 1;
                }
            }
        }
        flight.target = target;
        flight.abandoned = false;
        flight.coroutine = coroutine;
        flight.tag = tag;
        flight.verbs = verbs.len() as u16;
        flight.failed = false;
        flight.results.clear();
        flight.results.resize(result_words, 0);
        flight.staging.clear();
        flight.staging.resize(staging_words, 0);
        // One for every operation plus a guard released at the end.
        flight.remaining = verbs.len() as u32 + writes as u32 + 1;
        let ep = self.eps[target as usize];
        let rkey = self.rkeys[target as usize];
        let base = self.bases[target as usize];
        let flight_ptr: *mut Flight = &mut *flight;
        // SAFETY: param structs are valid; buffers point into the boxed
        // flight's vectors, sized above and not touched until it completes.
        unsafe {
            // RMA counts bytes (UCP supports only ucp_dt_make_contig(1)
            // there); atomics count 8-byte elements.
            let mut param: ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
            param.cb = Some(on_verb_done);
            param.user_data = flight_ptr as *mut c_void;
            let results_ptr = (*flight_ptr).results.as_mut_ptr();
            let staging_ptr = (*flight_ptr).staging.as_mut_ptr();
            let mut at_result = 0usize;
            let mut at_staging = 0usize;
            for verb in verbs {
                self.counters.count(verb);
                self.counters.wire_messages += 1;
                self.counters.wire_bytes += verb.wire_bytes();
                let remote = base + verb.addr * 8;
                let len = verb.len as usize;
                let status = match verb.kind {
                    VerbKind::Read => {
                        self.order(target, false);
                        let out = results_ptr.add(at_result);
                        at_result += len;
                        ucp_get_nbx(ep, out as *mut c_void, len * 8, remote, rkey, &param)
                    }
                    VerbKind::Write => {
                        self.order(target, true);
                        let buf = verb.buf as usize;
                        let src = staging_ptr.add(at_staging);
                        std::ptr::copy_nonoverlapping(
                            write_data[buf..buf + len].as_ptr(),
                            src,
                            len,
                        );
                        at_staging += len;
                        ucp_put_nbx(ep, src as *const c_void, len * 8, remote, rkey, &param)
                    }
                    VerbKind::Cas | VerbKind::Faa => {
                        self.order(target, true);
                        let operand = staging_ptr.add(at_staging);
                        let reply = results_ptr.add(at_result);
                        at_staging += 1;
                        at_result += 1;
                        // CSWAP: `buffer` holds the expected value, the
                        // reply buffer the new one and then the old value.
                        let opcode = if verb.kind == VerbKind::Cas {
                            *operand = verb.compare;
                            *reply = verb.swap;
                            UCP_ATOMIC_OP_CSWAP
                        } else {
                            *operand = verb.compare;
                            UCP_ATOMIC_OP_ADD
                        };
                        let mut atomic = std::ptr::read(&param);
                        atomic.op_attr_mask |=
                            UCP_OP_ATTR_FIELD_REPLY_BUFFER | UCP_OP_ATTR_FIELD_DATATYPE;
                        atomic.datatype = DATATYPE_WORD;
                        atomic.reply_buffer = reply as *mut c_void;
                        ucp_atomic_op_nbx(
                            ep,
                            opcode,
                            operand as *const c_void,
                            1,
                            remote,
                            rkey,
                            &atomic,
                        )
                    }
                };
                let done = !matches!(classify(status), StatusPtr::Request(_));
                let put = verb.kind == VerbKind::Write;
                self.posted(target, verb.kind != VerbKind::Read, done, put);
                Self::note(&mut *flight_ptr, status, &self.failure, target);
            }
            if writes {
                // Remote completion of the PUTs (and, by the flushes, of
                // everything before them on this endpoint).
                let status = ucp_ep_flush_nbx(ep, &param);
                Self::note(&mut *flight_ptr, status, &self.failure, target);
                if !matches!(classify(status), StatusPtr::Request(_)) {
                    // Flushed at once: everything before is remotely done.
                    self.links[target as usize] = LinkOrder::default();
                }
            }
        }
        self.counters.doorbells += 1;
        flight.remaining -= 1; // the guard
        if flight.remaining == 0 && !flight.failed {
            // Everything completed at once: hand the results over now.
            let mut from = 0;
            for verb in verbs {
                if verb.kind != VerbKind::Write {
                    let len = verb.len as usize;
                    let at = verb.buf as usize;
                    results[at..at + len].copy_from_slice(&flight.results[from..from + len]);
                    from += len;
                }
            }
            self.flights.push(flight);
            return Posted::At(0);
        }
        self.outstanding += 1;
        let raw = Box::into_raw(flight);
        if self.track {
            self.in_flight.push(raw);
        }
        // SAFETY: raw is a live flight; if it already completed (all
        // immediate but failed) deliver it through the done list.
        unsafe {
            if (*raw).remaining == 0 {
                (*self.state).done.push(raw);
            }
        }
        Posted::Deferred
    }

    fn send(&mut self, msg: Message) {
        if msg.flags & MSG_REPLY == 0 {
            self.counters.rpc += 1;
            self.counters.rpc_request_bytes += 8 * msg.payload.len() as u64;
        }
        if msg.dst_node == self.node && msg.dst_worker == self.worker_index {
            self.state().inbox.push(msg);
            return;
        }
        debug_assert_eq!(
            msg.dst_worker, self.worker_index,
            "RPCs go to the worker of the same index"
        );
        let request = msg.flags & MSG_REPLY == 0;
        if self.track {
            if self.failure.is_dead(msg.dst_node) || !self.leased() {
                if request {
                    // Bounced at once, as a dead peer's would be.
                    let mut msg = msg;
                    std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
                    std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
                    msg.flags |= MSG_REPLY | MSG_FAILED;
                    self.state().inbox.push(msg);
                } else {
                    self.state().pool.push(msg.payload);
                }
                return;
            }
            if request {
                self.awaiting.push(Awaited {
                    node: msg.dst_node,
                    coroutine: msg.coroutine,
                    call: msg.call,
                    kind: msg.kind,
                    fail_flags: (msg.flags & (MSG_PASSIVE | MSG_COMPLETION))
                        | MSG_REPLY
                        | MSG_FAILED,
                    verbs: false,
                });
            }
        }
        self.send_am(msg);
    }

    fn receive(&mut self, out: &mut Vec<Message>) {
        // The previous turn's messages leave now, one per destination.
        self.flush_outbox();
        self.progress();
        let state = self.state;
        // SAFETY: see `state`; no callback runs during this block.
        unsafe {
            let first_new = out.len();
            out.append(&mut (*state).inbox);
            if self.track && self.failure.dead_epoch() > 0 {
                self.drop_from_dead_peers(out, first_new);
            }
            if self.emulate {
                self.serve_verbs(out, first_new);
            }
            if self.track {
                for msg in &out[first_new..] {
                    if msg.flags & MSG_REPLY != 0 && msg.src_node != self.node {
                        if let Some(index) = self.awaiting.iter().position(|a| {
                            !a.verbs
                                && a.node == msg.src_node
                                && a.coroutine == msg.coroutine
                                && a.call == msg.call
                        }) {
                            self.awaiting.swap_remove(index);
                        }
                    }
                }
            }
            for raw in (*state).done.drain(..) {
                if self.track {
                    if let Some(index) = self.in_flight.iter().position(|&f| f == raw) {
                        self.in_flight.swap_remove(index);
                    }
                }
                let mut flight = Box::from_raw(raw);
                let mut payload = (*state).pool.pop().unwrap_or_default();
                payload.clear();
                // Fault-tolerant: a failed batch is `MSG_FAILED` from its
                // target, which the runtime holds until the peer is
                // declared dead, then fails the round.
                let failed = flight.failed && self.track;
                if failed {
                    // No results: the runtime fails the round.
                    payload.clear();
                } else if flight.failed {
                    // The run is being abandoned (PeerFailure is set); zeros
                    // keep the worker from waiting forever meanwhile.
                    payload.resize(flight.results.len(), 0);
                } else {
                    payload.extend_from_slice(&flight.results);
                }
                out.push(Message {
                    src_node: if failed { flight.target } else { self.node },
                    src_worker: self.worker_index,
                    dst_node: self.node,
                    dst_worker: self.worker_index,
                    coroutine: flight.coroutine,
                    call: flight.tag,
                    kind: flight.verbs,
                    flags: if failed {
                        MSG_COMPLETION | MSG_FAILED
                    } else {
                        MSG_COMPLETION
                    },
                    deliver_at_ns: 0,
                    payload,
                });
                flight.remaining = 0;
                self.flights.push(flight);
                self.outstanding -= 1;
            }
        }
        if self.track {
            self.fail_dead_peers();
            out.append(&mut self.state().inbox);
        }
        if self.outstanding == 0 {
            // Every operation posted so far has completed (PUTs included:
            // a batch with PUTs completes with its flush).
            for link in self.links.iter_mut() {
                *link = LinkOrder::default();
            }
        }
    }

    fn spend_cpu(&mut self, ns: u64) {
        if ns == 0 {
            return;
        }
        let until = self.now_ns() + ns;
        while self.now_ns() < until {
            std::hint::spin_loop();
        }
    }

    fn idle(&mut self, wake_at_ns: Option<u64>) {
        self.flush_outbox();
        let ready = |endpoint: &mut Self| {
            let events = endpoint.progress();
            let state = endpoint.state();
            events > 0
                || !state.inbox.is_empty()
                || !state.done.is_empty()
                || wake_at_ns.is_some_and(|t| endpoint.now_ns() >= t)
                || (endpoint.track && endpoint.failure.dead_epoch() != endpoint.seen_dead_epoch)
        };
        for _ in 0..SPIN_ROUNDS {
            if ready(self) {
                return;
            }
            std::hint::spin_loop();
        }
        if self.idle_spin_ns > 0 {
            let spin_until = self.now_ns() + self.idle_spin_ns;
            while self.now_ns() < spin_until {
                if ready(self) {
                    return;
                }
                std::hint::spin_loop();
            }
        }
        let yield_until = self.now_ns() + YIELD_BUDGET_NS;
        while self.now_ns() < yield_until {
            std::thread::yield_now();
            if ready(self) {
                return;
            }
        }
        // Return now and then even with nothing to do: the caller may have
        // been told to stop (the end of a run is not a message).
        let give_up_at = self.now_ns() + MAX_IDLE_NS;
        let mut sleep = Duration::from_micros(5);
        while self.now_ns() < give_up_at {
            let sleep_now = match wake_at_ns {
                Some(t) => sleep.min(Duration::from_nanos(t.saturating_sub(self.now_ns()))),
                None => sleep,
            };
            std::thread::sleep(sleep_now);
            if ready(self) || self.failure.get().is_some() || self.failure.abandoned() {
                return;
            }
            sleep = (sleep * 2).min(MAX_SLEEP);
        }
    }

    fn counters(&self) -> &VerbCounters {
        &self.counters
    }

    fn recycle(&mut self, buffer: Vec<u64>) {
        let pool = &mut self.state().pool;
        if pool.len() < SPARE_PAYLOADS {
            pool.push(buffer);
        }
    }
}

impl Drop for UcxEndpoint {
    fn drop(&mut self) {
        // SAFETY: on the owning thread; requests of a forced close need only
        // local progress. Flights still outstanding (a failed run) are
        // leaked rather than freed under UCX.
        unsafe {
            // Whatever the last turn queued, the peers may still wait for.
            self.flush_outbox();
            for _ in 0..16 {
                ucp_worker_progress(self.worker);
            }
            // The mapped views go before the rkeys that keep them mapped.
            self.mapped.clear();
            for &rkey in &self.rkeys {
                ucp_rkey_destroy(rkey);
            }
            for &ep in &self.eps {
                let mut param: ucp_request_param_t = std::mem::zeroed();
                param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
                param.flags = UCP_EP_CLOSE_FLAG_FORCE;
                let status = ucp_ep_close_nbx(ep, &param);
                if let StatusPtr::Request(request) = classify(status) {
                    let deadline = Instant::now() + Duration::from_secs(1);
                    while ucp_request_check_status(request) == UCS_INPROGRESS
                        && Instant::now() < deadline
                    {
                        ucp_worker_progress(self.worker);
                    }
                    ucp_request_free(request);
                }
            }
            if self.outstanding == 0 {
                ucp_worker_destroy(self.worker);
                drop(Box::from_raw(self.state));
            }
        }
        self.ep_errs.clear();
    }
}
