//! CALVIN's reconnaissance run (Deneva §3.4; Calvin §3.2.1's "dependent
//! transactions"): a request whose read/write set depends on data
//! (`Workload::declare_accesses` answers false) is first run by its
//! sequencer against the committed state, without locks, and the records
//! the program touched become its declared set. The run's reads are only a
//! guess: if by execution time the data changed so that the program
//! touches a record outside that set, every active participant aborts it
//! alike (`AbortReason::Undeclared`) and the origin reconnoitres and
//! submits it again in a later epoch — the restart Deneva describes. Writes
//! of the reconnaissance run stay in its private copies.
//!
//! Reads: a local record straight from the store; a remote one by an RPC
//! to its node ([`super::RPC_READ`]), whose handler returns a
//! version that is whole (`seq == seq_end` around the record, the store's
//! consistency rule) or `MISSING`.
//!
//! Rows the program inserts are left out of the set (see
//! `CalvinExec::insert_access`), and records the workload declared before
//! answering false (`Workload::declare_accesses`: locks that order the
//! request against writers of a range it reads through an ordered index)
//! are kept in it.
//!
//! Invariant: the run never writes to the store or takes a lock.

use super::{read_consistent, Reach, INSERTED, MISSING, RPC_READ};
use crate::base::Stage;
use crate::store::NodeStore;
use crate::txn::{AbortReason, TxnCx, TxnResult};

/// How a reconnaissance run reaches records (run as a
/// [`CalvinRun`](super::CalvinRun)).
pub struct Recon<'a> {
    /// The sequencer's own node.
    pub store: &'a NodeStore,
}

impl Reach for Recon<'_> {
    const STAGE: Stage = Stage::TxnBroadcastInput;

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let access = cx.accesses[index];
        let words = cx.table(access.table).record_words as usize;
        let seq = if access.node == self.store.node {
            read_consistent(self.store, access.table, access.key, cx.record_mut(index))
        } else {
            let call = {
                let mut batch = cx.round();
                let mut payload = batch.payload();
                payload.extend_from_slice(&[access.table as u64, access.key]);
                batch.call(access.node, RPC_READ, payload, false)
            };
            cx.submit().await?;
            let reply = cx.batch().reply(call).to_vec();
            if reply[0] != MISSING {
                cx.record_mut(index).copy_from_slice(&reply[1..1 + words]);
            }
            reply[0]
        };
        if seq == MISSING {
            return Err(AbortReason::NotFound);
        }
        cx.accesses[index].seq = seq;
        Ok(())
    }

    /// A row the program inserts is not part of the set (its key is
    /// covered by a record the transaction writes; see
    /// `CalvinExec::insert_access`): the run goes on with an absent copy,
    /// and claims nothing in the store.
    async fn insert_access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        cx.accesses[index].meta = INSERTED;
        Ok(())
    }
}
