//! How a TIMESTAMP or MVCC read waits for an older writer's pending write.
//!
//! A read younger than a writer that holds the tuple's lock must not read
//! past it (the write will be ordered before the read), so it waits. Two
//! policies, chosen by `ProtocolOptions::pending_write_wait_ns`:
//!
//! * **bounded retries** (unset, the default; RCC's behaviour): one-sided,
//!   the read polls the tuple `READ_WAITS` times with a `READ_WAIT_NS`
//!   sleep; by RPC the handler answers `Served::Wait` `RPC_WAITS` times,
//!   the request sitting in the serving event loop's waiting list (RCC
//!   §4.3). Then the read aborts (`read_locked`). Short, because a waiting
//!   reader holds its own locks, and long waits formed convoys on an
//!   oversubscribed machine.
//! * **blocking for a time** (set, Deneva §4.2: TIMESTAMP and MVCC "block
//!   newer transactions that conflict until the older ones commit"): the
//!   read waits until the writer resolves or `ns` have passed since its
//!   first wait, whichever is first, then aborts (`read_locked`). One-sided
//!   it polls every `READ_WAIT_NS`; by RPC the handler parks the request
//!   until the budget, measured on the serving worker's clock, runs out.
//!   The bound is what keeps a lost writer from holding readers forever;
//!   set it far above a commit's duration to get Deneva's waits.
//!
//! Invariants: waits only ever go from a younger reader to an older writer
//! (`judge`/`choose` answer `Wait` for no other case), so waiting cannot
//! form a cycle, whatever the budget. An RPC request's wait word is 0 when
//! the client sends it; under the bounded policy it counts the handler's
//! `Served::Wait` answers, under the timed one it holds the serving clock
//! at the first wait plus one (so that 0 still means "not yet waited").

use crate::config::Config;
use crate::fabric::VerbId;
use crate::txn::{kit, AbortReason, TxnCx, TxnResult};

use super::Served;

/// Tries of a read before it gives up (a torn READ or a failed double-read
/// each cost one).
pub(in crate::protocols) const READ_TRIES: u32 = 8;
/// Polls of a one-sided read waiting for an older writer to finish before
/// it gives up (`read_locked`), under the bounded policy.
const READ_WAITS: u32 = 2;
/// Times an RPC read handler answers `Served::Wait` for one request before
/// it refuses it (`read_locked`), under the bounded policy.
const RPC_WAITS: u64 = 4;
/// The sleep between two polls of a waiting one-sided read, ns: a writer
/// holds its lock from its fetch to its commit.
pub(in crate::protocols) const READ_WAIT_NS: u64 = 2_000;

/// How a read waits for an older writer's pending write (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::protocols) enum PendingWait {
    /// RCC: `READ_WAITS` polls one-sided, `RPC_WAITS` re-offers by RPC.
    Bounded,
    /// Deneva: until the writer resolves or `budget_ns` passed.
    Timed { budget_ns: u64 },
}

impl PendingWait {
    pub(in crate::protocols) fn from_config(config: &Config) -> PendingWait {
        match config.protocol_options.pending_write_wait_ns {
            None => PendingWait::Bounded,
            Some(budget_ns) => PendingWait::Timed { budget_ns },
        }
    }

    /// An RPC read handler met a pending older write while serving
    /// `request`, whose wait word is `request[wait_word]`: parks the
    /// request again (`Served::Wait`, the request put back into `payload`
    /// with its wait word advanced) or returns `None` once it has waited
    /// its share, and the handler refuses it.
    pub(in crate::protocols) fn park(
        self,
        payload: &mut Vec<u64>,
        request: &[u64],
        wait_word: usize,
        now_ns: u64,
    ) -> Option<Served> {
        let waited = request[wait_word];
        let next = match self {
            PendingWait::Bounded if waited < RPC_WAITS => waited + 1,
            PendingWait::Bounded => return None,
            PendingWait::Timed { .. } if waited == 0 => now_ns + 1,
            PendingWait::Timed { budget_ns } => {
                let first_wait_ns = waited - 1;
                if now_ns.saturating_sub(first_wait_ns) >= budget_ns {
                    return None;
                }
                waited
            }
        };
        payload.clear();
        payload.extend_from_slice(request);
        payload[wait_word] = next;
        Some(Served::Wait)
    }
}

/// What a one-sided read has spent so far, shared by TIMESTAMP and MVCC:
/// torn snapshots and lost double-reads count against `READ_TRIES`, waits
/// for an older writer against the `PendingWait` policy; `failure` is the
/// reason the read gives up with once either runs out.
pub(in crate::protocols) struct ReadTries {
    policy: PendingWait,
    tries: u32,
    waits: u32,
    /// The worker's clock at the first wait (timed policy).
    first_wait_ns: u64,
    /// The policy's share of waiting is spent.
    waited_out: bool,
    pub(in crate::protocols) failure: AbortReason,
}

impl ReadTries {
    pub(in crate::protocols) fn new(policy: PendingWait) -> ReadTries {
        ReadTries {
            policy,
            tries: 0,
            waits: 0,
            first_wait_ns: 0,
            waited_out: false,
            failure: AbortReason::ReadLocked,
        }
    }

    /// Whether the read may fetch the tuple again.
    pub(in crate::protocols) fn left(&self) -> bool {
        self.tries < READ_TRIES && !self.waited_out
    }

    /// The next READ of the whole tuple of `cx.accesses[index]` (its slot
    /// known), awaited, while the read may fetch it again; `None` once it
    /// may not.
    pub(in crate::protocols) async fn next_read(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
    ) -> TxnResult<Option<VerbId>> {
        if !self.left() {
            return Ok(None);
        }
        kit::read_tuple_onesided(cx, index).await.map(Some)
    }

    /// The snapshot was torn (`seq != seq_end`).
    pub(in crate::protocols) fn torn(&mut self) {
        self.failure = AbortReason::ReadInconsistent;
        self.tries += 1;
    }

    /// The double-read found the version no longer standing.
    pub(in crate::protocols) fn raise_lost(&mut self) {
        self.failure = AbortReason::ReadLocked;
        self.tries += 1;
    }

    /// An older writer holds the tuple: sleep before the next fetch. After
    /// the sleep, `left` says whether the policy allows that fetch.
    pub(in crate::protocols) async fn wait(&mut self, cx: &TxnCx<'_>) {
        self.failure = AbortReason::ReadLocked;
        self.waits += 1;
        self.waited_out = match self.policy {
            PendingWait::Bounded => self.waits >= READ_WAITS,
            PendingWait::Timed { budget_ns } => {
                // The clock is read only under this policy: the bounded one
                // keeps RCC's schedule, event for event.
                let now_ns = cx.worker.now_ns();
                if self.waits == 1 {
                    self.first_wait_ns = now_ns;
                }
                now_ns - self.first_wait_ns >= budget_ns
            }
        };
        cx.worker.sleep(cx.co, READ_WAIT_NS).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn park(policy: PendingWait, wait_word: u64, now_ns: u64) -> Option<u64> {
        let request = [7, 8, wait_word];
        let mut payload = vec![0; 9];
        policy
            .park(&mut payload, &request, 2, now_ns)
            .map(|served| {
                assert!(matches!(served, Served::Wait));
                assert_eq!(payload[..2], request[..2], "the request is put back whole");
                payload[2]
            })
    }

    #[test]
    fn bounded_rpc_waits_count_re_offers_then_refuse() {
        assert_eq!(park(PendingWait::Bounded, 0, 50), Some(1));
        assert_eq!(
            park(PendingWait::Bounded, RPC_WAITS - 1, 50),
            Some(RPC_WAITS)
        );
        assert_eq!(park(PendingWait::Bounded, RPC_WAITS, 50), None);
    }

    #[test]
    fn timed_rpc_waits_keep_the_first_wait_and_refuse_past_the_budget() {
        let timed = PendingWait::Timed { budget_ns: 1_000 };
        // The first wait stamps the serving clock, plus one (0 = not yet).
        assert_eq!(park(timed, 0, 0), Some(1));
        assert_eq!(park(timed, 0, 5_000), Some(5_001));
        // Later offers keep the stamp while the budget lasts.
        assert_eq!(park(timed, 5_001, 5_999), Some(5_001));
        assert_eq!(park(timed, 5_001, 6_000), None);
        // However many times it was offered before.
        assert_eq!(park(timed, 1, 999), Some(1));
    }
}
