//! The `verbena` binary: see `verbena::cli`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(verbena::cli::main_with_args(&args));
}
