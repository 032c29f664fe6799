//! CICADA placeholder.
