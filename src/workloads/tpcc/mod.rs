//! TPC-C (the TPC-C specification, revision 5.11; Deneva §4.1; DrTM+H §5;
//! RCBench §7.1): all nine tables, loaded per the specification (§4.3.3.1)
//! with `tpcc.warehouses_per_node` warehouses per node, and all five
//! transactions (§2.4–2.8) as programs over the `Txn` API, identical for
//! every protocol and stage primitive.
//!
//! Partitioning (as Deneva and DrTM+H): warehouse `w` and everything under it
//! (districts, customers, history, orders, new-orders, order lines, stock)
//! live on node `w / warehouses_per_node`. ITEM is read-only and replicated:
//! every node holds all items under keys of its own. A client on node `n`
//! takes its home warehouse among `n`'s. NewOrder reaches another node when
//! a stock row belongs to a remote supplying warehouse (1 % of items by
//! default; `new_order_always_distributed` forces one per order, DrTM+H's
//! "NewOrder only, always distributed"), Payment when the customer is remote
//! (15 %). Delivery, OrderStatus and StockLevel are local to the home
//! warehouse and find their rows with node-local ordered indexes, as DrTM+H
//! runs them (DrTM+H §5).
//!
//! Inserts (ORDER, NEW-ORDER, ORDER-LINE, HISTORY) and deletes (NEW-ORDER,
//! by Delivery) go through the store's run-time insert and tombstone delete
//! (`store`, "Run-time inserts and deletes"): those four tables keep a row
//! state in record word 0. Every insert is into the home warehouse, so on
//! the coordinator's node. The ordered indexes (`store::ordered`) change at
//! each transaction's commit point:
//!
//! * `NEW_ORDERS` (per node): order key of every undelivered order — Delivery
//!   takes the smallest in each district;
//! * `ORDERS_BY_CUSTOMER` (per node): `(customer, order id)` — OrderStatus
//!   takes the customer's largest;
//! * customers by last name: read-only after loading (customers are never
//!   inserted, deleted or renamed), so one copy serves every node like the
//!   item table, and a remote Payment by last name resolves its customer id
//!   without a round trip. Sorted by (district, last name, first name).
//!
//! StockLevel reads the last 20 orders of its district by key (order ids
//! below `D_NEXT_O_ID` are dense) and their order lines, then the stock of
//! each distinct item — all through the protocol, so the checker sees them.
//!
//! Scaled sizes (documented, all knobs): `items` (specification 100,000) and
//! `customers_per_district` (3,000; the initial orders are as many and the
//! initial new-orders the last 30 %, i.e. 900 of 3,000). NURand's `A` shrinks
//! with a scaled range (`A = min(A_spec, next_pow2(n/4) − 1)`, which gives
//! the specification's 1023, 255 and 8191 at full size). Loaded W_YTD and
//! D_YTD equal the loaded history amounts (at full size the specification's
//! 300,000.00 and 30,000.00), so consistency condition 8/9 holds at any
//! scale. Tables are preallocated: each district has room for
//! `insert_headroom_per_district` run-time orders (and as many payments'
//! history rows, and 15 lines per order); a NewOrder or Payment whose
//! district counter is past that gives up with `table_full`, decided from
//! the district row so that every CALVIN participant agrees.
//!
//! Deterministic protocols (CALVIN): requests as words and declared or
//! reconnoitred sets, see the `deterministic` module.
//!
//! Records store numbers as integers (money in cents, rates in 1/10,000)
//! and text columns as bytes packed into words at their specification
//! widths, generated per §4.3.2 (a-strings; 10 % of I_DATA and S_DATA
//! contain "ORIGINAL"). C_LAST is stored as its syllable number (the name is
//! a pure function of it, §4.3.2.3); C_DATA of a bad-credit customer gets
//! each payment's fields prepended in binary, the oldest bytes falling off
//! the end, as §2.5.2.2's string update does. Every row is generated from
//! its own seeded generator, so a load is a pure function of the seed.
//!
//! Invariants after a run ([`Tpcc::check_invariants`]): the consistency
//! conditions 1–4 of §3.3.2 per district/warehouse, condition 8 (W_YTD =
//! Σ H_AMOUNT), and that each node's ordered indexes hold exactly its live
//! new-order and order rows.
//!
//! Keys (unique per table across nodes, as the checker requires): district
//! `w·10 + d`; customer `district·C + c`; order and new-order
//! `district << 32 | o_id`; order line `order << 4 | ol_number`; history
//! `home district << 32 | h_id`; item `node << 32 | i_id`; stock
//! `w·(items+1) + i_id`. The specification's HISTORY has no primary key;
//! verbena numbers each home district's history rows with a counter in the
//! district row (`D_NEXT_H_ID`), which Payment updates anyway. So every
//! run-time key is a function of committed state on the node that owns the
//! row: an aborted attempt's placeholder is reused by the next transaction
//! that computes the same key, and no key ever exists on two nodes.

mod deterministic;
mod generate;
mod load;
mod rows;
mod txns;

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::check::History;
use crate::config::{TpccConfig, TpccMix};
use crate::fabric::NodeId;
use crate::store::{NodeStore, OrderedIndex, StoreError, TableSpec};
use crate::txn::{IndexOp, Protocol, Txn, TxnResult};

use super::{Declared, InvariantReport, Workload};

pub const DISTRICTS: u64 = 10;
pub const MAX_ORDER_LINES: usize = 15;

/// Table ids, in `Tpcc::tables` order.
pub mod table {
    use crate::store::TableId;
    pub const WAREHOUSE: TableId = 0;
    pub const DISTRICT: TableId = 1;
    pub const CUSTOMER: TableId = 2;
    pub const HISTORY: TableId = 3;
    pub const NEW_ORDER: TableId = 4;
    pub const ORDER: TableId = 5;
    pub const ORDER_LINE: TableId = 6;
    pub const ITEM: TableId = 7;
    pub const STOCK: TableId = 8;
}

/// Record word offsets per table. Tables with run-time inserts or deletes
/// keep the row state in word 0 (`store::ROW_STATE_WORD`).
pub mod col {
    // WAREHOUSE: ytd, tax, then name/street/city/state/zip (81 bytes).
    pub const W_YTD: usize = 0;
    pub const W_TAX: usize = 1;
    pub const W_TEXT: usize = 2;
    pub const W_WORDS: u32 = 13;
    // DISTRICT
    pub const D_YTD: usize = 0;
    pub const D_TAX: usize = 1;
    pub const D_NEXT_O_ID: usize = 2;
    /// verbena's addition: the next history row id of the district (the
    /// specification's HISTORY has no key; see the module doc).
    pub const D_NEXT_H_ID: usize = 3;
    pub const D_TEXT: usize = 4;
    pub const D_WORDS: u32 = 15;
    // CUSTOMER
    pub const C_BALANCE: usize = 0;
    pub const C_YTD_PAYMENT: usize = 1;
    pub const C_PAYMENT_CNT: usize = 2;
    pub const C_DELIVERY_CNT: usize = 3;
    pub const C_DISCOUNT: usize = 4;
    pub const C_CREDIT: usize = 5;
    pub const C_CREDIT_LIM: usize = 6;
    pub const C_LAST: usize = 7;
    /// 16 bytes.
    pub const C_FIRST: usize = 8;
    pub const C_SINCE: usize = 10;
    /// Middle, streets, city, state, zip, phone: 89 bytes.
    pub const C_TEXT: usize = 11;
    /// 500 bytes (63 words).
    pub const C_DATA: usize = 23;
    pub const C_DATA_WORDS: usize = 63;
    pub const C_WORDS: u32 = 86;
    // HISTORY (row state in word 0)
    pub const H_C_ID: usize = 1;
    pub const H_C_D_ID: usize = 2;
    pub const H_C_W_ID: usize = 3;
    pub const H_D_ID: usize = 4;
    pub const H_W_ID: usize = 5;
    pub const H_DATE: usize = 6;
    pub const H_AMOUNT: usize = 7;
    /// 24 bytes.
    pub const H_DATA: usize = 8;
    pub const H_WORDS: u32 = 11;
    // NEW-ORDER (row state in word 0)
    pub const NO_O_ID: usize = 1;
    pub const NO_D_ID: usize = 2;
    pub const NO_W_ID: usize = 3;
    pub const NO_WORDS: u32 = 4;
    // ORDER (row state in word 0)
    pub const O_ID: usize = 1;
    pub const O_C_ID: usize = 2;
    pub const O_D_ID: usize = 3;
    pub const O_W_ID: usize = 4;
    pub const O_ENTRY_D: usize = 5;
    /// 0 = null (not delivered).
    pub const O_CARRIER_ID: usize = 6;
    pub const O_OL_CNT: usize = 7;
    pub const O_ALL_LOCAL: usize = 8;
    pub const O_WORDS: u32 = 9;
    // ORDER-LINE (row state in word 0)
    pub const OL_O_ID: usize = 1;
    pub const OL_D_ID: usize = 2;
    pub const OL_W_ID: usize = 3;
    pub const OL_NUMBER: usize = 4;
    pub const OL_I_ID: usize = 5;
    pub const OL_SUPPLY_W_ID: usize = 6;
    /// 0 = null (not delivered).
    pub const OL_DELIVERY_D: usize = 7;
    pub const OL_QUANTITY: usize = 8;
    pub const OL_AMOUNT: usize = 9;
    /// 24 bytes.
    pub const OL_DIST_INFO: usize = 10;
    pub const OL_WORDS: u32 = 13;
    // ITEM
    pub const I_IM_ID: usize = 0;
    pub const I_PRICE: usize = 1;
    /// 24 bytes.
    pub const I_NAME: usize = 2;
    /// 50 bytes (7 words).
    pub const I_DATA: usize = 5;
    pub const I_WORDS: u32 = 12;
    // STOCK
    pub const S_QUANTITY: usize = 0;
    pub const S_YTD: usize = 1;
    pub const S_ORDER_CNT: usize = 2;
    pub const S_REMOTE_CNT: usize = 3;
    /// S_DIST_01..10, 24 bytes (3 words) each.
    pub const S_DIST: usize = 4;
    /// 50 bytes (7 words).
    pub const S_DATA: usize = 34;
    pub const S_WORDS: u32 = 41;
    /// Words of a 50-byte data column (I_DATA, S_DATA).
    pub const DATA_WORDS: usize = 7;
    /// Words of a 24-byte column.
    pub const TEXT24_WORDS: usize = 3;
}

/// The workload's ordered indexes, as named in `IndexOp::index`.
pub mod ordered {
    pub const NEW_ORDERS: u32 = 0;
    pub const ORDERS_BY_CUSTOMER: u32 = 1;
}

/// Transaction types, as `Workload::txn_type` numbers them.
pub const TXN_TYPES: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];

/// How a customer is selected (§2.5.1.2, §2.6.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CustomerSel {
    /// C_ID, 0-based.
    Id(u32),
    /// C_LAST's syllable number.
    LastName(u16),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineRequest {
    /// I_ID, 1-based; `items + 1` is the unused id of a rolled-back order.
    pub item: u32,
    pub supply_w: u32,
    pub quantity: u8,
}

/// §2.5: a Payment at district `(w, d)` by a customer of district `(c_w,
/// c_d)`, the home one or, for a remote payment, one elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaymentRequest {
    pub w: u32,
    pub d: u8,
    pub c_w: u32,
    pub c_d: u8,
    pub customer: CustomerSel,
    pub amount_cents: u32,
}

/// A generated TPC-C transaction: plain data, replayed exactly on retry.
/// Warehouses are global numbers; districts and customers 0-based.
#[derive(Clone, Copy, Debug)]
pub enum TpccRequest {
    NewOrder {
        w: u32,
        d: u8,
        c: u32,
        ol_cnt: u8,
        lines: [LineRequest; MAX_ORDER_LINES],
    },
    Payment(PaymentRequest),
    OrderStatus {
        w: u32,
        d: u8,
        customer: CustomerSel,
    },
    Delivery {
        w: u32,
        carrier: u8,
    },
    StockLevel {
        w: u32,
        d: u8,
        threshold: u8,
    },
}

/// Node-local ordered indexes.
struct NodeIndexes {
    new_orders: OrderedIndex,
    orders_by_customer: OrderedIndex,
}

impl NodeIndexes {
    /// Both indexes as words: each its entry count, then its `key, value`
    /// pairs in key order.
    fn to_words(&self) -> Vec<u64> {
        let mut words = Vec::new();
        let mut entries = Vec::new();
        for index in [&self.new_orders, &self.orders_by_customer] {
            entries.clear();
            index.collect_range(0..=u64::MAX, &mut entries);
            words.push(entries.len() as u64);
            words.extend(entries.iter().flat_map(|&(key, value)| [key, value]));
        }
        words
    }

    /// Replaces both indexes with what [`NodeIndexes::to_words`] wrote;
    /// false (and the indexes unchanged) if `words` are not that.
    fn replace_from_words(&self, words: &[u64]) -> bool {
        let mut parts = Vec::with_capacity(2);
        let mut rest = words;
        for _ in 0..2 {
            let Some((&count, tail)) = rest.split_first() else {
                return false;
            };
            let Some(len) = usize::try_from(count)
                .ok()
                .and_then(|count| count.checked_mul(2))
                .filter(|&len| len <= tail.len())
            else {
                return false;
            };
            parts.push(&tail[..len]);
            rest = &tail[len..];
        }
        if !rest.is_empty() {
            return false;
        }
        for (index, pairs) in [&self.new_orders, &self.orders_by_customer]
            .into_iter()
            .zip(parts)
        {
            index.clear();
            for pair in pairs.chunks_exact(2) {
                index.insert(pair[0], pair[1]);
            }
        }
        true
    }
}

use generate::NuRand;

pub struct Tpcc {
    config: TpccConfig,
    nodes: u32,
    seed: u64,
    customers: u64,
    initial_new_orders: u64,
    warehouses: u64,
    weights: [u32; 5],
    weight_sum: u64,
    nodes_indexes: Vec<NodeIndexes>,
    /// Customers by (district, last name, first name): read-only after load.
    by_name: OrderedIndex,
    nurand_customer: NuRand,
    nurand_last_load: NuRand,
    nurand_last_run: NuRand,
    nurand_item: NuRand,
}

/// Rough registered-memory bytes one node needs for `config` (for
/// `Config::validate`): tuples with a one-word protocol header, plus the
/// index at ≤ 50 % load.
pub fn region_bytes_estimate(config: &TpccConfig) -> u64 {
    tables_for(config)
        .iter()
        .map(|t| {
            t.capacity_per_node
                .saturating_mul(t.record_words as u64 + 4 + 8)
                * 8
        })
        .fold(0u64, |a, b| a.saturating_add(b))
}

fn tables_for(t: &TpccConfig) -> Vec<TableSpec> {
    let wpn = t.warehouses_per_node as u64;
    let districts = wpn * DISTRICTS;
    let c = t.customers_per_district as u64;
    let h = t.insert_headroom_per_district as u64;
    let orders = c + h;
    let new_orders = initial_new_orders(c) + h;
    let spec = |name, record_words, capacity_per_node| TableSpec {
        name,
        record_words,
        capacity_per_node,
    };
    vec![
        spec("warehouse", col::W_WORDS, wpn),
        spec("district", col::D_WORDS, districts),
        spec("customer", col::C_WORDS, districts * c),
        spec("history", col::H_WORDS, districts * orders),
        spec("new_order", col::NO_WORDS, districts * new_orders),
        spec("order", col::O_WORDS, districts * orders),
        // Up to 15 lines per order: every order a district can hold fits
        // with all its lines, so an insert never finds the table full (an
        // overflow one CALVIN participant saw alone would split its
        // participants' decisions).
        spec(
            "order_line",
            col::OL_WORDS,
            districts * MAX_ORDER_LINES as u64 * orders,
        ),
        spec("item", col::I_WORDS, t.items as u64),
        spec("stock", col::S_WORDS, wpn * t.items as u64),
    ]
}

fn initial_new_orders(customers: u64) -> u64 {
    (customers * 900 / 3000).max(1)
}

impl Tpcc {
    /// `config` must have passed `Config::validate`.
    pub fn new(config: &TpccConfig, nodes: u32, seed: u64) -> Tpcc {
        let customers = config.customers_per_district as u64;
        let weights = config.mix.weights();
        let mut rng = Rng::derive(seed, &[TPCC_TAG]);
        let c_last_load = rng.below(256);
        // §2.1.6.1: C_run differs from C_load by 65..=119, not 96 or 112.
        let delta = loop {
            let delta = 65 + rng.below(55);
            if delta != 96 && delta != 112 {
                break delta;
            }
        };
        let last_names = customers.min(1000);
        Tpcc {
            config: *config,
            nodes,
            seed,
            customers,
            initial_new_orders: initial_new_orders(customers),
            warehouses: nodes as u64 * config.warehouses_per_node as u64,
            weights,
            weight_sum: weights.iter().map(|&w| w as u64).sum(),
            nodes_indexes: (0..nodes)
                .map(|_| NodeIndexes {
                    new_orders: OrderedIndex::new(),
                    orders_by_customer: OrderedIndex::new(),
                })
                .collect(),
            by_name: OrderedIndex::new(),
            nurand_customer: NuRand::new(1023, 0, customers - 1, rng.below(1024)),
            nurand_last_load: NuRand::new(255, 0, last_names - 1, c_last_load),
            nurand_last_run: NuRand::new(255, 0, last_names - 1, c_last_load + delta),
            nurand_item: NuRand::new(8191, 1, config.items as u64, rng.below(8192)),
        }
    }

    /// The largest order id (and history row id) a district can take:
    /// the loaded ones, then `insert_headroom_per_district` more. The
    /// tables hold exactly that many per district, so a transaction that
    /// would go past it gives up (`table_full`) before inserting.
    fn last_run_time_id(&self) -> u64 {
        self.customers + self.config.insert_headroom_per_district as u64
    }

    pub fn config(&self) -> &TpccConfig {
        &self.config
    }

    #[inline]
    fn node_of(&self, w: u64) -> NodeId {
        (w / self.config.warehouses_per_node as u64) as NodeId
    }

    #[inline]
    pub fn district_key(w: u64, d: u64) -> u64 {
        w * DISTRICTS + d
    }

    #[inline]
    pub fn customer_key(&self, w: u64, d: u64, c: u64) -> u64 {
        Tpcc::district_key(w, d) * self.customers + c
    }

    #[inline]
    pub fn order_key(w: u64, d: u64, o: u64) -> u64 {
        (Tpcc::district_key(w, d) << 32) | o
    }

    #[inline]
    pub fn order_line_key(order_key: u64, ol: u64) -> u64 {
        debug_assert!((1..=MAX_ORDER_LINES as u64).contains(&ol));
        (order_key << 4) | ol
    }

    /// History row `h` (1-based) of home district `(w, d)`.
    #[inline]
    pub fn history_key(w: u64, d: u64, h: u64) -> u64 {
        (Tpcc::district_key(w, d) << 32) | h
    }

    #[inline]
    pub fn item_key(node: NodeId, i: u64) -> u64 {
        ((node as u64) << 32) | i
    }

    #[inline]
    pub fn stock_key(&self, w: u64, i: u64) -> u64 {
        w * (self.config.items as u64 + 1) + i
    }

    /// Key of `ORDERS_BY_CUSTOMER`: the customer's index on its node, then
    /// the order id.
    #[inline]
    fn order_by_customer_key(&self, w: u64, d: u64, c: u64, o: u64) -> u64 {
        let first_w = w - w % self.config.warehouses_per_node as u64;
        let local = self.customer_key(w, d, c) - self.customer_key(first_w, 0, 0);
        (local << 32) | o
    }

    /// Key of the by-name index: district, last name, then the customer's
    /// rank by first name within that name.
    #[inline]
    fn by_name_key(w: u64, d: u64, last: u64, rank: u64) -> u64 {
        (Tpcc::district_key(w, d) << 40) | (last << 30) | rank
    }

    fn nodes_indexes(&self, node: NodeId) -> &NodeIndexes {
        &self.nodes_indexes[node as usize]
    }
}

/// Tag of the workload's own generator (its NURand constants), apart from
/// every row's and client's.
const TPCC_TAG: u64 = 0x7bcc;

impl Workload for Tpcc {
    type Request = TpccRequest;

    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn tables(&self) -> Vec<TableSpec> {
        tables_for(&self.config)
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        load::load_node(self, store)
    }

    fn generate(&self, rng: &mut Rng, node: NodeId) -> TpccRequest {
        self.generate_request(rng, node)
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &TpccRequest,
    ) -> TxnResult<()> {
        match *request {
            TpccRequest::NewOrder {
                w,
                d,
                c,
                ol_cnt,
                ref lines,
            } => {
                txns::new_order(
                    self,
                    txn,
                    w as u64,
                    d as u64,
                    c as u64,
                    &lines[..ol_cnt as usize],
                )
                .await
            }
            TpccRequest::Payment(ref payment) => txns::payment(self, txn, payment).await,
            TpccRequest::OrderStatus { w, d, customer } => {
                txns::order_status(self, txn, w as u64, d as u64, customer).await
            }
            TpccRequest::Delivery { w, carrier } => {
                txns::delivery(self, txn, w as u64, carrier as u64).await
            }
            TpccRequest::StockLevel { w, d, threshold } => {
                txns::stock_level(self, txn, w as u64, d as u64, threshold as u64).await
            }
        }
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &TXN_TYPES
    }

    fn txn_type(&self, request: &TpccRequest) -> usize {
        match request {
            TpccRequest::NewOrder { .. } => 0,
            TpccRequest::Payment(_) => 1,
            TpccRequest::OrderStatus { .. } => 2,
            TpccRequest::Delivery { .. } => 3,
            TpccRequest::StockLevel { .. } => 4,
        }
    }

    fn at_commit_point(&self, node: NodeId, ops: &[IndexOp]) {
        let indexes = self.nodes_indexes(node);
        for op in ops {
            let index = match op.index {
                ordered::NEW_ORDERS => &indexes.new_orders,
                ordered::ORDERS_BY_CUSTOMER => &indexes.orders_by_customer,
                other => unreachable!("tpcc has no ordered index {other}"),
            };
            if op.insert {
                let previous = index.insert(op.key, op.value);
                debug_assert!(previous.is_none(), "index {} key {}", op.index, op.key);
            } else {
                let removed = index.remove(op.key);
                debug_assert!(removed.is_some(), "index {} key {}", op.index, op.key);
            }
        }
    }

    fn export_node_local(&self, node: NodeId) -> Vec<u64> {
        self.nodes_indexes(node).to_words()
    }

    fn import_node_local(&self, node: NodeId, words: &[u64]) -> bool {
        self.nodes_indexes
            .get(node as usize)
            .is_some_and(|indexes| indexes.replace_from_words(words))
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], history: &History) -> InvariantReport {
        load::check_consistency(self, stores, history)
    }

    fn max_request_words(&self) -> usize {
        deterministic::MAX_REQUEST_WORDS
    }

    fn max_accesses(&self) -> usize {
        self.deterministic_max_accesses()
    }

    fn max_forwarded_accesses(&self) -> usize {
        self.deterministic_max_forwarded()
    }

    fn encode_request(&self, request: &TpccRequest, out: &mut Vec<u64>) {
        self.encode(request, out)
    }

    fn decode_request(&self, words: &[u64]) -> Option<TpccRequest> {
        self.decode(words)
    }

    fn declare_accesses(&self, request: &TpccRequest, out: &mut Vec<Declared>) -> bool {
        self.declare(request, out)
    }
}

impl TpccMix {
    /// Parses a mix: `standard`, `new-order-only`, or five weights
    /// `NO,P,OS,D,SL` (e.g. `45,43,4,4,4`).
    pub fn parse(text: &str) -> Option<TpccMix> {
        match text {
            "standard" => return Some(TpccMix::STANDARD),
            "new-order-only" | "new_order_only" => return Some(TpccMix::NEW_ORDER_ONLY),
            _ => {}
        }
        let weights: Vec<u32> = text
            .split(',')
            .map(|part| part.trim().parse().ok())
            .collect::<Option<_>>()?;
        let [new_order, payment, order_status, delivery, stock_level] = weights[..] else {
            return None;
        };
        Some(TpccMix {
            new_order,
            payment,
            order_status,
            delivery,
            stock_level,
        })
    }
}

#[cfg(test)]
mod tests;
