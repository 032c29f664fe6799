//! Experiments (docs/ARCHITECTURE.md, layer 11): the papers' experiments as
//! commands, and their results as files a script or a reader can use.
//!
//! - [`sweep`]: runs the cartesian product of knob values (any config key by
//!   its TOML path), with repetitions, appending one self-describing row per
//!   run to a journal so an interrupted sweep resumes where it stopped;
//!   rows go out as JSON and CSV ([`table`]).
//! - [`hybrid`]: RCC §5.1's two methods of finding hybrid stage codes — the
//!   exhaustive enumeration of every code of a protocol, ranked by
//!   throughput and by latency, and the latency-breakdown method (compare
//!   the pure forms stage by stage, cherry-pick, test the pick).
//! - [`plot`] and [`html`]: SVG figures written here, without a plotting
//!   dependency (RCC Fig. 13, 14, 16, 18, 19; Deneva Fig. 2–6), small
//!   multiples past eight lines a panel, PNG copies rendered in process
//!   (resvg, no browser), and an HTML page per sweep.
//! - [`presets`]: the papers' experiments at the papers' scale, or at a
//!   small scale with `--small` (`verbena reproduce`).
//! - [`matrix`]: the seeded correctness matrix (`verbena check`), every
//!   protocol × plan × seed under the checker on `sim`, with and without a
//!   failover.
//!
//! Every result row carries what produced it ([`provenance`]): the full
//! resolved config, the verbena version and git revision, and the host.

pub mod html;
pub mod hybrid;
pub mod matrix;
pub mod plot;
pub mod presets;
pub mod progress;
pub mod provenance;
pub mod svg;
pub mod sweep;
pub mod table;
