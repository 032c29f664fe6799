//! The five TPC-C transaction programs (§2.4–2.8), over the `Txn` API and
//! identical for every protocol. Each reads and writes rows through the
//! protocol; the node-local ordered indexes only say which keys to visit
//! (see the parent module and `store::ordered`).

use crate::txn::{AbortReason, Protocol, Txn, TxnResult};

use super::load::contains_original;
use super::{col, ordered, rows, table, CustomerSel, LineRequest, PaymentRequest, Tpcc, DISTRICTS};

/// Signed money in a record word.
#[inline]
fn add_cents(word: &mut u64, cents: i64) {
    *word = (*word as i64).wrapping_add(cents) as u64;
}

/// §2.4.2: NewOrder.
pub(super) async fn new_order<P: Protocol>(
    tpcc: &Tpcc,
    txn: &mut Txn<'_, '_, P>,
    w: u64,
    d: u64,
    c: u64,
    lines: &[LineRequest],
) -> TxnResult<()> {
    let home = tpcc.node_of(w);
    debug_assert_eq!(home, txn.node(), "the home warehouse is the coordinator's");
    let warehouse = txn.read(table::WAREHOUSE, home, w).await?;
    let w_tax = txn.get(warehouse)[col::W_TAX];
    let district = txn
        .update(table::DISTRICT, home, Tpcc::district_key(w, d))
        .await?;
    let (d_tax, o_id) = {
        let record = txn.get_mut(district);
        let o_id = record[col::D_NEXT_O_ID];
        if o_id > tpcc.last_run_time_id() {
            // The district's insert headroom is used up. Decided from the
            // district row alone, so every CALVIN participant agrees
            // (a full table found by one node only could not be).
            return Err(AbortReason::TableFull);
        }
        record[col::D_NEXT_O_ID] = o_id + 1;
        (record[col::D_TAX], o_id)
    };
    let customer = txn
        .read(table::CUSTOMER, home, tpcc.customer_key(w, d, c))
        .await?;
    let c_discount = txn.get(customer)[col::C_DISCOUNT];
    let all_local = lines.iter().all(|l| l.supply_w as u64 == w);
    let okey = Tpcc::order_key(w, d, o_id);
    let now = txn.now_ns();

    let mut total_cents: u64 = 0;
    let mut line_record = [0u64; col::OL_WORDS as usize];
    for (number, line) in lines.iter().enumerate() {
        let i = line.item as u64;
        // §2.4.2.3: an unused item id is "not found" and rolls back.
        let item = match txn.read(table::ITEM, home, Tpcc::item_key(home, i)).await {
            Ok(item) => item,
            Err(AbortReason::NotFound) => return Err(txn.user_abort()),
            Err(other) => return Err(other),
        };
        let (price, item_original) = {
            let record = txn.get(item);
            (
                record[col::I_PRICE],
                contains_original(&record[col::I_DATA..col::I_WORDS as usize]),
            )
        };
        let supply_w = line.supply_w as u64;
        let stock = txn
            .update(
                table::STOCK,
                tpcc.node_of(supply_w),
                tpcc.stock_key(supply_w, i),
            )
            .await?;
        let quantity = line.quantity as u64;
        let dist_at = col::S_DIST + d as usize * col::TEXT24_WORDS;
        let stock_original = {
            let record = txn.get_mut(stock);
            let s_quantity = record[col::S_QUANTITY];
            record[col::S_QUANTITY] = if s_quantity >= quantity + 10 {
                s_quantity - quantity
            } else {
                s_quantity + 91 - quantity
            };
            record[col::S_YTD] += quantity;
            record[col::S_ORDER_CNT] += 1;
            if supply_w != w {
                record[col::S_REMOTE_CNT] += 1;
            }
            line_record[col::OL_DIST_INFO..col::OL_DIST_INFO + col::TEXT24_WORDS]
                .copy_from_slice(&record[dist_at..dist_at + col::TEXT24_WORDS]);
            contains_original(&record[col::S_DATA..col::S_WORDS as usize])
        };
        // The brand-generic flag is computed as §2.4.2.2 asks; the terminal
        // output it feeds is not modeled.
        let _brand_generic = !(item_original && stock_original);
        let amount = quantity * price;
        total_cents += amount;
        let ol = number as u64 + 1;
        rows::order_line(
            &mut line_record,
            (w, d, o_id),
            (ol, i, supply_w),
            (0, quantity, amount),
        );
        txn.insert(
            table::ORDER_LINE,
            Tpcc::order_line_key(okey, ol),
            &line_record,
        )
        .await?;
    }
    let mut order = [0u64; col::O_WORDS as usize];
    let ol_cnt = lines.len() as u64;
    rows::order(&mut order, (w, d, o_id), c, now, 0, ol_cnt, all_local);
    txn.insert(table::ORDER, okey, &order).await?;
    let mut new_order = [0u64; col::NO_WORDS as usize];
    rows::new_order(&mut new_order, (w, d, o_id));
    txn.insert(table::NEW_ORDER, okey, &new_order).await?;
    txn.index_insert(ordered::NEW_ORDERS, okey, 0);
    txn.index_insert(
        ordered::ORDERS_BY_CUSTOMER,
        tpcc.order_by_customer_key(w, d, c, o_id),
        0,
    );
    // §2.4.2.2's total, with discount and taxes (rates in 1/10,000).
    let _total =
        total_cents as u128 * (10_000 - c_discount) as u128 * (10_000 + w_tax + d_tax) as u128
            / 100_000_000;
    Ok(())
}

/// Resolves a customer selection to C_ID: by id, or (§2.5.2.2) the
/// customer at position ⌈n/2⌉ of those with the last name, sorted by first
/// name — through the read-only by-name index.
pub(super) fn resolve_customer(tpcc: &Tpcc, w: u64, d: u64, customer: CustomerSel) -> Option<u64> {
    match customer {
        CustomerSel::Id(c) => Some(c as u64),
        CustomerSel::LastName(last) => {
            let low = Tpcc::by_name_key(w, d, last as u64, 0);
            let high = Tpcc::by_name_key(w, d, last as u64, (1 << 30) - 1);
            let count = tpcc.by_name.count_range(low..=high) as u64;
            if count == 0 {
                return None;
            }
            let middle = count.div_ceil(2) - 1;
            tpcc.by_name
                .get(Tpcc::by_name_key(w, d, last as u64, middle))
        }
    }
}

/// §2.5.2: Payment.
pub(super) async fn payment<P: Protocol>(
    tpcc: &Tpcc,
    txn: &mut Txn<'_, '_, P>,
    request: &PaymentRequest,
) -> TxnResult<()> {
    let (w, d) = (request.w as u64, request.d as u64);
    let (c_w, c_d) = (request.c_w as u64, request.c_d as u64);
    let (customer, amount_cents) = (request.customer, request.amount_cents as u64);
    let home = tpcc.node_of(w);
    debug_assert_eq!(home, txn.node());
    let warehouse = txn.update(table::WAREHOUSE, home, w).await?;
    txn.get_mut(warehouse)[col::W_YTD] += amount_cents;
    let district = txn
        .update(table::DISTRICT, home, Tpcc::district_key(w, d))
        .await?;
    let h_id = {
        let record = txn.get_mut(district);
        record[col::D_YTD] += amount_cents;
        let h_id = record[col::D_NEXT_H_ID];
        if h_id > tpcc.last_run_time_id() {
            // As NewOrder's: no room left for the district's history.
            return Err(AbortReason::TableFull);
        }
        record[col::D_NEXT_H_ID] = h_id + 1;
        h_id
    };
    let Some(c) = resolve_customer(tpcc, c_w, c_d, customer) else {
        return Err(txn.user_abort());
    };
    let ckey = tpcc.customer_key(c_w, c_d, c);
    let customer = txn.update(table::CUSTOMER, tpcc.node_of(c_w), ckey).await?;
    {
        let record = txn.get_mut(customer);
        add_cents(&mut record[col::C_BALANCE], -(amount_cents as i64));
        record[col::C_YTD_PAYMENT] += amount_cents;
        record[col::C_PAYMENT_CNT] += 1;
        if record[col::C_CREDIT] == 1 {
            // Bad credit: prepend this payment to C_DATA (§2.5.2.2), the
            // oldest words falling off the end.
            let data = &mut record[col::C_DATA..col::C_DATA + col::C_DATA_WORDS];
            const ENTRY: usize = 6;
            data.copy_within(..col::C_DATA_WORDS - ENTRY, ENTRY);
            data[..ENTRY].copy_from_slice(&[c, c_d, c_w, d, w, amount_cents]);
        }
    }
    let mut history = [0u64; col::H_WORDS as usize];
    rows::history(
        &mut history,
        (c_w, c_d, c),
        (w, d),
        txn.now_ns(),
        amount_cents,
    );
    // H_DATA is W_NAME and D_NAME, 4 spaces apart (§2.5.2.2); the names are
    // not read here, so it holds the warehouse and district ids instead.
    history[col::H_DATA] = w;
    history[col::H_DATA + 1] = d;
    txn.insert(table::HISTORY, Tpcc::history_key(w, d, h_id), &history)
        .await?;
    Ok(())
}

/// §2.6.2: OrderStatus (read-only, local).
pub(super) async fn order_status<P: Protocol>(
    tpcc: &Tpcc,
    txn: &mut Txn<'_, '_, P>,
    w: u64,
    d: u64,
    customer: CustomerSel,
) -> TxnResult<()> {
    let home = tpcc.node_of(w);
    let Some(c) = resolve_customer(tpcc, w, d, customer) else {
        return Err(txn.user_abort());
    };
    let rec = txn
        .read(table::CUSTOMER, home, tpcc.customer_key(w, d, c))
        .await?;
    let _balance = txn.get(rec)[col::C_BALANCE] as i64;
    // The customer's last order: the largest (customer, o_id) entry.
    let low = tpcc.order_by_customer_key(w, d, c, 0);
    let high = tpcc.order_by_customer_key(w, d, c, u32::MAX as u64);
    let Some((entry, _)) = tpcc
        .nodes_indexes(home)
        .orders_by_customer
        .last_in(low..=high)
    else {
        // Every loaded customer has an order; none means a broken index.
        return Err(txn.user_abort());
    };
    let o_id = entry & u32::MAX as u64;
    let okey = Tpcc::order_key(w, d, o_id);
    let order = txn.read_row(table::ORDER, home, okey).await?;
    let ol_cnt = txn.get(order)[col::O_OL_CNT];
    for ol in 1..=ol_cnt {
        txn.read_row(table::ORDER_LINE, home, Tpcc::order_line_key(okey, ol))
            .await?;
    }
    Ok(())
}

/// §2.7.4: Delivery, one transaction for all ten districts (local).
pub(super) async fn delivery<P: Protocol>(
    tpcc: &Tpcc,
    txn: &mut Txn<'_, '_, P>,
    w: u64,
    carrier: u64,
) -> TxnResult<()> {
    let home = tpcc.node_of(w);
    debug_assert_eq!(home, txn.node());
    let now = txn.now_ns();
    for d in 0..DISTRICTS {
        // The oldest undelivered order of the district, if any (§2.7.4.2:
        // a district without one is skipped).
        let low = Tpcc::order_key(w, d, 0);
        let high = Tpcc::order_key(w, d, u32::MAX as u64);
        let Some((okey, _)) = tpcc.nodes_indexes(home).new_orders.first_in(low..=high) else {
            continue;
        };
        txn.delete(table::NEW_ORDER, home, okey).await?;
        txn.index_remove(ordered::NEW_ORDERS, okey);
        let order = txn.update_row(table::ORDER, home, okey).await?;
        let (c, ol_cnt) = {
            let record = txn.get_mut(order);
            record[col::O_CARRIER_ID] = carrier;
            (record[col::O_C_ID], record[col::O_OL_CNT])
        };
        let mut amount: u64 = 0;
        for ol in 1..=ol_cnt {
            let line = txn
                .update_row(table::ORDER_LINE, home, Tpcc::order_line_key(okey, ol))
                .await?;
            let record = txn.get_mut(line);
            record[col::OL_DELIVERY_D] = now.max(1);
            amount += record[col::OL_AMOUNT];
        }
        let customer = txn
            .update(table::CUSTOMER, home, tpcc.customer_key(w, d, c))
            .await?;
        let record = txn.get_mut(customer);
        add_cents(&mut record[col::C_BALANCE], amount as i64);
        record[col::C_DELIVERY_CNT] += 1;
    }
    Ok(())
}

/// §2.8.2: StockLevel (read-only, local): distinct items of the district's
/// last 20 orders whose stock is below `threshold`.
pub(super) async fn stock_level<P: Protocol>(
    tpcc: &Tpcc,
    txn: &mut Txn<'_, '_, P>,
    w: u64,
    d: u64,
    threshold: u64,
) -> TxnResult<()> {
    let home = tpcc.node_of(w);
    let district = txn
        .read(table::DISTRICT, home, Tpcc::district_key(w, d))
        .await?;
    let next_o_id = txn.get(district)[col::D_NEXT_O_ID];
    let mut items = [0u64; 20 * super::MAX_ORDER_LINES];
    let mut distinct = 0usize;
    for o in next_o_id.saturating_sub(20).max(1)..next_o_id {
        let okey = Tpcc::order_key(w, d, o);
        let order = txn.read_row(table::ORDER, home, okey).await?;
        let ol_cnt = txn.get(order)[col::O_OL_CNT];
        for ol in 1..=ol_cnt {
            let line = txn
                .read_row(table::ORDER_LINE, home, Tpcc::order_line_key(okey, ol))
                .await?;
            let item = txn.get(line)[col::OL_I_ID];
            if !items[..distinct].contains(&item) {
                items[distinct] = item;
                distinct += 1;
            }
        }
    }
    let mut low_stock = 0u64;
    for &item in &items[..distinct] {
        let stock = txn
            .read(table::STOCK, home, tpcc.stock_key(w, item))
            .await?;
        if txn.get(stock)[col::S_QUANTITY] < threshold {
            low_stock += 1;
        }
    }
    debug_assert!(low_stock <= distinct as u64);
    Ok(())
}
