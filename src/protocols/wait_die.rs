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

use crate::txn::AbortReason;

use super::lock2pl::{Decision, LockRule};
use super::ProtocolKind;

/// WAIT_DIE's rule (RCC §4.3): an older requester waits, a younger one
/// dies; the shared word's bound is its readers' minimum timestamp.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitDie;

impl LockRule for WaitDie {
    const KIND: ProtocolKind = ProtocolKind::WaitDie;
    const TIMESTAMPED: bool = true;
    const COUNTS_WAITERS: bool = true;
    const WOUNDS: bool = false;
    const CONFLICT: AbortReason = AbortReason::Died;
    const OWN_EARLIER_LOCK: Decision = Decision::Wait;

    fn against_holder(mine: u64, holder: u64) -> Decision {
        if mine < holder {
            Decision::Wait
        } else {
            Decision::Die(Self::CONFLICT)
        }
    }

    /// Waits only if older than every reader.
    fn against_readers(mine: u64, bound: u64) -> Decision {
        if mine < bound {
            Decision::Wait
        } else {
            Decision::Die(Self::CONFLICT)
        }
    }

    fn merge_bound(bound: u64, mine: u64) -> u64 {
        bound.min(mine)
    }
}
