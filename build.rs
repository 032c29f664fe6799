//! Embeds the git revision of the source tree in the binary
//! (`VERBENA_GIT_REVISION`), so every result row names the code that
//! produced it, and (with the `ucx` feature) finds UCX to link against. Outside a git checkout (a source tarball, a vendored copy)
//! the revision is `unknown`; a tree with uncommitted changes to tracked
//! files gets a `-dirty` suffix.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    link_ucx();
    let revision = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|status| !status.is_empty());
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=VERBENA_GIT_REVISION={revision}");
    // Rebuild when HEAD moves (a commit, a checkout) or the sources change
    // (the dirty flag). In a worktree HEAD lives in the worktree's git dir.
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        for file in ["HEAD", "logs/HEAD"] {
            let path = std::path::Path::new(&git_dir).join(file);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    for path in ["build.rs", "Cargo.toml", "Cargo.lock", "src"] {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// With the `ucx` feature, finds libucp before linking against it, so a
/// machine without UCX gets a message saying what to install instead of a
/// linker error. Without the feature this does nothing.
fn link_ucx() {
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
