//! Who owns which RPC handler kinds.
//!
//! An RPC names its handler by a `u16` kind, and a node's event loop hands
//! a request to the owner of its kind: the replication log, CALVIN's node
//! program, or the run's protocol. Each owner numbers its own kinds, so the
//! numbers are given out here, in ranges, one per owner, and each owner
//! checks its constants against its range when the crate compiles
//! ([`KindRange::check`]). Two owners then cannot collide, and a protocol
//! written outside the crate takes its kinds from [`EXTERNAL`], which
//! nothing inside the crate uses.
//!
//! Invariants: the ranges in [`RANGES`] are disjoint and none holds kind 0;
//! every kind constant lies in its owner's range and differs from every
//! other constant of that owner.

/// The kinds one owner may use: `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindRange {
    pub owner: &'static str,
    pub first: u16,
    pub last: u16,
}

impl KindRange {
    /// `owner`'s kinds `first..=last`.
    pub const fn new(owner: &'static str, first: u16, last: u16) -> KindRange {
        KindRange { owner, first, last }
    }

    pub const fn contains(&self, kind: u16) -> bool {
        self.first <= kind && kind <= self.last
    }

    /// Fails the build (in a `const` item) unless every kind in `kinds`
    /// lies in this range and no two are equal.
    pub const fn check(&self, kinds: &[u16]) {
        let mut i = 0;
        while i < kinds.len() {
            assert!(
                self.contains(kinds[i]),
                "an RPC kind outside its owner's range"
            );
            let mut j = i + 1;
            while j < kinds.len() {
                assert!(kinds[i] != kinds[j], "two RPC kinds of one owner are equal");
                j += 1;
            }
            i += 1;
        }
    }

    const fn overlaps(&self, other: &KindRange) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// The crate's protocols (`protocols::common::kind`).
pub const PROTOCOLS: KindRange = KindRange::new("protocols", 0x0001, 0x0fff);

/// Protocols defined outside the crate; nothing inside uses these.
pub const EXTERNAL: KindRange = KindRange::new("external protocols", 0x1000, 0x7fff);

/// CALVIN's node program (`engine::calvin`).
pub const CALVIN: KindRange = KindRange::new("calvin", 0xca00, 0xcaff);

/// The replication log (`replication::log::kind`), served before any
/// protocol sees a request.
pub const LOG: KindRange = KindRange::new("log", 0xf000, 0xffff);

/// Every owner's range.
pub const RANGES: [KindRange; 4] = [PROTOCOLS, EXTERNAL, CALVIN, LOG];

/// The owner of `kind`, if it is given out.
pub fn owner(kind: u16) -> Option<&'static str> {
    RANGES
        .iter()
        .find(|range| range.contains(kind))
        .map(|range| range.owner)
}

// The ranges themselves are disjoint and leave kind 0 unused.
const _: () = {
    let mut i = 0;
    while i < RANGES.len() {
        assert!(RANGES[i].first != 0 && RANGES[i].first <= RANGES[i].last);
        let mut j = i + 1;
        while j < RANGES.len() {
            assert!(!RANGES[i].overlaps(&RANGES[j]));
            j += 1;
        }
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_disjoint_and_name_their_owner() {
        for (i, a) in RANGES.iter().enumerate() {
            for b in &RANGES[i + 1..] {
                assert!(!a.overlaps(b), "{} and {} overlap", a.owner, b.owner);
            }
            assert_eq!(owner(a.first), Some(a.owner));
            assert_eq!(owner(a.last), Some(a.owner));
        }
        assert_eq!(owner(0), None);
        assert_eq!(owner(0xc000), None, "a gap between owners");
    }

    /// Protocols written outside the crate number their kinds from
    /// [`EXTERNAL`], so the ranges are part of the crate's interface.
    #[test]
    fn the_owners_ranges_are_pinned() {
        assert_eq!((PROTOCOLS.first, PROTOCOLS.last), (0x0001, 0x0fff));
        assert_eq!((EXTERNAL.first, EXTERNAL.last), (0x1000, 0x7fff));
        assert_eq!((CALVIN.first, CALVIN.last), (0xca00, 0xcaff));
        assert_eq!((LOG.first, LOG.last), (0xf000, 0xffff));
    }

    #[test]
    #[should_panic(expected = "outside its owner's range")]
    fn a_kind_outside_its_range_is_refused() {
        CALVIN.check(&[0xca01, 0xf001]);
    }

    #[test]
    #[should_panic(expected = "are equal")]
    fn two_equal_kinds_are_refused() {
        LOG.check(&[0xf001, 0xf002, 0xf001]);
    }
}
