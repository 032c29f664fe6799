//! Whether the selected workload's tables fit in the registered memory a
//! run may allocate ([`MAX_REGION_BYTES`]).
//!
//! The config checks each section's values, but only a workload knows the
//! tables its section asks for, so the memory check lives here. It is an
//! estimate: per row, `Config::row_bytes_estimate` (the tuple with the
//! protocol's header, and its index entry). YCSB's footprint is plain
//! arithmetic on its section and is checked with it, in `Config::validate`.

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
        WorkloadKind::SmallBank => check_tables(
            config,
            "smallbank",
            &SmallBank::new(&config.smallbank, config.nodes, config.workers).tables(),
        ),
        WorkloadKind::Pps => {
            check_tables(config, "pps", &Pps::new(&config.pps, config.nodes).tables())
        }
        WorkloadKind::TpceCp => check_tables(
            config,
            "tpce",
            &Tpce::new(&config.tpce, config.nodes).tables(),
        ),
    }
}

fn check_tables(config: &Config, name: &str, tables: &[TableSpec]) -> Result<(), ConfigError> {
    let mut rows = 0u64;
    let node_bytes = tables.iter().fold(0u64, |sum, table| {
        rows = rows.saturating_add(table.capacity_per_node);
        let row_bytes = config.row_bytes_estimate(table.record_words as u64);
        sum.saturating_add(row_bytes.saturating_mul(table.capacity_per_node))
    });
    let total = node_bytes.saturating_mul(config.nodes as u64);
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
