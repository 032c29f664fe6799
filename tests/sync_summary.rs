//! The version sync of a multi-process failover compares the survivors'
//! copies by bucket sums first (`recovery::steps::sync_summary`) and
//! exchanges versions only where they differ
//! (`recovery::steps::differing_buckets`): copies that agree cost no
//! versions, and a bucket where one copy holds a version another lacks is
//! always named.

use verbena::recovery::steps::{differing_buckets, sync_bucket, SYNC_BUCKETS};
use verbena::replication::Placement;

/// A summary of one copy's one table: the sums as `sync_summary` lays
/// them out.
fn summary(partition: u64, table: u64, sums: &[u64]) -> Vec<u64> {
    let mut words = vec![partition, table];
    words.extend_from_slice(sums);
    words
}

#[test]
fn equal_copies_differ_nowhere_and_one_bucket_differs_alone() {
    // Three nodes, R = 3, node 2 failed: partitions 0..3 each have two
    // live holders, nodes 0 and 1.
    let placement = Placement::new(3, 3);
    let failed = [2];
    let sums: Vec<u64> = (0..SYNC_BUCKETS).map(|b| b * 7 + 1).collect();
    let both = |node: u16, changed: Option<usize>| {
        let mut words = Vec::new();
        for partition in 0..3 {
            let mut own = sums.clone();
            if let (Some(bucket), 1) = (changed, partition) {
                own[bucket] ^= 1;
            }
            words.extend(summary(partition, 0, &own));
        }
        (node, words)
    };
    let equal = [both(0, None), both(1, None)];
    assert!(differing_buckets(&placement, &failed, &equal)
        .unwrap()
        .is_empty());
    let bucket = 17;
    let one = [both(0, None), both(1, Some(bucket))];
    assert_eq!(
        differing_buckets(&placement, &failed, &one).unwrap(),
        vec![1, 0, bucket as u64]
    );
}

#[test]
fn a_holder_without_a_summary_differs_everywhere_and_bad_summaries_are_refused() {
    let placement = Placement::new(3, 2);
    // Partition 0's live holders under R = 2 with no failure: nodes 0 and 1.
    let zeros = vec![0; SYNC_BUCKETS as usize];
    let only_one = [(0, summary(0, 0, &zeros)), (1, Vec::new())];
    let differing = differing_buckets(&placement, &[], &only_one).unwrap();
    assert_eq!(differing.len() as u64, 3 * SYNC_BUCKETS);
    let torn = [(0, vec![0, 0, 1])];
    assert!(differing_buckets(&placement, &[], &torn).is_err());
}

#[test]
fn buckets_spread_keys() {
    let mut hit = vec![0u32; SYNC_BUCKETS as usize];
    for key in 0..SYNC_BUCKETS * 8 {
        hit[sync_bucket(key) as usize] += 1;
    }
    // Consecutive keys (a loaded table's) fill every bucket.
    assert!(hit.iter().all(|&n| n > 0));
    assert!(hit.iter().all(|&n| n < 32));
}
