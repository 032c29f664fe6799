//! The `[smallbank]` section: the knobs of the SmallBank workload and its
//! transaction mix (`[smallbank.mix]`), with their value checks.
//!
//! Data and value checks only; `workloads::smallbank` reads it, and the memory
//! its tables need is checked there (`workloads::check_footprint`).

use serde::{Deserialize, Serialize};

use super::mix::validate_mix;
use super::{check_count, check_real, ConfigError};

/// The transaction types, in mix and report order.
pub const TXN_TYPES: [&str; 6] = [
    "send_payment",
    "amalgamate",
    "balance",
    "deposit_checking",
    "write_check",
    "transact_savings",
];

/// Relative weights of the six transactions. In a TOML `[smallbank.mix]`
/// table, a transaction not named gets weight 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmallBankMix {
    #[serde(default)]
    pub send_payment: u32,
    #[serde(default)]
    pub amalgamate: u32,
    #[serde(default)]
    pub balance: u32,
    #[serde(default)]
    pub deposit_checking: u32,
    #[serde(default)]
    pub write_check: u32,
    #[serde(default)]
    pub transact_savings: u32,
}

impl SmallBankMix {
    /// DrTM Table 5: 25 % send_payment, 15 % each of the others.
    pub const STANDARD: SmallBankMix = SmallBankMix {
        send_payment: 25,
        amalgamate: 15,
        balance: 15,
        deposit_checking: 15,
        write_check: 15,
        transact_savings: 15,
    };

    pub fn weights(&self) -> [u32; 6] {
        [
            self.send_payment,
            self.amalgamate,
            self.balance,
            self.deposit_checking,
            self.write_check,
            self.transact_savings,
        ]
    }

    pub fn from_weights(w: &[u32]) -> SmallBankMix {
        SmallBankMix {
            send_payment: w[0],
            amalgamate: w[1],
            balance: w[2],
            deposit_checking: w[3],
            write_check: w[4],
            transact_savings: w[5],
        }
    }
}

/// `[smallbank]`: the knobs of the SmallBank workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmallBankConfig {
    /// Customers per worker thread; a node holds `workers` times this.
    pub accounts_per_worker: u64,
    /// Share of each partition's customers that is hot.
    pub hot_account_fraction: f64,
    /// Share of accesses that go to the hot customers.
    pub hot_account_probability: f64,
    /// Probability that a transaction touches a node other than its
    /// coordinator's.
    pub distributed_probability: f64,
    /// Largest amount a transaction moves (amounts are uniform in
    /// `1..=max_amount`).
    pub max_amount: u64,
    /// Every transaction first reads its customers' `accounts` rows (the
    /// original benchmark's name lookup).
    pub lookup_accounts: bool,
    pub mix: SmallBankMix,
}

impl Default for SmallBankConfig {
    fn default() -> Self {
        SmallBankConfig {
            accounts_per_worker: 100_000,
            hot_account_fraction: 0.04,
            hot_account_probability: 0.9,
            distributed_probability: 1.0,
            max_amount: 100,
            lookup_accounts: false,
            mix: SmallBankMix::STANDARD,
        }
    }
}

impl SmallBankConfig {
    /// Checks every knob (the memory the tables need is checked by
    /// the workload, `workloads::check_footprint`).
    pub fn validate(&self, workers: u32) -> Result<(), ConfigError> {
        let per_node = self.accounts_per_worker.saturating_mul(workers as u64);
        if self.accounts_per_worker < 2 || self.accounts_per_worker > 1 << 32 {
            return Err(ConfigError(format!(
                "smallbank.accounts_per_worker = {} is out of range; allowed: 2..={} (send_payment needs two distinct customers)",
                self.accounts_per_worker,
                1u64 << 32
            )));
        }
        for (name, value) in [
            (
                "smallbank.hot_account_probability",
                self.hot_account_probability,
            ),
            (
                "smallbank.distributed_probability",
                self.distributed_probability,
            ),
        ] {
            check_real(name, value, 0.0, 1.0, false)?;
        }
        if !(self.hot_account_fraction > 0.0 && self.hot_account_fraction <= 1.0) {
            return Err(ConfigError(format!(
                "smallbank.hot_account_fraction = {} is out of range; allowed: (0, 1]",
                self.hot_account_fraction
            )));
        }
        check_count("smallbank.max_amount", self.max_amount, 1, 1 << 40)?;
        validate_mix("smallbank", &TXN_TYPES, &self.mix.weights())?;
        if per_node > 1 << 36 {
            return Err(ConfigError(format!(
                "smallbank.accounts_per_worker = {} × {workers} workers = {per_node} customers per node; allowed: at most {}",
                self.accounts_per_worker,
                1u64 << 36
            )));
        }
        Ok(())
    }
}
