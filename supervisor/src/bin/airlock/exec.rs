//! `airlock exec`, `status`, `logs`, `cancel` and `resume`: running executions and following
//! them, what is printed of their response, and their exit codes.

use crate::args::ExecArgs;
use crate::daemon::{answer_json, connect, path_segment};
use crate::{EXIT_PROGRAM_FAILED, EXIT_TIMEOUT, EXIT_WAITING};
use airlock_supervisor::agent_api::{
    CallOutcome, ConsoleStream, ExecutionEvent, ExecutionRequest, ExecutionResponse, NEW_SESSION,
    RequestLanguage, Status,
};
use airlock_supervisor::client::{Client, ClientError};
use anyhow::{Context, Result, bail};
use bytes::Bytes;
use std::fmt::Write as _;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock exec`: runs a program and streams its console output (or prints the whole
/// response with `--json`, or only its id with `--detach`).
pub async fn exec(socket: Option<PathBuf>, args: ExecArgs) -> Result<ExitCode> {
    let (code, by_extension) = read_program(args.code.clone(), args.file.clone())?;
    let request = request(&args, code, by_extension);
    let mut client = connect(socket).await?;
    if args.detach {
        let body = serde_json::to_vec(&request)?;
        let (status, body) = client.post("/v1/executions", Bytes::from(body)).await?;
        let accepted = answer_json(status, &body)?;
        println!("{}", accepted["id"].as_str().unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let response = if args.json {
        let response = client.execute(&request).await?;
        println!("{}", serde_json::to_string_pretty(&response)?);
        response
    } else {
        let response = stream(&mut client, &request).await?;
        report(&response);
        response
    };
    Ok(exit_code(&response))
}

/// The program's text: `-e CODE`, the file, or stdin; and, for a file, the language its
/// extension says (TypeScript for any extension but JavaScript's and Python's).
fn read_program(
    code: Option<String>,
    file: Option<PathBuf>,
) -> Result<(String, Option<RequestLanguage>)> {
    Ok(match (code, file) {
        (Some(code), _) => (code, None),
        (None, Some(path)) => {
            let code = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let language = match path.extension().and_then(|e| e.to_str()) {
                Some("js" | "mjs" | "cjs") => RequestLanguage::Javascript,
                Some("py") => RequestLanguage::Python,
                _ => RequestLanguage::Typescript,
            };
            (code, Some(language))
        }
        (None, None) => {
            if std::io::stdin().is_terminal() {
                eprintln!("airlock: reading the program from stdin (end with Ctrl-D)");
            }
            let mut code = String::new();
            std::io::stdin()
                .read_to_string(&mut code)
                .context("cannot read stdin")?;
            (code, None)
        }
    })
}

/// The request `airlock exec` makes of `code`.
fn request(
    args: &ExecArgs,
    code: String,
    by_extension: Option<RequestLanguage>,
) -> ExecutionRequest {
    let language = match (args.language, args.javascript) {
        (Some(language), _) => language,
        (None, true) => RequestLanguage::Javascript,
        (None, false) => by_extension.unwrap_or_default(),
    };
    ExecutionRequest {
        code,
        language,
        timeout_ms: args.timeout_ms,
        session: if args.new_session {
            Some(NEW_SESSION.to_owned())
        } else {
            args.session.clone()
        },
        replay: args.replay,
        wait: args.detach.then_some(false),
        ..Default::default()
    }
}

/// Runs `request`, printing its console output as it comes; its response.
async fn stream(client: &mut Client, request: &ExecutionRequest) -> Result<ExecutionResponse> {
    // The execution's id and session, from its first event: what to say when the
    // connection is cut before its result.
    let mut started: Option<(String, Option<String>)> = None;
    let streamed = client
        .execute_streaming(request, |event| {
            if let ExecutionEvent::Started { id, session } = event {
                started = Some((id.clone(), session.clone()));
            }
            print_console(event);
        })
        .await;
    match (streamed, started) {
        (Ok(response), _) => Ok(response),
        (Err(e), Some((id, session))) => {
            bail!("{}", cut_off(&e, &id, session.as_deref()))
        }
        (Err(e), None) => Err(e.into()),
    }
}

/// `airlock status ID`: the execution as the daemon knows it, as JSON.
pub async fn status(socket: Option<PathBuf>, id: &str) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let (status, body) = client
        .get(&format!("/v1/executions/{}", path_segment(id)))
        .await?;
    let value = answer_json(status, &body)?;
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(status_exit_code(value))
}

/// The exit status of `airlock status` for the daemon's answer.
fn status_exit_code(value: serde_json::Value) -> ExitCode {
    match serde_json::from_value::<ExecutionResponse>(value.clone()) {
        Ok(response) => exit_code(&response),
        // Known only by its journal row (interrupted, resumed, expired, …).
        Err(_) => match value["status"].as_str() {
            Some("running" | "waiting") => ExitCode::from(EXIT_WAITING),
            _ => ExitCode::from(EXIT_PROGRAM_FAILED),
        },
    }
}

/// `airlock logs [-f] ID`: a detached execution's output from event `after` on.
pub async fn logs(socket: Option<PathBuf>, id: &str, follow: bool, after: u64) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let response = client
        .events(id, after, follow, |_, event| print_console(event))
        .await?;
    Ok(match response {
        Some(response) => {
            report(&response);
            exit_code(&response)
        }
        None => ExitCode::from(EXIT_WAITING),
    })
}

/// `airlock cancel ID`.
pub async fn cancel(socket: Option<PathBuf>, id: &str) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let (status, body) = client
        .delete(&format!("/v1/executions/{}", path_segment(id)))
        .await?;
    let value = answer_json(status, &body)?;
    println!("{id}: {}", value["status"].as_str().unwrap_or("cancelled"));
    Ok(ExitCode::SUCCESS)
}

/// `airlock resume ID`: finishes an execution a daemon restart interrupted.
pub async fn resume(socket: Option<PathBuf>, id: &str, json: bool) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let response = client.resume(id).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&response)?);
    } else {
        print!("{}", response.stdout);
        eprint!("{}", response.stderr);
        report(&response);
    }
    Ok(exit_code(&response))
}

/// What to tell the user when the stream of execution `id` broke before its result: which
/// execution and session it was, how to see how it ended, and how to run again without
/// repeating what it already did.
fn cut_off(error: &ClientError, id: &str, session: Option<&str>) -> String {
    let mut text = format!(
        "the connection to the daemon was cut before execution {id} ended ({error}); the daemon stops an execution whose client is gone: `airlock status {id}` shows how it ended (`airlock resume {id}` finishes one a daemon restart interrupted)"
    );
    match session {
        Some(session) => text.push_str(&format!(
            "; it ran in session {session}: `airlock exec --session {session} …` runs the program again, answering the calls it made from the journal"
        )),
        None => text.push_str(
            "; it ran in no session, so running it again repeats its tool calls (`--session new` records them next time)",
        ),
    }
    text
}

/// Prints a console event to stdout or stderr as the program wrote it.
fn print_console(event: &ExecutionEvent) {
    if let ExecutionEvent::Console { stream, text, .. } = event {
        match stream {
            ConsoleStream::Stdout => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
            ConsoleStream::Stderr => eprintln!("{text}"),
        }
    }
}

/// The exit status of a finished execution.
fn exit_code(response: &ExecutionResponse) -> ExitCode {
    match response.status {
        Status::Ok => ExitCode::SUCCESS,
        // Cancelled only reaches a client that is gone; counted as a failure anyway.
        Status::Error | Status::Cancelled => ExitCode::from(EXIT_PROGRAM_FAILED),
        Status::Timeout => ExitCode::from(EXIT_TIMEOUT),
        Status::Waiting | Status::Queued | Status::Running => ExitCode::from(EXIT_WAITING),
    }
}

/// Prints the result (stdout) or the error (stderr) after the streamed console output.
fn report(response: &ExecutionResponse) {
    let Report { stdout, stderr } = Report::of(response);
    // Everything for stderr comes first, as each line did when printed one by one: the
    // result (stdout) is only there when no error is.
    eprint!("{stderr}");
    print!("{stdout}");
}

/// The text [`report`] prints of a response, on each stream.
#[derive(Debug, Default, PartialEq)]
struct Report {
    stdout: String,
    stderr: String,
}

impl Report {
    fn of(response: &ExecutionResponse) -> Report {
        let mut report = Report::default();
        let err = &mut report.stderr;
        if let Some(session) = &response.session {
            let _ = writeln!(
                err,
                "airlock: session {session}: {} of {} tool call(s) replayed from its journal",
                response.replayed_calls,
                response.tool_calls.len()
            );
        }
        // Warnings (coercions, a tool a dynamic server may add, redactions) say what to
        // change even when the program worked: printed, not left to `--json`.
        for warning in &response.warnings {
            let _ = writeln!(err, "warning: {warning}");
        }
        if response.stderr.contains("[airlock: console output over") {
            let _ = writeln!(
                err,
                "airlock: some console output was dropped (over the output limit)"
            );
        }
        match &response.error {
            None => {
                if !response.result.is_null() {
                    let _ = writeln!(
                        report.stdout,
                        "{}",
                        serde_json::to_string_pretty(&response.result).unwrap_or_default()
                    );
                }
            }
            Some(_) => report.error(response),
        }
        report
    }

    /// The error of a failed execution, where it happened, and its failed tool calls.
    fn error(&mut self, response: &ExecutionResponse) {
        let Some(err) = &response.error else {
            return;
        };
        let out = &mut self.stderr;
        let name = err
            .name
            .as_deref()
            .map(|n| format!("{n}: "))
            .unwrap_or_default();
        let _ = writeln!(out, "error[{}]: {name}{}", err.kind, err.message);
        if let (Some(line), Some(col)) = (err.line, err.column) {
            let _ = writeln!(out, "  at line {line}, column {col}");
        } else if let Some(line) = err.line {
            let _ = writeln!(out, "  at line {line}");
        }
        if let Some(excerpt) = &err.excerpt {
            out.push_str(excerpt);
        }
        if let Some(stack) = &err.stack {
            for l in stack.lines().filter(|l| !l.trim().is_empty()) {
                let _ = writeln!(out, "  {}", l.trim());
            }
        }
        if let Some(hint) = &err.hint {
            let _ = writeln!(out, "  hint: {hint}");
        }
        for call in response
            .tool_calls
            .iter()
            .filter(|c| c.outcome != CallOutcome::Ok)
        {
            let msg = call
                .error
                .as_ref()
                .map(|e| e.message.as_str())
                .unwrap_or("");
            let _ = writeln!(
                out,
                "  tool call #{} {} {}: {msg}",
                call.id, call.tool, call.outcome
            );
            if let Some(hint) = call.error.as_ref().and_then(|e| e.hint.as_deref()) {
                let _ = writeln!(out, "    hint: {hint}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_supervisor::agent_api::ReplayMode;
    use clap::Parser;

    /// A response as the daemon sends it, with `extra` keys over a successful one's.
    fn response(extra: serde_json::Value) -> ExecutionResponse {
        let mut v = serde_json::json!({
            "id": "e1",
            "status": "ok",
            "result": null,
            "stdout": "",
            "stderr": "",
            "tool_calls": [],
            "stats": {
                "queue_ms": 0.0, "spawn_ms": 0.0, "run_ms": 1.0, "total_ms": 1.0,
                "worker_from_pool": true
            },
            "peer": { "uid": 1000, "gid": 1000, "pid": null },
            "principal": "agents"
        });
        for (key, value) in extra.as_object().unwrap() {
            v[key] = value.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    fn exec_args(args: &[&str]) -> ExecArgs {
        let parsed = crate::args::Args::try_parse_from(
            ["airlock", "exec"].iter().chain(args.iter()).copied(),
        )
        .unwrap();
        match parsed.command {
            crate::args::Command::Exec(exec) => exec,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn exit_codes_of_each_status() {
        let code = |status: &str| exit_code(&response(serde_json::json!({ "status": status })));
        assert_eq!(code("ok"), ExitCode::SUCCESS);
        assert_eq!(code("error"), ExitCode::from(1));
        assert_eq!(code("cancelled"), ExitCode::from(1));
        assert_eq!(code("timeout"), ExitCode::from(2));
        assert_eq!(code("waiting"), ExitCode::from(4));
        assert_eq!(code("queued"), ExitCode::from(4));
        assert_eq!(code("running"), ExitCode::from(4));
    }

    #[test]
    fn exit_codes_of_status_answers() {
        let whole = serde_json::to_value(response(serde_json::json!({ "status": "timeout" })));
        assert_eq!(status_exit_code(whole.unwrap()), ExitCode::from(2));
        // Known only by its journal row.
        let row = |status: &str| serde_json::json!({ "id": "e1", "status": status });
        assert_eq!(status_exit_code(row("running")), ExitCode::from(4));
        assert_eq!(status_exit_code(row("waiting")), ExitCode::from(4));
        assert_eq!(status_exit_code(row("interrupted")), ExitCode::from(1));
        assert_eq!(status_exit_code(row("expired")), ExitCode::from(1));
        assert_eq!(status_exit_code(serde_json::json!({})), ExitCode::from(1));
    }

    #[test]
    fn the_cut_off_message_names_the_session_to_run_again_in() {
        let error = ClientError::Decode("eof".into());
        assert_eq!(
            cut_off(&error, "e7", Some("s3")),
            "the connection to the daemon was cut before execution e7 ended (unexpected answer from airlockd: eof); the daemon stops an execution whose client is gone: `airlock status e7` shows how it ended (`airlock resume e7` finishes one a daemon restart interrupted); it ran in session s3: `airlock exec --session s3 …` runs the program again, answering the calls it made from the journal"
        );
        assert_eq!(
            cut_off(&error, "e7", None),
            "the connection to the daemon was cut before execution e7 ended (unexpected answer from airlockd: eof); the daemon stops an execution whose client is gone: `airlock status e7` shows how it ended (`airlock resume e7` finishes one a daemon restart interrupted); it ran in no session, so running it again repeats its tool calls (`--session new` records them next time)"
        );
    }

    #[test]
    fn the_report_of_a_result() {
        let report = Report::of(&response(serde_json::json!({ "result": { "n": 1 } })));
        assert_eq!(report.stdout, "{\n  \"n\": 1\n}\n");
        assert_eq!(report.stderr, "");
        // A null result prints nothing.
        assert_eq!(
            Report::of(&response(serde_json::json!({}))),
            Report::default()
        );
    }

    #[test]
    fn the_report_of_a_session_and_of_dropped_output() {
        let report = Report::of(&response(serde_json::json!({
            "session": "s1",
            "replayed_calls": 1,
            "stderr": "x\n[airlock: console output over 1 MiB, dropped]\n",
            "result": 2,
            "tool_calls": [{
                "id": 1, "tool": "github.list", "args": {}, "outcome": "ok",
                "duration_ms": 1.0, "replayed": true
            }, {
                "id": 2, "tool": "github.get", "args": {}, "outcome": "ok", "duration_ms": 1.0
            }]
        })));
        assert_eq!(report.stdout, "2\n");
        assert_eq!(
            report.stderr,
            "airlock: session s1: 1 of 2 tool call(s) replayed from its journal\n\
             airlock: some console output was dropped (over the output limit)\n"
        );
    }

    #[test]
    fn the_report_prints_the_warnings_of_a_program_that_worked() {
        let report = Report::of(&response(serde_json::json!({
            "result": 3,
            "warnings": [
                "tools.t.sum: argument `a` was coerced from \"2\" to 2 — pass that instead",
                "a secret was redacted from a result"
            ]
        })));
        assert_eq!(report.stdout, "3\n");
        assert_eq!(
            report.stderr,
            "warning: tools.t.sum: argument `a` was coerced from \"2\" to 2 — pass that instead\n\
             warning: a secret was redacted from a result\n"
        );
    }

    #[test]
    fn the_report_of_an_error() {
        let report = Report::of(&response(serde_json::json!({
            "status": "error",
            "result": 5,
            "error": {
                "kind": "runtime",
                "name": "TypeError",
                "message": "x is undefined",
                "line": 3,
                "column": 7,
                "excerpt": "  3 > x.y\n        ^\n",
                "stack": "    at main (line 3)\n\n    at <eval>\n",
                "hint": "check x"
            },
            "tool_calls": [{
                "id": 1, "tool": "github.list", "args": {}, "outcome": "ok", "duration_ms": 1.0
            }, {
                "id": 2, "tool": "github.get", "args": {}, "outcome": "error", "duration_ms": 1.0,
                "error": { "code": "denied", "message": "not granted", "hint": "ask an admin" }
            }, {
                "id": 3, "tool": "fs.read", "args": {}, "outcome": "pending", "duration_ms": 0.0
            }]
        })));
        // The result is not printed when there is an error.
        assert_eq!(report.stdout, "");
        assert_eq!(
            report.stderr,
            "error[runtime]: TypeError: x is undefined\n\
             \x20 at line 3, column 7\n\
             \x20 3 > x.y\n\
             \x20       ^\n\
             \x20 at main (line 3)\n\
             \x20 at <eval>\n\
             \x20 hint: check x\n\
             \x20 tool call #2 github.get error: not granted\n\
             \x20   hint: ask an admin\n\
             \x20 tool call #3 fs.read pending: \n"
        );
        let report = Report::of(&response(serde_json::json!({
            "status": "error",
            "error": { "kind": "syntax", "message": "unexpected token", "line": 2 }
        })));
        assert_eq!(
            report.stderr,
            "error[syntax]: unexpected token\n  at line 2\n"
        );
    }

    #[test]
    fn programs_from_the_command_line_and_from_files() {
        assert_eq!(
            read_program(Some("return 1".into()), None).unwrap(),
            ("return 1".to_owned(), None)
        );
        let dir = tempfile::tempdir().unwrap();
        let (ts, js, py) = (
            RequestLanguage::Typescript,
            RequestLanguage::Javascript,
            RequestLanguage::Python,
        );
        for (name, language) in [
            ("a.ts", ts),
            ("a.js", js),
            ("a.mjs", js),
            ("a.cjs", js),
            ("a.py", py),
            ("a", ts),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, "1 + 1").unwrap();
            assert_eq!(
                read_program(None, Some(path)).unwrap(),
                ("1 + 1".to_owned(), Some(language)),
                "{name}"
            );
        }
        let missing = dir.path().join("missing.ts");
        let e = read_program(None, Some(missing.clone())).unwrap_err();
        assert_eq!(e.to_string(), format!("cannot read {}", missing.display()));
    }

    #[test]
    fn the_request_of_exec() {
        let r = request(
            &exec_args(&["job.ts"]),
            "code".into(),
            Some(RequestLanguage::Typescript),
        );
        assert_eq!(r.code, "code");
        assert_eq!(r.language, RequestLanguage::Typescript);
        assert_eq!(
            (r.timeout_ms, r.session, r.replay, r.wait),
            (None, None, None, None)
        );
        let r = request(
            &exec_args(&["job.js"]),
            String::new(),
            Some(RequestLanguage::Javascript),
        );
        assert_eq!(r.language, RequestLanguage::Javascript);
        let r = request(
            &exec_args(&["job.py"]),
            String::new(),
            Some(RequestLanguage::Python),
        );
        assert_eq!(r.language, RequestLanguage::Python);
        let r = request(
            &exec_args(&["--language", "python", "job.txt"]),
            String::new(),
            Some(RequestLanguage::Typescript),
        );
        assert_eq!(r.language, RequestLanguage::Python);
        let r = request(
            &exec_args(&[
                "--javascript",
                "--timeout-ms",
                "9",
                "--new-session",
                "--replay",
                "none",
                "--detach",
            ]),
            String::new(),
            None,
        );
        assert_eq!(r.language, RequestLanguage::Javascript);
        assert_eq!(r.timeout_ms, Some(9));
        assert_eq!(r.session.as_deref(), Some(NEW_SESSION));
        assert_eq!(r.replay, Some(ReplayMode::None));
        assert_eq!(r.wait, Some(false));
        let r = request(&exec_args(&["--session", "s2"]), String::new(), None);
        assert_eq!(r.session.as_deref(), Some("s2"));
    }
}
