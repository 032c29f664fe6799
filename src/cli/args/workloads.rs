//! The workloads' flags: YCSB, TPC-C, SmallBank, PPS and TPC-E, each a
//! help section of its own.

// Doc comments here are the flags' help text, where `[default]` in brackets
// is the help's convention, not an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use clap::Args;

use super::values::*;
use crate::config::KeyDistribution;

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "YCSB")]
pub struct YcsbFlags {
    /// Rows per node [100000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub rows_per_node: Option<u64>,
    /// Record size, a multiple of 8 [64]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub record_bytes: Option<u32>,
    /// Operations per transaction, 1..=64 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub ops_per_txn: Option<u32>,
    /// Share of read-modify-writes [0.2]
    #[arg(long, value_name = "F", value_parser = real())]
    pub write_ratio: Option<f64>,
    /// Deneva's mix instead of --write-ratio: share of update transactions
    /// (half their operations written), the rest read-only [unset]
    #[arg(long, value_name = "F", value_parser = real())]
    pub update_txn_ratio: Option<f64>,
    /// Key distribution [hot]
    #[arg(long, value_name = "D", value_parser = one_of(parse_distribution, || vec!["uniform", "zipf", "hot"]))]
    pub distribution: Option<KeyDistribution>,
    /// Zipf skew in [0, 1) [0.99]
    #[arg(long, value_name = "F", value_parser = real())]
    pub theta: Option<f64>,
    /// Share of rows in the hot area [0.001]
    #[arg(long, value_name = "F", value_parser = real())]
    pub hot_fraction: Option<f64>,
    /// Share of accesses to the hot area [0.1]
    #[arg(long, value_name = "F", value_parser = real())]
    pub hot_probability: Option<f64>,
    /// Execution-phase compute per txn, µs [5]
    #[arg(long, value_name = "F", value_parser = real())]
    pub compute_us: Option<f64>,
    /// Nodes a transaction touches [min(2, nodes)]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub partitions_per_txn: Option<u32>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "TPC-C (--workload tpcc)")]
pub struct TpccFlags {
    /// Warehouses per node [1]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub warehouses: Option<u32>,
    /// ITEM rows (specification: 100000) [100000]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub items: Option<u32>,
    /// Customers, and initial orders, per district (specification: 3000) [3000]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub customers_per_district: Option<u32>,
    /// Run-time orders each district has room for [5000]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub insert_headroom: Option<u32>,
    /// standard (45,43,4,4,4) | new-order-only | new-order-distributed
    /// (DrTM+H: NewOrder only, each with a supplier on another node) |
    /// NO,P,OS,D,SL weights [standard]
    #[arg(long, value_name = "MIX", value_parser = parse(mix_text))]
    pub tpcc_mix: Option<String>,
    /// NewOrder remote stock per item [0.01]
    #[arg(long, value_name = "F", value_parser = real())]
    pub remote_item_probability: Option<f64>,
    /// NewOrder rolled back (unused item) [0.01]
    #[arg(long, value_name = "F", value_parser = real())]
    pub invalid_item_probability: Option<f64>,
    /// Payment remote customer [0.15]
    #[arg(long, value_name = "F", value_parser = real())]
    pub payment_remote_probability: Option<f64>,
    /// Payment/OrderStatus by last name [0.6]
    #[arg(long, value_name = "F", value_parser = real())]
    pub by_last_name_probability: Option<f64>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "SmallBank (--workload smallbank; DrTM Table 5, DrTM+H §5)")]
pub struct SmallBankFlags {
    /// Customers per worker thread [100000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub sb_accounts_per_worker: Option<u64>,
    /// Share of customers that is hot [0.04]
    #[arg(long, value_name = "F", value_parser = real())]
    pub sb_hot_fraction: Option<f64>,
    /// Share of accesses to hot customers [0.9]
    #[arg(long, value_name = "F", value_parser = real())]
    pub sb_hot_probability: Option<f64>,
    /// Probability a txn crosses nodes [1.0]
    #[arg(long, value_name = "F", value_parser = real())]
    pub sb_distributed: Option<f64>,
    /// Amounts uniform in 1..=N [100]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub sb_max_amount: Option<u64>,
    /// Read the accounts row first: true | false [false]
    #[arg(long, value_name = "B", value_parser = parse(parse_switch))]
    pub sb_lookup_accounts: Option<bool>,
    /// Weights, e.g. send_payment=25,balance=15 (types not named get 0)
    /// [send_payment=25, amalgamate, balance, deposit_checking,
    /// write_check, transact_savings=15 each]
    #[arg(long, value_name = "LIST", value_parser = parse(mix_text))]
    pub sb_mix: Option<String>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "PPS (--workload pps; Deneva §4.1)")]
pub struct PpsFlags {
    /// Products per node [10000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_products_per_node: Option<u64>,
    /// Parts per node [10000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_parts_per_node: Option<u64>,
    /// Suppliers per node [1000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_suppliers_per_node: Option<u64>,
    /// Parts each product uses, 1..=32 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub pps_parts_per_product: Option<u32>,
    /// Parts each supplier supplies, 1..=32 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub pps_parts_per_supplier: Option<u32>,
    /// Share of part assignments on the owner's node; 0 = uniform over the cluster [0]
    #[arg(long, value_name = "F", value_parser = real())]
    pub pps_local_parts: Option<f64>,
    /// Order quantities uniform in 1..=N [10]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_max_quantity: Option<u64>,
    /// Stock of each part when loaded [1000000000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_initial_stock: Option<u64>,
    /// Weights of order_product, lookup_product, update_product_part,
    /// lookup_supplier [40, 40, 20, 0]
    #[arg(long, value_name = "LIST", value_parser = parse(mix_text))]
    pub pps_mix: Option<String>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "TPC-E customer-position (--workload tpce-cp; DrTM+H §5.5)")]
pub struct TpceFlags {
    /// Customers per node [5000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub tpce_customers_per_node: Option<u64>,
    /// Accounts per customer 1..=N, N <= 10 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub tpce_max_accounts: Option<u32>,
    /// Holdings per account, 1..=16 [4]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub tpce_holdings_per_account: Option<u32>,
    /// Securities per node [6850]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub tpce_securities_per_node: Option<u64>,
    /// Securities a market_feed reprices [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub tpce_feed_size: Option<u32>,
    /// Weights of customer_position, market_feed [100, 0]
    #[arg(long, value_name = "LIST", value_parser = parse(mix_text))]
    pub tpce_mix: Option<String>,
}
