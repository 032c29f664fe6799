//! Packing of ids into 64-bit words.
//!
//! A coroutine id is `node:12 | worker:8 | coroutine:8` (28 bits; the config
//! limits are `MAX_NODES`, `MAX_WORKERS`, `MAX_COROUTINES`). A lock word
//! holds `coroutine id + 1`, so 0 means free. A transaction id is the
//! coroutine id above a 36-bit per-coroutine attempt counter, unique over a
//! run.

use crate::fabric::NodeId;

pub const COUNTER_BITS: u32 = 36;

#[inline]
pub fn coroutine_id(node: NodeId, worker: u16, co: u16) -> u32 {
    debug_assert!(node < 4096 && worker < 256 && co < 256);
    ((node as u32) << 16) | ((worker as u32) << 8) | co as u32
}

#[inline]
pub fn lock_owner(coroutine: u32) -> u64 {
    coroutine as u64 + 1
}

#[inline]
pub fn txn_id(coroutine: u32, counter: u64) -> u64 {
    debug_assert!(counter < 1 << COUNTER_BITS);
    ((coroutine as u64) << COUNTER_BITS) | counter
}

/// The node whose coroutine ran transaction `txn_id`.
#[inline]
pub fn node_of_txn(txn_id: u64) -> NodeId {
    (txn_id >> (COUNTER_BITS + 16)) as NodeId
}

/// `(node, worker, coroutine)` of a lock word's owner value.
#[inline]
pub fn split_owner(owner: u64) -> (NodeId, u16, u16) {
    debug_assert!(owner != 0, "0 is a free lock, not an owner");
    let id = (owner - 1) as u32;
    (
        (id >> 16) as NodeId,
        ((id >> 8) & 0xff) as u16,
        (id & 0xff) as u16,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_splits_back_into_its_coroutine() {
        for (node, worker, co) in [(0, 0, 0), (4095, 255, 255), (17, 3, 200)] {
            let owner = lock_owner(coroutine_id(node, worker, co));
            assert_eq!(split_owner(owner), (node, worker, co));
            let txn = txn_id(coroutine_id(node, worker, co), (1 << COUNTER_BITS) - 1);
            assert_eq!(node_of_txn(txn), node);
        }
    }
}
