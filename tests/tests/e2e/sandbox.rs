//! Sandbox proof: a test-only worker build (feature `escape-probe`) runs the real lockdown
//! and then attempts one forbidden operation per execution, each in its own worker process.
//! Every attempt must end in SIGSYS or EPERM (EACCES for the Landlock-only variants), and
//! the supervisor must report it as a sandbox violation.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::Status;
use airlock_tests::{DaemonOptions, TestDaemon, binaries};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_escape_attempt_is_refused_and_reported() {
    let probe = binaries::escape_probe_worker();
    let d = TestDaemon::start_with(DaemonOptions::default().worker(probe)).await;

    let alive = d.exec_timeout("noop", 5000).await;
    assert_eq!(
        alive.status,
        Status::Ok,
        "the probe worker does not run at all: {alive:?}"
    );

    // The probe's own list (from its answer to an unknown attack), so this test cannot drift
    // from the attacks the probe knows.
    let listing = d.exec_timeout("no-such-attack", 5000).await;
    let message = listing.error.map(|e| e.message).unwrap_or_default();
    let attacks: Vec<String> = message
        .split_once("valid attacks: ")
        .and_then(|(_, rest)| rest.split_once(" (each"))
        .map(|(list, _)| list.split(", ").map(str::to_owned).collect())
        .unwrap_or_else(|| panic!("no attack list in {message:?}"));
    // `noop` and `sleep` are helpers, not attacks.
    let attacks: Vec<String> = attacks
        .into_iter()
        .filter(|a| a != "noop" && a != "sleep")
        .collect();
    assert!(attacks.len() >= 18, "too few attacks: {attacks:?}");

    let mut failures = Vec::new();
    for attack in &attacks {
        let r = d.exec_timeout(attack, 5000).await;
        let err = r.error.clone();
        let ok = r.status == Status::Error
            && err
                .as_ref()
                .is_some_and(|e| e.kind.as_str() == "sandbox_violation");
        if !ok {
            failures.push(format!(
                "{attack}: status {:?}, result {}, error {:?}",
                r.status, r.result, err
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "attempts not stopped by the sandbox:\n{}",
        failures.join("\n")
    );
}

/// Landlock on its own, without seccomp behind it (the probe's test-only
/// `--probe-skip-seccomp`): files, TCP and signals to the parent are still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landlock_alone_refuses_files_network_and_signals() {
    use airlock_proto::{
        Language, Limits, Outcome, StartExecution, SupervisorMessage, WorkerMessage,
    };
    use airlock_supervisor::workers::pool::start_worker;
    use airlock_supervisor::workers::process::{Spawner, StartMode, WorkerCeiling};

    let spawner = Spawner::start(binaries::escape_probe_worker(), StartMode::Exec).unwrap();
    let ceiling = WorkerCeiling {
        memory_ceiling_bytes: 1 << 30,
        cpu_seconds: 10,
    };
    for (attack, errno) in [
        ("openat-etc-passwd", "EACCES"),
        ("open-etc-passwd", "EACCES"),
        ("connect-localhost", "EACCES"),
        ("execve", "EACCES"),
        ("kill-parent", "EPERM"),
    ] {
        let mut w = start_worker(
            &spawner,
            ceiling,
            false,
            vec!["--probe-skip-seccomp".into()],
        )
        .await
        .unwrap();
        let start = SupervisorMessage::Start(StartExecution {
            execution_id: "landlock".into(),
            language: Language::JavaScript,
            code: format!("landlock-only:{attack}"),
            limits: Limits {
                timeout_ms: 5000,
                memory_bytes: 64 << 20,
                stack_bytes: 1 << 20,
                max_tool_calls: 0,
                max_output_bytes: 1024,
            },
            determinism: airlock_proto::Determinism {
                clock_ms: 0,
                seed: [0; 32],
            },
            report_idle: false,
        });
        w.channel.send(&start).await.unwrap();
        let msg = w.channel.recv().await.unwrap();
        let WorkerMessage::Done {
            outcome: Outcome::Error(e),
            ..
        } = msg
        else {
            panic!("{attack}: not refused: {msg:?}");
        };
        assert_eq!(
            e.kind,
            airlock_proto::ErrorKind::SandboxViolation,
            "{attack}: {e:?}"
        );
        assert!(e.message.contains(errno), "{attack}: {}", e.message);
        // The worker exits once we hang up.
        drop(w.channel);
        w.process.wait().await.unwrap();
    }
}
