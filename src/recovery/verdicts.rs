//! The cluster's verdicts on a `ucx` process's peers, as its fabric reads
//! them ([`RankVerdicts`]): the fabric only reports a peer that stopped
//! answering; who is dead is this process's [`Membership`], which the
//! failover sequencer (`recovery::sequencer`) declares into, and whether
//! it may still post is the lease rank 0 last renewed (DrTM §4.5's lease
//! scheme: a process frozen past its lease posts nothing before it learns
//! whether it was declared failed).
//!
//! Invariant: the fabric sees a peer dead exactly when the membership
//! does, so there is one dead set per process.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::Membership;
use crate::fabric::ucx::PeerVerdicts;
use crate::fabric::NodeId;

/// One process's membership and lease, as its endpoints ask them.
pub struct RankVerdicts {
    membership: Arc<Membership>,
    /// ns on the endpoints' clock; `u64::MAX`: no lease.
    lease_until_ns: AtomicU64,
}

impl RankVerdicts {
    /// Verdicts read from `membership`, with no lease yet.
    pub fn new(membership: Arc<Membership>) -> RankVerdicts {
        RankVerdicts {
            membership,
            lease_until_ns: AtomicU64::new(u64::MAX),
        }
    }

    /// Sets this process's lease (`u64::MAX`: none). Endpoints post
    /// nothing past it: they wait for a renewal, or for the run to be
    /// abandoned (this rank declared failed), and then fail what they
    /// were to post.
    pub fn set_lease_until(&self, until_ns: u64) {
        self.lease_until_ns.store(until_ns, Ordering::Release);
    }
}

impl PeerVerdicts for RankVerdicts {
    #[inline]
    fn is_dead(&self, node: NodeId) -> bool {
        !self.membership.is_alive(node)
    }

    #[inline]
    fn dead_epoch(&self) -> u64 {
        self.membership.epoch()
    }

    #[inline]
    fn lease_until_ns(&self) -> u64 {
        self.lease_until_ns.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fabric_sees_the_membership_and_the_lease() {
        let membership = Arc::new(Membership::new(0, 3));
        let verdicts = RankVerdicts::new(membership.clone());
        assert!(!verdicts.is_dead(2));
        assert_eq!(verdicts.dead_epoch(), 0);
        assert_eq!(verdicts.lease_until_ns(), u64::MAX);
        membership.declare_dead(2, 5);
        assert!(verdicts.is_dead(2) && !verdicts.is_dead(1));
        assert_eq!(verdicts.dead_epoch(), 1);
        verdicts.set_lease_until(1_000);
        assert_eq!(verdicts.lease_until_ns(), 1_000);
    }
}
