//! The committed history of a run, as the checker consumes it.
//!
//! Each worker appends to its own [`History`] (no sharing on the hot path);
//! the engine merges them after the run. Storage is flat — one vector of
//! transactions, one of items — so recording costs two pushes per access and
//! no allocation once the vectors have grown.
//!
//! A run that only needs the history's hash (a `sim` run without the
//! checker) records it packed ([`History::hash_only`]): each entry's words
//! as LEB128 varints in one byte vector, about a third of the flat form's
//! 40 bytes per transaction and 24 per access, so a long run's memory grows
//! three times slower. [`History::visit`] reads either form as the same
//! entries, so the hash does not depend on which was recorded.
//!
//! Sequence numbers: every tuple carries the count of committed writes to it.
//! The loader installs version 0; the n-th committed write installs n. A read
//! records the version it saw; a write records the version it installed.

use std::io::{self, Write};
use std::sync::Arc;

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
    /// The flat form's entries; empty in a hash-only history.
    pub txns: Vec<TxnEntry>,
    pub items: Vec<Item>,
    /// Where each entry is also written as it is recorded (see
    /// [`History::journaled`]).
    journal: Option<Arc<std::fs::File>>,
    /// The packed entries of a hash-only history ([`History::hash_only`]).
    packed: Option<Packed>,
}

/// Entries packed as varints, in recording order: id, node, kind, note
/// (zigzag), reads, writes, then `table, key, seq` per item, reads first.
#[derive(Clone, Debug, Default)]
struct Packed {
    bytes: Vec<u8>,
    entries: usize,
}

impl Packed {
    fn word(&mut self, mut word: u64) {
        while word >= 0x80 {
            self.bytes.push(word as u8 | 0x80);
            word >>= 7;
        }
        self.bytes.push(word as u8);
    }
}

/// Words of a packed entry before its items: id, node, kind, note,
/// reads, writes.
const PACKED_HEAD_WORDS: usize = 6;
/// The most bytes a 64-bit word takes as a varint.
const MAX_VARINT_BYTES: usize = 10;

/// The varint at `bytes[*at..]`, moving `at` past it.
fn read_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut word = 0u64;
    let mut shift = 0;
    loop {
        let byte = bytes[*at];
        *at += 1;
        word |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return word;
        }
        shift += 7;
    }
}

/// Words of a journal entry before its items: length, id, node | kind <<
/// 16, reads << 32 | writes, note.
const JOURNAL_HEAD_WORDS: usize = 5;

/// Makes room for `more` elements, growing by a quarter rather than
/// doubling: a long run's histories are a large share of its peak memory
/// (every committed transaction of every worker, for the history hash),
/// and doubling leaves a third of it unused on average. Large blocks grow
/// in place (`mremap`), so the extra growth steps cost little.
fn grow_by_a_quarter<T>(vec: &mut Vec<T>, more: usize) {
    const FIRST_ELEMENTS: usize = 1024;
    if vec.capacity() - vec.len() < more {
        vec.reserve_exact(more.max(vec.len() / 4).max(FIRST_ELEMENTS));
    }
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    /// A history that keeps only what [`History::visit`] (and so the
    /// history's hash) reads, packed: for runs without the checker. Its
    /// `txns` and `items` stay empty; [`History::into_flat`] unpacks it.
    pub fn hash_only() -> History {
        History {
            packed: Some(Packed::default()),
            ..History::default()
        }
    }

    /// The accessors of the flat form read `txns` and `items`, which a
    /// hash-only history leaves empty.
    fn debug_assert_flat(&self) {
        debug_assert!(
            self.packed.is_none(),
            "a hash-only history has no flat entries"
        );
    }

    /// Whether this history was made by [`History::hash_only`].
    pub fn is_hash_only(&self) -> bool {
        self.packed.is_some()
    }

    /// Calls `f` with every entry and its items (reads first), in
    /// recording order, whichever form the history is in. An entry's
    /// `first` is 0: its items are the slice given.
    pub fn visit(&self, mut f: impl FnMut(&TxnEntry, &[Item])) {
        let Some(packed) = &self.packed else {
            for txn in &self.txns {
                let count = (txn.reads + txn.writes) as usize;
                f(txn, &self.items[txn.first..txn.first + count]);
            }
            return;
        };
        let bytes = &packed.bytes;
        let mut items = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let id = read_varint(bytes, &mut at);
            let node = read_varint(bytes, &mut at) as u16;
            let kind = read_varint(bytes, &mut at) as u8;
            let zigzag = read_varint(bytes, &mut at);
            let note = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
            let reads = read_varint(bytes, &mut at) as u32;
            let writes = read_varint(bytes, &mut at) as u32;
            items.clear();
            for _ in 0..reads + writes {
                let table = read_varint(bytes, &mut at) as u32;
                let key = read_varint(bytes, &mut at);
                let seq = read_varint(bytes, &mut at);
                items.push(Item { table, key, seq });
            }
            let txn = TxnEntry {
                id,
                node,
                first: 0,
                reads,
                writes,
                kind,
                note,
            };
            f(&txn, &items);
        }
    }

    /// The flat form of this history (itself, if it is flat).
    pub fn into_flat(self) -> History {
        if self.packed.is_none() {
            return self;
        }
        let mut flat = History::new();
        self.visit(|txn, items| {
            let (reads, writes) = items.split_at(txn.reads as usize);
            flat.push_noted(txn.id, txn.node, txn.kind, txn.note, reads, writes);
        });
        flat
    }

    /// A history that also appends every entry to `journal` as it is
    /// recorded, in one `write(2)` each, so that what a process recorded
    /// survives the process (`kill -9` included: the kernel holds what was
    /// written). A multi-process run that loses a rank reads the dead
    /// rank's journal back ([`History::read_journal`]). A journal that
    /// cannot be written is dropped with a warning; the reader then finds
    /// its history short, and says so.
    pub fn journaled(journal: std::fs::File) -> History {
        History {
            journal: Some(Arc::new(journal)),
            ..History::default()
        }
    }

    fn write_journal(&mut self, entry: &TxnEntry) {
        let Some(file) = &self.journal else {
            return;
        };
        let items = &self.items[entry.first..entry.first + (entry.reads + entry.writes) as usize];
        let mut bytes = Vec::with_capacity(8 * (JOURNAL_HEAD_WORDS + 3 * items.len()));
        let words = JOURNAL_HEAD_WORDS + 3 * items.len();
        for word in [
            words as u64,
            entry.id,
            entry.node as u64 | (entry.kind as u64) << 16,
            ((entry.reads as u64) << 32) | entry.writes as u64,
            entry.note as u64,
        ] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        for item in items {
            for word in [item.table as u64, item.key, item.seq] {
                bytes.extend_from_slice(&word.to_le_bytes());
            }
        }
        if let Err(e) = (&**file).write_all(&bytes) {
            eprintln!("verbena: the history journal could not be written ({e}); it stops here");
            self.journal = None;
        }
    }

    /// The entries of a journal [`History::journaled`] wrote; a last entry
    /// cut short (the writer died in the middle) is left out. Errors name
    /// what is malformed.
    pub fn read_journal(bytes: &[u8]) -> Result<History, String> {
        let words: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let mut history = History::new();
        let mut at = 0usize;
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        while at + JOURNAL_HEAD_WORDS <= words.len() {
            let len = words[at] as usize;
            if len < JOURNAL_HEAD_WORDS || (len - JOURNAL_HEAD_WORDS) % 3 != 0 {
                return Err(format!("journal entry at word {at} has length {len}"));
            }
            if at + len > words.len() {
                break; // cut short
            }
            let entry = &words[at..at + len];
            let (read_count, write_count) = ((entry[3] >> 32) as usize, entry[3] as u32 as usize);
            if JOURNAL_HEAD_WORDS + 3 * (read_count + write_count) != len {
                return Err(format!(
                    "journal entry at word {at}: {read_count} reads and {write_count} writes do not fill {len} words"
                ));
            }
            let item = |i: usize| Item {
                table: entry[JOURNAL_HEAD_WORDS + 3 * i] as u32,
                key: entry[JOURNAL_HEAD_WORDS + 3 * i + 1],
                seq: entry[JOURNAL_HEAD_WORDS + 3 * i + 2],
            };
            reads.clear();
            writes.clear();
            reads.extend((0..read_count).map(item));
            writes.extend((read_count..read_count + write_count).map(item));
            history.push_noted(
                entry[1],
                entry[2] as u16,
                (entry[2] >> 16) as u8,
                entry[4] as i64,
                &reads,
                &writes,
            );
            at += len;
        }
        Ok(history)
    }

    pub fn len(&self) -> usize {
        match &self.packed {
            Some(packed) => packed.entries,
            None => self.txns.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        if let Some(packed) = &mut self.packed {
            let words = PACKED_HEAD_WORDS + 3 * (reads.len() + writes.len());
            grow_by_a_quarter(&mut packed.bytes, MAX_VARINT_BYTES * words);
            packed.word(id);
            packed.word(node as u64);
            packed.word(kind as u64);
            packed.word(((note << 1) ^ (note >> 63)) as u64);
            packed.word(reads.len() as u64);
            packed.word(writes.len() as u64);
            for item in reads.iter().chain(writes) {
                packed.word(item.table as u64);
                packed.word(item.key);
                packed.word(item.seq);
            }
            packed.entries += 1;
            return;
        }
        let first = self.items.len();
        grow_by_a_quarter(&mut self.items, reads.len() + writes.len());
        grow_by_a_quarter(&mut self.txns, 1);
        self.items.extend_from_slice(reads);
        self.items.extend_from_slice(writes);
        let entry = TxnEntry {
            id,
            node,
            first,
            reads: reads.len() as u32,
            writes: writes.len() as u32,
            kind,
            note,
        };
        self.txns.push(entry);
        if self.journal.is_some() {
            self.write_journal(&entry);
        }
    }

    /// A flat history's reads of `txn` (see [`History::visit`] for either
    /// form).
    pub fn reads(&self, txn: &TxnEntry) -> &[Item] {
        self.debug_assert_flat();
        &self.items[txn.first..txn.first + txn.reads as usize]
    }

    pub fn writes(&self, txn: &TxnEntry) -> &[Item] {
        self.debug_assert_flat();
        let start = txn.first + txn.reads as usize;
        &self.items[start..start + txn.writes as usize]
    }

    /// An empty history of the form of `parts` (all of one form) with room
    /// for all of them: what [`History::append`]ing each in turn needs.
    pub fn with_room_for<'a>(parts: impl Iterator<Item = &'a History> + Clone) -> History {
        let mut history = match parts.clone().next() {
            Some(first) if first.is_hash_only() => History::hash_only(),
            _ => History::new(),
        };
        match &mut history.packed {
            Some(packed) => packed.bytes.reserve_exact(
                parts
                    .filter_map(|p| p.packed.as_ref())
                    .map(|p| p.bytes.len())
                    .sum(),
            ),
            None => {
                history
                    .txns
                    .reserve_exact(parts.clone().map(|p| p.txns.len()).sum());
                history
                    .items
                    .reserve_exact(parts.map(|p| p.items.len()).sum());
            }
        }
        history
    }

    /// Appends all of `other`, which must be of the same form.
    pub fn append(&mut self, other: &History) {
        assert_eq!(
            self.is_hash_only(),
            other.is_hash_only(),
            "a hash-only history appends only another"
        );
        if let (Some(packed), Some(more)) = (&mut self.packed, &other.packed) {
            packed.bytes.extend_from_slice(&more.bytes);
            packed.entries += more.entries;
            return;
        }
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
        self.debug_assert_flat();
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
        self.debug_assert_flat();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::Rng;

    /// A hash-only history visits, counts and unpacks as the flat history
    /// of the same entries: extreme words (ids and keys of 64 bits,
    /// negative notes), empty entries, and appends of either form.
    #[test]
    fn a_hash_only_history_reads_as_the_flat_one() {
        let mut rng = Rng::derive(11, &[1]);
        let (mut flat, mut packed) = (History::new(), History::hash_only());
        let (mut flat_tail, mut packed_tail) = (History::new(), History::hash_only());
        for n in 0..500u64 {
            let word = |rng: &mut Rng| match (rng.unit() * 4.0) as u32 {
                0 => 0,
                1 => u64::MAX - (rng.unit() * 3.0) as u64,
                2 => (rng.unit() * 200.0) as u64,
                _ => (rng.unit() * 1e15) as u64,
            };
            let items = |count: usize, rng: &mut Rng| -> Vec<Item> {
                (0..count)
                    .map(|_| Item {
                        table: if n % 7 == 0 { u32::MAX } else { (n % 3) as u32 },
                        key: word(rng),
                        seq: word(rng),
                    })
                    .collect()
            };
            let reads = items((rng.unit() * 4.0) as usize, &mut rng);
            let writes = items((rng.unit() * 3.0) as usize, &mut rng);
            let id = word(&mut rng);
            let node = (n % 5) as u16 * 16_000;
            let kind = if n % 11 == 0 {
                SECONDARY_ENTRY
            } else {
                (n % 3) as u8
            };
            let note = match n % 4 {
                0 => 0,
                1 => i64::MIN,
                2 => -(n as i64) * 1_000,
                _ => i64::MAX - n as i64,
            };
            let (f, p) = if n < 300 {
                (&mut flat, &mut packed)
            } else {
                (&mut flat_tail, &mut packed_tail)
            };
            f.push_noted(id, node, kind, note, &reads, &writes);
            p.push_noted(id, node, kind, note, &reads, &writes);
        }
        flat.append(&flat_tail);
        packed.append(&packed_tail);
        assert!(packed.is_hash_only() && packed.txns.is_empty() && packed.items.is_empty());
        assert_eq!((packed.len(), flat.len()), (500, 500));
        let mut seen = Vec::new();
        flat.visit(|txn, items| seen.push((*txn, items.to_vec())));
        let mut at = 0;
        packed.visit(|txn, items| {
            let (want, want_items) = &seen[at];
            assert_eq!(TxnEntry { first: 0, ..*want }, *txn, "entry {at}");
            assert_eq!(want_items, items, "entry {at}");
            at += 1;
        });
        assert_eq!(at, 500);
        let unpacked = packed.into_flat();
        assert!(!unpacked.is_hash_only());
        assert_eq!(unpacked.txns, flat.txns);
        assert_eq!(unpacked.items, flat.items);
    }

    #[test]
    fn a_journal_reads_back_every_whole_entry() {
        let path =
            std::env::temp_dir().join(format!("verbena-journal-test-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let mut history = History::journaled(file);
        let item = |key, seq| Item { table: 1, key, seq };
        history.push_noted(7, 2, 3, -40, &[item(5, 1)], &[item(5, 2), item(6, 1)]);
        history.push(8, 2, &[item(9, 0)], &[]);
        let mut bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let back = History::read_journal(&bytes).unwrap();
        assert_eq!(back.txns, history.txns);
        assert_eq!(back.items, history.items);
        // A writer killed in the middle of its last entry: that entry is
        // left out, the rest read back.
        bytes.truncate(bytes.len() - 8);
        let cut = History::read_journal(&bytes).unwrap();
        assert_eq!(cut.len(), 1);
        assert_eq!(cut.writes(&cut.txns[0]), &[item(5, 2), item(6, 1)]);
        assert_eq!(cut.txns[0].note, -40);
        // Garbage is named, not misread.
        bytes[0] = 2;
        assert!(History::read_journal(&bytes)
            .unwrap_err()
            .contains("length 2"));
    }
}
