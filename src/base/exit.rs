//! The `verbena` binary's exit codes, shared by the CLI that returns them
//! and the launcher that reads its ranks' codes.
//!
//! Scripts branch on these, so a code never changes meaning: a check that
//! fails is always 3, whatever else went wrong in the run.

/// The run (or command) did what was asked.
pub const EXIT_OK: i32 = 0;
/// An error that is not the user's input: an I/O failure, a peer lost
/// without a replica to fail over to.
pub const EXIT_FAILED: i32 = 1;
/// Bad input: a flag, a config value or a file; the message names it.
pub const EXIT_USAGE: i32 = 2;
/// The run finished, and its checker found a violation.
pub const EXIT_CHECK_FAILED: i32 = 3;
/// This rank was declared failed by the others (a false suspicion, or a
/// real crash it survived long enough to see) and left the run.
pub const EXIT_DECLARED_FAILED: i32 = 4;

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes are part of the command-line interface: pin them.
    #[test]
    fn the_codes_are_fixed_and_distinct() {
        let codes = [
            EXIT_OK,
            EXIT_FAILED,
            EXIT_USAGE,
            EXIT_CHECK_FAILED,
            EXIT_DECLARED_FAILED,
        ];
        assert_eq!(codes, [0, 1, 2, 3, 4]);
    }
}
