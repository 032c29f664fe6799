//! SmallBank (DrTM Table 5 and §7; DrTM+H §5): a bank of customers, each
//! with a savings and a checking account, and six short transactions over
//! one or two customers — network-bound, with almost no computation, which
//! is why DrTM+H uses it to compare primitives.
//!
//! Schema (one partition per node; customer `c` of node `n` has the global
//! id `n · accounts_per_node + c`, `accounts_per_node = accounts_per_worker
//! · workers`, DrTM+H's "100,000 accounts per thread"):
//!
//! * `accounts`: id → `[id, name]` (the name is a hash of the id). Read by
//!   every transaction only with `lookup_accounts`, which models the
//!   original benchmark's name → id lookup; off by default, as the RDMA
//!   systems measure SmallBank as one access per balance.
//! * `savings`, `checking`: id → `[balance]`, a signed whole amount (stored
//!   as two's complement). Loaded with a value in `[10000, 50000)` derived
//!   from the id, so the invariant can recompute every initial balance.
//!
//! Transactions (DrTM Table 5 names; the standard mix is SP 25 %, the
//! others 15 % each, configurable):
//!
//! * `send_payment(a, b, v)`: `checking[a]` −= v, `checking[b]` += v; gives up
//!   (user abort) if `checking[a]` < v.
//! * `amalgamate(a, b)`: moves `savings[a]` + `checking[a]` into `checking[b]`.
//! * `balance(a)`: reads `savings[a]` and `checking[a]` (read-only).
//! * `deposit_checking(a, v)`: `checking[a]` += v.
//! * `write_check(a, v)`: `checking[a]` −= v, or v + 1 (an overdraft penalty)
//!   when `savings[a]` + `checking[a]` < v.
//! * `transact_savings(a, v)`: `savings[a]` −= v; gives up if that would
//!   make it negative.
//!
//! Amounts are uniform in `1..=max_amount`. Skew: in each partition,
//! `hot_account_fraction` of the customers (4 %) get
//! `hot_account_probability` (90 %) of the accesses. Placement: with
//! probability `distributed_probability` a transaction crosses nodes — its
//! second customer (send_payment,
//! amalgamate) or its only one (the others) lives on another node, chosen
//! uniformly; otherwise every customer is on the coordinator's node. The
//! default 1.0 is DrTM+H's "no locality" setting; DrTM's is 0.01.
//!
//! Invariant after a run: the money in all savings and checking accounts
//! equals the loaded total plus what committed transactions deposited minus
//! what they withdrew. Each program notes its net deposit (`Txn::note`);
//! only committed transactions' notes reach the history, so a lost,
//! duplicated or half-applied write (send_payment debiting without
//! crediting) shows as a difference. Also: the `accounts` table is never
//! written.

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::check::History;
use crate::fabric::NodeId;
use crate::store::{NodeStore, StoreError, TableId, TableSpec};
use crate::txn::{Protocol, Txn, TxnResult};

use super::common::{for_each_row, mix64, txn_types, Findings, HotArea, Mix};
use super::{Declared, InvariantReport, Workload};

pub const ACCOUNTS: TableId = 0;
pub const SAVINGS: TableId = 1;
pub const CHECKING: TableId = 2;

pub use crate::config::smallbank::{SmallBankConfig, SmallBankMix, TXN_TYPES};

/// Lowest and one past the highest loaded balance.
const BALANCE_LOW: i64 = 10_000;
const BALANCE_SPAN: u64 = 40_000;

txn_types! {
    pub enum SmallBankTxn {
        SendPayment, Amalgamate, Balance, DepositChecking, WriteCheck, TransactSavings
    }
}

impl SmallBankTxn {
    fn two_customers(self) -> bool {
        matches!(self, SmallBankTxn::SendPayment | SmallBankTxn::Amalgamate)
    }
}

/// A customer: its node and global id.
pub type Customer = (NodeId, u64);

#[derive(Clone, Copy, Debug)]
pub struct SmallBankRequest {
    pub txn: SmallBankTxn,
    pub a: Customer,
    /// The second customer (send_payment, amalgamate); else equal to `a`.
    pub b: Customer,
    pub amount: u64,
}

pub struct SmallBank {
    config: SmallBankConfig,
    nodes: u32,
    per_node: u64,
    area: HotArea,
    mix: Mix,
}

impl SmallBank {
    /// `config` must have passed validation.
    pub fn new(config: &SmallBankConfig, nodes: u32, workers: u32) -> SmallBank {
        let per_node = config.accounts_per_worker * workers as u64;
        SmallBank {
            config: *config,
            nodes,
            per_node,
            area: HotArea::new(
                per_node,
                config.hot_account_fraction,
                config.hot_account_probability,
            ),
            mix: Mix::new(&config.mix.weights()),
        }
    }

    /// Customers per node.
    pub fn accounts_per_node(&self) -> u64 {
        self.per_node
    }

    /// The balance `table` (savings or checking) of customer `id` held when
    /// loaded.
    pub fn initial_balance(table: TableId, id: u64) -> i64 {
        BALANCE_LOW + (mix64(id.wrapping_mul(3).wrapping_add(table as u64)) % BALANCE_SPAN) as i64
    }

    fn name_of(id: u64) -> u64 {
        mix64(id ^ 0x5a11_ba4c)
    }

    fn customer(&self, rng: &mut Rng, node: NodeId) -> Customer {
        (node, node as u64 * self.per_node + self.area.row(rng))
    }

    fn other_node(&self, rng: &mut Rng, home: NodeId) -> NodeId {
        let other = rng.below(self.nodes as u64 - 1) as NodeId;
        if other >= home {
            other + 1
        } else {
            other
        }
    }

    async fn lookup<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        customer: Customer,
    ) -> TxnResult<()> {
        if self.config.lookup_accounts {
            let row = txn.read(ACCOUNTS, customer.0, customer.1).await?;
            debug_assert_eq!(txn.get(row)[0], customer.1, "accounts row of another id");
        }
        Ok(())
    }
}

fn balance(record: &[u64]) -> i64 {
    record[0] as i64
}

fn set_balance(record: &mut [u64], value: i64) {
    record[0] = value as u64;
}

impl Workload for SmallBank {
    type Request = SmallBankRequest;

    fn name(&self) -> &'static str {
        "smallbank"
    }

    fn tables(&self) -> Vec<TableSpec> {
        let spec = |name, record_words| TableSpec {
            name,
            record_words,
            capacity_per_node: self.per_node,
        };
        vec![spec("accounts", 2), spec("savings", 1), spec("checking", 1)]
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        for row in 0..self.per_node {
            let id = store.node as u64 * self.per_node + row;
            store.insert(ACCOUNTS, id, &[id, SmallBank::name_of(id)])?;
            for table in [SAVINGS, CHECKING] {
                store.insert(table, id, &[SmallBank::initial_balance(table, id) as u64])?;
            }
        }
        Ok(())
    }

    fn generate(&self, rng: &mut Rng, node: NodeId) -> SmallBankRequest {
        let txn = SmallBankTxn::ALL[self.mix.pick(rng)];
        let distributed = self.nodes > 1 && rng.unit() < self.config.distributed_probability;
        let amount = 1 + rng.below(self.config.max_amount);
        if txn.two_customers() {
            let a = self.customer(rng, node);
            let b_node = if distributed {
                self.other_node(rng, node)
            } else {
                node
            };
            let mut b = self.customer(rng, b_node);
            let mut tries = 0;
            while b == a {
                tries += 1;
                // One hot row: after a few redraws, step to the next one.
                b = if tries < 16 {
                    self.customer(rng, b_node)
                } else {
                    (
                        b_node,
                        b_node as u64 * self.per_node + (b.1 + 1) % self.per_node,
                    )
                };
            }
            SmallBankRequest { txn, a, b, amount }
        } else {
            let a_node = if distributed {
                self.other_node(rng, node)
            } else {
                node
            };
            let a = self.customer(rng, a_node);
            SmallBankRequest {
                txn,
                a,
                b: a,
                amount,
            }
        }
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &SmallBankRequest,
    ) -> TxnResult<()> {
        let (a, b) = (request.a, request.b);
        let amount = request.amount as i64;
        self.lookup(txn, a).await?;
        if request.txn.two_customers() {
            self.lookup(txn, b).await?;
        }
        match request.txn {
            SmallBankTxn::SendPayment => {
                let from = txn.update(CHECKING, a.0, a.1).await?;
                let to = txn.update(CHECKING, b.0, b.1).await?;
                let from_balance = balance(txn.get(from));
                if from_balance < amount {
                    return Err(txn.user_abort());
                }
                set_balance(txn.get_mut(from), from_balance - amount);
                let to_balance = balance(txn.get(to));
                set_balance(txn.get_mut(to), to_balance.wrapping_add(amount));
            }
            SmallBankTxn::Amalgamate => {
                let savings = txn.update(SAVINGS, a.0, a.1).await?;
                let checking = txn.update(CHECKING, a.0, a.1).await?;
                let to = txn.update(CHECKING, b.0, b.1).await?;
                let total = balance(txn.get(savings)).wrapping_add(balance(txn.get(checking)));
                set_balance(txn.get_mut(savings), 0);
                set_balance(txn.get_mut(checking), 0);
                let to_balance = balance(txn.get(to));
                set_balance(txn.get_mut(to), to_balance.wrapping_add(total));
            }
            SmallBankTxn::Balance => {
                txn.read(SAVINGS, a.0, a.1).await?;
                txn.read(CHECKING, a.0, a.1).await?;
            }
            SmallBankTxn::DepositChecking => {
                let checking = txn.update(CHECKING, a.0, a.1).await?;
                let value = balance(txn.get(checking));
                set_balance(txn.get_mut(checking), value.wrapping_add(amount));
                txn.note(amount);
            }
            SmallBankTxn::WriteCheck => {
                let savings = txn.read(SAVINGS, a.0, a.1).await?;
                let checking = txn.update(CHECKING, a.0, a.1).await?;
                let value = balance(txn.get(checking));
                let total = balance(txn.get(savings)).wrapping_add(value);
                let debit = if total < amount { amount + 1 } else { amount };
                set_balance(txn.get_mut(checking), value.wrapping_sub(debit));
                txn.note(-debit);
            }
            SmallBankTxn::TransactSavings => {
                let savings = txn.update(SAVINGS, a.0, a.1).await?;
                let value = balance(txn.get(savings));
                if value < amount {
                    return Err(txn.user_abort());
                }
                set_balance(txn.get_mut(savings), value - amount);
                txn.note(-amount);
            }
        }
        Ok(())
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &TXN_TYPES
    }

    fn txn_type(&self, request: &SmallBankRequest) -> usize {
        request.txn as usize
    }

    fn max_request_words(&self) -> usize {
        6
    }

    fn max_accesses(&self) -> usize {
        5
    }

    /// `[type, a's node, a, b's node, b, amount]`.
    fn encode_request(&self, request: &SmallBankRequest, out: &mut Vec<u64>) {
        let (a, b) = (request.a, request.b);
        out.extend_from_slice(&[
            request.txn as u64,
            a.0 as u64,
            a.1,
            b.0 as u64,
            b.1,
            request.amount,
        ]);
    }

    fn decode_request(&self, words: &[u64]) -> Option<SmallBankRequest> {
        let &[txn, a_node, a, b_node, b, amount] = words else {
            return None;
        };
        let txn = *SmallBankTxn::ALL.get(txn as usize)?;
        let node = |n: u64| (n < self.nodes as u64).then_some(n as NodeId);
        Some(SmallBankRequest {
            txn,
            a: (node(a_node)?, a),
            b: (node(b_node)?, b),
            amount,
        })
    }

    /// Every SmallBank transaction's records follow from its request.
    fn declare_accesses(&self, request: &SmallBankRequest, out: &mut Vec<Declared>) -> bool {
        let (a, b) = (request.a, request.b);
        let mut declare = |table, (node, key): Customer, write| {
            out.push(Declared {
                table,
                node,
                key,
                write,
            })
        };
        if self.config.lookup_accounts {
            declare(ACCOUNTS, a, false);
            if request.txn.two_customers() {
                declare(ACCOUNTS, b, false);
            }
        }
        match request.txn {
            SmallBankTxn::SendPayment => {
                declare(CHECKING, a, true);
                declare(CHECKING, b, true);
            }
            SmallBankTxn::Amalgamate => {
                declare(SAVINGS, a, true);
                declare(CHECKING, a, true);
                declare(CHECKING, b, true);
            }
            SmallBankTxn::Balance => {
                declare(SAVINGS, a, false);
                declare(CHECKING, a, false);
            }
            SmallBankTxn::DepositChecking => declare(CHECKING, a, true),
            SmallBankTxn::WriteCheck => {
                declare(SAVINGS, a, false);
                declare(CHECKING, a, true);
            }
            SmallBankTxn::TransactSavings => declare(SAVINGS, a, true),
        }
        true
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], history: &History) -> InvariantReport {
        let mut findings = Findings::default();
        let mut loaded = 0i64;
        let mut now = 0i64;
        let mut customers = 0u64;
        for table in [SAVINGS, CHECKING] {
            for_each_row(stores, table, |id, _, record| {
                loaded = loaded.wrapping_add(SmallBank::initial_balance(table, id));
                now = now.wrapping_add(balance(record));
                customers += (table == SAVINGS) as u64;
            });
        }
        for_each_row(stores, ACCOUNTS, |id, seq, record| {
            if seq != 0 || record != [id, SmallBank::name_of(id)] {
                findings.violation(|| {
                    format!("accounts row {id} changed (version {seq}, record {record:?}); no transaction writes it")
                });
            }
        });
        let expected_customers = self.per_node * stores.len() as u64;
        if customers != expected_customers {
            findings
                .violation(|| format!("{customers} savings rows, expected {expected_customers}"));
        }
        let (net_deposits, committed) = history.notes(None);
        let expected = loaded.wrapping_add(net_deposits);
        if now != expected {
            findings.violation(|| {
                format!(
                    "money in savings and checking is {now}, but the loaded {loaded} plus the net deposits {net_deposits} of {committed} committed transactions is {expected} (off by {})",
                    now.wrapping_sub(expected)
                )
            });
        } else {
            findings.note(format!(
                "money conserved: loaded {loaded} + net deposits {net_deposits} of {committed} committed transactions = {now} in savings and checking"
            ));
        }
        findings.into_report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bank(nodes: u32, distributed: f64) -> SmallBank {
        let config = SmallBankConfig {
            accounts_per_worker: 1000,
            distributed_probability: distributed,
            ..SmallBankConfig::default()
        };
        config.validate(1).unwrap();
        SmallBank::new(&config, nodes, 1)
    }

    #[test]
    fn requests_follow_the_placement_knob_and_pick_distinct_customers() {
        let mut rng = Rng::new(5);
        let local = bank(4, 0.0);
        let remote = bank(4, 1.0);
        for _ in 0..2000 {
            let r = local.generate(&mut rng, 2);
            assert!(r.a.0 == 2 && r.b.0 == 2, "{r:?}");
            assert!(r.a.1 / 1000 == 2 && r.b.1 / 1000 == 2);
            let r = remote.generate(&mut rng, 2);
            if r.txn.two_customers() {
                assert!(r.a.0 == 2 && r.b.0 != 2 && r.b.1 / 1000 == r.b.0 as u64);
            } else {
                assert!(r.a.0 != 2 && r.a == r.b);
            }
            assert!(r.a != r.b || !r.txn.two_customers());
            assert!((1..=100).contains(&r.amount));
        }
    }

    #[test]
    fn one_hot_row_still_yields_two_customers() {
        let config = SmallBankConfig {
            accounts_per_worker: 2,
            hot_account_fraction: 0.01,
            hot_account_probability: 1.0,
            distributed_probability: 0.0,
            mix: SmallBankMix::from_weights(&[1, 0, 0, 0, 0, 0]),
            ..SmallBankConfig::default()
        };
        let bank = SmallBank::new(&config, 1, 1);
        let mut rng = Rng::new(1);
        for _ in 0..100 {
            let r = bank.generate(&mut rng, 0);
            assert_ne!(r.a, r.b);
        }
    }

    /// A loaded two-node bank and a history of `notes`, checked after
    /// `tamper` changed the store.
    fn check_after(notes: &[i64], tamper: impl Fn(&NodeStore)) -> InvariantReport {
        use crate::store::StoreLayout;
        let config = SmallBankConfig {
            accounts_per_worker: 10,
            ..SmallBankConfig::default()
        };
        let bank = SmallBank::new(&config, 2, 1);
        let layout = Arc::new(StoreLayout::new(&bank.tables(), |_| 1));
        let stores: Vec<Arc<NodeStore>> = (0..2)
            .map(|node| {
                let store = NodeStore::new(node, layout.clone());
                bank.load(&store).unwrap();
                Arc::new(store)
            })
            .collect();
        tamper(&stores[1]);
        let mut history = History::new();
        for (i, &note) in notes.iter().enumerate() {
            history.push_noted(i as u64 + 1, 0, 3, note, &[], &[]);
        }
        bank.check_invariants(&stores, &history)
    }

    fn add_to_checking(store: &NodeStore, id: u64, amount: i64) {
        let slot = store.lookup(CHECKING, id).unwrap();
        let addr = store.layout.table(CHECKING).record_addr(slot);
        let value = store.region.load(addr) as i64 + amount;
        store.region.store(addr, value as u64);
    }

    #[test]
    fn money_invariant_accounts_for_every_committed_note() {
        assert!(check_after(&[], |_| {}).ok);
        // Two committed deposits of 7 and 5, both applied.
        let report = check_after(&[7, 5], |s| {
            add_to_checking(s, 12, 7);
            add_to_checking(s, 15, 5);
        });
        assert!(report.ok, "{:?}", report.details);
        // A deposit the store lost, and one applied twice.
        let lost = check_after(&[7, 5], |s| add_to_checking(s, 12, 7));
        assert!(
            !lost.ok && lost.details[0].contains("off by -5"),
            "{:?}",
            lost.details
        );
        let twice = check_after(&[7], |s| add_to_checking(s, 12, 14));
        assert!(!twice.ok && twice.details[0].contains("off by 7"));
        // Money moved between accounts changes nothing.
        let moved = check_after(&[], |s| {
            add_to_checking(s, 12, -30);
            add_to_checking(s, 13, 30);
        });
        assert!(moved.ok);
        // The accounts table must stay as loaded.
        let renamed = check_after(&[], |s| {
            let slot = s.lookup(ACCOUNTS, 11).unwrap();
            s.region
                .store(s.layout.table(ACCOUNTS).record_addr(slot) + 1, 0);
        });
        assert!(!renamed.ok && renamed.details[0].contains("accounts row 11"));
    }

    #[test]
    fn bad_knobs_are_named() {
        let bad = |c: SmallBankConfig| c.validate(1).unwrap_err().0;
        let base = SmallBankConfig::default();
        assert!(bad(SmallBankConfig {
            accounts_per_worker: 1,
            ..base
        })
        .contains("smallbank.accounts_per_worker = 1"));
        assert!(bad(SmallBankConfig {
            distributed_probability: 1.5,
            ..base
        })
        .contains("smallbank.distributed_probability = 1.5"));
        assert!(bad(SmallBankConfig {
            mix: SmallBankMix::from_weights(&[0; 6]),
            ..base
        })
        .contains("weight 0"));
    }
}
