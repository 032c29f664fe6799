//! The dependency graph as compressed sparse rows, its strongly connected
//! components, and one shortest cycle as evidence.
//!
//! Nothing here recurses: histories reach millions of transactions, so the
//! component search and the cycle extraction keep explicit stacks.

use std::collections::VecDeque;

use super::records::{bits, radix_sort};
use super::NONE;

/// Compressed sparse rows: the successors of `t` are
/// `targets[offsets[t]..offsets[t + 1]]`, sorted and distinct.
pub(super) struct Graph {
    pub(super) offsets: Vec<usize>,
    pub(super) targets: Vec<u32>,
}

impl Graph {
    #[inline]
    pub(super) fn successors(&self, t: u32) -> &[u32] {
        &self.targets[self.offsets[t as usize]..self.offsets[t as usize + 1]]
    }
}

/// Groups `from << 32 | to` edges into rows, deduplicating: a transaction
/// reading several keys from one writer yields the same edge once per key.
pub(super) fn to_csr(mut edges: Vec<u64>, n: usize) -> Graph {
    // Grouping needs only the source bits; rows are small and each is sorted
    // on its own below.
    radix_sort(&mut edges, bits(n as u64), |&e| e >> 32);
    let mut offsets = vec![0usize; n + 1];
    let mut targets: Vec<u32> = Vec::with_capacity(edges.len());
    let mut row_start = 0;
    while row_start < edges.len() {
        let from = (edges[row_start] >> 32) as usize;
        let mut row_end = row_start + 1;
        while row_end < edges.len() && (edges[row_end] >> 32) as usize == from {
            row_end += 1;
        }
        let row = &mut edges[row_start..row_end];
        row.sort_unstable();
        let mut last = u64::MAX;
        for &e in row.iter() {
            if e != last {
                targets.push(e as u32);
                last = e;
            }
        }
        offsets[from + 1] = targets.len();
        row_start = row_end;
    }
    drop(edges);
    // Sources without edges were left at 0; they end where the last row did.
    for t in 0..n {
        offsets[t + 1] = offsets[t + 1].max(offsets[t]);
    }
    targets.shrink_to_fit();
    Graph { offsets, targets }
}

pub(super) struct Components {
    /// Component number of each transaction.
    pub(super) component: Vec<u32>,
    pub(super) cyclic_components: usize,
    /// A transaction in the first component found with more than one member.
    pub(super) first_cyclic: Option<u32>,
}

/// Pearce's space-efficient variant of Tarjan's algorithm ("A space-efficient
/// algorithm for finding strongly connected components", IPL 2016), with an
/// explicit call stack. One `u32` per transaction instead of Tarjan's three:
/// every edge visit lands on a random transaction, so the smaller the array
/// the more of it stays in cache.
///
/// `rindex[v]` is 0 while `v` is unvisited; while `v` is being searched, its
/// visit index, lowered to the smallest index it reaches; once its component
/// is complete, the component number. Numbers are handed out downwards from
/// `n - 1` and visit indexes are reused as components complete, so a
/// completed number is never below a live index and needs no separate flag.
pub(super) fn strongly_connected(graph: &Graph) -> Components {
    let n = graph.offsets.len() - 1;
    let mut rindex = vec![0u32; n];
    // Visited transactions whose component is not yet complete.
    let mut stack: Vec<u32> = Vec::new();
    // (transaction, next edge, still a candidate component root).
    let mut calls: Vec<(u32, usize, bool)> = Vec::new();
    let mut index = 1u32;
    let mut next_component = n as u32;
    let mut cyclic_components = 0;
    let mut first_cyclic = None;

    for root in 0..n as u32 {
        if rindex[root as usize] != 0 {
            continue;
        }
        rindex[root as usize] = index;
        index += 1;
        calls.push((root, graph.offsets[root as usize], true));

        while let Some(&mut (v, ref mut edge, ref mut is_root)) = calls.last_mut() {
            let vi = v as usize;
            if *edge < graph.offsets[vi + 1] {
                let w = graph.targets[*edge];
                *edge += 1;
                let seen = rindex[w as usize];
                if seen == 0 {
                    rindex[w as usize] = index;
                    index += 1;
                    calls.push((w, graph.offsets[w as usize], true));
                } else if seen < rindex[vi] {
                    rindex[vi] = seen;
                    *is_root = false;
                }
                continue;
            }
            let is_root = *is_root;
            calls.pop();
            if is_root {
                next_component -= 1;
                index -= 1;
                let mut size = 1usize;
                while let Some(&w) = stack.last() {
                    if rindex[w as usize] < rindex[vi] {
                        break;
                    }
                    stack.pop();
                    rindex[w as usize] = next_component;
                    index -= 1;
                    size += 1;
                }
                rindex[vi] = next_component;
                if size > 1 {
                    cyclic_components += 1;
                    first_cyclic.get_or_insert(v);
                }
            } else {
                stack.push(v);
            }
            if let Some((parent, _, parent_is_root)) = calls.last_mut() {
                let low = rindex[vi];
                if low < rindex[*parent as usize] {
                    rindex[*parent as usize] = low;
                    *parent_is_root = false;
                }
            }
        }
    }
    Components {
        component: rindex,
        cyclic_components,
        first_cyclic,
    }
}

/// A shortest cycle through `start`, found by breadth-first search from it
/// back to it inside its component (every cycle through `start` stays inside,
/// and the search never wanders over the rest of a huge graph).
pub(super) fn find_cycle(graph: &Graph, component: &[u32], start: u32) -> Vec<u32> {
    let home = component[start as usize];
    let mut parent = vec![NONE; component.len()];
    let mut queue = VecDeque::new();
    queue.push_back(start);
    while let Some(v) = queue.pop_front() {
        for &w in graph.successors(v) {
            if w == start {
                // Walk parents back from v to start, then reverse into edge order.
                let mut cycle = vec![v];
                let mut at = v;
                while at != start {
                    at = parent[at as usize];
                    cycle.push(at);
                }
                cycle.reverse();
                return cycle;
            }
            if component[w as usize] == home && parent[w as usize] == NONE {
                parent[w as usize] = v;
                queue.push_back(w);
            }
        }
    }
    unreachable!("a component with more than one member has a cycle through each member")
}
