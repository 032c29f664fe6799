//! Multi-process runs (issue 7): one OS process per node, on one host or a
//! cluster, over the `ucx` fabric (`fabric::ucx`).
//!
//! * [`bootstrap`] — the TCP rendezvous (rank 0 listens): worker addresses,
//!   rkeys and region layouts exchanged, barriers, heartbeats, bounded-time
//!   fault detection naming the rank and host at fault.
//! * [`auth`] — who may join: the job key (HMAC challenge–response) and
//!   the launcher's job id.
//! * [`wire`] — the frames and encodings ranks exchange (statistics,
//!   histories, region images).
//! * [`launch`] — ranks from flags or from `srun`/`mpirun`/PMI environment
//!   variables; local and ssh launchers.
//! * `node` (feature `ucx`) — the per-process run: this process hosts one
//!   node, the others are remote; rank 0 gathers every rank's results and
//!   the driver checks and reports them as a `threads` run's.
//! * `rank` (feature `ucx`) — a rank as a backend of the one driver
//!   (`engine::driver`): the UCX context, the join, the control loop and
//!   the gathering on rank 0.
//!
//! * `failover` (feature `ucx`) — a replicated run's failover across the
//!   processes: a rank killed mid-run is failed over to the survivors'
//!   backups and the run goes on.
//!
//! * `fabric_bench` (feature `ucx`) — `verbena fabric-bench`: one verb
//!   type's rate through the fabric, to compare with `ucx_perftest`.
//! * [`socket_bench`] — `verbena fabric-bench --link socket`: the RPC rate
//!   of a TCP transport of our own, to compare with UCX's.
//!
//! The bootstrap, wire format and launchers build without UCX (and are
//! tested without it); only `node` and the fabric need `libucp`.

pub mod auth;
pub mod bootstrap;
#[cfg(feature = "ucx")]
pub mod fabric_bench;
#[cfg(feature = "ucx")]
pub mod failover;
pub mod launch;
#[cfg(feature = "ucx")]
pub mod node;
#[cfg(feature = "ucx")]
mod rank;
pub mod socket_bench;
pub mod wire;
