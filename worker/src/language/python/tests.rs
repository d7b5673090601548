//! Interpreter tests: a real interpreter per test and a fake supervisor on the other end of a
//! socket pair. No lockdown is applied here (that is `tests/lockdown.rs`'s job).

use super::*;
use airlock_proto::frame::blocking::{IoFrameError, read_message, write_message};
use airlock_proto::{ConsoleLevel, Determinism, MAX_FRAME_LEN, ToolFailure};
use std::os::unix::net::UnixStream;

pub(super) const TEST_DETERMINISM: Determinism = Determinism {
    clock_ms: 1_790_000_000_000,
    seed: [7; 32],
};

pub(super) fn limits() -> Limits {
    Limits {
        timeout_ms: 5_000,
        // Large: the allocator's count is the whole test process's, other tests included.
        memory_bytes: 1 << 30,
        stack_bytes: 1024 * 1024,
        max_tool_calls: 100,
        max_output_bytes: 1024 * 1024,
    }
}

#[derive(Debug)]
pub(super) struct Run {
    pub(super) outcome: Outcome,
    pub(super) messages: Vec<WorkerMessage>,
    references: Option<ToolReferences>,
}

impl Run {
    pub(super) fn value(&self) -> &str {
        match &self.outcome {
            Outcome::Ok { value_json } => value_json,
            Outcome::Error(e) => panic!(
                "expected a value, got {e:#?}\nmessages: {:?}",
                self.messages
            ),
        }
    }

    pub(super) fn error(&self) -> &ExecError {
        match &self.outcome {
            Outcome::Error(e) => e,
            Outcome::Ok { value_json } => panic!("expected an error, got {value_json}"),
        }
    }

    fn console(&self) -> Vec<String> {
        self.messages
            .iter()
            .filter_map(|m| match m {
                WorkerMessage::Console { level, text } => {
                    assert_eq!(*level, ConsoleLevel::Log);
                    Some(text.clone())
                }
                _ => None,
            })
            .collect()
    }

    fn tool_calls(&self) -> Vec<(u32, String, String)> {
        self.messages
            .iter()
            .filter_map(|m| match m {
                WorkerMessage::ToolCall {
                    id,
                    tool,
                    args_json,
                    ..
                } => Some((*id, tool.clone(), args_json.clone())),
                _ => None,
            })
            .collect()
    }
}

fn run(code: &str) -> Run {
    run_with(code, limits(), |_| Vec::new())
}

pub(super) fn run_with(
    code: &str,
    limits: Limits,
    respond: impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static,
) -> Run {
    run_judged(code, limits, SupervisorMessage::Proceed, respond)
}

fn run_judged(
    code: &str,
    limits: Limits,
    verdict: SupervisorMessage,
    mut respond: impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static,
) -> Run {
    let (worker_end, mut supervisor_end) = UnixStream::pair().expect("socketpair");
    supervisor_end
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let supervisor = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut references = None;
        loop {
            match read_message::<WorkerMessage>(&mut supervisor_end, MAX_FRAME_LEN) {
                Ok(WorkerMessage::ToolReferences(refs)) => {
                    references = Some(refs);
                    if write_message(&mut supervisor_end, &verdict).is_err() {
                        return (seen, references);
                    }
                }
                Ok(msg) => {
                    seen.push(msg);
                    for reply in respond(&seen) {
                        if write_message(&mut supervisor_end, &reply).is_err() {
                            return (seen, references);
                        }
                    }
                }
                Err(IoFrameError::Closed) => return (seen, references),
                Err(IoFrameError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return (seen, references);
                }
                Err(e) => panic!("supervisor side: {e}"),
            }
        }
    });
    let start = StartExecution {
        execution_id: "test".to_owned(),
        language: Language::Python,
        code: code.to_owned(),
        limits,
        determinism: TEST_DETERMINISM,
        report_idle: false,
    };
    // The worker runs programs on its 8 MiB main thread; give the interpreter the same.
    let worker = std::thread::Builder::new()
        .stack_size(8 * 1024 * 1024)
        .spawn(move || {
            let interpreter = Interpreter::start().expect("start");
            let mut ipc = Ipc::from_stream(worker_end);
            interpreter.run(start, &mut ipc)
        })
        .expect("spawn");
    let (outcome, _stats) = worker.join().expect("interpreter thread panicked");
    let (messages, references) = supervisor.join().expect("supervisor thread panicked");
    Run {
        outcome,
        messages,
        references,
    }
}

/// Answers every tool call with `answer(tool, args_json)`, as it arrives.
pub(super) fn answering(
    mut answer: impl FnMut(&str, &str) -> Result<String, ToolFailure> + Send + 'static,
) -> impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static {
    move |seen| match seen.last() {
        Some(WorkerMessage::ToolCall {
            id,
            tool,
            args_json,
            ..
        }) => vec![SupervisorMessage::ToolResult {
            id: *id,
            result: answer(tool, args_json),
            clock_ms: TEST_DETERMINISM.clock_ms + 1000 * u64::from(*id),
        }],
        _ => Vec::new(),
    }
}

#[test]
fn the_last_expression_is_the_result() {
    assert_eq!(run("1 + 1").value(), "2");
    assert_eq!(
        run("x = {'a': [1, 2.5, 'x', None, True]}\nx").value(),
        r#"{"a":[1,2.5,"x",null,true]}"#
    );
    assert_eq!(run("x = 1").value(), "null");
}

#[test]
fn print_is_the_console_one_message_per_line() {
    let r = run("print('hello', 42)\nprint('a', end='')\nprint('b')\nprint('tail', end='')\n7");
    assert_eq!(r.value(), "7");
    assert_eq!(r.console(), ["hello 42", "ab", "tail"]);
}

#[test]
fn tools_are_awaited_with_keyword_arguments() {
    let r = run_with(
        "r = await tools.github.issues_create(owner='o', repo='r', n=3)\nr['number'] + 1",
        limits(),
        answering(|tool, args| {
            assert_eq!(tool, "github.issues_create");
            assert_eq!(args, r#"{"owner":"o","repo":"r","n":3}"#);
            Ok(r#"{"number": 41}"#.to_owned())
        }),
    );
    assert_eq!(r.value(), "42");
    let refs = r
        .references
        .expect("the literal call is sent for the contract check");
    assert_eq!(refs.calls[0].namespace, "github");
    let props: Vec<_> = refs.calls[0]
        .argument
        .as_ref()
        .unwrap()
        .properties
        .iter()
        .map(|p| p.key.clone())
        .collect();
    assert_eq!(props, ["owner", "repo", "n"]);
}

#[test]
fn gather_sends_every_call_before_the_first_answer() {
    // Answers only once all three calls are out: a program that waited for each answer
    // before making the next call would hang here.
    let r = run_with(
        "import asyncio\na, b, c = await asyncio.gather(tools.m.f(i=1), tools.m.f(i=2), tools.m.f(i=3))\n[a, b, c]",
        limits(),
        |seen| {
            let calls: Vec<u32> = seen
                .iter()
                .filter_map(|m| match m {
                    WorkerMessage::ToolCall { id, .. } => Some(*id),
                    _ => None,
                })
                .collect();
            if calls.len() == 3 && matches!(seen.last(), Some(WorkerMessage::ToolCall { .. })) {
                // Answered out of order: each future gets its own answer.
                [3, 1, 2]
                    .into_iter()
                    .map(|id| SupervisorMessage::ToolResult {
                        id,
                        result: Ok(format!("{}", id * 10)),
                        clock_ms: 0,
                    })
                    .collect()
            } else {
                Vec::new()
            }
        },
    );
    assert_eq!(r.value(), "[10,20,30]");
    let ids: Vec<u32> = r.tool_calls().iter().map(|c| c.0).collect();
    assert_eq!(ids, [1, 2, 3], "ids in call order");
}

#[test]
fn tool_errors_are_catchable_and_uncaught_ones_are_tool_errors() {
    let fail = || {
        answering(|_, _| {
            Err(ToolFailure {
                code: "not_found".into(),
                message: "no such repo".into(),
                hint: Some("check the owner".into()),
            })
        })
    };
    let caught = run_with(
        "try:\n    await tools.gh.get(repo='x')\nexcept RuntimeError as e:\n    r = str(e)\nr",
        limits(),
        fail(),
    );
    assert_eq!(
        caught.value(),
        r#""gh.get: no such repo (code: not_found; hint: check the owner)""#
    );
    let uncaught = run_with("x = 1\nawait tools.gh.get(repo='x')", limits(), fail());
    let e = uncaught.error();
    assert_eq!(e.kind, ErrorKind::Runtime);
    assert_eq!(e.name.as_deref(), Some("ToolError"));
    assert_eq!(e.message, "gh.get: no such repo");
    assert_eq!(e.line, Some(2));
    let e = run("try:\n    1 / 0\nexcept ToolError:\n    pass\n1")
        .error()
        .clone();
    assert!(e.message.contains("except RuntimeError"), "{e:?}");
}

#[test]
fn syntax_errors_have_a_position() {
    let r = run("x = 1\ny = (2 +\n");
    let e = r.error();
    assert_eq!(e.kind, ErrorKind::Syntax, "{e:?}");
    assert_eq!(e.line, Some(3), "{e:?}");
    assert!(e.column.is_some());
}

#[test]
fn an_unsupported_import_says_what_there_is() {
    let e = run("import requests\n1").error().clone();
    assert!(
        e.message.contains("asyncio, base64") && e.message.contains("call tools"),
        "{e:?}"
    );
    assert_eq!(e.line, Some(1));
}

#[test]
fn limits_end_programs() {
    let mut short = limits();
    short.timeout_ms = 200;
    let e = run_with("while True:\n    pass", short, |_| Vec::new())
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e:?}");

    let e = run("def f(n):\n    return f(n + 1)\nf(0)").error().clone();
    assert_eq!(e.kind, ErrorKind::StackOverflow, "{e:?}");
    assert_eq!(e.line, Some(2));

    let mut small = limits();
    small.max_output_bytes = 10;
    let e = run_with("for i in range(100):\n    print('xxxxx')", small, |_| {
        Vec::new()
    })
    .error()
    .clone();
    assert_eq!(e.kind, ErrorKind::OutputLimit, "{e:?}");

    let mut few = limits();
    few.max_tool_calls = 2;
    let r = run_with(
        "for i in range(5):\n    await tools.t.c()",
        few,
        answering(|_, _| Ok("1".into())),
    );
    assert_eq!(r.error().kind, ErrorKind::ToolCallLimit, "{:?}", r.error());
    assert_eq!(r.tool_calls().len(), 2);
}

#[test]
fn results_that_are_not_json_say_where() {
    let e = run("{'a': {1, 2}}").error().clone();
    assert_eq!(e.kind, ErrorKind::ResultNotJson);
    assert!(e.message.contains("$.a"), "{e:?}");
}

#[test]
fn the_clock_is_the_supervisors() {
    let r = run_with(
        "from datetime import datetime, timezone\na = datetime.now(timezone.utc).isoformat()\nawait tools.t.c()\nb = datetime.now(timezone.utc).isoformat()\n[a, b]",
        limits(),
        answering(|_, _| Ok("null".into())),
    );
    // 1_790_000_000_000 ms is 2026-09-21T14:13:20Z; the answer moved it one second.
    assert_eq!(
        r.value(),
        r#"["2026-09-21T14:13:20+00:00","2026-09-21T14:13:21+00:00"]"#
    );
}

#[test]
fn hashing_and_iteration_order_are_fixed() {
    let code = "s = {'pear', 'apple', 'fig', 'kiwi'}\nd = {'b': 1, 'a': 2}\n[list(s), list(d), hash('airlock'), hash(('a', 1))]";
    let first = run(code).value().to_owned();
    let second = run(code).value().to_owned();
    assert_eq!(first, second);
    assert!(
        first.starts_with(r#"[["pear","apple","fig","kiwi"],["b","a"],"#),
        "{first}"
    );
}

#[test]
fn files_and_the_environment_are_refused() {
    let e = run("open('/etc/passwd').read()").error().clone();
    assert!(e.message.contains("no file system"), "{e:?}");
    assert_eq!(run("import os\nos.getenv('HOME')").value(), "null");
}

#[test]
fn progress_is_reported() {
    let r = run("progress({'done': 1})\nprogress(0.5)\n1");
    let values: Vec<_> = r
        .messages
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Progress { value_json } => Some(value_json.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(values, [r#"{"done":1}"#, "0.5"]);
}

#[test]
fn a_refused_contract_check_runs_nothing() {
    let r = run_judged(
        "print('side effect')\nawait tools.nope.missing(a=1)",
        limits(),
        SupervisorMessage::Cancel,
        |_| Vec::new(),
    );
    assert_eq!(r.error().kind, ErrorKind::Cancelled);
    assert!(r.messages.is_empty(), "{:?}", r.messages);
}

#[test]
fn builtins_and_module_members_it_lacks_say_what_to_write() {
    for (code, expected) in [
        ("eval('1 + 1')", "cannot run code from text"),
        ("globals()", "a dict of your own"),
        ("input('name?')", "cannot wait for a person"),
        ("exit(0)", "last expression"),
        ("import sys\nsys.exit(1)", "last expression"),
        ("import os\nos.system('id')", "no processes"),
        (
            "import math\nmath.no_such_function(1)",
            "part of the `math` module",
        ),
    ] {
        let r = run(code);
        let e = r.error();
        assert!(e.message.contains(expected), "{code}: {e:?}");
    }
}
