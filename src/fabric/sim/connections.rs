//! The NICs' connection caches of the `sim` fabric
//! (`NetworkProfile::qp_cache`): each NIC caches the state of a bounded
//! number of connections (queue pairs), and a doorbell batch whose
//! connection misses at either end pays `qp_miss_ns` per miss — the
//! effect DrTM+H §3.1 and RCC §3.3 measure when a cluster's connections
//! outgrow the NIC's cache.
//!
//! Invariants: each cache holds at most `capacity` names and evicts the
//! least recently used one exactly; the connection a worker's next batch
//! to a node takes cycles through its `per_target` connections in order,
//! so the model is a pure function of the batches posted.

use crate::config::profile::NetworkProfile;
use crate::fabric::NodeId;

/// Each NIC's cache of connection state (`NetworkProfile::qp_cache`), and
/// which connection each worker's next batch to each node takes.
///
/// Connections are symmetric, as in DrTM+H's and RCC's setups: worker `w`
/// of node A reaches node B over its `k`-th connection to B, whose other
/// end at B belongs to B's worker `w`. So NIC A holds `workers × nodes ×
/// per_target` connections, named `(w × nodes + peer) × per_target + k`.
pub(super) struct ConnectionCaches {
    miss_ns: u64,
    per_target: u32,
    nodes: u32,
    workers_per_node: u32,
    /// Per (worker, target node): the connection its next batch takes.
    next: Vec<u32>,
    nics: Vec<Lru>,
    pub(super) lookups: u64,
    pub(super) misses: u64,
}

impl ConnectionCaches {
    /// The caches of `nodes` NICs with `workers_per_node` workers each,
    /// each worker cycling over enough connections per target node that
    /// the cluster holds as many as `emulated_nodes` nodes would; `None`
    /// when the profile models no cache.
    pub(super) fn new(
        profile: &NetworkProfile,
        emulated_nodes: u32,
        nodes: usize,
        workers_per_node: u16,
    ) -> Option<ConnectionCaches> {
        if profile.qp_cache == 0 {
            return None;
        }
        let per_target = (emulated_nodes as usize).div_ceil(nodes.max(1)).max(1) as u32;
        let names = workers_per_node as usize * nodes * per_target as usize;
        Some(ConnectionCaches {
            miss_ns: profile.qp_miss_ns,
            per_target,
            nodes: nodes as u32,
            workers_per_node: workers_per_node as u32,
            next: vec![0; workers_per_node as usize * nodes * nodes],
            nics: (0..nodes)
                .map(|_| Lru::new(profile.qp_cache, names))
                .collect(),
            lookups: 0,
            misses: 0,
        })
    }

    /// The extra time of a doorbell batch from `initiator` (a worker
    /// index) to `target`: a doorbell batch is one queue pair's, so each
    /// NIC looks its connection up once per batch.
    pub(super) fn batch_extra_ns(&mut self, initiator: u32, source: NodeId, target: NodeId) -> u64 {
        let pair = (initiator * self.nodes + target as u32) as usize;
        let k = self.next[pair];
        self.next[pair] = (k + 1) % self.per_target;
        let local = initiator % self.workers_per_node;
        let name = |peer: NodeId| (local * self.nodes + peer as u32) * self.per_target + k;
        let (at_source, at_target) = (name(target), name(source));
        let mut extra = 0;
        for (nic, connection) in [(source, at_source), (target, at_target)] {
            self.lookups += 1;
            if !self.nics[nic as usize].touch(connection) {
                self.misses += 1;
                extra += self.miss_ns;
            }
        }
        extra
    }
}

/// An exact LRU set of connection names `0..len`, as linked lists over
/// arrays (no allocation after start).
struct Lru {
    capacity: u32,
    len: u32,
    head: u32,
    tail: u32,
    prev: Vec<u32>,
    next: Vec<u32>,
    cached: Vec<bool>,
}

const NIL: u32 = u32::MAX;

impl Lru {
    pub(super) fn new(capacity: u32, names: usize) -> Lru {
        Lru {
            capacity,
            len: 0,
            head: NIL,
            tail: NIL,
            prev: vec![NIL; names],
            next: vec![NIL; names],
            cached: vec![false; names],
        }
    }

    pub(super) fn unlink(&mut self, name: u32) {
        let (prev, next) = (self.prev[name as usize], self.next[name as usize]);
        match prev {
            NIL => self.head = next,
            p => self.next[p as usize] = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.prev[n as usize] = prev,
        }
    }

    /// Uses `name`: whether it was cached; it is the most recent after.
    pub(super) fn touch(&mut self, name: u32) -> bool {
        let hit = self.cached[name as usize];
        if hit {
            self.unlink(name);
        } else {
            if self.len == self.capacity {
                let oldest = self.tail;
                self.unlink(oldest);
                self.cached[oldest as usize] = false;
                self.len -= 1;
            }
            self.cached[name as usize] = true;
            self.len += 1;
        }
        self.prev[name as usize] = NIL;
        self.next[name as usize] = self.head;
        match self.head {
            NIL => self.tail = name,
            h => self.prev[h as usize] = name,
        }
        self.head = name;
        hit
    }
}
