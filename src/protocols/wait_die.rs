//! WAIT_DIE: two-phase locking in which an older requester waits for a
//! younger holder and a younger requester dies (RCC §4.3, Fig. 6; Deneva
//! §3.1; RCBench §6.2.1, Alg. 5 with the comparison reversed and the wound
//! replaced by an abort).
//!
//! Each transaction takes a unique timestamp when a request first starts —
//! the local clock with the coroutine's id in its low bits (RCC §4.3) — and
//! keeps it across retries, so a restarted transaction ages until it is the
//! oldest and cannot die any more. The lock word holds the exclusive
//! holder's timestamp, so a requester that fails to lock learns whom it
//! conflicts with from the same CAS. Waits only ever go from an older
//! transaction to a younger holder: wait-for chains have increasing
//! timestamps, hence no deadlock.
//!
//! Stages (RCC bits): `lock` = 1 (lock & read at access time, waiting as
//! needed; the read→write upgrade), `log` = 4 (empty without replication),
//! `commit` = 16 (update & unlock), `release` = 8 (unlock on abort).
//!
//! * one-sided lock: CAS(lock, 0 → EXCLUSIVE | ts) + READ(tuple) in one
//!   doorbell batch. On failure the CAS's returned word decides: older →
//!   sleep briefly (0.5–8 µs, doubling) and post CAS + READ again; younger
//!   → abort (`died`).
//! * RPC lock: the handler decides on the word and locks with a local CAS;
//!   for an older requester it returns `Served::Wait`, so the request joins
//!   the event loop's waiting list and is decided again on later turns
//!   until it gets the lock (then the reply carries the record) or must die
//!   — no handler ever blocks (RCC §4.3).
//! * commit / release: as NO_WAIT (`lock2pl`).
//! * `lock_mode = shared`: reads share a lock; the shared word keeps the
//!   minimum (coarse) timestamp of its readers, and a writer waits only if
//!   it is older than that bound. An upgrade with other readers dies.
//! * `wait_die_starvation_fix` (RCC §4.3's proposed fix): header word 1
//!   counts the transactions waiting for the tuple. A transaction starting
//!   to wait adds 1 (FETCH_AND_ADD, or the handler's local add) and
//!   subtracts it when it gets the lock or dies; while the count is
//!   non-zero, every requester that is not waiting dies, so a free lock
//!   goes to a waiter instead of a younger newcomer.
//!
//! Header layout: word 0 = lock word (`lock2pl`: 0 free; exclusive: bit 63
//! | timestamp `clock:34 | owner:29`; shared: `bound:47 | count:16`); word 1
//! = waiter count (starvation fix; stays 0 without it). Hybrid handshakes
//! (RCC §5.2): none beyond the lock word, the waiter word (both forms add to
//! it atomically) and the slot every RPC lock replies.
//!
//! Invariants: a record is read only under its lock; a transaction waits
//! only for strictly younger holders (or for its own earlier attempt's lock,
//! whose release is in flight); a waiter's count in word 1 is removed on
//! every way out of its wait.

use crate::store::NodeStore;
use crate::txn::{TxnCx, TxnResult};

use super::lock2pl::{Lock2pl, Policy};
use super::{Protocol, ProtocolKind, Served, Stage};

#[derive(Clone, Debug)]
pub struct WaitDie(pub Lock2pl);

impl Default for WaitDie {
    fn default() -> Self {
        WaitDie(Lock2pl::new(Policy::WaitDie))
    }
}

impl Protocol for WaitDie {
    const KIND: ProtocolKind = ProtocolKind::WaitDie;
    const ACCESS_STAGE: Stage = Stage::Lock;

    fn header_words(_record_words: u32) -> u32 {
        Lock2pl::header_words(Policy::WaitDie)
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
        assert!(served.is_some(), "wait_die has no RPC handler {kind}");
        served.unwrap_or(Served::Reply)
    }
}
