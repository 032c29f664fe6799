//! Peer failures as this process's endpoints see them ([`PeerFailure`]).
//! The fabric does not decide who is dead: it reports a peer that stopped
//! answering (an "unreachable" event, drained by whoever decides:
//! `cluster::failover`) and reads the cluster's decisions through
//! [`PeerVerdicts`], which `recovery` implements. Without fault
//! tolerance the first error ends the run.

use std::sync::OnceLock;

use super::*;

/// What the cluster decided about this process's peers, as the fabric
/// reads it: which peers are dead (what is outstanding to one fails and
/// nothing waits on it again) and until when this process may post (its
/// lease). Implemented where it is decided (`recovery::RankVerdicts`).
pub trait PeerVerdicts: Send + Sync {
    /// Whether the cluster declared `node` dead.
    fn is_dead(&self, node: NodeId) -> bool;
    /// Declarations so far: an endpoint compares it with what it last
    /// handled.
    fn dead_epoch(&self) -> u64;
    /// Until when (ns on the endpoints' clock) this process may post;
    /// `u64::MAX`: no lease.
    fn lease_until_ns(&self) -> u64;
}

/// Peer failures as this process's endpoints see them.
///
/// Without fault tolerance, set once by the first endpoint whose peer
/// failed (`node + 1`, 0 = none) and the run is abandoned. In a
/// fault-tolerant run ([`PeerFailure::follow`]) a UCX error only reports
/// its peer unreachable ([`PeerFailure::take_unreachable`]: the cluster
/// decides; see `cluster::failover`), and once the cluster's verdicts
/// declare a peer dead every endpoint fails what it still has outstanding
/// to it and never waits on it again.
pub struct PeerFailure {
    pub(super) node_plus_one: AtomicU32,
    pub(super) status: AtomicU32,
    pub(super) abandoned: AtomicBool,
    /// The cluster's decisions (fault-tolerant run only).
    pub(super) verdicts: OnceLock<Arc<dyn PeerVerdicts>>,
    /// Per node (bit `node % 64` of word `node / 64`): a UCX error named
    /// it since the decider last took the events.
    pub(super) unreachable: Box<[AtomicU64]>,
    /// This process was declared failed by its peers (it stops).
    pub(super) declared_failed: AtomicBool,
}

/// Nodes a [`PeerFailure`] can name (`config::MAX_NODES`).
pub(super) const NODE_WORDS: usize = 64;

impl Default for PeerFailure {
    fn default() -> PeerFailure {
        PeerFailure {
            node_plus_one: AtomicU32::new(0),
            status: AtomicU32::new(0),
            abandoned: AtomicBool::new(false),
            verdicts: OnceLock::new(),
            unreachable: (0..NODE_WORDS).map(|_| AtomicU64::new(0)).collect(),
            declared_failed: AtomicBool::new(false),
        }
    }
}

impl PeerFailure {
    /// Makes UCX errors reports rather than the end of the run, and the
    /// cluster's `verdicts` what the endpoints go by. Before any endpoint
    /// connects; once.
    pub fn follow(&self, verdicts: Arc<dyn PeerVerdicts>) {
        let fresh = self.verdicts.set(verdicts).is_ok();
        debug_assert!(fresh, "one set of verdicts per process");
    }

    /// Whether the run tolerates a peer's failure.
    pub fn tolerant(&self) -> bool {
        self.verdicts.get().is_some()
    }

    #[inline]
    pub fn is_dead(&self, node: NodeId) -> bool {
        self.verdicts.get().is_some_and(|v| v.is_dead(node))
    }

    pub(super) fn dead_epoch(&self) -> u64 {
        self.verdicts.get().map_or(0, |v| v.dead_epoch())
    }

    #[inline]
    pub fn lease_until_ns(&self) -> u64 {
        self.verdicts.get().map_or(u64::MAX, |v| v.lease_until_ns())
    }

    /// The peers UCX reported unreachable since the last call (tolerant
    /// mode): each is reported once, for the decider to judge.
    pub fn take_unreachable(&self) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        for (word, bits) in self.unreachable.iter().enumerate() {
            let bits = bits.swap(0, Ordering::SeqCst);
            for bit in 0..64 {
                if bits & (1 << bit) != 0 {
                    nodes.push((word * 64 + bit) as NodeId);
                }
            }
        }
        nodes
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

    /// An endpoint's operation to `node` failed with `status`.
    pub(super) fn set(&self, node: NodeId, status: ucs_status_t) {
        if self.tolerant() {
            let (word, bit) = (node as usize / 64, node as u64 % 64);
            self.unreachable[word].fetch_or(1 << bit, Ordering::SeqCst);
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
