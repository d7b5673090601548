//! `tsc` over a generated SDK: the proof that the TypeScript the daemon serves is valid and
//! that programs using it type-check (or fail with the expected error codes).

use crate::mcp_peers::npm_package;
use airlock_supervisor::sdk::SdkFiles;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// `tsc` from `tests/mcp-peers` (TypeScript from npm), or `None` with a SKIPPED line.
pub fn tsc(test: &str) -> Option<PathBuf> {
    npm_package(".bin/tsc", test)
}

/// Writes the SDK and `extra` files (a program, say) to a new directory and runs `tsc -p`
/// there. Returns whether it passed and what it printed; how long it took goes to stderr.
pub fn check(tsc: &Path, sdk: &SdkFiles, extra: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("temporary directory");
    for (path, text) in &sdk.files {
        let full = dir.path().join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("create SDK directory");
        }
        std::fs::write(full, text).expect("write SDK file");
    }
    for (path, text) in extra {
        std::fs::write(dir.path().join(path), text).expect("write extra file");
    }
    let started = Instant::now();
    let out = Command::new(tsc)
        .arg("-p")
        .arg(dir.path())
        .output()
        .expect("run tsc");
    eprintln!(
        "tsc over {} files: {:?}",
        sdk.files.len() + extra.len(),
        started.elapsed()
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
