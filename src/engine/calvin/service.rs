//! The RPC handlers of a CALVIN node (RCC §4.6): sub-batches that
//! sequencers send by RPC, forwarded records, completion reports, and in a
//! replicated run the replication layer's log messages and the background
//! apply of what arrived in this node's log rings.
//!
//! Invariants: a handler only files what arrived into the node's shared
//! state (`NodeState`) and replies at once — it never waits on another
//! node, so CALVIN's handlers cannot deadlock the event loop.

use std::cell::RefCell;

use super::{
    read_consistent, CalvinLayout, NodeShared, Place, SubBatch, RING, RPC_BATCH, RPC_DONE,
    RPC_FORWARD, RPC_READ,
};
use crate::fabric::NodeId;
use crate::protocols::Served;
use crate::replication::{self, Replication};
use crate::runtime::RpcService;
use crate::store::{NodeStore, TableId};

/// Serves CALVIN's RPCs on one node: sub-batches, forwarded records and
/// completion reports; in a replicated run also the replication layer's
/// log messages, and the background apply of the log records that
/// arrived in this node's rings (as `engine::Service` does for every other
/// protocol).
pub struct CalvinService<'a> {
    pub shared: &'a NodeShared,
    pub store: &'a NodeStore,
    pub calvin: &'a CalvinLayout,
    pub replication: Option<&'a Replication>,
    /// The backup apply's record buffer (kept for its capacity).
    pub scratch: RefCell<Vec<u64>>,
}

impl<'a> CalvinService<'a> {
    pub fn new(
        shared: &'a NodeShared,
        store: &'a NodeStore,
        calvin: &'a CalvinLayout,
        replication: Option<&'a Replication>,
    ) -> CalvinService<'a> {
        CalvinService {
            shared,
            store,
            calvin,
            replication,
            scratch: RefCell::new(Vec::new()),
        }
    }
}

impl RpcService for CalvinService<'_> {
    fn background(&self, worker: u16) -> bool {
        match self.replication {
            Some(replication) => {
                replication.poll(self.store, worker, &mut self.scratch.borrow_mut())
            }
            None => false,
        }
    }

    fn serve(&self, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        if let Some(replication) = self.replication {
            if replication::log::kind::owned(kind) {
                if let Some(served) = replication.serve(self.store, kind, payload) {
                    return served;
                }
            }
        }
        match kind {
            // [sender, epoch, sealed_ns, count, stop, entries...]
            RPC_BATCH => {
                let (sender, epoch) = (payload[0] as NodeId, payload[1]);
                let mut state = self.shared.lock();
                // A copy sent again after a failover refused the call
                // (`sequencer`): the epoch is here already.
                if epoch < state.scheduled_below || state.rpc_batches.contains_key(&(sender, epoch))
                {
                    payload.clear();
                    return Served::Reply;
                }
                // Flow control: see the module docs.
                if epoch + 1 >= state.done_below + RING {
                    return Served::Wait;
                }
                let mut words = std::mem::take(payload);
                let (sealed_ns, count, stop) = (words[2], words[3], words[4] != 0);
                words.drain(..5);
                state.rpc_batches.insert(
                    (sender, epoch),
                    SubBatch {
                        sealed_ns,
                        stop,
                        count,
                        entries: words,
                    },
                );
                Served::Reply
            }
            // [epoch, sequencer, position, blocks of [access, seq, record]...]
            RPC_FORWARD => {
                let key = Place {
                    epoch: payload[0],
                    sequencer: payload[1] as NodeId,
                    position: payload[2] as u32,
                };
                let blocks = payload[3] as u32;
                let mut state = self.shared.lock();
                let entry = state.forwards.entry(key).or_default();
                entry.0 += blocks;
                entry.1.extend_from_slice(&payload[4..]);
                payload.clear();
                Served::Reply
            }
            // [table, key] -> [seq, record] or [MISSING]: reconnaissance.
            RPC_READ => {
                let (table, key) = (payload[0] as TableId, payload[1]);
                let words = self.store.layout.table(table).record_words as usize;
                payload.clear();
                payload.resize(1 + words, 0);
                payload[0] = read_consistent(self.store, table, key, &mut payload[1..]);
                Served::Reply
            }
            // [client slot, addend]
            RPC_DONE => {
                self.store
                    .region
                    .faa(self.calvin.done_addr(payload[0] as u32), payload[1]);
                payload.clear();
                Served::Reply
            }
            _ => {
                debug_assert!(false, "unknown CALVIN RPC kind {kind}");
                payload.clear();
                Served::Reply
            }
        }
    }
}
