//! One principal cannot starve another: connections from a uid no principal admits are
//! answered and closed before anything is read; a principal holds at most its
//! `limits.max_connections` connections and queues at most `limits.max_queued_executions`
//! programs (`429` with `Retry-After` past either); connections that send nothing, or stop in
//! the middle of a request's head, are closed after `[daemon] idle_timeout`; and a principal
//! flooding the daemon with endless programs leaves another's `1 + 1` fast (its p99 under
//! 50 ms). The other principal is uid 65534 (`airlock_tests::another_principal`), so most of
//! these need root.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use airlock_supervisor::agent_api::ExecutionRequest;
use airlock_tests::another_principal::{self, UID};
use airlock_tests::{DaemonOptions, TestDaemon};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Everything the daemon writes on `stream` within `wait` (until it closes, or the wait
/// ends), and whether it closed.
fn read_for(stream: &mut UnixStream, wait: Duration) -> (String, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // A reset is a close too.
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), true),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

fn execution_request(code: &str, timeout_ms: u64) -> Vec<u8> {
    let body = serde_json::to_vec(&ExecutionRequest {
        code: code.to_owned(),
        timeout_ms: Some(timeout_ms),
        ..Default::default()
    })
    .unwrap();
    let mut request = format!(
        "POST /v1/executions HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uid_no_principal_admits_is_answered_and_closed_before_it_sends_anything() {
    if !another_principal::can_run("a_uid_no_principal_admits_is_answered_and_closed") {
        return;
    }
    let d = TestDaemon::start().await;
    another_principal::open_socket(&d);
    let socket = d.socket.clone();
    let (answer, closed) = tokio::task::spawn_blocking(move || {
        let mut stream = another_principal::connect(&socket, 1).remove(0).unwrap();
        // Not a byte sent: the daemon must not wait for one.
        read_for(&mut stream, Duration::from_secs(3))
    })
    .await
    .unwrap();
    assert!(closed, "the connection is still open: {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(answer.contains("not_admitted"), "{answer}");
    assert!(answer.contains(&format!("uid {UID}")), "{answer}");
    // The CLI's client still shows that answer, though its request found the door closed.
    let (ok, text) = another_principal::cli(&d, &["exec", "-e", "1"]).await;
    assert!(!ok, "{text}");
    assert!(text.contains("not admitted"), "{text}");
    assert_eq!(d.exec("'alive'").await.result, serde_json::json!("alive"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_holds_at_most_its_connections_and_the_others_are_served() {
    if !another_principal::can_run("a_principal_holds_at_most_its_connections") {
        return;
    }
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        another_principal::admit(p, &["*"]);
        p.principals.last_mut().unwrap().limits.max_connections = 4;
    }))
    .await;
    another_principal::open_socket(&d);
    let socket = d.socket.clone();
    let (held, refused) = tokio::task::spawn_blocking(move || {
        let mut held: Vec<UnixStream> = another_principal::connect(&socket, 4)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        // Each of the four is served.
        for stream in &mut held {
            stream
                .write_all(b"GET /v1/health HTTP/1.1\r\nHost: airlock\r\n\r\n")
                .unwrap();
            let (answer, _) = read_for(stream, Duration::from_millis(500));
            assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        }
        // The fifth is answered and closed at once.
        let mut fifth = another_principal::connect(&socket, 1).remove(0).unwrap();
        let refused = read_for(&mut fifth, Duration::from_secs(3));
        (held, refused)
    })
    .await
    .unwrap();
    let (answer, closed) = refused;
    assert!(closed, "the fifth connection is still open: {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(
        answer.contains("rate_limited") && answer.contains("limits.max_connections"),
        "{answer}"
    );
    // Another principal is served meanwhile.
    assert_eq!(d.exec("1 + 1").await.result, serde_json::json!(2));
    // A connection closed frees its place.
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, body) = another_principal::get(&d, "/v1/health").await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_idle_and_half_sent_connections_are_closed_after_the_idle_timeout() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.daemon.idle_timeout_ms = 1_000;
    }))
    .await;
    let socket = d.socket.clone();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        // Sends nothing.
        let mut silent = UnixStream::connect(&socket).unwrap();
        // Stops in the middle of a request's head.
        let mut half = UnixStream::connect(&socket).unwrap();
        half.write_all(b"GET /v1/health HTTP/1.1\r\nHost: air")
            .unwrap();
        // Sends one whole request, then nothing more.
        let mut kept = UnixStream::connect(&socket).unwrap();
        kept.write_all(b"GET /v1/health HTTP/1.1\r\nHost: airlock\r\n\r\n")
            .unwrap();
        for (what, stream) in [
            ("silent", &mut silent),
            ("half-sent", &mut half),
            ("kept", &mut kept),
        ] {
            let (answer, closed) = read_for(stream, Duration::from_secs(5));
            assert!(closed, "the {what} connection is still open: {answer:?}");
            if what == "kept" {
                assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
            }
        }
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "closed only after {took:?}");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_queues_at_most_its_limit_and_is_told_when_to_retry() {
    let d = TestDaemon::start_with(DaemonOptions::default().pool(1).policy(|p| {
        p.principals[0].limits.max_running_executions = 1;
        p.principals[0].limits.max_queued_executions = 1;
    }))
    .await;
    let socket = d.socket.clone();
    tokio::task::spawn_blocking(move || {
        // One runs, one waits for a slot.
        let mut running = UnixStream::connect(&socket).unwrap();
        running
            .write_all(&execution_request("while (true) {}", 5000))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let mut queued = UnixStream::connect(&socket).unwrap();
        queued
            .write_all(&execution_request("while (true) {}", 5000))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // The third is refused at once, and told when to try again.
        let mut third = UnixStream::connect(&socket).unwrap();
        third.write_all(&execution_request("1 + 1", 5000)).unwrap();
        let (answer, _) = read_for(&mut third, Duration::from_secs(2));
        assert!(answer.starts_with("HTTP/1.1 429 "), "{answer:?}");
        let lower = answer.to_ascii_lowercase();
        assert!(lower.contains("retry-after: 1\r\n"), "{answer}");
        assert!(answer.contains("\"rate_limited\""), "{answer}");
        assert!(answer.contains("limits.max_queued_executions"), "{answer}");
        assert!(answer.contains("retry in 1 s"), "{answer}");
    })
    .await
    .unwrap();
}

/// The load test: uid 65534 floods the daemon with 70 endless programs on 70 connections
/// (those past its connection and queue limits are refused) while root runs `1 + 1` 200
/// times, one after another; root's p99 stays under 50 ms. Without fair slots the flood takes
/// every slot and `1 + 1` waits for an endless program's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_flood_of_endless_programs_leaves_anothers_one_plus_one_fast() {
    if !another_principal::can_run("one_principals_flood_leaves_anothers_one_plus_one_fast") {
        return;
    }
    let d = TestDaemon::start_with(DaemonOptions::default().pool(2).policy(|p| {
        another_principal::admit(p, &["*"]);
        p.daemon.max_concurrent_executions = 8;
    }))
    .await;
    another_principal::open_socket(&d);
    let socket = d.socket.clone();
    let flood = tokio::task::spawn_blocking(move || {
        let mut streams = Vec::new();
        for stream in another_principal::connect(&socket, 70) {
            let Ok(mut stream) = stream else { continue };
            // A refused connection may already be closed: its write fails, which is fine.
            let _ = stream.write_all(&execution_request("while (true) {}", 15_000));
            streams.push(stream);
        }
        streams
    })
    .await
    .unwrap();
    // Let the flood take what it may.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut client = d.client().await;
    let mut took = Vec::new();
    let started = Instant::now();
    while took.len() < 200 && started.elapsed() < Duration::from_secs(20) {
        let t = Instant::now();
        let response = client
            .execute(&ExecutionRequest {
                code: "1 + 1".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        took.push(t.elapsed());
        assert_eq!(response.result, serde_json::json!(2), "{response:?}");
    }
    assert_eq!(took.len(), 200, "only {} in 20 s", took.len());
    took.sort();
    let p50 = took[took.len() / 2];
    let p99 = took[took.len() * 99 / 100 - 1];
    let max = took[took.len() - 1];
    println!(
        "1 + 1 during the flood: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    assert!(p99 < Duration::from_millis(50), "p99 {p99:?}");
    drop(flood);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_its_answer_is_dropped_after_the_write_timeout() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.daemon.write_timeout_ms = 1_000;
        // An 8 MB answer: the output budget raised to its maximum (at the default 10,000
        // tokens the result would be cut to about 40 kB, which the socket takes at once).
        p.limits.max_output_tokens = airlock_policy::LimitSettings::MAX_OUTPUT_TOKENS;
    }))
    .await;
    let socket = d.socket.clone();
    tokio::task::spawn_blocking(move || {
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream
            .write_all(&execution_request("'x '.repeat(4_000_000)", 20_000))
            .unwrap();
        // The answer has begun (the execution and its output budget took their time)...
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut got = vec![0u8; 13];
        stream.read_exact(&mut got).unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200 "), "{got:?}");
        // ... and nothing more of the 8 MB is read for longer than the write timeout.
        std::thread::sleep(Duration::from_secs(4));
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let ended = stream.read_to_end(&mut got);
        assert!(
            ended.is_ok() && got.len() < 8_000_000,
            "the daemon kept writing to a reader that read nothing: {} bytes, {ended:?}",
            got.len()
        );
    })
    .await
    .unwrap();
    // The daemon serves on.
    assert_eq!(d.exec("1 + 1").await.result, serde_json::json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_in_time_is_refused_and_its_connection_closed() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.daemon.body_timeout_ms = 1_000;
    }))
    .await;
    let socket = d.socket.clone();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut stream = UnixStream::connect(&socket).unwrap();
        // The head promises 100 bytes; 10 come, then nothing.
        stream
            .write_all(
                b"POST /v1/executions HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"code\": ",
            )
            .unwrap();
        let (answer, closed) = read_for(&mut stream, Duration::from_secs(5));
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer:?}");
        assert!(answer.contains("body_timeout"), "{answer}");
        assert!(closed, "the connection is still open: {answer}");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "closed only after {took:?}");

        // The MCP door's body is read by rmcp, under the same deadline.
        let started = Instant::now();
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream
            .write_all(
                b"POST /mcp HTTP/1.1\r\nHost: airlock\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\": ",
            )
            .unwrap();
        let (answer, closed) = read_for(&mut stream, Duration::from_secs(5));
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer:?}");
        assert!(answer.contains("body_timeout"), "{answer}");
        assert!(closed, "the MCP connection is still open: {answer}");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "closed only after {took:?}");
    })
    .await
    .unwrap();
}

/// The daemon raises its soft descriptor limit to the hard one as it starts, so that
/// `[daemon] max_connections`, not `EMFILE`, bounds its connections (a shell's soft limit is
/// often 1,024).
#[test]
fn the_daemon_raises_its_descriptor_limit_to_the_hard_one() {
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().unwrap();
    let policy = airlock_tests::real_daemon::policy(dir.path(), 0, "");
    let daemon = airlock_tests::real_daemon::RealDaemon::start(dir.path(), &policy, |cmd| {
        // SAFETY: setrlimit with a struct on this stack, in the child before exec.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 256,
                    rlim_max: 4096,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", daemon.pid())).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft: Vec<&str> = open_files.split_whitespace().collect();
    assert_eq!(soft.get(3), Some(&"4096"), "{open_files}");
}
