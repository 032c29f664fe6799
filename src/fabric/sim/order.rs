//! The processing order of the `sim` fabric's events (the parent's module
//! doc, "Processing order"): window by window of the network's lookahead,
//! node by node within a window, by time within a node, folded into one
//! `u64` key that the event queue orders as it would a time.
//!
//! Invariants: keys of one node grow with its times; a key maps back to
//! its time exactly (`time_ns`); with one node, or no lookahead, the key
//! is the time itself (plain time order).

use crate::fabric::event_queue::TIME_SHIFT;
use crate::fabric::NodeId;

/// The order events run in (module docs, "Processing order"): window by
/// window of the lookahead, node by node within a window, and by time
/// within a node. A key folds (window, node, time) into one `u64`, which
/// the event queue orders as it would a time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Order {
    /// The network's lookahead: nothing one node does takes effect at
    /// another sooner. 0: plain time order, the key is the time.
    pub(super) lookahead_ns: u64,
    nodes: u64,
}

impl Order {
    /// The order of `nodes` nodes whose messages and verbs take at least
    /// `lookahead_ns` to reach another node.
    pub(super) fn new(nodes: usize, lookahead_ns: u64) -> Order {
        let nodes = nodes.max(1) as u64;
        // One node: windows would order nothing differently.
        let lookahead_ns = if nodes == 1 { 0 } else { lookahead_ns };
        Order {
            lookahead_ns,
            nodes,
        }
    }

    /// A key is about `nodes` times its time: past 2^64 / `nodes` ns (over
    /// 3 days at 65,536 nodes; runs are seconds) keys saturate, and such
    /// events come last.
    #[inline]
    pub(super) fn key(self, node: NodeId, at_ns: u64) -> u64 {
        if self.lookahead_ns == 0 {
            return at_ns;
        }
        debug_assert!((node as u64) < self.nodes);
        let window = at_ns / self.lookahead_ns;
        (window.saturating_mul(self.nodes) + node as u64)
            .saturating_mul(self.lookahead_ns)
            .saturating_add(at_ns % self.lookahead_ns)
    }

    /// The virtual time of `key`.
    #[inline]
    pub(super) fn time_ns(self, key: u64) -> u64 {
        if self.lookahead_ns == 0 {
            return key;
        }
        key / (self.lookahead_ns * self.nodes) * self.lookahead_ns + key % self.lookahead_ns
    }

    /// The earliest time at `node` whose key is not below `key`: a node's
    /// keys grow with its time, so comparing times against this bound
    /// orders them as their keys would, with one division.
    #[inline]
    pub(super) fn first_time_at_or_after(self, node: NodeId, key: u64) -> u64 {
        if self.lookahead_ns == 0 {
            return key;
        }
        let span = self.lookahead_ns * self.nodes;
        let window_start_ns = key / span * self.lookahead_ns;
        let slot = key % span / self.lookahead_ns;
        match (node as u64).cmp(&slot) {
            // Its slot of this window comes after `key`.
            std::cmp::Ordering::Greater => window_start_ns,
            std::cmp::Ordering::Equal => window_start_ns + key % self.lookahead_ns,
            // Its slot of this window is past: the next window's.
            std::cmp::Ordering::Less => window_start_ns + self.lookahead_ns,
        }
    }

    /// The node whose events `key` is among.
    pub(super) fn node_of_key(self, key: u64) -> u64 {
        if self.lookahead_ns == 0 {
            return 0;
        }
        key / self.lookahead_ns % self.nodes
    }

    /// The earliest time a node can still be at while `at_ns`'s window
    /// runs: its start (every node has run up to it).
    #[inline]
    pub(super) fn floor_ns(self, at_ns: u64) -> u64 {
        if self.lookahead_ns == 0 {
            return at_ns;
        }
        at_ns / self.lookahead_ns * self.lookahead_ns
    }

    /// How many more keys than ns a bucket of the event queue spans.
    pub(super) fn bucket_shift(self) -> u32 {
        if self.lookahead_ns == 0 {
            TIME_SHIFT
        } else {
            TIME_SHIFT + self.nodes.next_power_of_two().trailing_zeros()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Comparing a node's times against `first_time_at_or_after` orders
    /// them exactly as comparing their keys does, and a key maps back to
    /// its time.
    #[test]
    pub(super) fn a_time_bound_orders_as_the_keys_do() {
        let order = Order::new(5, 1_000);
        for key in (0..40_000).step_by(37) {
            for node in 0..5 {
                let bound = order.first_time_at_or_after(node, key);
                for at_ns in bound.saturating_sub(3)..bound + 3 {
                    assert_eq!(
                        order.key(node, at_ns) >= key,
                        at_ns >= bound,
                        "{key} {node} {at_ns}"
                    );
                    assert_eq!(order.time_ns(order.key(node, at_ns)), at_ns);
                }
            }
        }
        let plain = Order::new(1, 1_000);
        assert_eq!(plain.key(0, 12_345), 12_345);
        assert_eq!(plain.first_time_at_or_after(0, 12_345), 12_345);
    }
}
