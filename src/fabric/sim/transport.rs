//! What the transport does with a lost transfer on the `sim` fabric (the
//! parent's module doc, "Faults"): a `drop` link fault loses a verb or a
//! wire message, and the transport retransmits it after its timeout, as a
//! real one does; past its retry budget the connection breaks and the
//! transfer completes with an error that names the peer.
//!
//! Two transports, chosen by the network profile ([`TransportRetry::of`]):
//! * **RDMA RC** (every profile but the TCP ones): the requester's QP
//!   retransmits an unacknowledged packet after the *Local ACK Timeout*,
//!   4.096 µs × 2^`timeout` (InfiniBand Architecture Specification 1.x,
//!   §9.7.6.1.3, "Local ACK Timeout"), the same each time, up to
//!   `retry_cnt` times (a 3-bit field: at most 7); then the work request
//!   completes with `IBV_WC_RETRY_EXC_ERR` and the QP moves to the error
//!   state, flushing everything after it. Defaults: `timeout` 14 (67.1
//!   ms) and `retry_cnt` 7, perftest's defaults (`ib_write_bw -u 14`,
//!   `retry_cnt` 7) and the values most RC deployments keep. The papers
//!   verbena follows (RCC, DrTM+H, DrTM, RCBench, Deneva) state none.
//! * **TCP** (`tcp-10g`, `cloud-lan`): a lost segment is retransmitted
//!   after the retransmission timeout, doubled after each loss (RFC 6298
//!   §5.5); Linux's floor is `TCP_RTO_MIN`, 200 ms, far above a data
//!   centre's round trip, so the RTO is 200 ms; Linux gives up after
//!   `tcp_retries2` = 15 retransmissions (about 15 minutes) and resets the
//!   connection.
//!
//! Duplicates are impossible by construction, and this is the model of
//! the transport's own sequence numbers (RC's PSN, TCP's sequence
//! space): the copy that was lost never arrives, and the retransmitted
//! one replaces it, so a request executes once and its reply is its own
//! transfer, retransmitted in its turn if lost — a lost reply never makes
//! the server run a non-idempotent RPC again. A one-sided verb takes
//! effect once, when the copy that got through arrives; one that ran out
//! of retries took effect nowhere (every copy was lost on the way out).
//!
//! Invariants: a retransmission keeps the transfer's place in its queue
//! pair or channel (later transfers on it wait behind it, RC's go-back-N
//! and TCP's in-order delivery); a connection that ran out of retries
//! stays broken for the rest of the run, both ways, and fails at once
//! whatever is later sent on it (an RC QP in the error state); a run
//! without a `drop` fault draws nothing more from the seed than before.

use super::SimState;
use crate::config::profile::NetworkProfile;
use crate::fabric::NodeId;

/// A transport's retransmission: its timeout, how many times it retries,
/// and whether the timeout doubles after each loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportRetry {
    /// Wait before the first retransmission, ns.
    pub timeout_ns: u64,
    /// Retransmissions before the transfer fails.
    pub retry_count: u32,
    /// TCP's exponential back-off: each timeout twice the last.
    pub doubling: bool,
}

/// RC's Local ACK Timeout exponent (perftest's default).
pub const RC_TIMEOUT_EXPONENT: u32 = 14;
/// RC's retry count (perftest's default, the 3-bit field's maximum).
pub const RC_RETRY_COUNT: u32 = 7;
/// Linux's `TCP_RTO_MIN`, ns.
pub const TCP_RTO_MIN_NS: u64 = 200_000_000;
/// Linux's `tcp_retries2`.
pub const TCP_RETRIES: u32 = 15;

impl TransportRetry {
    /// RDMA RC with the Local ACK Timeout exponent `exponent`
    /// (4.096 µs × 2^exponent) and `retry_count` retries.
    pub fn rc(exponent: u32, retry_count: u32) -> TransportRetry {
        TransportRetry {
            timeout_ns: 4_096u64 << exponent.min(31),
            retry_count,
            doubling: false,
        }
    }

    /// TCP with Linux's defaults.
    pub fn tcp() -> TransportRetry {
        TransportRetry {
            timeout_ns: TCP_RTO_MIN_NS,
            retry_count: TCP_RETRIES,
            doubling: true,
        }
    }

    /// The transport `profile` models: TCP for the TCP profiles, RDMA RC
    /// for the others.
    pub fn of(profile: &NetworkProfile) -> TransportRetry {
        match profile.name.as_str() {
            "tcp-10g" | "cloud-lan" => TransportRetry::tcp(),
            _ => TransportRetry::rc(RC_TIMEOUT_EXPONENT, RC_RETRY_COUNT),
        }
    }

    /// The wait before retransmission number `retry` (0: the first).
    pub fn timeout_before(&self, retry: u32) -> u64 {
        if self.doubling {
            self.timeout_ns.saturating_mul(1 << retry.min(32))
        } else {
            self.timeout_ns
        }
    }
}

/// What became of one transfer on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Transfer {
    /// It arrives `extra_ns` later than an unhindered one would: link
    /// delays, plus the timeouts of the copies that were lost.
    Delivered { extra_ns: u64 },
    /// Every copy was lost (or the connection was already broken): the
    /// transfer fails, and its sender learns it at `at_ns`.
    Failed { at_ns: u64 },
}

impl SimState {
    /// Sends one transfer `from → to` at `at_ns` through the link faults
    /// and the transport: each copy lost to a `drop` is sent again after
    /// the transport's timeout, until one gets through or the retry budget
    /// is spent, which breaks the connection.
    pub(super) fn transfer(&mut self, from: NodeId, to: NodeId, at_ns: u64) -> Transfer {
        if self.connection_broken(from, to) {
            return Transfer::Failed { at_ns };
        }
        let mut waited_ns = 0u64;
        let mut retry = 0;
        loop {
            let (extra_ns, lost) = self.link_effect(from, to, at_ns + waited_ns);
            if !lost {
                return Transfer::Delivered {
                    extra_ns: extra_ns + waited_ns,
                };
            }
            self.lost_count += 1;
            if retry == self.transport.retry_count {
                self.break_connection(from, to);
                return Transfer::Failed {
                    at_ns: at_ns + waited_ns,
                };
            }
            self.retransmitted_count += 1;
            waited_ns = waited_ns.saturating_add(self.transport.timeout_before(retry));
            retry += 1;
        }
    }

    fn connection_broken(&self, from: NodeId, to: NodeId) -> bool {
        !self.broken_connections.is_empty()
            && self
                .broken_connections
                .iter()
                .any(|&(a, b)| (a, b) == (from.min(to), from.max(to)))
    }

    fn break_connection(&mut self, from: NodeId, to: NodeId) {
        if !self.connection_broken(from, to) {
            self.broken_connections.push((from.min(to), from.max(to)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_and_tcp_timeouts_follow_their_specifications() {
        let rc = TransportRetry::rc(14, 7);
        assert_eq!(rc.timeout_ns, 67_108_864);
        assert_eq!(rc.timeout_before(0), rc.timeout_before(6));
        let tcp = TransportRetry::tcp();
        assert_eq!(tcp.timeout_before(0), 200_000_000);
        assert_eq!(tcp.timeout_before(2), 800_000_000);
        let profile = NetworkProfile::builtin("tcp-10g").unwrap();
        assert_eq!(TransportRetry::of(&profile), tcp);
        let profile = NetworkProfile::builtin("cx4-edr").unwrap();
        assert_eq!(TransportRetry::of(&profile), rc);
    }
}
