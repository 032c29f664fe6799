//! Where CALVIN's buffers live in every node's region, after the tables
//! (RCC §4.6, Fig. 11–12): a request buffer (CRB) per sequencer, a ring of
//! [`RING`] epochs of slots each, that sequencers write sub-batches into
//! one-sided; the forward blocks that participants write read records
//! into; and the completion counters of the client slots. Also how a
//! declared access packs into a batch entry.
//!
//! Invariants: every address lies inside the region the layout reserved
//! (`reserve` fails the run instead); a slot's or a block's address is a
//! pure function of `(epoch mod RING, sender, position)`, the same on
//! every node; an access packs into two words and back unchanged.

use super::{CRB_HEADER_WORDS, ENTRY_FIXED_WORDS, RING};
use crate::fabric::NodeId;
use crate::store::{StoreLayout, TableId};
use crate::workloads::Declared;

/// A transaction's place in the global order: its epoch, its sequencer
/// and its position in that sequencer's batch. Every node computes it
/// from the input alone, so it names the transaction's forwarded records
/// (a forward block's address, the key of the records forwarded by RPC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Place {
    pub epoch: u64,
    pub sequencer: NodeId,
    /// Position in the sequencer's whole batch of the epoch.
    pub position: u32,
}

impl Place {
    /// The tag of a forward block that holds this transaction's record.
    #[inline]
    pub fn tag(self) -> u64 {
        self.epoch + 1
    }
}

/// Where CALVIN's buffers live in every node's region (after the tables).
#[derive(Clone, Copy, Debug)]
pub struct CalvinLayout {
    pub nodes: u32,
    /// Client slots per node ([`client_slots`](super::client_slots)): at
    /// most this many entries per sequencer batch, and requests in flight
    /// per node.
    pub clients: u32,
    pub max_accesses: u32,
    /// Forward blocks per transaction: most records one active participant
    /// receives (`Workload::max_forwarded_accesses`).
    pub max_forwarded: u32,
    /// Words of one batch entry at most.
    pub entry_words: u32,
    /// Largest record of any table, words.
    pub max_record_words: u32,
    pub crb_base: u64,
    pub crb_slot_words: u64,
    pub fwd_base: u64,
    pub done_base: u64,
}

impl CalvinLayout {
    /// Reserves the buffers at the end of `layout`'s region.
    pub fn reserve(
        layout: &mut StoreLayout,
        nodes: u32,
        clients: u32,
        max_accesses: u32,
        max_forwarded: u32,
        max_request_words: u32,
    ) -> CalvinLayout {
        let max_forwarded = max_forwarded.min(max_accesses);
        let max_record_words = layout
            .tables
            .iter()
            .map(|t| t.record_words)
            .max()
            .unwrap_or(0);
        let entry_words = ENTRY_FIXED_WORDS as u32 + 2 * max_accesses + max_request_words;
        let crb_slot_words = CRB_HEADER_WORDS + clients as u64 * entry_words as u64;
        let crb_base = layout.region_words;
        let fwd_base = crb_base + nodes as u64 * RING * crb_slot_words;
        let fwd_words = RING
            * nodes as u64
            * clients as u64
            * max_forwarded as u64
            * (2 + max_record_words as u64);
        let done_base = fwd_base + fwd_words;
        layout.region_words = done_base + clients as u64;
        CalvinLayout {
            nodes,
            clients,
            max_accesses,
            max_forwarded,
            entry_words,
            max_record_words,
            crb_base,
            crb_slot_words,
            fwd_base,
            done_base,
        }
    }

    /// The request-buffer slot, on the receiving node, that `sender` fills
    /// for `epoch`.
    #[inline]
    pub fn crb_addr(&self, sender: NodeId, epoch: u64) -> u64 {
        self.crb_base + (sender as u64 * RING + epoch % RING) * self.crb_slot_words
    }

    /// Words of one forwarded record block: `[tag, seq, record]`.
    #[inline]
    pub fn fwd_block_words(&self) -> u64 {
        2 + self.max_record_words as u64
    }

    /// Forward block `block`, on an active participant, of the transaction
    /// at `place`: block `b` holds the `b`-th access (in declared order)
    /// that lies on another node than that participant, so a transaction
    /// needs as many blocks there as it has records elsewhere, not as it
    /// has records.
    #[inline]
    pub fn fwd_addr(&self, place: Place, block: u32) -> u64 {
        debug_assert!(place.position < self.clients && block < self.max_forwarded);
        let batch = (place.epoch % RING) * self.nodes as u64 + place.sequencer as u64;
        let txn = batch * self.clients as u64 + place.position as u64;
        self.fwd_base + (txn * self.max_forwarded as u64 + block as u64) * self.fwd_block_words()
    }

    /// Whether `accesses` fit the forward buffer: no node that writes
    /// would receive more than `max_forwarded` records.
    pub fn forwards_fit(&self, accesses: &[Declared]) -> bool {
        let mut writers: Vec<NodeId> = Vec::new();
        for access in accesses.iter().filter(|a| a.write) {
            if !writers.contains(&access.node) {
                writers.push(access.node);
            }
        }
        writers.iter().all(|&writer| {
            accesses.iter().filter(|a| a.node != writer).count() <= self.max_forwarded as usize
        })
    }

    /// The completion counter of client slot `slot`, on its origin node.
    #[inline]
    pub fn done_addr(&self, slot: u32) -> u64 {
        debug_assert!(slot < self.clients);
        self.done_base + slot as u64
    }
}

/// Packs an access for a batch entry.
#[inline]
pub fn pack_access(access: &Declared) -> [u64; 2] {
    [
        ((access.table as u64) << 32) | ((access.node as u64) << 1) | access.write as u64,
        access.key,
    ]
}

#[inline]
pub fn unpack_access(words: &[u64]) -> Declared {
    Declared {
        table: (words[0] >> 32) as TableId,
        node: ((words[0] & 0xffff_ffff) >> 1) as NodeId,
        key: words[1],
        write: words[0] & 1 != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_pack_round_trip() {
        let access = Declared {
            table: 3,
            node: 4095,
            key: u64::MAX - 1,
            write: true,
        };
        assert_eq!(unpack_access(&pack_access(&access)), access);
    }
}
