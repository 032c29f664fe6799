//! The rows TPC-C inserts — ORDER, NEW_ORDER, ORDER_LINE and HISTORY —
//! whose columns the loader (§4.3.3.1) and the programs that insert them at
//! run time (NewOrder §2.4.2.2, Payment §2.5.2.2) fill alike: one writer per
//! row kind, so the two agree on which column holds what.
//!
//! A writer sets the id and number columns its row kind has (adjacent, in
//! `col`'s order, which the assertions below pin) and leaves every other
//! word as the caller has it: the row state in word 0, which the loader
//! sets and a run-time insert leaves to the store, and the text columns.

use super::col;

/// Whether `columns` are adjacent words, in this order.
const fn adjacent(columns: &[usize]) -> bool {
    let mut i = 1;
    while i < columns.len() {
        if columns[i] != columns[i - 1] + 1 {
            return false;
        }
        i += 1;
    }
    true
}

const _: () = assert!(adjacent(&[
    col::O_ID,
    col::O_C_ID,
    col::O_D_ID,
    col::O_W_ID,
    col::O_ENTRY_D,
    col::O_CARRIER_ID,
    col::O_OL_CNT,
    col::O_ALL_LOCAL
]));
const _: () = assert!(adjacent(&[col::NO_O_ID, col::NO_D_ID, col::NO_W_ID]));
const _: () = assert!(adjacent(&[
    col::OL_O_ID,
    col::OL_D_ID,
    col::OL_W_ID,
    col::OL_NUMBER,
    col::OL_I_ID,
    col::OL_SUPPLY_W_ID,
    col::OL_DELIVERY_D,
    col::OL_QUANTITY,
    col::OL_AMOUNT
]));
const _: () = assert!(adjacent(&[
    col::H_C_ID,
    col::H_C_D_ID,
    col::H_C_W_ID,
    col::H_D_ID,
    col::H_W_ID,
    col::H_DATE,
    col::H_AMOUNT
]));

/// The ORDER row of order `(w, d, o)`, placed by customer `c`.
pub(super) fn order(
    record: &mut [u64],
    (w, d, o): (u64, u64, u64),
    c: u64,
    entry_d: u64,
    carrier_id: u64,
    ol_cnt: u64,
    all_local: bool,
) {
    record[col::O_ID..=col::O_ALL_LOCAL].copy_from_slice(&[
        o,
        c,
        d,
        w,
        entry_d,
        carrier_id,
        ol_cnt,
        all_local as u64,
    ]);
}

/// The NEW_ORDER row of order `(w, d, o)`, not yet delivered.
pub(super) fn new_order(record: &mut [u64], (w, d, o): (u64, u64, u64)) {
    record[col::NO_O_ID..=col::NO_W_ID].copy_from_slice(&[o, d, w]);
}

/// Line `ol` of order `(w, d, o)`: `item` from warehouse `supply_w`, and
/// `(delivery_d, quantity, amount)`.
pub(super) fn order_line(
    record: &mut [u64],
    (w, d, o): (u64, u64, u64),
    (ol, item, supply_w): (u64, u64, u64),
    (delivery_d, quantity, amount): (u64, u64, u64),
) {
    record[col::OL_O_ID..=col::OL_AMOUNT]
        .copy_from_slice(&[o, d, w, ol, item, supply_w, delivery_d, quantity, amount]);
}

/// A HISTORY row: customer `c` of district `(c_w, c_d)` paid
/// `amount_cents` at district `(w, d)` at `date`.
pub(super) fn history(
    record: &mut [u64],
    (c_w, c_d, c): (u64, u64, u64),
    (w, d): (u64, u64),
    date: u64,
    amount_cents: u64,
) {
    record[col::H_C_ID..=col::H_AMOUNT].copy_from_slice(&[c, c_d, c_w, d, w, date, amount_cents]);
}
