//! The terminal the command line talks to: its width, the help text
//! wrapped to it, and standard output that a closed pipe ends quietly.
//!
//! clap wraps help only with its `wrap_help` feature, which needs a
//! terminal-size crate this project does not build; so the help clap
//! renders is wrapped here, each long line continued under its own
//! description column (a flag's text stays right of the flag).
//!
//! Invariants: wrapped help has no line wider than the width unless a
//! single word is; output cut short by a closed pipe (`verbena … | head`)
//! is not an error, as with other command-line tools.

use std::io::Write as _;

use super::{failed, CliError};

/// Help is never wrapped narrower than this (a terminal that says less is
/// mistaken or a test), nor wider than [`MAX_HELP_WIDTH`].
const MIN_HELP_WIDTH: usize = 40;

/// Lines of prose read best below about this width, however wide the
/// terminal.
const MAX_HELP_WIDTH: usize = 120;

/// The width when neither `COLUMNS` nor a terminal says (clap's default).
const DEFAULT_HELP_WIDTH: usize = 100;

/// The columns help wraps to: `COLUMNS` when set, else the terminal's
/// width, else 100; kept within 40..=120.
pub(super) fn help_width() -> usize {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .filter(|&columns| columns > 0)
        .or_else(terminal_columns)
        .unwrap_or(DEFAULT_HELP_WIDTH);
    columns.clamp(MIN_HELP_WIDTH, MAX_HELP_WIDTH)
}

/// The width of the terminal on stdout, stderr or stdin, if one is (on
/// Linux, where the size request's number is known for these
/// architectures; elsewhere none).
fn terminal_columns() -> Option<usize> {
    #[cfg(all(
        target_os = "linux",
        any(
            target_arch = "x86_64",
            target_arch = "x86",
            target_arch = "aarch64",
            target_arch = "arm",
            target_arch = "riscv64"
        )
    ))]
    {
        /// `struct winsize` of `<sys/ioctl.h>`.
        #[repr(C)]
        #[derive(Default)]
        struct WinSize {
            rows: u16,
            columns: u16,
            x_pixels: u16,
            y_pixels: u16,
        }
        extern "C" {
            fn ioctl(fd: std::ffi::c_int, request: std::ffi::c_ulong, ...) -> std::ffi::c_int;
        }
        /// The request that reads a terminal's size.
        const TIOCGWINSZ: std::ffi::c_ulong = 0x5413;
        return [1, 2, 0].into_iter().find_map(|fd| {
            let mut size = WinSize::default();
            // SAFETY: TIOCGWINSZ writes one `struct winsize` through the
            // pointer, which points at a live, writable `WinSize` of that
            // layout; on a descriptor that is no terminal it fails and
            // writes nothing.
            let rc = unsafe { ioctl(fd, TIOCGWINSZ, &mut size as *mut WinSize) };
            (rc == 0 && size.columns > 0).then_some(size.columns as usize)
        });
    }
    #[allow(unreachable_code)]
    None
}

/// `help` with every line wider than `width` wrapped at spaces.
pub fn wrap_help(help: &str, width: usize) -> String {
    let mut out = String::with_capacity(help.len() + help.len() / 16);
    for line in help.lines() {
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        for piece in wrap_line(line, width) {
            out.push_str(piece.trim_end());
            out.push('\n');
        }
    }
    out
}

/// Where a long line's text starts (a byte offset) and the column its
/// continuation lines start at: a two-column line (`--flag <V>  text`,
/// `run    Run one…`) continues under its text, any other line under its
/// own indent. A text column past half the width continues at the indent
/// plus 8, as clap lays out a flag too long for its column.
fn text_layout(line: &str, width: usize) -> (usize, usize) {
    let indent = line.len() - line.trim_start().len();
    let two_columns = line[indent..].find("  ").and_then(|gap| {
        let after = indent + gap;
        let text = after + (line[after..].len() - line[after..].trim_start().len());
        (text < line.len()).then_some(text)
    });
    match two_columns {
        Some(text) => {
            let column = line[..text].chars().count();
            (
                text,
                if column <= width / 2 {
                    column
                } else {
                    indent + 8
                },
            )
        }
        None => (indent, indent),
    }
}

/// One long line as lines of at most `width` columns (a longer word
/// keeps its own line).
fn wrap_line(line: &str, width: usize) -> Vec<String> {
    let (text, column) = text_layout(line, width);
    let mut lines = Vec::new();
    let mut current = line[..text].to_string();
    let mut current_width = current.chars().count();
    // Whether `current` holds no word of the text yet.
    let mut fresh = true;
    for word in line[text..].split(' ').filter(|w| !w.is_empty()) {
        let word_width = word.chars().count();
        let gap = usize::from(!fresh);
        let at_line_start = fresh && current.trim().is_empty();
        if current_width + gap + word_width > width && !at_line_start {
            lines.push(std::mem::replace(&mut current, " ".repeat(column)));
            current_width = column;
            fresh = true;
        }
        if !fresh {
            current.push(' ');
            current_width += 1;
        }
        current.push_str(word);
        current_width += word_width;
        fresh = false;
    }
    lines.push(current);
    lines
}

/// Writes `text` to stdout. A reader that closed the pipe (`| head`) ends
/// the output quietly; any other write error is a failure.
pub(super) fn print_out(text: &str) -> Result<(), CliError> {
    write_out(text.as_bytes())
}

/// [`print_out`] for bytes (a completion script).
pub(super) fn write_out(bytes: &[u8]) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(failed(format!("cannot write to stdout: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_help_fits_eighty_columns() {
        let command = super::super::args::command();
        let mut helps = vec![command.clone().render_help().to_string()];
        for sub in command.get_subcommands() {
            helps.push(sub.clone().render_help().to_string());
        }
        for help in helps {
            for line in wrap_help(&help, 80).lines() {
                assert!(line.chars().count() <= 80, "{} columns: {line}", line.len());
            }
        }
    }

    #[test]
    fn a_flag_continues_under_its_description() {
        let line = format!("      --jitter <F>   {}", "word ".repeat(30));
        let wrapped = wrap_help(&line, 60);
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(lines.len() > 1);
        assert!(lines[0].starts_with("      --jitter <F>   word"));
        for continued in &lines[1..] {
            assert!(continued.starts_with(&" ".repeat(21)));
            assert!(!continued[21..].starts_with(' '));
            assert!(continued.chars().count() <= 60);
        }
    }

    #[test]
    fn prose_continues_under_its_indent_and_short_lines_stay() {
        let text = format!("short line\n    {}\n", "prose ".repeat(20));
        let wrapped = wrap_help(&text, 40);
        let lines: Vec<&str> = wrapped.lines().collect();
        assert_eq!(lines[0], "short line");
        assert!(lines[1..].iter().all(|l| l.starts_with("    prose")));
        assert!(lines.iter().all(|l| l.chars().count() <= 40));
    }

    #[test]
    fn a_word_longer_than_the_width_keeps_its_line() {
        let long = "x".repeat(50);
        let wrapped = wrap_help(&format!("a {long} b"), 20);
        assert_eq!(wrapped, format!("a\n{long}\nb\n"));
    }
}
