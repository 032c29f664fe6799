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

use crate::store::NodeStore;
use crate::txn::{TxnCx, TxnResult};

use super::lock2pl::{Lock2pl, Policy};
use super::{Protocol, ProtocolKind, Served, Stage};

#[derive(Clone, Debug)]
pub struct NoWait(pub Lock2pl);

impl Default for NoWait {
    fn default() -> Self {
        NoWait(Lock2pl::new(Policy::NoWait))
    }
}

impl Protocol for NoWait {
    const KIND: ProtocolKind = ProtocolKind::NoWait;
    const ACCESS_STAGE: Stage = Stage::Lock;

    fn header_words(_record_words: u32) -> u32 {
        Lock2pl::header_words(Policy::NoWait)
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        self.0.begin(cx);
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.0.access(cx, index).await
    }

    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.0.upgrade(cx, index).await
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        self.0.commit(cx);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        self.0.release(cx);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served {
        let served = self.0.serve(store, kind, payload, now_ns);
        assert!(served.is_some(), "no_wait has no RPC handler {kind}");
        served.unwrap_or(Served::Reply)
    }
}
