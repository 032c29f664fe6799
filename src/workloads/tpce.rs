//! TPC-E customer-position as DrTM+H §5.5 runs it: the distributed
//! read-only transaction that summarises a customer's standing at current
//! market prices ("the assets prices are fetched in a distributed way"),
//! as a stress of the read and validation stages of read-only
//! transactions. Only the tables the transaction reads are built (TPC-E
//! v1.14 clause 3.3.2, frame 1 of Customer-Position; its optional trade
//! history frame is left out), scaled by knobs.
//!
//! Schema (customers partitioned by id; an account and its holdings live
//! with their customer; securities partitioned by symbol id, so a
//! customer's prices are spread over the cluster):
//!
//! * `customer`: c → `[c, tier, account_count]`, `account_count` uniform in
//!   `1..=max_accounts_per_customer` (TPC-E: 1–10).
//! * `customer_account`: `c · max_accounts_per_customer + k` → `[account,
//!   c, cash balance]`.
//! * `holding_summary`: `account · holdings_per_account + h` → `[symbol,
//!   quantity]`, distinct symbols per account, uniform over all securities.
//! * `last_trade`: symbol → `[price (cents), volume, trades]`.
//!
//! Transactions:
//!
//! * `customer_position(c)` (read-only): reads c, each of its accounts,
//!   each account's holdings and each held security's last trade, and sums
//!   the account's assets (cash + Σ quantity × price).
//! * `market_feed(symbols, deltas)`: moves the price of `feed_size`
//!   securities of the coordinator's partition (TPC-E's Market-Feed, the
//!   writer the prices come from). Weight 0 in the default mix — DrTM+H
//!   measures customer-position alone — and on in the correctness tests,
//!   so read-only transactions are checked against concurrent writers.
//!
//! Invariants after a run: customers, accounts and holdings are never
//! written (each row still holds what the loader put there, at version 0);
//! the sum of price changes over all securities equals the sum the
//! committed market feeds noted (`Txn::note`); the securities' trade
//! counters sum to `feed_size` per committed market feed; no price fell
//! below 1 cent.

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::check::History;
use crate::fabric::NodeId;
use crate::store::{NodeStore, StoreError, TableId, TableSpec};
use crate::txn::{Protocol, Txn, TxnResult};

use super::common::{for_each_row, mix64, Findings, Mix};
use super::{Declared, InvariantReport, Workload};

pub const CUSTOMER: TableId = 0;
pub const CUSTOMER_ACCOUNT: TableId = 1;
pub const HOLDING_SUMMARY: TableId = 2;
pub const LAST_TRADE: TableId = 3;

pub use crate::config::tpce::{
    TpceConfig, TpceMix, MAX_ACCOUNTS_PER_CUSTOMER, MAX_FEED_SIZE, MAX_HOLDINGS_PER_ACCOUNT,
    TXN_TYPES,
};

/// A generated transaction. The market feed's arrays make it a few
/// hundred bytes, copied once per transaction: no reason to box it.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
pub enum TpceRequest {
    CustomerPosition { node: NodeId, customer: u64 },
    MarketFeed(MarketFeed),
}

/// A market feed: the first `len` of `symbols`, securities of `node`,
/// repriced by their `deltas`.
#[derive(Clone, Copy, Debug)]
pub struct MarketFeed {
    pub node: NodeId,
    pub len: u8,
    pub symbols: [u64; MAX_FEED_SIZE as usize],
    /// Price change of each symbol, cents.
    pub deltas: [i8; MAX_FEED_SIZE as usize],
}

impl MarketFeed {
    /// The securities repriced, in feed order.
    pub fn symbols(&self) -> &[u64] {
        &self.symbols[..self.len as usize]
    }

    /// Each repriced security's price change, cents.
    pub fn deltas(&self) -> &[i8] {
        &self.deltas[..self.len as usize]
    }
}

pub struct Tpce {
    config: TpceConfig,
    nodes: u32,
    mix: Mix,
}

impl Tpce {
    /// `config` must have passed validation.
    pub fn new(config: &TpceConfig, nodes: u32) -> Tpce {
        Tpce {
            config: *config,
            nodes,
            mix: Mix::new(&config.mix.weights()),
        }
    }

    fn account_count(&self, customer: u64) -> u64 {
        1 + mix64(customer ^ 0xacc0) % self.config.max_accounts_per_customer as u64
    }

    fn account_id(&self, customer: u64, k: u64) -> u64 {
        customer * self.config.max_accounts_per_customer as u64 + k
    }

    fn cash(account: u64) -> u64 {
        10_000 + mix64(account ^ 0xca5) % 1_000_000
    }

    /// The `h`-th security account `account` holds: distinct per account.
    fn holding_symbol(&self, account: u64, h: u64) -> u64 {
        let securities = self.config.securities_per_node * self.nodes as u64;
        let holdings = self.config.holdings_per_account as u64;
        // A random start and a stride that keeps `holdings` picks distinct.
        let start = mix64(account ^ 0x5eed) % securities;
        let stride = (securities / holdings).max(1);
        (start + h * stride) % securities
    }

    fn quantity(holding: u64) -> u64 {
        100 * (1 + mix64(holding ^ 0x9a7) % 50)
    }

    fn initial_price(symbol: u64) -> u64 {
        1_000 + mix64(symbol ^ 0x1a57) % 99_000
    }

    fn symbol_node(&self, symbol: u64) -> NodeId {
        (symbol / self.config.securities_per_node) as NodeId
    }
}

impl Workload for Tpce {
    type Request = TpceRequest;

    fn name(&self) -> &'static str {
        "tpce-cp"
    }

    fn tables(&self) -> Vec<TableSpec> {
        let c = &self.config;
        let accounts = c.customers_per_node * c.max_accounts_per_customer as u64;
        vec![
            TableSpec {
                name: "customer",
                record_words: 3,
                capacity_per_node: c.customers_per_node,
            },
            TableSpec {
                name: "customer_account",
                record_words: 3,
                capacity_per_node: accounts,
            },
            TableSpec {
                name: "holding_summary",
                record_words: 2,
                capacity_per_node: accounts * c.holdings_per_account as u64,
            },
            TableSpec {
                name: "last_trade",
                record_words: 3,
                capacity_per_node: c.securities_per_node,
            },
        ]
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        let c = &self.config;
        let node = store.node as u64;
        for i in 0..c.customers_per_node {
            let customer = node * c.customers_per_node + i;
            let accounts = self.account_count(customer);
            store.insert(CUSTOMER, customer, &[customer, 1 + customer % 3, accounts])?;
            for k in 0..accounts {
                let account = self.account_id(customer, k);
                store.insert(
                    CUSTOMER_ACCOUNT,
                    account,
                    &[account, customer, Tpce::cash(account)],
                )?;
                for h in 0..c.holdings_per_account as u64 {
                    let holding = account * c.holdings_per_account as u64 + h;
                    store.insert(
                        HOLDING_SUMMARY,
                        holding,
                        &[self.holding_symbol(account, h), Tpce::quantity(holding)],
                    )?;
                }
            }
        }
        for i in 0..c.securities_per_node {
            let symbol = node * c.securities_per_node + i;
            store.insert(LAST_TRADE, symbol, &[Tpce::initial_price(symbol), 0, 0])?;
        }
        Ok(())
    }

    fn generate(&self, rng: &mut Rng, node: NodeId) -> TpceRequest {
        let c = &self.config;
        if self.mix.pick(rng) == 0 {
            TpceRequest::CustomerPosition {
                node,
                customer: node as u64 * c.customers_per_node + rng.below(c.customers_per_node),
            }
        } else {
            let mut symbols = [0u64; MAX_FEED_SIZE as usize];
            let mut deltas = [0i8; MAX_FEED_SIZE as usize];
            for (symbol, delta) in symbols
                .iter_mut()
                .zip(deltas.iter_mut())
                .take(c.feed_size as usize)
            {
                *symbol = node as u64 * c.securities_per_node + rng.below(c.securities_per_node);
                *delta = rng.below(21) as i8 - 10;
            }
            TpceRequest::MarketFeed(MarketFeed {
                node,
                len: c.feed_size as u8,
                symbols,
                deltas,
            })
        }
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &TpceRequest,
    ) -> TxnResult<()> {
        match *request {
            TpceRequest::CustomerPosition { node, customer } => {
                let row = txn.read(CUSTOMER, node, customer).await?;
                let accounts = txn.get(row)[2];
                let holdings = self.config.holdings_per_account as u64;
                let mut net_worth = 0u64;
                for k in 0..accounts {
                    let account_id = self.account_id(customer, k);
                    let account = txn.read(CUSTOMER_ACCOUNT, node, account_id).await?;
                    let mut assets = txn.get(account)[2];
                    for h in 0..holdings {
                        let holding = txn
                            .read(HOLDING_SUMMARY, node, account_id * holdings + h)
                            .await?;
                        let (symbol, quantity) = (txn.get(holding)[0], txn.get(holding)[1]);
                        let trade = txn
                            .read(LAST_TRADE, self.symbol_node(symbol), symbol)
                            .await?;
                        assets = assets.wrapping_add(quantity.wrapping_mul(txn.get(trade)[0]));
                    }
                    net_worth = net_worth.wrapping_add(assets);
                }
                std::hint::black_box(net_worth);
            }
            TpceRequest::MarketFeed(ref feed) => {
                let mut moved = 0i64;
                for (&symbol, &delta) in feed.symbols().iter().zip(feed.deltas()) {
                    let row = txn.update(LAST_TRADE, feed.node, symbol).await?;
                    let record = txn.get_mut(row);
                    let price = record[0] as i64;
                    let new_price = (price + delta as i64).max(1);
                    record[0] = new_price as u64;
                    record[1] += 100;
                    record[2] += 1;
                    moved += new_price - price;
                }
                txn.note(moved);
            }
        }
        Ok(())
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &TXN_TYPES
    }

    fn txn_type(&self, request: &TpceRequest) -> usize {
        match request {
            TpceRequest::CustomerPosition { .. } => 0,
            TpceRequest::MarketFeed(_) => 1,
        }
    }

    fn max_request_words(&self) -> usize {
        3 + 2 * MAX_FEED_SIZE as usize
    }

    fn max_accesses(&self) -> usize {
        let c = &self.config;
        let accounts = c.max_accounts_per_customer as usize;
        (1 + accounts + 2 * accounts * c.holdings_per_account as usize).max(c.feed_size as usize)
    }

    /// customer_position: `[0, node, customer]`; market_feed: `[1, node,
    /// len, symbols…, deltas…]`.
    fn encode_request(&self, request: &TpceRequest, out: &mut Vec<u64>) {
        match *request {
            TpceRequest::CustomerPosition { node, customer } => {
                out.extend_from_slice(&[0, node as u64, customer])
            }
            TpceRequest::MarketFeed(ref feed) => {
                out.extend_from_slice(&[1, feed.node as u64, feed.len as u64]);
                out.extend_from_slice(feed.symbols());
                out.extend(feed.deltas().iter().map(|&d| d as i64 as u64));
            }
        }
    }

    fn decode_request(&self, words: &[u64]) -> Option<TpceRequest> {
        let (&kind, rest) = words.split_first()?;
        let (&node, rest) = rest.split_first()?;
        if node >= self.nodes as u64 {
            return None;
        }
        let node = node as NodeId;
        match kind {
            0 => match rest {
                &[customer] => Some(TpceRequest::CustomerPosition { node, customer }),
                _ => None,
            },
            1 => {
                let (&len, rest) = rest.split_first()?;
                let len = len as usize;
                if len > MAX_FEED_SIZE as usize || rest.len() != 2 * len {
                    return None;
                }
                let mut symbols = [0u64; MAX_FEED_SIZE as usize];
                let mut deltas = [0i8; MAX_FEED_SIZE as usize];
                symbols[..len].copy_from_slice(&rest[..len]);
                for (delta, &word) in deltas.iter_mut().zip(&rest[len..]) {
                    *delta = i8::try_from(word as i64).ok()?;
                }
                Some(TpceRequest::MarketFeed(MarketFeed {
                    node,
                    len: len as u8,
                    symbols,
                    deltas,
                }))
            }
            _ => None,
        }
    }

    /// A market feed's securities follow from its request (each declared
    /// once); customer_position finds its accounts and holdings in the
    /// data, so a deterministic protocol reconnoitres it.
    fn declare_accesses(&self, request: &TpceRequest, out: &mut Vec<Declared>) -> bool {
        let TpceRequest::MarketFeed(feed) = request else {
            return false;
        };
        let symbols = feed.symbols();
        for (i, &symbol) in symbols.iter().enumerate() {
            if !symbols[..i].contains(&symbol) {
                out.push(Declared {
                    table: LAST_TRADE,
                    node: feed.node,
                    key: symbol,
                    write: true,
                });
            }
        }
        true
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], history: &History) -> InvariantReport {
        let c = &self.config;
        let holdings = c.holdings_per_account as u64;
        let mut findings = Findings::default();
        let mut unchanged = |table: &str, key: u64, seq: u64, ok: bool| {
            if seq != 0 || !ok {
                findings.violation(|| {
                    format!("{table} row {key} changed (version {seq}); only last_trade is written")
                });
            }
        };
        let mut rows = 0u64;
        for_each_row(stores, CUSTOMER, |key, seq, record| {
            rows += 1;
            unchanged(
                "customer",
                key,
                seq,
                record == [key, 1 + key % 3, self.account_count(key)],
            );
        });
        for_each_row(stores, CUSTOMER_ACCOUNT, |key, seq, record| {
            rows += 1;
            let customer = key / c.max_accounts_per_customer as u64;
            unchanged(
                "customer_account",
                key,
                seq,
                record == [key, customer, Tpce::cash(key)],
            );
        });
        for_each_row(stores, HOLDING_SUMMARY, |key, seq, record| {
            rows += 1;
            let symbol = self.holding_symbol(key / holdings, key % holdings);
            unchanged(
                "holding_summary",
                key,
                seq,
                record == [symbol, Tpce::quantity(key)],
            );
        });
        let (mut moved, mut trades) = (0i64, 0u64);
        for_each_row(stores, LAST_TRADE, |symbol, _, record| {
            if record[0] < 1 {
                findings.violation(|| format!("security {symbol} has price {}", record[0]));
            }
            moved += record[0] as i64 - Tpce::initial_price(symbol) as i64;
            trades += record[2];
        });
        let (noted, feeds) = history.notes(Some(1));
        if moved != noted || trades != feeds * c.feed_size as u64 {
            findings.violation(|| {
                format!(
                    "prices moved by {moved} cents and {trades} trades were counted, but {feeds} committed market feeds moved them by {noted} and traded {}",
                    feeds * c.feed_size as u64
                )
            });
        } else {
            findings.note(format!(
                "{rows} customer, account and holding rows unchanged; prices moved by {moved} cents, as the {feeds} committed market feeds noted"
            ));
        }
        findings.into_report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holdings_are_distinct_and_spread_over_the_cluster() {
        let tpce = Tpce::new(&TpceConfig::default(), 4);
        let mut nodes = [0u32; 4];
        for account in 0..500 {
            let symbols: Vec<u64> = (0..4).map(|h| tpce.holding_symbol(account, h)).collect();
            for (i, s) in symbols.iter().enumerate() {
                assert!(*s < 4 * 6_850);
                assert!(!symbols[..i].contains(s), "{symbols:?}");
                nodes[tpce.symbol_node(*s) as usize] += 1;
            }
            let count = tpce.account_count(account);
            assert!((1..=10).contains(&count));
        }
        assert!(nodes.iter().all(|&n| n > 300), "{nodes:?}");
    }

    #[test]
    fn bad_knobs_are_named() {
        let base = TpceConfig::default();
        let bad = |c: TpceConfig| c.validate(2).unwrap_err().0;
        assert!(bad(TpceConfig {
            max_accounts_per_customer: 11,
            ..base
        })
        .contains("tpce.max_accounts_per_customer = 11"));
        assert!(bad(TpceConfig {
            securities_per_node: 1,
            ..base
        })
        .contains("tpce.holdings_per_account = 4 exceeds"));
        assert!(bad(TpceConfig {
            feed_size: 0,
            ..base
        })
        .contains("tpce.feed_size = 0"));
    }
}
