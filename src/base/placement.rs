//! Where each partition's copies live.
//!
//! Partition `p` (the rows node `p` loads) has its primary on node `p` and
//! its `r − 1` backups on nodes `p + 1, …, p + r − 1 (mod n)` — the
//! successor placement FaRM and DrTM+H use (DrTM+H §5.4: primary-backup
//! replication, r = 3 in the evaluation; RCC §6.1 runs with 3-way
//! replication). On node `b`, the backup of partition `p` is copy
//! `j = b − p (mod n)` of every table (`store`'s module doc), so copy `j`
//! of every node backs up the same distance behind it. Invariants:
//! `1 ≤ r ≤ n`, and the `r` nodes of a partition are distinct.
//!
//! After a failure the first *live* node of `p, p + 1, …, p + r − 1` serves
//! the partition (`primary_given`): the promoted backup.

use super::NodeId;

/// The replication factor and cluster size; the map from partitions to
/// nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub nodes: u32,
    /// Copies of each partition, primary included (1..=3, ≤ nodes).
    pub factor: u32,
}

impl Placement {
    pub fn new(nodes: u32, factor: u32) -> Placement {
        assert!(
            factor >= 1 && factor <= nodes,
            "replication factor {factor} for {nodes} nodes"
        );
        Placement { nodes, factor }
    }

    /// The node holding copy `copy` of partition `partition` (copy 0: the
    /// primary).
    #[inline]
    pub fn node_of(&self, partition: NodeId, copy: u32) -> NodeId {
        debug_assert!(copy < self.factor);
        ((partition as u32 + copy) % self.nodes) as NodeId
    }

    /// Backups of `partition`, in promotion order.
    pub fn backups(&self, partition: NodeId) -> impl Iterator<Item = NodeId> + Clone + '_ {
        (1..self.factor).map(move |copy| self.node_of(partition, copy))
    }

    /// Which copy of `partition` node `node` holds, if any (0: primary).
    #[inline]
    pub fn copy_on(&self, node: NodeId, partition: NodeId) -> Option<u32> {
        let distance = (node as u32 + self.nodes - partition as u32) % self.nodes;
        (distance < self.factor).then_some(distance)
    }

    /// `(partition, copy)` of every backup copy node `node` holds.
    pub fn backed_up_by(&self, node: NodeId) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        (1..self.factor).map(move |copy| {
            let partition = (node as u32 + self.nodes - copy) % self.nodes;
            (partition as NodeId, copy)
        })
    }

    /// The node serving `partition` when `alive` says which nodes are up:
    /// its first live copy in placement order; `None` if all are down.
    pub fn primary_given(
        &self,
        partition: NodeId,
        alive: impl Fn(NodeId) -> bool,
    ) -> Option<NodeId> {
        (0..self.factor)
            .map(|copy| self.node_of(partition, copy))
            .find(|&node| alive(node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backups_follow_the_primary_and_copies_agree() {
        let placement = Placement::new(4, 3);
        assert_eq!(placement.backups(0).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(placement.backups(3).collect::<Vec<_>>(), vec![0, 1]);
        for node in 0..4 {
            for (partition, copy) in placement.backed_up_by(node) {
                assert_eq!(placement.node_of(partition, copy), node);
                assert_eq!(placement.copy_on(node, partition), Some(copy));
            }
            assert_eq!(placement.copy_on(node, node), Some(0));
        }
        assert_eq!(
            placement.copy_on(3, 0),
            None,
            "node 3 does not hold partition 0"
        );
        assert_eq!(placement.primary_given(1, |n| n != 1), Some(2));
        assert_eq!(placement.primary_given(1, |n| n == 0), None);
        let single = Placement::new(2, 1);
        assert_eq!(single.backups(0).count(), 0);
        assert_eq!(single.backed_up_by(1).count(), 0);
    }
}
