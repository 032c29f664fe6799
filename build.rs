//! Embeds the git revision of the source tree in the binary
//! (`VERBENA_GIT_REVISION`), so every result row names the code that
//! produced it. Outside a git checkout (a source tarball, a vendored copy)
//! the revision is `unknown`; a tree with uncommitted changes to tracked
//! files gets a `-dirty` suffix.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
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
