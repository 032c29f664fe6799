//! Peer failures as this process's endpoints see them ([`PeerFailure`]):
//! the first error of a run that ends on one, or, in a fault-tolerant run,
//! what the cluster decided and the lease it granted.

use super::*;

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
    pub(super) node_plus_one: AtomicU32,
    pub(super) status: AtomicU32,
    pub(super) abandoned: AtomicBool,
    pub(super) tolerant: AtomicBool,
    /// Per node (bit `node % 64` of word `node / 64`): declared dead.
    pub(super) dead: Box<[AtomicU64]>,
    /// Bumped by every `mark_dead`; endpoints compare it with what they saw.
    pub(super) dead_epoch: AtomicU64,
    /// Per node: a UCX error named it (tolerant mode).
    pub(super) suspected: Box<[AtomicU64]>,
    /// Until when (ns on the endpoints' clock) this process may post, in a
    /// fault-tolerant run (`cluster::bootstrap::Bootstrap::enable_leases`);
    /// `u64::MAX`: no lease.
    pub(super) lease_until_ns: AtomicU64,
    /// This process was declared failed by its peers (it stops).
    pub(super) declared_failed: AtomicBool,
}

/// Nodes a [`PeerFailure`] can name (`config::MAX_NODES`).
pub(super) const DEAD_WORDS: usize = 64;

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

    pub(super) fn dead_epoch(&self) -> u64 {
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

    pub(super) fn set(&self, node: NodeId, status: ucs_status_t) {
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
