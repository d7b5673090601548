//! `airlockd --check-config` and argument handling of the binaries (no daemon needed).
//! Being an integration test of this package also makes `cargo test` build `airlockd` and
//! `airlock`, which the end-to-end tests in `tests/` run.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn check_config_reports_errors_with_file_line_and_key() {
    let dir = std::env::temp_dir().join(format!("airlock-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[daemon]\npool_size = 2\npol_size = 3\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlockd"))
        .arg("--check-config")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:3:", bad.display())), "{err}");
    assert!(err.contains("pol_size"), "{err}");

    let good = dir.join("good.toml");
    std::fs::write(&good, "[limits]\ntimeout_ms = 1000\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlockd"))
        .arg("--check-config")
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cli_explains_an_unreachable_daemon() {
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["--socket", "/nonexistent/airlock.sock", "exec", "-e", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/airlock.sock"), "{err}");
    assert!(err.contains("is airlockd running"), "{err}");
}
