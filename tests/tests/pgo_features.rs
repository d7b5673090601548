//! airlockd's crates get the same features, hence the same symbol names, whatever cargo builds
//! beside them, so that its profile (supervisor/pgo/airlockd.profdata) matches every build.
//!
//! A profile is matched to functions by symbol name; a Rust symbol's name hashes its crate's
//! `-C metadata`, which cargo derives from the crate's features and its dependencies'. Cargo
//! turns a dependency's features on by what else the same command builds, so without care
//! `cargo build --release` (with the worker and the tests' crates) and `cargo build
//! -p airlock-supervisor` compile the daemon's crates under different names and a profile
//! taken from one misses the others. `airlock-pgo` (supervisor/pgo/Cargo.toml) turns on, for
//! the daemon, every feature another member turns on.
//! This test fails, naming the crate and the features, when a dependency change makes the
//! graphs differ again: add what it names to supervisor/pgo/Cargo.toml.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// `cargo tree` over `selection`, as package → the features it is built with. `-e normal`
/// leaves dev-dependencies out of the resolution unless `dev` adds them; `no-proc-macro`
/// keeps to code that is linked into the binary (a proc macro's dependencies are built for
/// the host, apart).
fn features(selection: &[&str], dev: bool) -> BTreeMap<String, BTreeSet<String>> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let edges = if dev {
        "normal,dev,no-proc-macro"
    } else {
        "normal,no-proc-macro"
    };
    let output = Command::new(env!("CARGO"))
        .current_dir(workspace)
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .args(["-e", edges, "-f", "{p}|{f}"])
        .args(selection)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo tree {selection:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let Some((package, list)) = line.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        let list: BTreeSet<String> = list
            .split(',')
            .filter(|f| !f.is_empty())
            .map(String::from)
            .collect();
        // A package listed twice with two feature sets would be two units: say so.
        if let Some(before) = packages.insert(package.to_owned(), list.clone()) {
            assert_eq!(
                before, list,
                "{package} appears with two feature sets in {selection:?}"
            );
        }
    }
    packages
}

#[test]
fn the_daemons_crates_are_built_alike_whatever_else_cargo_builds() {
    let alone = features(&["-p", "airlock-supervisor"], false);
    assert!(
        alone.keys().any(|p| p.starts_with("tokio ")),
        "cargo tree listed no tokio for the daemon: {alone:?}"
    );
    // The widest build there is: every member, with every member's dev-dependencies.
    let everything = features(&["--workspace"], true);
    let mut differing = Vec::new();
    for (package, own) in &alone {
        let widest = &everything[package];
        if own != widest {
            let missing: Vec<_> = widest.difference(own).collect();
            differing.push(format!("{package}: add features {missing:?}"));
        }
    }
    assert!(
        differing.is_empty(),
        "other members turn on features in the daemon's crates that the daemon alone does \
         not, so its profile would miss some builds; declare them in \
         supervisor/pgo/Cargo.toml:\n{}",
        differing.join("\n")
    );
}
