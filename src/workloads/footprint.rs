//! How much memory the selected workload's tables take, and whether they
//! fit in the registered memory a run may allocate ([`MAX_REGION_BYTES`]).
//!
//! The config checks each section's values, but only a workload knows the
//! tables its section asks for, so the estimate lives here. It is an
//! estimate: per row, `Config::row_bytes_estimate` (the tuple with the
//! protocol's header, and its index entry; TPC-C has its own,
//! `tpcc::region_bytes_estimate`). YCSB's footprint is plain arithmetic on
//! its section and is checked with it, in `Config::validate`.
//! [`tables_bytes_estimate`] gives every workload's, for the host's memory
//! warning before a run.

use crate::config::{Config, ConfigError, WorkloadKind, MAX_REGION_BYTES};
use crate::store::TableSpec;

use super::pps::Pps;
use super::smallbank::SmallBank;
use super::tpce::Tpce;
use super::Workload;

/// Checks that the tables of `config`'s workload fit on its nodes. Call it
/// after `Config::validate`, which it relies on for the sections' values.
pub fn check_footprint(config: &Config) -> Result<(), ConfigError> {
    match config.workload {
        WorkloadKind::Ycsb => Ok(()),
        WorkloadKind::Tpcc => check_tpcc(config),
        WorkloadKind::SmallBank | WorkloadKind::Pps | WorkloadKind::TpceCp => {
            let (name, tables) = table_specs(config).expect("a workload of table specs");
            check_tables(config, name, &tables)
        }
    }
}

/// Rough bytes of `config`'s workload tables on all its nodes, every
/// workload alike (what a run's process holds on `sim` and `threads`).
pub fn tables_bytes_estimate(config: &Config) -> u64 {
    let per_node = match config.workload {
        WorkloadKind::Ycsb => config
            .row_bytes_estimate(config.ycsb.record_bytes as u64 / 8)
            .saturating_mul(config.ycsb.rows_per_node),
        WorkloadKind::Tpcc => super::tpcc::region_bytes_estimate(&config.tpcc),
        WorkloadKind::SmallBank | WorkloadKind::Pps | WorkloadKind::TpceCp => {
            let (_, tables) = table_specs(config).expect("a workload of table specs");
            node_bytes(config, &tables)
        }
    };
    per_node.saturating_mul(config.nodes as u64)
}

/// The section's name and the tables of a workload that declares them
/// as table specs (SmallBank, PPS, TPC-E); `None` for YCSB and TPC-C,
/// whose footprints are their own arithmetic.
fn table_specs(config: &Config) -> Option<(&'static str, Vec<TableSpec>)> {
    Some(match config.workload {
        WorkloadKind::SmallBank => (
            "smallbank",
            SmallBank::new(&config.smallbank, config.nodes, config.workers).tables(),
        ),
        WorkloadKind::Pps => ("pps", Pps::new(&config.pps, config.nodes).tables()),
        WorkloadKind::TpceCp => ("tpce", Tpce::new(&config.tpce, config.nodes).tables()),
        WorkloadKind::Ycsb | WorkloadKind::Tpcc => return None,
    })
}

/// Bytes of `tables` on one node, per row `Config::row_bytes_estimate`.
fn node_bytes(config: &Config, tables: &[TableSpec]) -> u64 {
    tables.iter().fold(0u64, |sum, table| {
        let row_bytes = config.row_bytes_estimate(table.record_words as u64);
        sum.saturating_add(row_bytes.saturating_mul(table.capacity_per_node))
    })
}

fn check_tables(config: &Config, name: &str, tables: &[TableSpec]) -> Result<(), ConfigError> {
    let rows = tables.iter().fold(0u64, |sum, table| {
        sum.saturating_add(table.capacity_per_node)
    });
    let total = node_bytes(config, tables).saturating_mul(config.nodes as u64);
    if total > MAX_REGION_BYTES {
        return Err(ConfigError(format!(
            "the [{name}] tables ({rows} rows per node, on {} nodes) need about {} MiB of registered memory with {}'s tuple header; allowed: at most {} MiB (fewer rows per node, or fewer nodes)",
            config.nodes,
            total >> 20,
            config.protocol.name(),
            MAX_REGION_BYTES >> 20
        )));
    }
    Ok(())
}

fn check_tpcc(config: &Config) -> Result<(), ConfigError> {
    let t = &config.tpcc;
    let bytes = super::tpcc::region_bytes_estimate(t).saturating_mul(config.nodes as u64);
    if bytes > MAX_REGION_BYTES {
        return Err(ConfigError(format!(
            "tpcc with {} warehouse(s) per node, {} items, {} customers per district and insert headroom {} on {} nodes needs about {} MiB of registered memory; allowed: at most {} MiB (lower tpcc.insert_headroom_per_district or tpcc.warehouses_per_node)",
            t.warehouses_per_node,
            t.items,
            t.customers_per_district,
            t.insert_headroom_per_district,
            config.nodes,
            bytes >> 20,
            MAX_REGION_BYTES >> 20
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets a workload's scale knob to a multiple of its unit.
    type Scale = fn(&mut Config, u64);

    /// The estimate of `workload` with its scale knob at `small` and at
    /// `large` (set by `scale`).
    fn estimates(workload: WorkloadKind, scale: Scale, small: u64, large: u64) -> (u64, u64) {
        let mut config = Config {
            workload,
            ..Config::default()
        };
        scale(&mut config, small);
        let at_small = tables_bytes_estimate(&config);
        scale(&mut config, large);
        (at_small, tables_bytes_estimate(&config))
    }

    #[test]
    fn each_workloads_estimate_grows_with_its_scale_knob() {
        let knobs: [(WorkloadKind, Scale); 5] = [
            (WorkloadKind::Ycsb, |c, n| c.ycsb.rows_per_node = n * 1_000),
            (WorkloadKind::Tpcc, |c, n| {
                c.tpcc.warehouses_per_node = n as u32
            }),
            (WorkloadKind::SmallBank, |c, n| {
                c.smallbank.accounts_per_worker = n * 1_000
            }),
            (WorkloadKind::Pps, |c, n| {
                c.pps.products_per_node = n * 1_000;
                c.pps.parts_per_node = n * 1_000;
                c.pps.suppliers_per_node = n * 1_000;
            }),
            (WorkloadKind::TpceCp, |c, n| {
                c.tpce.customers_per_node = n * 1_000
            }),
        ];
        for (workload, scale) in knobs {
            let (small, large) = estimates(workload, scale, 1, 10);
            assert!(small > 0, "{workload:?}");
            assert!(
                large > 5 * small,
                "{workload:?}: {small} bytes at scale 1, {large} at scale 10"
            );
        }
    }

    #[test]
    fn every_workloads_estimate_grows_with_its_nodes() {
        for (_, workload) in WorkloadKind::NAMED {
            let mut config = Config {
                workload,
                ..Config::default()
            };
            let two = tables_bytes_estimate(&config);
            config.nodes *= 10;
            assert_eq!(tables_bytes_estimate(&config), two * 10, "{workload:?}");
        }
    }
}
