//! The bootstrap's wire format: length-prefixed frames of little-endian
//! words and byte strings, and the encodings of what ranks exchange (run
//! statistics, histories, region images).
//!
//! Frame: `[kind: u32][reserved: u32][length: u64][length bytes]`. Decoding
//! never panics on what a peer sent: a short or malformed frame is an error
//! that names what was being read.

use std::io::{Read, Write};

use crate::check::{History, Item, TxnEntry};
use crate::fabric::VerbCounters;
use crate::stats::{Latencies, WorkerSnapshot, WorkerStats};

/// Largest frame accepted (a region image of the largest allowed store).
pub const MAX_FRAME_BYTES: u64 = 20 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    Hello = 1,
    Table = 2,
    Ready = 3,
    Go = 4,
    Done = 5,
    AllDone = 6,
    Result = 7,
    Abort = 8,
    /// Failover (`cluster::failover`): a rank suspects a peer dead.
    Suspect = 9,
    /// Rank 0: the peer is declared failed; pause.
    Fail = 10,
    /// A rank's coroutines are all parked.
    Quiet = 11,
    /// Rank 0: every survivor is quiet; recover locally, send the digest.
    Drain = 12,
    /// A rank's local recovery counts and sync summary.
    Synced = 13,
    /// Rank 0: the versions this rank's copies lack.
    Install = 14,
    /// A rank installed them and reset its headers.
    Recovered = 15,
    /// Rank 0: every survivor recovered; resume.
    Resume = 16,
    /// Never sent: what rank 0's bootstrap reports when a rank's
    /// connection is lost in a run that tolerates it.
    Lost = 17,
    /// A rank's decided-record counts and its doubts (`recovery::Doubts`).
    Doubts = 18,
    /// Rank 0: the dead coordinators' transactions that committed.
    Decide = 19,
    /// A rank's heartbeat in a fault-tolerant run: its clock when sent
    /// (`Bootstrap::enable_leases`).
    LeaseBeat = 20,
    /// Rank 0: the echo of a `LeaseBeat`, which renews that rank's lease.
    LeaseGrant = 21,
    /// Rank 0, first thing on a new connection: the nonce the joiner must
    /// answer (`cluster::auth`).
    Challenge = 22,
    /// Rank 0: the buckets whose copies differ; send their versions.
    Fetch = 23,
    /// A rank's versions in those buckets.
    Versions = 24,
}

impl Kind {
    fn from_u32(value: u32) -> Option<Kind> {
        Some(match value {
            1 => Kind::Hello,
            2 => Kind::Table,
            3 => Kind::Ready,
            4 => Kind::Go,
            5 => Kind::Done,
            6 => Kind::AllDone,
            7 => Kind::Result,
            8 => Kind::Abort,
            9 => Kind::Suspect,
            10 => Kind::Fail,
            11 => Kind::Quiet,
            12 => Kind::Drain,
            13 => Kind::Synced,
            14 => Kind::Install,
            15 => Kind::Recovered,
            16 => Kind::Resume,
            18 => Kind::Doubts,
            19 => Kind::Decide,
            20 => Kind::LeaseBeat,
            21 => Kind::LeaseGrant,
            22 => Kind::Challenge,
            23 => Kind::Fetch,
            24 => Kind::Versions,
            _ => return None,
        })
    }
}

#[derive(Debug)]
pub struct Frame {
    pub kind: Kind,
    pub body: Vec<u8>,
}

pub fn write_frame(out: &mut impl Write, kind: Kind, body: &[u8]) -> std::io::Result<()> {
    let mut head = [0u8; 16];
    head[..4].copy_from_slice(&(kind as u32).to_le_bytes());
    head[8..].copy_from_slice(&(body.len() as u64).to_le_bytes());
    out.write_all(&head)?;
    out.write_all(body)?;
    out.flush()
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub fn read_frame(input: &mut impl Read) -> Result<Option<Frame>, String> {
    read_frame_limited(input, MAX_FRAME_BYTES)
}

/// [`read_frame`] refusing a frame longer than `max_bytes` before reading
/// (or allocating) its body: what a peer not yet admitted gets, so a
/// stranger cannot make rank 0 allocate gigabytes with one header.
pub fn read_frame_limited(input: &mut impl Read, max_bytes: u64) -> Result<Option<Frame>, String> {
    let mut head = [0u8; 16];
    let mut got = 0;
    while got < head.len() {
        match input.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err("the connection closed in the middle of a message".into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading from the connection failed: {e}")),
        }
    }
    let kind_word = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
    let kind = Kind::from_u32(kind_word)
        .ok_or_else(|| format!("unknown message kind {kind_word} (not a verbena peer?)"))?;
    let length = u64::from_le_bytes(head[8..].try_into().expect("8 bytes"));
    if length > max_bytes {
        return Err(format!(
            "message of {length} bytes is too large (at most {max_bytes} here)"
        ));
    }
    let mut body = vec![0u8; length as usize];
    input
        .read_exact(&mut body)
        .map_err(|e| format!("the connection failed in the middle of a message: {e}"))?;
    Ok(Some(Frame { kind, body }))
}

/// Builds a frame body.
#[derive(Default)]
pub struct Enc {
    pub bytes: Vec<u8>,
}

impl Enc {
    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn bytes(&mut self, data: &[u8]) -> &mut Self {
        self.u64(data.len() as u64);
        self.bytes.extend_from_slice(data);
        self
    }

    pub fn str(&mut self, text: &str) -> &mut Self {
        self.bytes(text.as_bytes())
    }

    pub fn words(&mut self, words: &[u64]) -> &mut Self {
        self.u64(words.len() as u64);
        self.bytes.reserve(words.len() * 8);
        for word in words {
            self.bytes.extend_from_slice(&word.to_le_bytes());
        }
        self
    }
}

/// Reads a frame body.
pub struct Dec<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Dec<'a> {
    pub fn new(bytes: &'a [u8]) -> Dec<'a> {
        Dec { bytes, at: 0 }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| format!("malformed message: it ends inside {what}"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }

    fn len(&mut self, what: &str, unit: usize) -> Result<usize, String> {
        let len = self.u64(what)?;
        if len.saturating_mul(unit as u64) > (self.bytes.len() - self.at) as u64 {
            return Err(format!("malformed message: {what} longer than the message"));
        }
        Ok(len as usize)
    }

    pub fn bytes(&mut self, what: &str) -> Result<Vec<u8>, String> {
        let len = self.len(what, 1)?;
        Ok(self.take(len, what)?.to_vec())
    }

    pub fn str(&mut self, what: &str) -> Result<String, String> {
        String::from_utf8(self.bytes(what)?)
            .map_err(|_| format!("malformed message: {what} is not UTF-8"))
    }

    pub fn words(&mut self, what: &str) -> Result<Vec<u64>, String> {
        let len = self.len(what, 8)?;
        let raw = self.take(len * 8, what)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }
}

/// Words of one worker's [`VerbCounters`] on the wire.
const COUNTER_WORDS: usize = 11;

fn counters_words(c: &VerbCounters) -> [u64; COUNTER_WORDS] {
    [
        c.read,
        c.read_bytes,
        c.write,
        c.write_bytes,
        c.cas,
        c.faa,
        c.doorbells,
        c.rpc,
        c.rpc_request_bytes,
        c.wire_messages,
        c.wire_bytes,
    ]
}

/// One worker's closed statistics (what `WorkerStats::merge` uses).
pub fn encode_stats(enc: &mut Enc, stats: &WorkerStats) {
    let m = &stats.measured;
    let mut words = vec![stats.committed, stats.user_aborted, stats.execution_ns];
    words.extend_from_slice(&stats.aborts);
    words.extend_from_slice(&stats.stage_ns);
    words.extend_from_slice(&counters_words(&m.counters));
    words.extend_from_slice(&[
        m.wall_ns,
        m.idle_ns,
        m.handler_ns,
        stats.cache_hits,
        stats.cache_misses,
        stats.fault_commits.before_fault,
        stats.fault_commits.after_fault,
        stats.fault_commits.after_detection,
        stats.aborted_ns,
        stats.backoff_ns,
    ]);
    words.extend_from_slice(&stats.committed_by_type);
    for counts in &stats.per_type {
        words.extend_from_slice(&[counts.aborted, counts.user_aborted, counts.latency_ns_sum]);
    }
    enc.words(&words);
    enc.words(&stats.latency.to_words());
}

pub fn decode_stats(dec: &mut Dec) -> Result<WorkerStats, String> {
    let words = dec.words("worker statistics")?;
    let mut stats = WorkerStats::new();
    let expected = 3
        + stats.aborts.len()
        + stats.stage_ns.len()
        + COUNTER_WORDS
        + 5
        + 3
        + 2
        + stats.committed_by_type.len()
        + 3 * stats.per_type.len();
    if words.len() != expected {
        return Err(format!(
            "worker statistics have {} fields, expected {expected} (a different verbena version?)",
            words.len()
        ));
    }
    let mut it = words.into_iter();
    let mut next = || it.next().expect("length checked");
    stats.committed = next();
    stats.user_aborted = next();
    stats.execution_ns = next();
    for slot in stats.aborts.iter_mut() {
        *slot = next();
    }
    for slot in stats.stage_ns.iter_mut() {
        *slot = next();
    }
    let counters = VerbCounters {
        read: next(),
        read_bytes: next(),
        write: next(),
        write_bytes: next(),
        cas: next(),
        faa: next(),
        doorbells: next(),
        rpc: next(),
        rpc_request_bytes: next(),
        wire_messages: next(),
        wire_bytes: next(),
    };
    stats.measured = WorkerSnapshot {
        counters,
        wall_ns: next(),
        idle_ns: next(),
        handler_ns: next(),
    };
    stats.cache_hits = next();
    stats.cache_misses = next();
    stats.fault_commits.before_fault = next();
    stats.fault_commits.after_fault = next();
    stats.fault_commits.after_detection = next();
    stats.aborted_ns = next();
    stats.backoff_ns = next();
    for slot in stats.committed_by_type.iter_mut() {
        *slot = next();
    }
    for counts in stats.per_type.iter_mut() {
        counts.aborted = next();
        counts.user_aborted = next();
        counts.latency_ns_sum = next();
    }
    stats.latency = Latencies::from_words(&dec.words("latency histograms")?)
        .ok_or("malformed latency histograms")?;
    Ok(stats)
}

pub fn encode_history(enc: &mut Enc, history: &History) {
    let mut txns = Vec::with_capacity(history.txns.len() * TXN_WORDS);
    for t in &history.txns {
        txns.push(t.id);
        txns.push(t.node as u64 | (t.kind as u64) << 16);
        txns.push(((t.reads as u64) << 32) | t.writes as u64);
        txns.push(t.note as u64);
    }
    enc.words(&txns);
    let mut items = Vec::with_capacity(history.items.len() * 3);
    for item in &history.items {
        items.push(item.table as u64);
        items.push(item.key);
        items.push(item.seq);
    }
    enc.words(&items);
}

/// Words per history transaction on the wire: id, node | kind << 16,
/// reads << 32 | writes, note.
const TXN_WORDS: usize = 4;

pub fn decode_history(dec: &mut Dec) -> Result<History, String> {
    let txns = dec.words("history transactions")?;
    let items = dec.words("history items")?;
    if txns.len() % TXN_WORDS != 0 || items.len() % 3 != 0 {
        return Err("malformed history".into());
    }
    let mut history = History::new();
    history.items = items
        .chunks_exact(3)
        .map(|c| Item {
            table: c[0] as u32,
            key: c[1],
            seq: c[2],
        })
        .collect();
    let mut first = 0usize;
    for c in txns.chunks_exact(TXN_WORDS) {
        let reads = (c[2] >> 32) as u32;
        let writes = c[2] as u32;
        history.txns.push(TxnEntry {
            id: c[0],
            node: c[1] as u16,
            first,
            reads,
            writes,
            kind: (c[1] >> 16) as u8,
            note: c[3] as i64,
        });
        first += reads as usize + writes as usize;
    }
    if first != history.items.len() {
        return Err("malformed history: item count disagrees with the transactions".into());
    }
    Ok(history)
}

/// FNV-1a of `bytes` (the configuration digest ranks compare).
pub fn digest(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_stats_and_histories_round_trip() {
        let mut stats = WorkerStats::new();
        stats.committed = 42;
        stats.aborts[1] = 7;
        stats.stage_ns[2] = 1234;
        stats.measured.counters.cas = 9;
        stats.measured.wall_ns = 5_000;
        stats.measured.counters.wire_messages = 4;
        stats.cache_hits = 3;
        stats.aborted_ns = 11;
        stats.backoff_ns = 13;
        stats.committed_by_type[1] = 40;
        stats.per_type[1].aborted = 6;
        stats.per_type[1].user_aborted = 1;
        stats.per_type[1].latency_ns_sum = 99_000;
        stats.latency.record(0, 0, 77_000);
        let mut history = History::new();
        let item = |key, seq| Item { table: 0, key, seq };
        history.push(5, 1, &[item(1, 0)], &[item(1, 1)]);
        history.push(6, 0, &[item(2, 0), item(1, 1)], &[]);

        let mut enc = Enc::default();
        enc.str("host-a");
        encode_stats(&mut enc, &stats);
        encode_history(&mut enc, &history);
        let mut wire = Vec::new();
        write_frame(&mut wire, Kind::Result, &enc.bytes).unwrap();
        let frame = read_frame(&mut wire.as_slice()).unwrap().unwrap();
        assert_eq!(frame.kind, Kind::Result);
        let mut dec = Dec::new(&frame.body);
        assert_eq!(dec.str("host").unwrap(), "host-a");
        let back = decode_stats(&mut dec).unwrap();
        assert_eq!(back.committed, 42);
        assert_eq!(back.aborts, stats.aborts);
        assert_eq!(back.stage_ns, stats.stage_ns);
        assert_eq!(back.measured, stats.measured);
        // What the report's per-type lines and time breakdown need.
        assert_eq!((back.aborted_ns, back.backoff_ns), (11, 13));
        assert_eq!(back.committed_by_type, stats.committed_by_type);
        assert_eq!(back.per_type, stats.per_type);
        assert_eq!(back.latency.count(), 1);
        let back_history = decode_history(&mut dec).unwrap();
        assert_eq!(back_history.txns, history.txns);
        assert_eq!(back_history.items, history.items);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert!(read_frame(&mut [1u8, 0, 0].as_slice()).is_err());
        assert!(read_frame(&mut [99u8; 16].as_slice()).is_err());
        assert!(read_frame(&mut [].as_slice()).unwrap().is_none());
        let mut huge = Vec::new();
        write_frame(&mut huge, Kind::Hello, &[0; 64]).unwrap();
        let error = read_frame_limited(&mut huge.as_slice(), 32).unwrap_err();
        assert!(error.contains("64 bytes is too large"), "{error}");
        let mut enc = Enc::default();
        enc.u64(1 << 40);
        assert!(Dec::new(&enc.bytes).words("x").is_err());
        assert!(Dec::new(&[1, 2]).u64("x").is_err());
        assert!(decode_stats(&mut Dec::new(&[])).is_err());
    }
}
