//! NO_WAIT: two-phase locking that aborts on any conflict (RCC §4.2, Fig. 5;
//! Deneva §3.1; RCBench §6.2.1, Alg. 4).
//!
//! Every record a transaction touches is locked when first accessed; a lock
//! held in a conflicting mode aborts the transaction at once, so no
//! transaction ever waits and deadlock is impossible. With
//! `lock_mode = exclusive` (the default, RCC's and RCBench's choice) every
//! access locks exclusively; with `lock_mode = shared` reads take shared
//! locks and writes exclusive ones (RCBench Alg. 4's reader count, §7.6.2).
//!
//! Stages (RCC bits): `lock` = 1 (lock & read, at access time; also the
//! read→write upgrade of a shared lock), `log` = 4 (empty without
//! replication), `commit` = 16 (update & unlock written records; the other
//! locked records are unlocked in the same passive round with the `release`
//! primitive), `release` = 8 (unlock on abort).
//!
//! * one-sided lock: CAS(lock, 0 → owner) and READ(tuple) in one doorbell
//!   batch; FIFO makes the READ see the tuple after the CAS, and if the CAS
//!   failed its data is ignored (RCC §4.2). A shared request whose CAS found
//!   other readers retries its CAS against the word it saw (Read-Cas). On a
//!   location-cache miss an index probe round comes first.
//! * RPC lock: the handler looks the key up, decides on the lock word and
//!   CASes it locally, and replies `[status, slot, seq, record…]`; the slot
//!   fills the cache so a one-sided commit or release can address the tuple
//!   (RCC §5.2).
//! * commit / release: WRITE record+seq_end, WRITE [seq, lock = 0] for a
//!   written record; WRITE lock = 0 for an exclusive, FETCH_AND_ADD −1 for a
//!   shared lock; or one RPC per participant and kind (`lock2pl`).
//!
//! Header layout: word 0 = the lock word of `lock2pl` (0 free; exclusive:
//! bit 63 | owner, owner = coroutine id + 1; shared: reader count in bits
//! 0..16). Hybrid handshakes (RCC §5.2): none beyond the lock word itself —
//! every form of every stage CASes, adds to or stores that one word — and
//! the slot every RPC lock replies.
//!
//! Invariant: a record is read only while this transaction holds its lock
//! (shared or exclusive), so the version read is the version a write
//! replaces (`seq + 1`).

use crate::txn::AbortReason;

use super::lock2pl::{Decision, LockRule};
use super::ProtocolKind;

/// NO_WAIT's rule: every conflict aborts (RCC §4.2), so nobody waits and
/// lock values are the coroutine's owner, not a timestamp.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoWait;

impl LockRule for NoWait {
    const KIND: ProtocolKind = ProtocolKind::NoWait;
    const TIMESTAMPED: bool = false;
    const COUNTS_WAITERS: bool = false;
    const WOUNDS: bool = false;
    const CONFLICT: AbortReason = AbortReason::LockConflict;
    const OWN_EARLIER_LOCK: Decision = Decision::Die(AbortReason::LockConflict);

    fn against_holder(_mine: u64, _holder: u64) -> Decision {
        Decision::Die(Self::CONFLICT)
    }

    fn against_readers(_mine: u64, _bound: u64) -> Decision {
        Decision::Die(Self::CONFLICT)
    }

    /// Readers need no bound: no requester ever waits for them.
    fn merge_bound(_bound: u64, _mine: u64) -> u64 {
        0
    }
}
