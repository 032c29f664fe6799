//! What a coroutine posts: one-sided verbs and RPC messages, and the
//! per-coroutine [`Batch`] that collects them between two awaits.
//!
//! A coroutine queues verbs and RPCs into its batch, then awaits the whole
//! round once (`runtime`). Consecutive verbs to the same node form one
//! doorbell batch (one MMIO on real hardware, DrTM+H §3.2); batches to
//! several nodes are in flight together (outstanding requests). Results land
//! in the batch's arenas, addressed by the ids returned when queueing.
//!
//! No allocation in steady state: the arenas keep their capacity across
//! rounds, and RPC payload vectors circulate between workers (a request's
//! vector comes back as its reply) and return to the worker's pool.

use serde::Serialize;

use super::NodeId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerbKind {
    Read,
    Write,
    Cas,
    Faa,
}

/// One one-sided verb against `node`'s registered memory.
#[derive(Clone, Copy, Debug)]
pub struct Verb {
    pub kind: VerbKind,
    pub node: NodeId,
    /// Word address in the target region.
    pub addr: u64,
    /// Words read or written (1 for atomics).
    pub len: u32,
    /// Read/Cas/Faa: offset of the result in `results`; Write: offset of the
    /// payload in `write_data`.
    pub buf: u32,
    /// Cas: expected value; Faa: addend.
    pub compare: u64,
    /// Cas: new value.
    pub swap: u64,
}

impl Verb {
    /// Bytes this verb puts on the wire, request and response together: a
    /// 16-byte descriptor (operation, address, length), plus the data it
    /// writes or reads, or an atomic's operands and old value.
    pub fn wire_bytes(&self) -> u64 {
        16 + match self.kind {
            VerbKind::Read | VerbKind::Write => 8 * self.len as u64,
            VerbKind::Cas => 24,
            VerbKind::Faa => 16,
        }
    }
}

/// One doorbell batch as a coroutine posts it (`Endpoint::post`): its
/// verbs, all to one node and executed in order, the words its WRITEs
/// carry (addressed by each WRITE's `buf`), and the tag a deferred
/// completion echoes.
#[derive(Clone, Copy, Debug)]
pub struct Doorbell<'a> {
    pub coroutine: u16,
    pub tag: u16,
    pub verbs: &'a [Verb],
    pub write_data: &'a [u64],
}

/// Handle of a queued verb, valid until the batch is cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerbId(pub u32);

/// Handle of a queued RPC, valid until the batch is cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallId(pub u16);

pub const MSG_REPLY: u8 = 1;
/// The sender does not wait for the reply (passive ACK, DrTM+H §3.2): the
/// reply only returns the payload buffer and is absorbed by the event loop.
pub const MSG_PASSIVE: u8 = 2;
/// The deferred completion of a doorbell batch (`Posted::Deferred`), sent
/// by a backend to the posting worker itself.
pub const MSG_COMPLETION: u8 = 4;
/// A completion or RPC that did not reach its peer because the peer has
/// failed (`recovery`): set by a backend on a deferred completion whose verbs
/// were lost to a crashed node (`src_node` is that node), or on a request
/// bounced back to its sender (`MSG_REPLY` also set, source and destination
/// swapped, so `src_node` is again the failed node). The runtime holds it
/// until its node's membership declares that peer dead, then fails the
/// waiting round (see `runtime`).
pub const MSG_FAILED: u8 = 8;
/// With `MSG_FAILED | MSG_REPLY`: a request its server refused to keep
/// waiting (a replicated run pausing for a failover, `recovery::failover`)
/// rather than one bounced by a dead peer; the requester fails the round at
/// once.
pub const MSG_REFUSED: u8 = 16;

/// An RPC request or reply between two workers.
#[derive(Debug)]
pub struct Message {
    pub src_node: NodeId,
    pub src_worker: u16,
    pub dst_node: NodeId,
    pub dst_worker: u16,
    /// The requesting coroutine and its call, echoed in the reply.
    pub coroutine: u16,
    pub call: u16,
    /// Handler kind (requests); echoed in replies.
    pub kind: u16,
    pub flags: u8,
    /// Earliest time the receiver may see it (injected latency).
    pub deliver_at_ns: u64,
    pub payload: Vec<u64>,
}

impl Message {
    /// Bytes of this message on the wire: a 16-byte header (route, call,
    /// kind, flags, length) and the payload — one frame of a coalesced
    /// wire message.
    pub fn wire_bytes(&self) -> u64 {
        8 * (FRAME_HEADER_WORDS + self.payload.len()) as u64
    }

    /// Words of this message's frame in a coalesced wire message.
    pub fn frame_words(&self) -> usize {
        FRAME_HEADER_WORDS + self.payload.len()
    }
}

/// Words of a coalesced wire message's own header: the number of frames
/// it carries. Everything one worker sends to one node within one turn of
/// its event loop leaves as one such message, `[header, frame...]`, each
/// frame `[frame header, payload]` (the `ucx` fabric sends it; `sim`
/// models its cost).
pub const COALESCED_HEADER_WORDS: usize = 1;
/// Words of one frame's header: route and call, then kind, flags and the
/// payload's length in words ([`Message::wire_bytes`] counts them).
pub const FRAME_HEADER_WORDS: usize = 2;
/// A destination's queued frames leave at once when they reach this many
/// words (64 KiB), not only at the end of the turn.
pub const MAX_COALESCED_WORDS: usize = 8192;

/// The coalesced wire messages one worker's RPC traffic amounts to, as
/// `ucx` sends it: the frames bound for one node within one turn of the
/// event loop leave as one message, cut where they reach
/// [`MAX_COALESCED_WORDS`]. A fabric that delivers messages one by one
/// (`threads`) counts through it, so that `wire_messages` means what it
/// means where the coalescing is real (`ucx`) or modelled (`sim`).
#[derive(Clone, Debug, Default)]
pub struct Coalescing {
    /// Per destination node: words of the message open this turn (0: none).
    open_words: Vec<usize>,
}

impl Coalescing {
    /// Counts `msg`, bound for another node, into `counters`: its frame's
    /// bytes, and a wire message with its header when the frame opens one.
    pub fn count(&mut self, msg: &Message, counters: &mut VerbCounters) {
        let node = msg.dst_node as usize;
        if node >= self.open_words.len() {
            self.open_words.resize(node + 1, 0);
        }
        let words = &mut self.open_words[node];
        if *words == 0 {
            counters.wire_messages += 1;
            counters.wire_bytes += 8 * COALESCED_HEADER_WORDS as u64;
        }
        counters.wire_bytes += msg.wire_bytes();
        *words += msg.frame_words();
        if *words >= MAX_COALESCED_WORDS {
            // Full: it leaves now, and the next frame opens another.
            *words = 0;
        }
    }

    /// The turn ends: every open message has left.
    pub fn end_turn(&mut self) {
        self.open_words.fill(0);
    }
}

/// Verbs and messages by type, with bytes. Counted by the issuing side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct VerbCounters {
    pub read: u64,
    pub read_bytes: u64,
    pub write: u64,
    pub write_bytes: u64,
    pub cas: u64,
    pub faa: u64,
    pub doorbells: u64,
    pub rpc: u64,
    pub rpc_request_bytes: u64,
    /// Messages between nodes this endpoint's traffic puts on the wire,
    /// counted alike on every fabric: a one-sided verb to another node is
    /// two (its request and its response or completion, as an RDMA NIC
    /// sends them; a doorbell batch saves MMIO, not messages), and RPC
    /// traffic counts as coalesced messages, everything one worker sends
    /// to one node within one turn of its event loop as one
    /// ([`Coalescing`]), requests and replies each by their sender. Where
    /// a fabric carries verbs another way the count stays: `threads` and
    /// `ucx` on mapped memory run them as CPU operations, and count what
    /// a NIC would send; `threads` delivers RPCs one by one, and counts
    /// the coalesced messages `ucx` and `sim` send. The one exception is
    /// `ucx` over a transport without RMA, where verb batches really
    /// travel as frames of coalesced messages and count as such. Traffic
    /// within a node counts nothing.
    pub wire_messages: u64,
    /// Bytes of those messages, headers included.
    pub wire_bytes: u64,
}

impl VerbCounters {
    pub fn add(&mut self, other: &VerbCounters) {
        self.read += other.read;
        self.read_bytes += other.read_bytes;
        self.write += other.write;
        self.write_bytes += other.write_bytes;
        self.cas += other.cas;
        self.faa += other.faa;
        self.doorbells += other.doorbells;
        self.rpc += other.rpc;
        self.rpc_request_bytes += other.rpc_request_bytes;
        self.wire_messages += other.wire_messages;
        self.wire_bytes += other.wire_bytes;
    }

    pub fn sub(&self, earlier: &VerbCounters) -> VerbCounters {
        VerbCounters {
            read: self.read - earlier.read,
            read_bytes: self.read_bytes - earlier.read_bytes,
            write: self.write - earlier.write,
            write_bytes: self.write_bytes - earlier.write_bytes,
            cas: self.cas - earlier.cas,
            faa: self.faa - earlier.faa,
            doorbells: self.doorbells - earlier.doorbells,
            rpc: self.rpc - earlier.rpc,
            rpc_request_bytes: self.rpc_request_bytes - earlier.rpc_request_bytes,
            wire_messages: self.wire_messages - earlier.wire_messages,
            wire_bytes: self.wire_bytes - earlier.wire_bytes,
        }
    }

    pub fn count(&mut self, verb: &Verb) {
        match verb.kind {
            VerbKind::Read => {
                self.read += 1;
                self.read_bytes += 8 * verb.len as u64;
            }
            VerbKind::Write => {
                self.write += 1;
                self.write_bytes += 8 * verb.len as u64;
            }
            VerbKind::Cas => self.cas += 1,
            VerbKind::Faa => self.faa += 1,
        }
    }

    /// Counts the wire traffic of a doorbell batch to another node: per
    /// verb a request and a response (see `wire_messages`), and the
    /// verbs' bytes. Every fabric calls it wherever it runs the batch.
    pub fn count_remote_verbs(&mut self, verbs: &[Verb]) {
        self.wire_messages += 2 * verbs.len() as u64;
        self.wire_bytes += verbs.iter().map(Verb::wire_bytes).sum::<u64>();
    }

    /// Counts one doorbell batch as its poster issues it: each verb and
    /// one doorbell. Returns the node the batch targets, or `None` for an
    /// empty batch, which posts (and counts) nothing. Every fabric's
    /// `Endpoint::post` starts here, so they count alike.
    pub fn count_batch(&mut self, verbs: &[Verb]) -> Option<NodeId> {
        let target = verbs.first()?.node;
        for verb in verbs {
            debug_assert_eq!(verb.node, target, "a doorbell batch targets one node");
            self.count(verb);
        }
        self.doorbells += 1;
        Some(target)
    }

    /// Counts a message as its sender hands it to the fabric: a request
    /// is one RPC with its payload's bytes; a reply counts nothing here.
    /// Every fabric's `Endpoint::send` starts here, so they count alike.
    pub fn count_send(&mut self, msg: &Message) {
        if msg.flags & MSG_REPLY == 0 {
            self.rpc += 1;
            self.rpc_request_bytes += 8 * msg.payload.len() as u64;
        }
    }
}

/// An outgoing RPC of the current round.
#[derive(Debug)]
pub struct OutgoingCall {
    pub node: NodeId,
    pub kind: u16,
    pub passive: bool,
    pub payload: Vec<u64>,
}

/// One coroutine's queue of verbs and RPCs for the current round, and their
/// results.
#[derive(Debug, Default)]
pub struct Batch {
    pub verbs: Vec<Verb>,
    pub write_data: Vec<u64>,
    pub results: Vec<u64>,
    pub calls: Vec<OutgoingCall>,
    /// Replies by call index; filled by the worker's event loop.
    pub replies: Vec<Option<Vec<u64>>>,
    /// Payload buffers for new calls (this coroutine's share of the pool),
    /// at most [`Batch::POOL_BUFFERS`].
    pub pool: Vec<Vec<u64>>,
}

impl Batch {
    /// Most payload buffers a coroutine keeps for its calls: more than a
    /// round's calls to distinct nodes seldom need, so that completions,
    /// whose buffers arrive with every doorbell batch and are never sent
    /// again, cannot pile up here.
    pub const POOL_BUFFERS: usize = 16;

    /// Keeps `buffer` in `pool` (a batch's) for a later call, or hands it
    /// back when the pool is full (for the fabric to reuse, [`super::Endpoint::recycle`]).
    #[must_use]
    pub fn keep(pool: &mut Vec<Vec<u64>>, buffer: Vec<u64>) -> Option<Vec<u64>> {
        if pool.len() < Self::POOL_BUFFERS {
            pool.push(buffer);
            None
        } else {
            Some(buffer)
        }
    }

    pub fn read(&mut self, node: NodeId, addr: u64, len: u32) -> VerbId {
        let buf = self.results.len() as u32;
        self.results.resize(self.results.len() + len as usize, 0);
        self.push(Verb {
            kind: VerbKind::Read,
            node,
            addr,
            len,
            buf,
            compare: 0,
            swap: 0,
        })
    }

    pub fn write(&mut self, node: NodeId, addr: u64, data: &[u64]) -> VerbId {
        let buf = self.write_data.len() as u32;
        self.write_data.extend_from_slice(data);
        self.push(Verb {
            kind: VerbKind::Write,
            node,
            addr,
            len: data.len() as u32,
            buf,
            compare: 0,
            swap: 0,
        })
    }

    pub fn write_word(&mut self, node: NodeId, addr: u64, value: u64) -> VerbId {
        self.write(node, addr, &[value])
    }

    pub fn cas(&mut self, node: NodeId, addr: u64, expected: u64, new: u64) -> VerbId {
        self.push_atomic(VerbKind::Cas, node, addr, (expected, new))
    }

    pub fn faa(&mut self, node: NodeId, addr: u64, add: u64) -> VerbId {
        self.push_atomic(VerbKind::Faa, node, addr, (add, 0))
    }

    /// A one-word atomic with its operands (`compare`, `swap`) and a
    /// result word for the previous value.
    fn push_atomic(
        &mut self,
        kind: VerbKind,
        node: NodeId,
        addr: u64,
        (compare, swap): (u64, u64),
    ) -> VerbId {
        let buf = self.results.len() as u32;
        self.results.push(0);
        self.push(Verb {
            kind,
            node,
            addr,
            len: 1,
            buf,
            compare,
            swap,
        })
    }

    fn push(&mut self, verb: Verb) -> VerbId {
        self.verbs.push(verb);
        VerbId(self.verbs.len() as u32 - 1)
    }

    /// Result words of a READ, or the previous value of a CAS/FAA (1 word).
    pub fn result(&self, id: VerbId) -> &[u64] {
        let verb = &self.verbs[id.0 as usize];
        debug_assert_ne!(verb.kind, VerbKind::Write, "WRITE has no result");
        &self.results[verb.buf as usize..verb.buf as usize + verb.len as usize]
    }

    pub fn result_word(&self, id: VerbId) -> u64 {
        self.result(id)[0]
    }

    /// A payload buffer to fill for [`Batch::call`].
    pub fn payload(&mut self) -> Vec<u64> {
        let mut buffer = self.pool.pop().unwrap_or_default();
        buffer.clear();
        buffer
    }

    /// Queues an RPC of handler `kind` to `node`'s worker with this worker's
    /// index. A passive call is not awaited (its reply only returns buffers).
    pub fn call(&mut self, node: NodeId, kind: u16, payload: Vec<u64>, passive: bool) -> CallId {
        self.calls.push(OutgoingCall {
            node,
            kind,
            passive,
            payload,
        });
        let id = (self.calls.len() - 1) as u16;
        if self.replies.len() <= id as usize {
            self.replies.push(None);
        }
        CallId(id)
    }

    pub fn reply(&self, id: CallId) -> &[u64] {
        self.replies[id.0 as usize]
            .as_deref()
            .expect("reply read before the round completed")
    }

    /// Forgets the round: results, replies (buffers back to the pool).
    pub fn clear(&mut self) {
        self.verbs.clear();
        self.write_data.clear();
        self.results.clear();
        debug_assert!(self.calls.is_empty(), "calls are taken when posted");
        for reply in self.replies.iter_mut() {
            if let Some(buffer) = reply.take() {
                // A round's replies are no more than its calls, whose
                // buffers came from this pool: dropping the excess frees
                // only what a large round allocated.
                let _excess = Self::keep(&mut self.pool, buffer);
            }
        }
    }
}
