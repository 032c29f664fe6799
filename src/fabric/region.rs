//! Registered memory: the words of one node that the network may access.
//!
//! Every access is an 8-byte atomic on one aligned word, which is exactly the
//! atomicity an RC queue pair gives (docs/ARCHITECTURE.md, fabric semantics): CAS
//! and FETCH_AND_ADD are atomic against each other, while a multi-word READ
//! or WRITE is a sequence of word accesses in increasing address order, so a
//! READ that overlaps a concurrent WRITE can return a torn tuple. Protocols
//! are written against that, and tests show it happens.
//!
//! Ordering: stores are `Release` and loads `Acquire`, so the verbs one worker
//! issues to one node take effect in issue order for every observer (FIFO).

use std::sync::atomic::{AtomicU64, Ordering};

use super::verbs::{Verb, VerbKind};

/// A node's registered memory region, addressed in 8-byte words.
pub struct Region {
    words: Box<[AtomicU64]>,
    /// Memory owned by someone else (a NIC library's registered allocation,
    /// see [`Region::external`]); `words` must then never be freed by Rust.
    external: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Region {
    pub fn new(len_words: usize) -> Region {
        Region {
            words: (0..len_words).map(|_| AtomicU64::new(0)).collect(),
            external: None,
        }
    }

    /// A region over `len_words` words at `base`, which `keeper` owns and
    /// releases when dropped (after the region stops using them). The
    /// `ucx` fabric places a node's region in memory UCX allocated, so that
    /// peers on the same host can map it (true one-sided shared memory).
    /// The words are zeroed here.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `len_words` 8-byte
    /// aligned words, used by nothing else in Rust, until `keeper` drops.
    pub unsafe fn external(
        base: *mut AtomicU64,
        len_words: usize,
        keeper: Box<dyn std::any::Any + Send + Sync>,
    ) -> Region {
        debug_assert_eq!(base as usize % 8, 0, "words must be 8-byte aligned");
        let slice = std::ptr::slice_from_raw_parts_mut(base, len_words);
        let words = Box::from_raw(slice);
        for word in words.iter() {
            word.store(0, Ordering::Relaxed);
        }
        Region {
            words,
            external: Some(keeper),
        }
    }

    /// A view of `len_words` words at `base` that another process owns and
    /// initializes (a peer's region mapped into this process): nothing is
    /// zeroed, and dropping the view releases nothing.
    ///
    /// # Safety
    /// `base` must stay valid for atomic reads and writes of `len_words`
    /// 8-byte aligned words while the view lives.
    pub unsafe fn mapped(base: *mut AtomicU64, len_words: usize) -> Region {
        debug_assert_eq!(base as usize % 8, 0, "words must be 8-byte aligned");
        let slice = std::ptr::slice_from_raw_parts_mut(base, len_words);
        Region {
            words: Box::from_raw(slice),
            external: Some(Box::new(())),
        }
    }

    /// Address of word 0: what a real NIC registers (`ucx` fabric's
    /// `ucp_mem_map`). The region's words never move once created.
    pub fn base_ptr(&self) -> *const AtomicU64 {
        self.words.as_ptr()
    }

    pub fn len_words(&self) -> u64 {
        self.words.len() as u64
    }

    #[inline]
    pub fn load(&self, word: u64) -> u64 {
        self.words[word as usize].load(Ordering::Acquire)
    }

    #[inline]
    pub fn store(&self, word: u64, value: u64) {
        self.words[word as usize].store(value, Ordering::Release)
    }

    /// Compare-and-swap; returns the previous value (success iff it equals
    /// `expected`).
    #[inline]
    pub fn cas(&self, word: u64, expected: u64, new: u64) -> u64 {
        match self.words[word as usize].compare_exchange(
            expected,
            new,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(previous) | Err(previous) => previous,
        }
    }

    /// Fetch-and-add; returns the previous value.
    #[inline]
    pub fn faa(&self, word: u64, add: u64) -> u64 {
        self.words[word as usize].fetch_add(add, Ordering::AcqRel)
    }

    /// Raises the word to at least `value` atomically (a handler's CPU
    /// atomic, like `faa`); returns what it held before.
    #[inline]
    pub fn fetch_max(&self, word: u64, value: u64) -> u64 {
        self.words[word as usize].fetch_max(value, Ordering::AcqRel)
    }

    /// Word-by-word copy out, lowest address first (tearable).
    #[inline]
    pub fn read(&self, word: u64, out: &mut [u64]) {
        let start = word as usize;
        let len = out.len();
        for (slot, cell) in out.iter_mut().zip(&self.words[start..start + len]) {
            *slot = cell.load(Ordering::Acquire);
        }
    }

    /// Runs one verb here with CPU operations, complete on return: a READ
    /// into `results[verb.buf..]`, a WRITE from `write_data[verb.buf..]`,
    /// a CAS's or FAA's previous value into `results[verb.buf]` (the
    /// fabrics whose verbs are CPU operations share this).
    #[inline]
    pub fn apply(&self, verb: &Verb, write_data: &[u64], results: &mut [u64]) {
        let buf = verb.buf as usize;
        match verb.kind {
            VerbKind::Read => self.read(verb.addr, &mut results[buf..buf + verb.len as usize]),
            VerbKind::Write => self.write(verb.addr, &write_data[buf..buf + verb.len as usize]),
            VerbKind::Cas => results[buf] = self.cas(verb.addr, verb.compare, verb.swap),
            VerbKind::Faa => results[buf] = self.faa(verb.addr, verb.compare),
        }
    }

    /// Word-by-word copy in, lowest address first (tearable).
    #[inline]
    pub fn write(&self, word: u64, data: &[u64]) {
        let start = word as usize;
        for (value, cell) in data.iter().zip(&self.words[start..start + data.len()]) {
            cell.store(*value, Ordering::Release);
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.external.is_some() {
            // Not Rust's allocation: forget the box, then let the keeper
            // release the memory.
            let words = std::mem::take(&mut self.words);
            std::mem::forget(words);
            self.external = None;
        }
    }
}
