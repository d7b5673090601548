//! A second principal, for the tests that what one principal made (a session, a detached
//! execution) is out of another's reach: uid 65534 (nobody), admitted as `other`, talking to
//! the daemon through the real CLI ([`cli`]) or with a raw request ([`get`]). Acting as
//! another uid needs root, so these tests are skipped without it ([`can_run`]).

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

/// `GET path` on the daemon's socket as the other principal: its status and body. The
/// connection is made from a thread of its own that has taken uid and gid 65534 (and no
/// supplementary groups) for itself alone, so the daemon reads those as its peer's
/// credentials; the thread ends with the request. Root only, as [`cli`] is.
pub async fn get(d: &TestDaemon, path: &str) -> (u16, String) {
    let socket = d.socket.clone();
    let request = format!("GET {path} HTTP/1.1\r\nHost: airlock\r\nConnection: close\r\n\r\n");
    tokio::task::spawn_blocking(move || {
        std::thread::spawn(move || {
            as_nobody_in_this_thread();
            crate::raw_http::send(&socket, request.as_bytes())
                .expect("a request to the daemon as the other principal")
        })
        .join()
        .expect("the other principal's thread did not panic")
    })
    .await
    .expect("the other principal's thread was joined")
}

/// `n` connections to the daemon's socket made as uid 65534 (from a thread of its own that
/// has taken that uid, as [`get`] does): the daemon reads that uid as their peer's, whoever
/// then uses them. Each is an `Err` where the connect itself failed. Root only.
pub fn connect(
    socket: &std::path::Path,
    n: usize,
) -> Vec<std::io::Result<std::os::unix::net::UnixStream>> {
    let socket = socket.to_owned();
    std::thread::spawn(move || {
        as_nobody_in_this_thread();
        (0..n)
            .map(|_| std::os::unix::net::UnixStream::connect(&socket))
            .collect()
    })
    .join()
    .expect("the other principal's thread did not panic")
}

/// Takes uid and gid 65534, without supplementary groups, for the calling thread only: the
/// raw system calls, not libc's wrappers, which would change every thread of the process.
fn as_nobody_in_this_thread() {
    // SAFETY: the three calls take only integers (and a null list with a zero length for
    // setgroups); they change the credentials of the calling thread, which makes one request
    // and ends; no memory of ours is touched.
    let failed = unsafe {
        libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
            || libc::syscall(libc::SYS_setresgid, UID, UID, UID) != 0
            || libc::syscall(libc::SYS_setresuid, UID, UID, UID) != 0
    };
    assert!(
        !failed,
        "cannot take uid 65534 in a thread: {}",
        std::io::Error::last_os_error()
    );
}
