//! TPC-C's own tests: a fresh load meets every consistency condition,
//! each broken condition is named, the ordered indexes travel as words,
//! and the mix and the request knobs shape what is generated.

use super::*;
use crate::store::{StoreLayout, TableId, ROW_ABSENT};
use txns::resolve_customer;

fn small() -> TpccConfig {
    TpccConfig {
        warehouses_per_node: 2,
        items: 200,
        customers_per_district: 30,
        insert_headroom_per_district: 10,
        ..TpccConfig::default()
    }
}

fn loaded(config: &TpccConfig, nodes: u32) -> (Tpcc, Vec<Arc<NodeStore>>) {
    let tpcc = Tpcc::new(config, nodes, 11);
    let layout = Arc::new(StoreLayout::new(&tpcc.tables(), |_| 1));
    let stores: Vec<Arc<NodeStore>> = (0..nodes)
        .map(|n| {
            let store = Arc::new(NodeStore::new(n as NodeId, layout.clone()));
            tpcc.load(&store).expect("load fits");
            store
        })
        .collect();
    (tpcc, stores)
}

fn set(store: &NodeStore, table: TableId, key: u64, word: usize, value: u64) {
    let slot = store.lookup(table, key).expect("key loaded");
    let addr = store.layout.table(table).record_addr(slot) + word as u64;
    store.region.store(addr, value);
}

#[test]
fn a_fresh_load_meets_every_consistency_condition() {
    let (tpcc, stores) = loaded(&small(), 2);
    let report = tpcc.check_invariants(&stores, &History::new());
    assert!(report.ok, "{:?}", report.details);
    // §4.3.3.1 cardinalities, scaled: 30 customers, 30 orders, the
    // last 9 undelivered, per district.
    let store = &stores[1];
    assert_eq!(store.rows(table::WAREHOUSE), 2);
    assert_eq!(store.rows(table::DISTRICT), 20);
    assert_eq!(store.rows(table::CUSTOMER), 600);
    assert_eq!(store.rows(table::HISTORY), 600);
    assert_eq!(store.rows(table::ORDER), 600);
    assert_eq!(store.rows(table::NEW_ORDER), 180);
    assert_eq!(store.rows(table::ITEM), 200);
    assert_eq!(store.rows(table::STOCK), 400);
    assert_eq!(tpcc.nodes_indexes(1).new_orders.len(), 180);
    // Warehouse 3 lives on node 1.
    assert!(store.lookup(table::WAREHOUSE, 3).is_some());
    assert!(stores[0].lookup(table::WAREHOUSE, 3).is_none());
    // Every last name of the district resolves to a customer with it.
    for last in 0..30u16 {
        let c = resolve_customer(&tpcc, 3, 4, CustomerSel::LastName(last)).unwrap();
        let slot = store
            .lookup(table::CUSTOMER, tpcc.customer_key(3, 4, c))
            .unwrap();
        let mut record = Vec::new();
        store.record(table::CUSTOMER, slot, &mut record);
        assert_eq!(record[col::C_LAST], last as u64);
    }
}

/// A process that did not load a node (rank 0 of a multi-process run)
/// has none of its ordered indexes, so the stores fail the check until
/// it takes each node's from the words its own process exported.
#[test]
fn ordered_indexes_travel_as_words_and_replace_the_receivers() {
    let config = small();
    let (owner, stores) = loaded(&config, 2);
    let receiver = Tpcc::new(&config, 2, 11);
    assert!(!receiver.check_invariants(&stores, &History::new()).ok);
    // A stale entry is replaced, not merged.
    receiver.nodes_indexes(1).new_orders.insert(u64::MAX, 0);
    for node in 0..2 {
        let words = owner.export_node_local(node);
        assert!(receiver.import_node_local(node, &words));
        assert_eq!(receiver.export_node_local(node), words);
    }
    let report = receiver.check_invariants(&stores, &History::new());
    assert!(report.ok, "{:?}", report.details);
    assert_eq!(receiver.nodes_indexes(1).new_orders.len(), 180);
    // What is not an export is refused and changes nothing.
    let words = owner.export_node_local(1);
    let longer = [words.as_slice(), &[0]].concat();
    for bad in [&words[..words.len() - 1], &longer[..], &[]] {
        assert!(!receiver.import_node_local(1, bad));
    }
    assert!(!receiver.import_node_local(2, &words));
    assert_eq!(receiver.export_node_local(1), words);
}

#[test]
fn each_broken_condition_is_named() {
    let config = small();
    type Corruption = (&'static str, fn(&NodeStore));
    let cases: [Corruption; 5] = [
        ("condition 1", |s| {
            set(s, table::WAREHOUSE, 0, col::W_YTD, 1)
        }),
        ("condition 2", |s| {
            set(
                s,
                table::DISTRICT,
                Tpcc::district_key(0, 3),
                col::D_NEXT_O_ID,
                99,
            )
        }),
        ("condition 3", |s| {
            // Deleting a middle new-order leaves a gap (and a stale
            // index entry).
            set(
                s,
                table::NEW_ORDER,
                Tpcc::order_key(1, 2, 25),
                0,
                ROW_ABSENT,
            )
        }),
        ("condition 4", |s| {
            set(s, table::ORDER, Tpcc::order_key(0, 0, 7), col::O_OL_CNT, 16)
        }),
        ("condition 8", |s| {
            let key = Tpcc::history_key(0, 1, 2);
            set(s, table::HISTORY, key, col::H_AMOUNT, 5)
        }),
    ];
    for (condition, corrupt) in cases {
        let (tpcc, stores) = loaded(&config, 1);
        corrupt(&stores[0]);
        let report = tpcc.check_invariants(&stores, &History::new());
        assert!(!report.ok, "{condition} went unnoticed");
        assert!(
            report.details.iter().any(|d| d.contains(condition)),
            "{condition}: {:?}",
            report.details
        );
    }
}

#[test]
fn mixes_parse_and_requests_follow_the_knobs() {
    assert_eq!(TpccMix::parse("standard"), Some(TpccMix::STANDARD));
    assert_eq!(TpccMix::parse("1,0,0,0,0"), Some(TpccMix::NEW_ORDER_ONLY));
    assert_eq!(TpccMix::parse("1,2,3"), None);
    assert_eq!(TpccMix::parse("a,b,c,d,e"), None);
    let config = TpccConfig {
        mix: TpccMix::NEW_ORDER_ONLY,
        new_order_always_distributed: true,
        ..small()
    };
    let tpcc = Tpcc::new(&config, 3, 1);
    let mut rng = Rng::new(4);
    for _ in 0..500 {
        let TpccRequest::NewOrder {
            w, ol_cnt, lines, ..
        } = tpcc.generate(&mut rng, 1)
        else {
            panic!("the mix is NewOrder only");
        };
        assert_eq!(
            tpcc.node_of(w as u64),
            1,
            "home warehouse on the client's node"
        );
        assert!((5..=15).contains(&ol_cnt));
        assert!(
            lines[..ol_cnt as usize]
                .iter()
                .any(|l| tpcc.node_of(l.supply_w as u64) != 1),
            "always distributed"
        );
    }
    // The standard mix draws every type in about its share.
    let tpcc = Tpcc::new(&small(), 2, 1);
    let mut counts = [0u32; 5];
    for _ in 0..10_000 {
        counts[tpcc.txn_type(&tpcc.generate(&mut rng, 0))] += 1;
    }
    for (count, weight) in counts.iter().zip(TpccMix::STANDARD.weights()) {
        let expected = weight as f64 * 100.0;
        assert!(
            (*count as f64 - expected).abs() < expected * 0.2 + 30.0,
            "{counts:?}"
        );
    }
}
