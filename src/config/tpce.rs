//! The `[tpce]` section: the knobs of the TPC-E customer-position workload and its
//! transaction mix (`[tpce.mix]`), with their value checks.
//!
//! Data and value checks only; `workloads::tpce` reads it, and the memory
//! its tables need is checked there (`workloads::check_footprint`).

use serde::{Deserialize, Serialize};

use super::mix::validate_mix;
use super::{check_count, ConfigError};

/// The transaction types, in mix and report order.
pub const TXN_TYPES: [&str; 2] = ["customer_position", "market_feed"];
pub const MAX_ACCOUNTS_PER_CUSTOMER: u32 = 10;
pub const MAX_HOLDINGS_PER_ACCOUNT: u32 = 16;
pub const MAX_FEED_SIZE: u32 = 32;

/// Relative weights; in a TOML `[tpce.mix]` table, a transaction not
/// named gets weight 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TpceMix {
    #[serde(default)]
    pub customer_position: u32,
    #[serde(default)]
    pub market_feed: u32,
}

impl TpceMix {
    pub fn weights(&self) -> [u32; 2] {
        [self.customer_position, self.market_feed]
    }

    pub fn from_weights(w: &[u32]) -> TpceMix {
        TpceMix {
            customer_position: w[0],
            market_feed: w[1],
        }
    }
}

/// `[tpce]`: the knobs of the TPC-E customer-position workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TpceConfig {
    pub customers_per_node: u64,
    /// Accounts per customer are uniform in `1..=` this (TPC-E: 10).
    pub max_accounts_per_customer: u32,
    /// Securities each account holds (scaled down from TPC-E's ~10).
    pub holdings_per_account: u32,
    /// TPC-E's ratio: 6,850 securities per 5,000 customers.
    pub securities_per_node: u64,
    /// Securities one market feed reprices.
    pub feed_size: u32,
    pub mix: TpceMix,
}

impl Default for TpceConfig {
    fn default() -> Self {
        TpceConfig {
            customers_per_node: 5_000,
            max_accounts_per_customer: 10,
            holdings_per_account: 4,
            securities_per_node: 6_850,
            feed_size: 10,
            mix: TpceMix {
                customer_position: 100,
                market_feed: 0,
            },
        }
    }
}

impl TpceConfig {
    /// Checks every knob (the memory the tables need is checked by
    /// the workload, `workloads::check_footprint`).
    pub fn validate(&self, nodes: u32) -> Result<(), ConfigError> {
        for (name, value) in [
            ("tpce.customers_per_node", self.customers_per_node),
            ("tpce.securities_per_node", self.securities_per_node),
        ] {
            check_count(name, value, 1, 1 << 32)?;
        }
        for (name, value, high) in [
            (
                "tpce.max_accounts_per_customer",
                self.max_accounts_per_customer,
                MAX_ACCOUNTS_PER_CUSTOMER,
            ),
            (
                "tpce.holdings_per_account",
                self.holdings_per_account,
                MAX_HOLDINGS_PER_ACCOUNT,
            ),
            ("tpce.feed_size", self.feed_size, MAX_FEED_SIZE),
        ] {
            check_count(name, value, 1, high)?;
        }
        let securities = self.securities_per_node * nodes as u64;
        if (self.holdings_per_account as u64) > securities {
            return Err(ConfigError(format!(
                "tpce.holdings_per_account = {} exceeds the {securities} securities of the cluster; allowed: at most securities_per_node × nodes (an account holds distinct securities)",
                self.holdings_per_account
            )));
        }
        validate_mix("tpce", &TXN_TYPES, &self.mix.weights())?;
        Ok(())
    }
}
