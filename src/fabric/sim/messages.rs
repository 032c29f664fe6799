//! RPC messages on the `sim` fabric (the parent's module doc, "RPC
//! messages"): what a worker sends to one node within a turn is coalesced
//! into one wire message, which leaves when the turn ends (or fills) and
//! arrives as one event; a message between workers of one node is
//! delivered at once.
//!
//! Invariants: messages of one worker pair deliver in send order (one
//! (worker, node) channel, FIFO); a wire message leaves exactly once; a
//! request that reaches a crashed node goes back to its sender as
//! `MSG_FAILED` one lookahead later, and anything else to it is lost; a
//! wire message a drop loses is sent again by the transport and arrives
//! once, late, keeping its place on its channel; one the transport gave
//! up on fails every part: a request back to its sender, a reply on to its
//! receiver, each `MSG_FAILED` from the unreachable peer.

use super::transport::Transfer;
use super::{Event, Outbox, SimState, WIRE_HEADER_BYTES};
use crate::fabric::verbs::{MAX_COALESCED_WORDS, MSG_COMPLETION, MSG_FAILED, MSG_REPLY};
use crate::fabric::Message;

impl SimState {
    /// Hands a request that reached a crashed node back to its sender as
    /// `MSG_FAILED` (source and destination swapped); replies and
    /// completions for a crashed node, and anything whose sender crashed
    /// too, are just lost.
    pub(super) fn bounce(&mut self, mut msg: Message) {
        if msg.flags & (MSG_REPLY | MSG_COMPLETION) != 0 || self.crashed(msg.src_node, self.now_ns)
        {
            return;
        }
        std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
        std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
        msg.flags |= MSG_REPLY | MSG_FAILED;
        // The failure travels back one lookahead: no node hears of another
        // node's state sooner (see "Processing order").
        let at = self.now_ns + self.order.lookahead_ns;
        msg.deliver_at_ns = at;
        let sender = msg.dst_node as u32 * self.workers_per_node as u32 + msg.dst_worker as u32;
        self.schedule(
            msg.dst_node,
            at,
            Event::Deliver {
                worker: sender,
                msg,
            },
        );
    }

    /// Takes `msg` from worker `sender`. A message to a worker of the
    /// sender's own node is delivered at once; one to another node joins
    /// the wire message the sender is filling for that node this turn,
    /// which leaves at the end of the turn (`flush`) or, at the size cap,
    /// now. Returns whether `msg` opened a new wire message.
    pub(super) fn send(&mut self, sender: u32, mut msg: Message) -> bool {
        let nodes = self.regions.len();
        debug_assert_eq!(msg.src_node, self.node_of(sender));
        if msg.dst_node == msg.src_node {
            let receiver =
                msg.dst_node as u32 * self.workers_per_node as u32 + msg.dst_worker as u32;
            let channel = sender as usize * nodes + msg.dst_node as usize;
            let at = self.clock_ns[sender as usize].max(self.channel_last_ns[channel]);
            self.channel_last_ns[channel] = at;
            msg.deliver_at_ns = at;
            self.schedule(
                msg.dst_node,
                at,
                Event::Deliver {
                    worker: receiver,
                    msg,
                },
            );
            return false;
        }
        let outboxes = &mut self.outboxes[sender as usize];
        let (index, opened) = match outboxes.iter().position(|o| o.node == msg.dst_node) {
            Some(index) => (index, false),
            None => {
                let parts = self.spare_parts.pop().unwrap_or_default();
                debug_assert!(parts.is_empty());
                outboxes.push(Outbox {
                    node: msg.dst_node,
                    words: 0,
                    parts,
                });
                (outboxes.len() - 1, true)
            }
        };
        let outbox = &mut outboxes[index];
        outbox.words += msg.frame_words();
        outbox.parts.push(msg);
        if outbox.words >= MAX_COALESCED_WORDS {
            let full = outboxes.swap_remove(index);
            self.depart(sender, full);
        }
        opened
    }

    /// Sends every wire message worker `sender` filled, in node order
    /// (as `ucx` flushes its outboxes).
    pub(super) fn flush(&mut self, sender: u32) {
        if self.outboxes[sender as usize].is_empty() {
            return;
        }
        let mut outboxes = std::mem::take(&mut self.outboxes[sender as usize]);
        outboxes.sort_unstable_by_key(|o| o.node);
        for outbox in outboxes.drain(..) {
            self.depart(sender, outbox);
        }
        // Keep the list's capacity for the next turn.
        debug_assert!(self.outboxes[sender as usize].is_empty());
        self.outboxes[sender as usize] = outboxes;
    }

    /// Puts one coalesced wire message on the wire at the sender's clock:
    /// one doorbell (`send_ns`), one one-way latency, its bytes at the
    /// wire rate, one operation of the target NIC, one draw of each link
    /// fault, FIFO behind the channel's previous message, and one arrival
    /// event.
    pub(super) fn depart(&mut self, sender: u32, outbox: Outbox) {
        let Outbox { node, words, parts } = outbox;
        debug_assert!(!parts.is_empty(), "a wire message carries a part");
        debug_assert!(parts.iter().all(|m| m.dst_node == node));
        debug_assert_eq!(words, parts.iter().map(Message::frame_words).sum::<usize>());
        self.clock_ns[sender as usize] += self.cpu.send_ns;
        let now = self.clock_ns[sender as usize];
        let source = self.node_of(sender);
        let bytes = WIRE_HEADER_BYTES + 8 * words as u64;
        let mut at = now + self.jittered(self.timing.rpc_one_way_ns) + self.wire_ns(bytes);
        let extra = match self.transfer(source, node, now) {
            Transfer::Delivered { extra_ns } => extra_ns,
            Transfer::Failed { at_ns } => {
                self.fail_unsent(parts, at_ns);
                return;
            }
        };
        at = self.through_nic(node, at + extra);
        let channel = sender as usize * self.regions.len() + node as usize;
        at = at.max(self.channel_last_ns[channel]);
        self.channel_last_ns[channel] = at;
        let mut parts = parts;
        for part in parts.iter_mut() {
            part.deliver_at_ns = at;
        }
        self.schedule(node, at, Event::Arrive { parts });
    }

    /// Fails every part of a wire message the transport gave up on at
    /// `at_ns` (its connection broke): a request goes back to its sender
    /// as `MSG_FAILED`, then, and a reply goes on to its receiver marked
    /// `MSG_FAILED`, one lookahead later at the earliest (no node hears of
    /// another's state sooner), so whoever waits on either learns that
    /// the peer is unreachable. Nothing of it ran at the receiver.
    pub(super) fn fail_unsent(&mut self, mut parts: Vec<Message>, at_ns: u64) {
        let per_node = self.workers_per_node as u32;
        for mut msg in parts.drain(..) {
            let (node, at) = if msg.flags & MSG_REPLY == 0 {
                std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
                std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
                msg.flags |= MSG_REPLY | MSG_FAILED;
                (msg.dst_node, at_ns.max(self.now_ns))
            } else {
                msg.flags |= MSG_FAILED;
                (
                    msg.dst_node,
                    at_ns.max(self.now_ns + self.order.lookahead_ns),
                )
            };
            msg.deliver_at_ns = at;
            let worker = node as u32 * per_node + msg.dst_worker as u32;
            self.schedule(node, at, Event::Deliver { worker, msg });
        }
        self.spare_parts.push(parts);
    }

    /// A wire message arrives: its parts go to their receivers' mailboxes
    /// in send order — or, at a crashed node, each is lost, and each
    /// request goes back to its sender as failed (`bounce`).
    pub(super) fn arrive(&mut self, mut parts: Vec<Message>) {
        let node = parts[0].dst_node;
        debug_assert!(parts.iter().all(|m| m.dst_node == node));
        let now = self.now_ns;
        if self.crashed(node, now) {
            for msg in parts.drain(..) {
                self.lost_count += 1;
                self.bounce(msg);
            }
        } else {
            for msg in parts.drain(..) {
                let receiver = node as u32 * self.workers_per_node as u32 + msg.dst_worker as u32;
                self.mailboxes[receiver as usize].push(msg);
                self.wake(receiver, now);
            }
        }
        self.spare_parts.push(parts);
    }
}
