//! A second principal, for the tests that what one principal made (a session, a detached
//! execution) is out of another's reach: uid 65534 (nobody), admitted as `other`, talking to
//! the daemon through the real CLI. Acting as another uid needs root, so these tests are
//! skipped without it ([`can_run`]).

use crate::{TestDaemon, binaries, processes};
use airlock_policy::{Policy, Principal};
use std::os::unix::fs::PermissionsExt;

/// The uid the other principal is admitted for and runs the CLI as.
pub const UID: u32 = 65534;

/// Whether `test` can act as the other principal: it must run as root (else it says it is
/// skipped, as [`processes::runs_as_root`] does).
pub fn can_run(test: &str) -> bool {
    processes::runs_as_root(test, "to connect as uid 65534")
}

/// Admits uid 65534 as the principal `other`, allowed the tools matching `allow`; for
/// [`DaemonOptions::policy`](crate::DaemonOptions::policy).
pub fn admit(policy: &mut Policy, allow: &[&str]) {
    policy
        .principals
        .push(Principal::new("other", vec![UID], allow));
}

/// Lets every user reach the daemon's socket (its directory 0755, the socket 0666), so the
/// other principal can connect: the daemon then tells the two apart by the peer's credentials.
pub fn open_socket(d: &TestDaemon) {
    let dir = d.socket.parent().expect("the socket is in a directory");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .expect("open the socket's directory to everyone");
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
        .expect("open the socket to everyone");
}

/// Runs the `airlock` CLI as the other principal ([`binaries::cli_as_nobody`]) on a blocking
/// thread, so the daemon in the test's runtime keeps its threads to answer it: whether it
/// succeeded, and its stdout and stderr.
pub async fn cli(d: &TestDaemon, args: &[&str]) -> (bool, String) {
    let socket = d.socket.clone();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        binaries::cli_as_nobody(&socket, &args)
    })
    .await
    .expect("the CLI's thread did not panic")
}

/// Asserts that the CLI call `what` failed with the 404 of an id that does not exist, which is
/// all the other principal may learn of what is not its own.
#[track_caller]
pub fn assert_not_found(ok: bool, text: &str, what: &str) {
    assert!(!ok, "{what}: {text}");
    assert!(
        text.contains("404") || text.contains("not_found"),
        "{what}: {text}"
    );
}
