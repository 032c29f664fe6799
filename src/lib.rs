//! verbena: a distributed in-memory transaction engine built as a testbed.
//! Every concurrency-control protocol runs on the same store, coroutine
//! runtime and network, each protocol stage reaches remote memory with
//! one-sided verbs or with an RPC (chosen at run time), and every run can
//! record its committed history and check it for serializability.
//!
//! # Layers, bottom up
//!
//! The crate is drawn as layers (docs/ARCHITECTURE.md, "Layers, bottom up").
//! **The rule: a module may import only from layers below it.** Modules of
//! the same layer are siblings and must not import each other (`txn` and
//! `check`, `protocols` and `workloads`), except where the last column
//! says so. `tests/layers.rs` reads every path into the crate under
//! `src/` (`crate::`, `super::`, `self::`, a child module's name), holds
//! this table as data (and checks that the two agree), and fails on any
//! import against the map that its allow-list of today's breaks does not
//! name, and on any import cycle between the table's modules that its
//! list of today's cycles does not name.
//!
//! | layer | name | modules today | may import |
//! |---|---|---|---|
//! | 0 | base | `base` | nothing |
//! | 1 | config | `config` | ≤ 0 |
//! | 2 | fabric | `fabric` | ≤ 1 |
//! | 3 | store | `store` | ≤ 2 |
//! | 4 | runtime | `runtime` | ≤ 3 |
//! | 5 | txn & check | `txn`, `check`, `stats` | ≤ 4; `stats` may import `txn` |
//! | 6 | replication | `replication` | ≤ 5 |
//! | 7 | protocols & workloads | `protocols`, `workloads` | ≤ 6 |
//! | 8 | recovery | `recovery` | ≤ 7 |
//! | 9 | programs | `engine::coroutine`, `engine::calvin`, `engine::program`, `engine::report` | ≤ 8; `engine::coroutine` may import `engine::program`, `engine::report`; `engine::calvin` may import `engine::program`, `engine::report`; `engine::program` may import `engine::report` |
//! | 10 | driver | `engine`, `cluster` | ≤ 9; `cluster` may import `engine` |
//! | 11 | experiments | `experiments` | ≤ 10 |
//! | 12 | cli | `cli` | all |
//!
//! Where today's modules sit, where it is not plain from the names:
//! * `base` holds the names every layer speaks: the stages, primitives
//!   and stage plans (RCC §5.1), the protocol names, the seeded RNG and
//!   the binary's exit codes.
//! * The [`txn::Protocol`] trait, the contract a protocol implements, sits
//!   in `txn` with the context its stages receive, so that `protocols`
//!   (which implement it) and `workloads` (whose programs are generic over
//!   it) need not import each other.
//! * `stats` (what each worker counts while it runs: commits and aborts by
//!   `txn`'s abort reasons, time per stage, latency histograms) is measured
//!   per transaction, so it sits with `txn` on layer 5 and may import it.
//! * `engine` is split by submodule: `engine::coroutine` (the staged
//!   coordinator pipeline every two-phase protocol shares) and
//!   `engine::calvin` (CALVIN: its sequencer, scheduler, executors, failover
//!   hook and node program) are programs, layer 9, with the interface they
//!   implement (`engine::program`: the node program, the cluster it is
//!   handed, the run's error) and the report's type they fill
//!   (`engine::report`); the rest of `engine` (the one driver and its
//!   `sim` backend) is the driver, layer 10. A path belongs to the longest name in the table
//!   that prefixes it, as written: `crate::engine::Report` counts as
//!   `engine`.
//! * `cluster` (multi-process runs: bootstrap and its wire format, launch,
//!   one rank's node, failover across ranks, the fabric benchmarks) is the
//!   driver's process-rank backend, layer 10: it may import `engine`'s
//!   driver, and not the other way round.
//! * `recovery` (failure detection, membership, the failover state
//!   machine, its steps, the sequencer that runs them across parties over
//!   a control channel, the one crash injector, the hook a node program
//!   implements, the report) is layer 8; what a run is told to break is
//!   configuration (`config::faults`). `cluster::failover` is only the
//!   sequencer's transport between `ucx` ranks (frames over the bootstrap
//!   connections, rank 0's leases and timeouts); on `sim` and `threads`
//!   every survivor is a party of the same sequencer over its own memory,
//!   its messages passed in process (`recovery::loopback`).
//! * `check` (the history, the dependency graph, the final-state check)
//!   sits beside `txn` on 5; the seeded matrix that drives whole runs
//!   under it is an experiment (`experiments::matrix`).
//!
//! No import runs against the map, and no two units import each other:
//! `tests/layers.rs` holds empty allow-lists and fails on the first break.
//!
//! The runtime knows nothing of replication or fault policy: it asks the
//! narrow views of `runtime::liveness` (is a peer a member, which node
//! serves a partition, are we paused), which the recovery layer implements.

pub mod base;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod engine;
pub mod experiments;
pub mod fabric;
pub mod protocols;
pub mod recovery;
pub mod replication;
pub mod runtime;
pub mod stats;
pub mod store;
pub mod txn;
pub mod workloads;
