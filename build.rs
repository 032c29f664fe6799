// With the `ucx` feature, find libucp before linking against it, so a
// machine without UCX gets a message saying what to install instead of a
// linker error. Without the feature this does nothing.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=UCX_HOME");
    if std::env::var_os("CARGO_FEATURE_UCX").is_none() {
        return;
    }
    let mut dirs: Vec<String> = Vec::new();
    if let Ok(home) = std::env::var("UCX_HOME") {
        dirs.push(format!("{home}/lib"));
        dirs.push(format!("{home}/lib64"));
    }
    if let Ok(output) = std::process::Command::new("pkg-config")
        .args(["--variable=libdir", "ucx"])
        .output()
    {
        let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if output.status.success() && !dir.is_empty() {
            dirs.push(dir);
        }
    }
    for dir in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
        "/opt/ucx/lib",
    ] {
        dirs.push(dir.to_string());
    }
    match dirs
        .iter()
        .find(|dir| Path::new(dir).join("libucp.so").exists())
    {
        Some(dir) => println!("cargo:rustc-link-search=native={dir}"),
        None => panic!(
            "\n\nthe `ucx` feature needs UCX's development files (libucp.so), found in none of: {}\n\
             install them (Debian/Ubuntu: `apt-get install libucx-dev ucx-utils`; elsewhere UCX >= 1.13 from https://openucx.org and set UCX_HOME to its prefix), or build without `--features ucx`\n\n",
            dirs.join(", ")
        ),
    }
}
