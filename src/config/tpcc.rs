//! The `[tpcc]` section: the TPC-C workload's scale and mix
//! (`workloads::tpcc` reads it), with its value checks. The memory its
//! tables need is checked by the workload (`workloads::check_footprint`).

use serde::{Deserialize, Serialize};

use super::{check_count, check_real, Config, ConfigError, WorkloadKind};

/// Relative weights of the five TPC-C transactions (any non-negative
/// integers, not all zero). The default is the specification's minimum mix
/// (TPC-C §5.2.3: at least 43 % Payment, 4 % each of OrderStatus, Delivery
/// and StockLevel; NewOrder the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TpccMix {
    pub new_order: u32,
    pub payment: u32,
    pub order_status: u32,
    pub delivery: u32,
    pub stock_level: u32,
}

impl Default for TpccMix {
    fn default() -> Self {
        TpccMix::STANDARD
    }
}

impl TpccMix {
    pub const STANDARD: TpccMix = TpccMix {
        new_order: 45,
        payment: 43,
        order_status: 4,
        delivery: 4,
        stock_level: 4,
    };
    pub const NEW_ORDER_ONLY: TpccMix = TpccMix {
        new_order: 1,
        payment: 0,
        order_status: 0,
        delivery: 0,
        stock_level: 0,
    };

    pub fn weights(&self) -> [u32; 5] {
        [
            self.new_order,
            self.payment,
            self.order_status,
            self.delivery,
            self.stock_level,
        ]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TpccConfig {
    /// Warehouses each node owns (TPC-C's scale factor, per node).
    pub warehouses_per_node: u32,
    /// Rows of ITEM (specification: 100,000; replicated on every node).
    pub items: u32,
    /// Customers per district (specification: 3,000). The initial orders
    /// per district are as many (one per customer), and the initial
    /// new-orders the last 30 % of them (specification: 900 of 3,000).
    pub customers_per_district: u32,
    /// Run-time NewOrders each district has room for beyond its initial
    /// orders (tables are preallocated; a NewOrder that finds no room gives
    /// up with `table_full`). Payments' history rows get the same room.
    pub insert_headroom_per_district: u32,
    /// Transaction mix weights.
    pub mix: TpccMix,
    /// NewOrder: probability that an item is supplied by a remote warehouse
    /// (specification: 1 %).
    pub remote_item_probability: f64,
    /// NewOrder: probability that the transaction names an unused item and
    /// rolls back (specification: 1 %).
    pub invalid_item_probability: f64,
    /// NewOrder: every order has at least one item supplied by a warehouse
    /// on another node (DrTM+H §6's "NewOrder only, always distributed";
    /// needs at least 2 nodes).
    pub new_order_always_distributed: bool,
    /// Payment: probability that the customer belongs to a remote warehouse
    /// (specification: 15 %).
    pub payment_remote_probability: f64,
    /// Payment and OrderStatus: probability that the customer is selected
    /// by last name (specification: 60 %).
    pub by_last_name_probability: f64,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            warehouses_per_node: 1,
            items: 100_000,
            customers_per_district: 3_000,
            insert_headroom_per_district: 5_000,
            mix: TpccMix::STANDARD,
            remote_item_probability: 0.01,
            invalid_item_probability: 0.01,
            new_order_always_distributed: false,
            payment_remote_probability: 0.15,
            by_last_name_probability: 0.60,
        }
    }
}

/// Largest number of warehouses a run may have in all (keys pack the
/// warehouse into fixed bit ranges; see `workloads::tpcc`).
pub const MAX_TPCC_WAREHOUSES: u64 = 1 << 16;

impl Config {
    pub(super) fn validate_tpcc(&self) -> Result<(), ConfigError> {
        let t = &self.tpcc;
        check_count("tpcc.warehouses_per_node", t.warehouses_per_node, 1, 4096)?;
        check_count("tpcc.items", t.items, 20, 1 << 24)?;
        check_count(
            "tpcc.customers_per_district",
            t.customers_per_district,
            10,
            1 << 20,
        )?;
        check_count(
            "tpcc.insert_headroom_per_district",
            t.insert_headroom_per_district,
            0,
            1 << 26,
        )?;
        for (name, value) in [
            ("tpcc.remote_item_probability", t.remote_item_probability),
            ("tpcc.invalid_item_probability", t.invalid_item_probability),
            (
                "tpcc.payment_remote_probability",
                t.payment_remote_probability,
            ),
            ("tpcc.by_last_name_probability", t.by_last_name_probability),
        ] {
            check_real(name, value, 0.0, 1.0, false)?;
        }
        let weights = t.mix.weights();
        if weights.iter().all(|&w| w == 0) || weights.iter().any(|&w| w > 1_000_000) {
            return Err(ConfigError(format!(
                "tpcc.mix = {weights:?} (new_order, payment, order_status, delivery, stock_level) is not allowed; allowed: weights in 0..=1000000, not all 0"
            )));
        }
        if self.workload != WorkloadKind::Tpcc {
            return Ok(());
        }
        let warehouses = t.warehouses_per_node as u64 * self.nodes as u64;
        if warehouses > MAX_TPCC_WAREHOUSES {
            return Err(ConfigError(format!(
                "tpcc.warehouses_per_node × nodes = {warehouses} warehouses; allowed: at most {MAX_TPCC_WAREHOUSES}"
            )));
        }
        let customers_per_node =
            t.warehouses_per_node as u64 * 10 * t.customers_per_district as u64;
        if customers_per_node >= 1 << 31 {
            return Err(ConfigError(format!(
                "tpcc.warehouses_per_node × 10 × customers_per_district = {customers_per_node} customers per node; allowed: fewer than {}",
                1u64 << 31
            )));
        }
        if t.new_order_always_distributed && self.nodes < 2 {
            return Err(ConfigError(
                "tpcc.new_order_always_distributed needs at least 2 nodes (a remote supplier on another node); nodes = 1".into(),
            ));
        }
        Ok(())
    }
}
