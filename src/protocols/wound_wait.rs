//! WOUND_WAIT: two-phase locking in which an older requester wounds (aborts)
//! a younger holder and waits for its lock, and a younger requester waits
//! (RCBench §6.2.1, Alg. 5; the timestamps of RCC §4.3).
//!
//! Timestamps are WAIT_DIE's (unique, kept across retries). The wound is a
//! remote abort through the holder's per-transaction global metadata: one
//! CAS on its status word, `running → WOUNDED`. The wounded transaction
//! notices at its next check — every access, every round of a one-sided
//! wait — and at its commit point, and aborts, freeing its locks. A
//! wounded transaction parked in a lock RPC is woken by its wounder, which
//! sends the wound to where it waits (`lock2pl`, "Waking a wounded
//! waiter"); the parked request's timeout is the fallback.
//!
//! Commit point: in the `log` stage, the last fallible one, a transaction
//! CASes its own status `running → COMMITTING`. If a wound got there first
//! the CAS returns `WOUNDED` and the attempt aborts before installing
//! anything; once the CAS succeeded, every later wound fails (it expects
//! `running`), so a committing transaction is never aborted and its waiter
//! simply waits for the commit's unlock.
//!
//! Stages (RCC bits): `lock` = 1 (lock & read at access time, wounding and
//! waiting as needed; the read→write upgrade), `log` = 4 (the commit-point
//! CAS on the coordinator's own status word: a local CAS verb one-sided, a
//! `LOCK2PL_STATUS_CAS` RPC to its own worker two-sided), `commit` = 16
//! (update & unlock), `release` = 8 (unlock on abort).
//!
//! * one-sided lock: READ(own status) + CAS(lock, 0 → EXCLUSIVE | ts) +
//!   READ(tuple) per round. On a younger exclusive holder: CAS(holder's
//!   status, holder's running value → WOUNDED) at once, then wait; on an
//!   older one: wait (sleep 0.5–8 µs, doubling, and post the round again).
//! * RPC lock: every request is tagged and recorded in the requester's
//!   metadata (node and tag). The handler decides on the word and locks
//!   with a local CAS. A younger holder is answered `WOUND` with its
//!   timestamp; the requester wounds it (`LOCK2PL_WOUND` RPC to the
//!   holder's node: CAS its status, reply its record), wakes the holder's
//!   recorded request if the wound succeeded (`LOCK2PL_WAKE`, passive) and
//!   asks again, naming the holder it wounded, and the handler parks the
//!   request (`Served::Wait`) in the worker's waiting list by its
//!   timestamp, oldest first, so a freed lock goes to the oldest waiter,
//!   which nobody wounds. A parked request is answered `WOKEN` once a
//!   wounder woke it, and otherwise `TIMEOUT` after 8 offers or 16 µs of
//!   the serving worker's clock, whichever comes first (both doubling with
//!   each timeout of the same access), so that its requester reads its own
//!   status and asks again.
//! * commit / release: as NO_WAIT (`lock2pl`).
//! * `lock_mode = shared`: the shared word keeps the maximum (coarse)
//!   timestamp of its readers. Readers are anonymous, so they cannot be
//!   wounded: a writer younger than every reader waits, any other writer
//!   dies (`died`). An upgrade with other readers dies.
//!
//! Header layout: word 0 = lock word (`lock2pl`: 0 free; exclusive: bit 63 |
//! timestamp `clock:34 | owner:29`; shared: `bound:47 | count:16`).
//! Transaction metadata: 2 + nodes words per coroutine: the status
//! (`cx.owner` while running, `WOUNDED` = 1, `COMMITTING` = 2), armed at
//! the attempt's first access; the record of its pending lock RPC
//! (`node:12 | tag:52`); and, on every node, a wake mark per node for the
//! coroutines of the same `(worker, coroutine)` index there. Hybrid handshakes (RCC §5.2): none beyond the lock word, the
//! status word (every form CASes it) and the slot every RPC lock replies.
//!
//! Invariants: every deadlock cycle contains a wounded transaction, and a
//! wounded transaction cannot wait forever without noticing; a transaction
//! installs writes only after its status became `COMMITTING`; a request
//! answered `WOKEN` took no lock, and belongs to the attempt its wounder
//! wounded (on `threads`, a retry that recorded a request between the
//! wound's CAS and its read of the record could lose that attempt: an
//! abort, so safe).

use crate::txn::AbortReason;

use super::lock2pl::{Decision, LockRule};
use super::ProtocolKind;

/// WOUND_WAIT's rule (RCBench Alg. 5): an older requester wounds the
/// holder and waits, a younger one waits; anonymous readers cannot be
/// wounded, so the shared word's bound is its readers' maximum timestamp
/// and only a writer younger than all of them waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct WoundWait;

impl LockRule for WoundWait {
    const KIND: ProtocolKind = ProtocolKind::WoundWait;
    const TIMESTAMPED: bool = true;
    const COUNTS_WAITERS: bool = false;
    const WOUNDS: bool = true;
    const CONFLICT: AbortReason = AbortReason::Died;
    const OWN_EARLIER_LOCK: Decision = Decision::Wait;

    fn against_holder(mine: u64, holder: u64) -> Decision {
        if mine < holder {
            Decision::Wound(holder)
        } else {
            Decision::Wait
        }
    }

    fn against_readers(mine: u64, bound: u64) -> Decision {
        if mine > bound {
            Decision::Wait
        } else {
            Decision::Die(Self::CONFLICT)
        }
    }

    fn merge_bound(bound: u64, mine: u64) -> u64 {
        bound.max(mine)
    }
}
