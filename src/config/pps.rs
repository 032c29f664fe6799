//! The `[pps]` section: the knobs of the PPS workload and its
//! transaction mix (`[pps.mix]`), with their value checks.
//!
//! Data and value checks only; `workloads::pps` reads it, and the memory
//! its tables need is checked there (`workloads::check_footprint`).

use serde::{Deserialize, Serialize};

use super::mix::validate_mix;
use super::{check_count, check_real, ConfigError};

/// The transaction types, in mix and report order.
pub const TXN_TYPES: [&str; 4] = [
    "order_product",
    "lookup_product",
    "update_product_part",
    "lookup_supplier",
];
/// Most parts per product or per supplier.
pub const MAX_PARTS_PER_ENTITY: u32 = 32;

/// Relative weights of the transactions; in a TOML `[pps.mix]` table, a
/// transaction not named gets weight 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PpsMix {
    #[serde(default)]
    pub order_product: u32,
    #[serde(default)]
    pub lookup_product: u32,
    #[serde(default)]
    pub update_product_part: u32,
    #[serde(default)]
    pub lookup_supplier: u32,
}

impl PpsMix {
    /// 80 % foreign-key transactions (Deneva Fig. 11), split evenly
    /// between ordering and looking up; 20 % mapping updates.
    pub const DEFAULT: PpsMix = PpsMix {
        order_product: 40,
        lookup_product: 40,
        update_product_part: 20,
        lookup_supplier: 0,
    };

    pub fn weights(&self) -> [u32; 4] {
        [
            self.order_product,
            self.lookup_product,
            self.update_product_part,
            self.lookup_supplier,
        ]
    }

    pub fn from_weights(w: &[u32]) -> PpsMix {
        PpsMix {
            order_product: w[0],
            lookup_product: w[1],
            update_product_part: w[2],
            lookup_supplier: w[3],
        }
    }
}

/// `[pps]`: the knobs of the PPS workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PpsConfig {
    pub products_per_node: u64,
    pub parts_per_node: u64,
    pub suppliers_per_node: u64,
    /// Parts each product uses (its `uses` rows).
    pub parts_per_product: u32,
    /// Parts each supplier supplies (its `supplies` rows).
    pub parts_per_supplier: u32,
    /// Share of part assignments kept on the product's or supplier's node
    /// (0: uniform over the cluster).
    pub local_part_probability: f64,
    /// OrderProduct takes a quantity uniform in `1..=max_quantity` of each
    /// part.
    pub max_quantity: u64,
    /// Stock of every part when loaded.
    pub initial_stock: u64,
    pub mix: PpsMix,
}

impl Default for PpsConfig {
    fn default() -> Self {
        PpsConfig {
            products_per_node: 10_000,
            parts_per_node: 10_000,
            suppliers_per_node: 1_000,
            parts_per_product: 10,
            parts_per_supplier: 10,
            local_part_probability: 0.0,
            max_quantity: 10,
            initial_stock: 1_000_000_000,
            mix: PpsMix::DEFAULT,
        }
    }
}

impl PpsConfig {
    /// Checks every knob (the memory the tables need is checked by
    /// the workload, `workloads::check_footprint`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, value) in [
            ("pps.products_per_node", self.products_per_node),
            ("pps.parts_per_node", self.parts_per_node),
            ("pps.suppliers_per_node", self.suppliers_per_node),
        ] {
            check_count(name, value, 1, 1 << 32)?;
        }
        for (name, value) in [
            ("pps.parts_per_product", self.parts_per_product),
            ("pps.parts_per_supplier", self.parts_per_supplier),
        ] {
            check_count(name, value, 1, MAX_PARTS_PER_ENTITY)?;
        }
        check_real(
            "pps.local_part_probability",
            self.local_part_probability,
            0.0,
            1.0,
            false,
        )?;
        check_count("pps.max_quantity", self.max_quantity, 1, 1_000_000)?;
        check_count("pps.initial_stock", self.initial_stock, 0, 1 << 50)?;
        validate_mix("pps", &TXN_TYPES, &self.mix.weights())?;
        Ok(())
    }
}
