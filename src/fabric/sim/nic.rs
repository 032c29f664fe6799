//! The NIC op-rate cap of the `sim` fabric (`NetworkProfile::nic_mops`),
//! reserved by arrival time.
//!
//! What the cap means: each NIC's virtual time is cut into fixed windows
//! of `window_ns = capacity × op_ns` (`op_ns` = 1 / the op rate, so about
//! 1 µs; at least one operation's time), and at most `capacity`
//! operations start in each window. An operation arriving at `t` takes a
//! place in the first window at or after `t`'s that has one, and starts
//! at `max(t, that window's start)`. So over every window the NIC starts
//! no more operations than its rate allows, and an operation is delayed
//! only when its own window is full — at saturation, by up to a window
//! more than a FIFO queue at the same rate would, the model's resolution.
//!
//! Why windows and not one "free at" time per NIC: the simulator runs
//! worker turns in the order of their turn times, but a worker's clock
//! runs ahead of the others' within its turn (by a compute step, several
//! µs), so operations reach the NIC out of arrival order. A single free
//! time let an operation arriving later reserve first and push every
//! earlier one behind it, at a NIC far below its cap. With windows,
//! reserving a later operation first never delays an earlier one, except
//! by filling the earlier one's own window (which needs a saturated NIC).
//! Which operations of a full window move on still follows simulation
//! order, which is deterministic.
//!
//! Invariants: every operation a window holds arrived in it or before it;
//! no window holds more than `capacity`; a window's count, once it holds
//! one, only grows while the window can still be reached (no operation
//! arrives before the simulation's `now`, so windows before `now`'s are
//! dead and their slots are recycled). Counts live in a ring of slots per
//! node, each tagged with its window, sized to cover the windows an
//! operation can reach ahead of `now` (one-way latencies, swarm and
//! jitter, a compute step's skew); a window whose slot still holds
//! another live window (a link delay fault, a long backlog) is counted in
//! an ordered overflow map instead. No hash map: the run stays a pure
//! function of (config, seed).

use std::collections::BTreeMap;

use crate::fabric::NodeId;

/// The window the cap is counted over, about: long enough that the
/// capacity divides finely (130 M ops/s: 125 operations a µs), short
/// enough that a saturated NIC's delays stay near a FIFO queue's.
const WINDOW_TARGET_NS: u64 = 1_000;

/// Skew a ring must cover beyond the network's one-way times: a worker's
/// clock runs ahead of `now` by up to its turn's CPU time (a compute step
/// of a few µs, a long turn of served requests).
const SKEW_ALLOWANCE_NS: u64 = 64_000;

/// Bound on the ring's slots per node (beyond it, the overflow map).
const MAX_RING: u64 = 1 << 14;

#[derive(Clone, Copy)]
struct Slot {
    window: u64,
    count: u32,
}

/// Per node: the windows `[from, to)` known to be full, so a saturated
/// NIC's backlog is skipped in one step. A hint only: reservations are the
/// same without it.
#[derive(Clone, Copy, Default)]
struct FullRun {
    from: u64,
    to: u64,
}

/// Each NIC's reservations under its op-rate cap (module doc).
pub(super) struct NicCap {
    window_ns: u64,
    capacity: u32,
    /// Slots per node, a power of two.
    ring: usize,
    /// Per (node, window mod `ring`), at `node * ring + window % ring`.
    slots: Vec<Slot>,
    /// Windows counted outside the ring, by (window, node): ordered by
    /// window, so the dead ones are a prefix.
    overflow: BTreeMap<(u64, NodeId), u32>,
    full: Vec<FullRun>,
}

impl NicCap {
    /// The cap of `nodes` NICs at one operation per `op_ns` (none when 0),
    /// for operations arriving up to about `max_one_way_ns` (after swarm
    /// scaling, before jitter) ahead of the time they are reserved at.
    pub(super) fn new(
        nodes: usize,
        op_ns: u64,
        max_one_way_ns: u64,
        jitter: f64,
    ) -> Option<NicCap> {
        if op_ns == 0 {
            return None;
        }
        let capacity = (WINDOW_TARGET_NS / op_ns).clamp(1, u32::MAX as u64);
        let window_ns = capacity * op_ns;
        let reach_ns = (max_one_way_ns as f64 * (1.0 + jitter)) as u64 + SKEW_ALLOWANCE_NS;
        let ring = (reach_ns / window_ns + 2).next_power_of_two().min(MAX_RING) as usize;
        Some(NicCap {
            window_ns,
            capacity: capacity as u32,
            ring,
            // Slot `i` starts as window `i`, empty: a valid count.
            slots: (0..nodes)
                .flat_map(|_| (0..ring as u64).map(|window| Slot { window, count: 0 }))
                .collect(),
            overflow: BTreeMap::new(),
            full: vec![FullRun::default(); nodes],
        })
    }

    /// Reserves `node`'s NIC for one operation arriving at `at_ns`, when
    /// no operation arrives before `now_ns` any more; returns when the
    /// operation starts.
    pub(super) fn reserve(&mut self, node: NodeId, at_ns: u64, now_ns: u64) -> u64 {
        debug_assert!(at_ns >= now_ns, "an operation arrives before now");
        let live = now_ns / self.window_ns;
        let mut window = at_ns / self.window_ns;
        let run = self.full[node as usize];
        if (run.from..run.to).contains(&window) {
            window = run.to;
        }
        loop {
            match self.take(node, window, live) {
                Take::Taken { now_full } => {
                    if now_full {
                        self.note_full(node, window, live);
                    }
                    return at_ns.max(window * self.window_ns);
                }
                Take::Full => {
                    self.note_full(node, window, live);
                    let run = self.full[node as usize];
                    window = if (run.from..run.to).contains(&window) {
                        run.to
                    } else {
                        window + 1
                    };
                }
            }
        }
    }

    /// Takes a place in `window` of `node`'s NIC if it has one.
    fn take(&mut self, node: NodeId, window: u64, live: u64) -> Take {
        let capacity = self.capacity;
        let index = node as usize * self.ring + (window as usize & (self.ring - 1));
        let slot = &mut self.slots[index];
        if slot.window != window {
            let in_overflow =
                !self.overflow.is_empty() && self.overflow.contains_key(&(window, node));
            if !in_overflow && slot.window < live {
                // The slot's window is dead: recycle it for this one.
                *slot = Slot { window, count: 0 };
            } else {
                return self.take_overflow(node, window, live);
            }
        }
        if slot.count >= capacity {
            return Take::Full;
        }
        slot.count += 1;
        Take::Taken {
            now_full: slot.count == capacity,
        }
    }

    /// `take` for a window counted in the overflow map (its ring slot holds
    /// another live window).
    fn take_overflow(&mut self, node: NodeId, window: u64, live: u64) -> Take {
        if self
            .overflow
            .first_key_value()
            .is_some_and(|(&(first, _), _)| first < live)
        {
            self.overflow = self.overflow.split_off(&(live, 0));
        }
        let count = self.overflow.entry((window, node)).or_insert(0);
        if *count >= self.capacity {
            return Take::Full;
        }
        *count += 1;
        Take::Taken {
            now_full: *count == self.capacity,
        }
    }

    /// Records that `window` of `node`'s NIC is full, extending the known
    /// full run when it touches it, or starting a new one when the old run
    /// is dead.
    fn note_full(&mut self, node: NodeId, window: u64, live: u64) {
        let run = &mut self.full[node as usize];
        if window == run.to {
            run.to += 1;
        } else if window + 1 == run.from {
            run.from = window;
        } else if run.to <= live || run.from == run.to {
            *run = FullRun {
                from: window,
                to: window + 1,
            };
        }
    }
}

enum Take {
    Taken { now_full: bool },
    Full,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cx4-edr's cap: 8 ns an operation, 125 a 1 µs window.
    fn cx4() -> NicCap {
        NicCap::new(2, 8, 1_500, 0.1).unwrap()
    }

    #[test]
    fn no_cap_without_an_op_rate() {
        assert!(NicCap::new(2, 0, 1_500, 0.1).is_none());
    }

    #[test]
    fn an_unsaturated_nic_adds_no_delay() {
        let mut nic = cx4();
        // 100 operations in each of 50 windows, in a scrambled order, on
        // one node; other nodes' counts are their own.
        let mut order: Vec<u64> = (0..5_000).map(|i| (i * 7_919) % 5_000).collect();
        order.rotate_left(1_234);
        for i in order {
            let at = 10 * i + 3;
            assert_eq!(nic.reserve(0, at, 0), at);
        }
        assert_eq!(nic.reserve(1, 17, 0), 17);
    }

    #[test]
    fn a_saturated_nic_spreads_operations_at_its_cap() {
        let mut nic = cx4();
        // 1,000 operations arrive at once: 125 start in each window.
        let starts: Vec<u64> = (0..1_000).map(|_| nic.reserve(0, 500, 0)).collect();
        assert_eq!(&starts[..125], &[500; 125][..]);
        for (k, chunk) in starts.chunks(125).enumerate().skip(1) {
            assert!(chunk.iter().all(|&s| s == k as u64 * 1_000), "window {k}");
        }
        // The burst takes 8 windows of 1 µs: the cap's 8 ns an operation.
        assert_eq!(starts.last(), Some(&7_000));
        // A later operation lands after the backlog, an earlier window's
        // count is untouched by it (the node's other NIC is free).
        assert_eq!(nic.reserve(0, 600, 0), 8_000);
        assert_eq!(nic.reserve(1, 600, 0), 600);
    }

    #[test]
    fn reserving_a_later_operation_first_does_not_delay_an_earlier_one() {
        // The old model's failure: one free time per NIC, so an operation
        // at 5 µs reserved first delayed one at 1 µs to after 5 µs.
        let mut nic = cx4();
        assert_eq!(nic.reserve(0, 5_000, 0), 5_000);
        assert_eq!(nic.reserve(0, 1_000, 0), 1_000);
        // Even a later window filled to its cap leaves earlier ones free.
        for _ in 0..125 {
            nic.reserve(0, 9_000, 0);
        }
        assert_eq!(nic.reserve(0, 9_500, 0), 10_000);
        assert_eq!(nic.reserve(0, 8_999, 0), 8_999);
    }

    #[test]
    fn operations_beyond_the_ring_are_counted_in_the_overflow() {
        let mut nic = cx4();
        let ring = nic.ring as u64;
        // Window 3 and window 3 + ring share a slot while both are live.
        for _ in 0..125 {
            assert_eq!(nic.reserve(0, 3_000, 0), 3_000);
        }
        let far = (3 + ring) * 1_000;
        for _ in 0..125 {
            assert_eq!(nic.reserve(0, far, 0), far);
        }
        assert_eq!(nic.reserve(0, 3_000, 0), 4_000);
        assert_eq!(nic.reserve(0, far, 0), far + 1_000);
        // Once window 3 is dead the slot is recycled, and the overflow's
        // dead windows are dropped.
        let later = (3 + 2 * ring) * 1_000;
        assert_eq!(nic.reserve(0, later, 5_000 + ring * 1_000), later);
        assert_eq!(nic.reserve(0, far, far), far + 1_000);
    }

    /// The ring, its overflow and the full-run hint give the reservations
    /// of a plain count per (node, window): random arrivals, some far
    /// beyond the ring, at a NIC saturated often, as `now` advances.
    #[test]
    fn the_ring_reserves_as_a_plain_map_of_windows_would() {
        let mut nic = NicCap::new(3, 250, 1_500, 0.1).unwrap();
        let (window, capacity) = (nic.window_ns, nic.capacity);
        let horizon = nic.ring as u64 * window;
        let mut plain: BTreeMap<(NodeId, u64), u32> = BTreeMap::new();
        let mut rng = crate::base::rng::Rng::derive(7, &[1]);
        let (mut now, mut delayed, mut overflowed) = (0, 0, 0);
        // About 3.3 operations a µs per NIC against a cap of 4: full
        // windows and backlogs come and go.
        for _ in 0..100_000 {
            now += rng.below(200);
            let ahead = match rng.below(100) {
                0 => horizon + rng.below(4 * horizon),
                1..=20 => rng.below(20 * window),
                _ => rng.below(2 * window),
            };
            let (node, at) = (rng.below(3) as NodeId, now + ahead);
            let mut w = at / window;
            while plain.get(&(node, w)).copied().unwrap_or(0) >= capacity {
                w += 1;
            }
            *plain.entry((node, w)).or_insert(0) += 1;
            let start = nic.reserve(node, at, now);
            assert_eq!(start, at.max(w * window));
            delayed += (start > at) as u32;
            overflowed = overflowed.max(nic.overflow.len());
        }
        assert!(delayed > 1_000, "saturated often: {delayed} delayed");
        assert!(overflowed > 10, "beyond the ring often: {overflowed}");
    }

    #[test]
    fn a_slow_nic_windows_one_operation_at_a_time() {
        // cloud-lan: 0.5 M ops/s, 2 µs an operation, longer than the
        // target window.
        let mut nic = NicCap::new(1, 2_000, 500_000, 0.1).unwrap();
        let starts: Vec<u64> = (0..4).map(|_| nic.reserve(0, 100, 0)).collect();
        assert_eq!(starts, [100, 2_000, 4_000, 6_000]);
    }
}
