//! The committed history of a run, as the checker consumes it.
//!
//! Each worker appends to its own [`History`] (no sharing on the hot path);
//! the engine merges them after the run. Storage is flat — one vector of
//! transactions, one of items — so recording costs two pushes per access and
//! no allocation once the vectors have grown.
//!
//! Sequence numbers: every tuple carries the count of committed writes to it.
//! The loader installs version 0; the n-th committed write installs n. A read
//! records the version it saw; a write records the version it installed.

use std::io::{self, Write};

/// One access of a committed transaction: `(table, key, seq)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub table: u32,
    pub key: u64,
    pub seq: u64,
}

/// One committed transaction; its items are `items[first..first + reads +
/// writes]`, the reads first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnEntry {
    /// Unique over the run (`txn::ids` packs node, worker, coroutine, count).
    pub id: u64,
    /// The coordinator's node.
    pub node: u16,
    pub first: usize,
    pub reads: u32,
    pub writes: u32,
    /// The workload's transaction type (`Workload::txn_type`; 0 for
    /// workloads with one type).
    pub kind: u8,
    /// What the committed program recorded with `Txn::note` (SmallBank:
    /// money deposited minus money withdrawn; 0 when it noted nothing).
    pub note: i64,
}

/// `TxnEntry::kind` of an entry that is one participant's part of a
/// transaction recorded in full by another entry (CALVIN records one entry
/// per participant): it carries no type and no note.
pub const SECONDARY_ENTRY: u8 = u8::MAX;

#[derive(Clone, Debug, Default)]
pub struct History {
    pub txns: Vec<TxnEntry>,
    pub items: Vec<Item>,
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Appends one committed transaction (type 0, no note).
    pub fn push(&mut self, id: u64, node: u16, reads: &[Item], writes: &[Item]) {
        self.push_noted(id, node, 0, 0, reads, writes)
    }

    /// Appends one committed transaction of type `kind` whose program
    /// noted `note`.
    pub fn push_noted(
        &mut self,
        id: u64,
        node: u16,
        kind: u8,
        note: i64,
        reads: &[Item],
        writes: &[Item],
    ) {
        let first = self.items.len();
        self.items.extend_from_slice(reads);
        self.items.extend_from_slice(writes);
        self.txns.push(TxnEntry {
            id,
            node,
            first,
            reads: reads.len() as u32,
            writes: writes.len() as u32,
            kind,
            note,
        });
    }

    pub fn reads(&self, txn: &TxnEntry) -> &[Item] {
        &self.items[txn.first..txn.first + txn.reads as usize]
    }

    pub fn writes(&self, txn: &TxnEntry) -> &[Item] {
        let start = txn.first + txn.reads as usize;
        &self.items[start..start + txn.writes as usize]
    }

    /// Appends all of `other`.
    pub fn append(&mut self, other: &History) {
        let offset = self.items.len();
        self.items.extend_from_slice(&other.items);
        self.txns.extend(other.txns.iter().map(|t| TxnEntry {
            first: t.first + offset,
            ..*t
        }));
    }

    /// Sum of the notes of the committed transactions (of type `kind`, or
    /// of every type), and how many transactions there were (entries of
    /// [`SECONDARY_ENTRY`] not counted).
    pub fn notes(&self, kind: Option<u8>) -> (i64, u64) {
        let mut sum = 0i64;
        let mut count = 0u64;
        for txn in &self.txns {
            if txn.kind != SECONDARY_ENTRY && kind.is_none_or(|k| k == txn.kind) {
                sum = sum.wrapping_add(txn.note);
                count += 1;
            }
        }
        (sum, count)
    }

    /// Writes the history as JSON lines, one transaction per line:
    /// `{"txn": id, "node": n, "reads": [[table, key, seq], ...], "writes": [...]}`,
    /// plus `"type"` and `"note"` when the workload set them.
    pub fn write_jsonl<W: Write>(&self, mut out: W) -> io::Result<()> {
        for txn in &self.txns {
            write!(
                out,
                "{{\"txn\":{},\"node\":{},\"reads\":[",
                txn.id, txn.node
            )?;
            write_items(&mut out, self.reads(txn))?;
            write!(out, "],\"writes\":[")?;
            write_items(&mut out, self.writes(txn))?;
            write!(out, "]")?;
            if txn.kind != 0 || txn.note != 0 {
                write!(out, ",\"type\":{},\"note\":{}", txn.kind, txn.note)?;
            }
            writeln!(out, "}}")?;
        }
        out.flush()
    }
}

fn write_items<W: Write>(out: &mut W, items: &[Item]) -> io::Result<()> {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write!(out, "[{},{},{}]", item.table, item.key, item.seq)?;
    }
    Ok(())
}
