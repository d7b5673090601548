//! A corpus of mistakes models make in code mode, run against real catalogues: the npm
//! `server-memory` and `server-everything`, PyPI's `mcp-server-time` and `mcp-server-git`, and
//! GitHub's REST document (`@octokit/openapi`, nothing sent: its base URL is a closed port).
//!
//! Each case is a program with one mistake of a kind models make — a tool name guessed from
//! the task, an argument named or typed after another API, the old nested OpenAPI body, a
//! result's shape guessed wrong, a missing `await`, an array of Promises, JSON text used as an
//! object, `require` or `fetch` or a timer — and the words that name the fix (the real
//! tool, the real argument, the keys the value has, `await`). The fix was written down from
//! the mistake, before looking at what the daemon answers. A case passes when every one of its
//! words is in what the agent reads about the failure: the error's `message`, `hint` and
//! `explanation`, and the response's `warnings` — not the excerpt, which quotes the program
//! back. At least 95% must pass; the test prints every miss. Every explanation is at most 300
//! characters, and a program that uses a host API the sandbox lacks (`require`, `fetch`, a
//! timer, `process`) is refused before its first tool call is sent.
//!
//! Run: `cargo test -p airlock-tests --test e2e mistakes_corpus -- --nocapture`.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::mcp_peers::{CorpusDaemon, agent_reads};

/// (what the model did wrong, the program, the words that name the fix).
const CASES: &[(&str, &str, &[&str])] = &[
    // Tool names guessed from the task.
    (
        "camelCase name",
        "await tools.memory.createEntities({ entities: [] })",
        &["create_entities"],
    ),
    ("typo", "await tools.memory.read_graf({})", &["read_graph"]),
    (
        "get for read",
        "await tools.memory.get_graph({})",
        &["read_graph"],
    ),
    (
        "verb only",
        "await tools.memory.search({ query: 'x' })",
        &["search_nodes"],
    ),
    (
        "add for create",
        "await tools.memory.add_entities({ entities: [] })",
        &["create_entities"],
    ),
    (
        "singular",
        "await tools.memory.delete_entity({ entityNames: ['a'] })",
        &["delete_entities"],
    ),
    (
        "short time name",
        "await tools.time.get_time({ timezone: 'UTC' })",
        &["get_current_time"],
    ),
    (
        "now",
        "await tools.time.current_time({ timezone: 'UTC' })",
        &["get_current_time"],
    ),
    (
        "convert",
        "await tools.time.convert({ source_timezone: 'UTC', time: '10:00', target_timezone: 'Asia/Tokyo' })",
        &["convert_time"],
    ),
    (
        "git name without its prefix",
        "await tools.git.status({ repo_path: REPO })",
        &["git_status"],
    ),
    (
        "git log without its prefix",
        "await tools.git.log({ repo_path: REPO })",
        &["git_log"],
    ),
    (
        "git commit without its prefix",
        "await tools.git.commit({ repo_path: REPO, message: 'm' })",
        &["git_commit"],
    ),
    (
        "add for sum (a server whose list may change)",
        "await tools.everything.add({ a: 1, b: 2 })",
        &["get_sum"],
    ),
    (
        "sum",
        "await tools.everything.sum({ a: 1, b: 2 })",
        &["get_sum"],
    ),
    (
        "hyphenated name as the server spells it",
        "await tools.everything['get-sum']({ a: 1, b: 2 })",
        &["get_sum"],
    ),
    (
        "GitHub: verb first",
        "await tools.github.create_issue({ owner: 'o', repo: 'r', title: 't' })",
        &["issues_create"],
    ),
    (
        "GitHub: get_repo",
        "await tools.github.get_repo({ owner: 'o', repo: 'r' })",
        &["repos_get"],
    ),
    (
        "GitHub: pull requests spelt out",
        "await tools.github.list_pull_requests({ owner: 'o', repo: 'r' })",
        &["pulls_list"],
    ),
    (
        "GitHub: comment on an issue",
        "await tools.github.create_issue_comment({ owner: 'o', repo: 'r', issue_number: 1, body: 'hi' })",
        &["issues_create_comment"],
    ),
    (
        "namespace abbreviated",
        "await tools.gh.repos_get({ owner: 'o', repo: 'r' })",
        &["tools.github"],
    ),
    (
        "namespace capitalised",
        "await tools.Memory.read_graph({})",
        &["tools.memory"],
    ),
    // Arguments named or typed after another API.
    (
        "short argument name",
        "await tools.memory.search_nodes({ q: 'alice' })",
        &["query"],
    ),
    (
        "tz for timezone",
        "await tools.time.get_current_time({ tz: 'UTC' })",
        &["timezone"],
    ),
    (
        "required argument left out",
        "await tools.time.get_current_time({})",
        &["timezone"],
    ),
    (
        "a number where a string is expected",
        "await tools.time.convert_time({ source_timezone: 'UTC', time: 1430, target_timezone: 'Asia/Tokyo' })",
        &["time", "string"],
    ),
    (
        "text for message",
        "await tools.everything.echo({ text: 'hi' })",
        &["message"],
    ),
    (
        "path for repo_path",
        "await tools.git.git_status({ path: REPO })",
        &["repo_path"],
    ),
    (
        "GitHub: the old nested body",
        "await tools.github.issues_create_comment({ owner: 'o', repo: 'r', issue_number: 1, body: { body: 'text' } })",
        &["body", "string"],
    ),
    (
        "GitHub: required title left out",
        "await tools.github.issues_create({ owner: 'o', repo: 'r', body: 'x' })",
        &["title"],
    ),
    (
        "GitHub: owner/repo as one string",
        "await tools.github.repos_get({ repository: 'octo/hello' })",
        &["owner", "repo"],
    ),
    (
        "GitHub: status for state",
        "await tools.github.issues_update({ owner: 'o', repo: 'r', issue_number: 5, status: 'closed' })",
        &["state"],
    ),
    (
        "GitHub: an enum value guessed",
        "await tools.github.pulls_list({ owner: 'o', repo: 'r', state: 'opened' })",
        &["open"],
    ),
    (
        "GitHub: a page size as a string",
        "await tools.github.issues_list_for_repo({ owner: 'o', repo: 'r', per_page: '10' })",
        &["per_page", "integer"],
    ),
    (
        "arguments not literal, named wrongly",
        "const args: any = { name: 'x' }; await tools.memory.search_nodes(args)",
        &["query"],
    ),
    // A result's shape guessed wrong.
    (
        "a key the result does not have",
        "const g = await tools.memory.read_graph({}); g.nodes.map((n: any) => n.name)",
        &["entities", "relations"],
    ),
    (
        "a string method on an object",
        "const t = await tools.time.get_current_time({ timezone: 'UTC' }); t.split('T')",
        &["datetime", "not a string"],
    ),
    (
        "a missing await",
        "const r = tools.memory.read_graph({}); r.entities.length",
        &["await"],
    ),
    (
        "the first element of an empty list",
        "const r = await tools.memory.search_nodes({ query: 'nobody' }); r.entities[0].name",
        &["empty"],
    ),
    (
        "a text result read as an object",
        "const s = await tools.everything.get_sum({ a: 1, b: 2 }); s.result.toFixed(1)",
        &["string"],
    ),
    (
        "a field name guessed",
        "const w = await tools.everything.get_structured_content({ location: 'Chicago' }); w.temp.toFixed(1)",
        &["temperature"],
    ),
    (
        "destructuring a key the result does not have",
        "const { nodes } = await tools.memory.read_graph({}); nodes.length",
        &["entities"],
    ),
    (
        "an array method on a text result",
        "const log = await tools.git.git_log({ repo_path: REPO, max_count: 1 }); log.map((l: any) => l)",
        &["string"],
    ),
    (
        "an array method on an object that holds the array",
        "const g = await tools.memory.read_graph({}); g.filter((e: any) => e.entityType === 'person')",
        &["not an array", "g.entities"],
    ),
    (
        "a method arrays do not have",
        "const r = await tools.memory.search_nodes({ query: 'nobody' }); const es = r.entities; es.get(0)",
        &["array", ".find"],
    ),
    (
        "data called as a function",
        "const g = await tools.memory.read_graph({}); g.entities().length",
        &["g.entities", "array"],
    ),
    (
        "an array method on a text result",
        "const b = await tools.git.git_branch({ repo_path: REPO, branch_type: 'local' }); b.filter((l: any) => l)",
        &["string", "not an array"],
    ),
    (
        "a time result used as a Date",
        "const t = await tools.time.get_current_time({ timezone: 'UTC' }); t.getHours()",
        &["datetime"],
    ),
    // A property of a missing property.
    (
        "the result wrapped in data",
        "const r = await tools.memory.read_graph({}); r.data.entities.length",
        &["r.data is undefined", "entities"],
    ),
    (
        "the result wrapped in result",
        "const t = await tools.time.get_current_time({ timezone: 'UTC' }); t.result.datetime",
        &["t.result", "datetime"],
    ),
    (
        "structured content read as MCP content blocks",
        "const w = await tools.everything.get_structured_content({ location: 'Chicago' }); w.content[0].text",
        &["temperature"],
    ),
    (
        "a conversion's answer read from a key it does not have",
        "const c = await tools.time.convert_time({ source_timezone: 'UTC', time: '10:00', target_timezone: 'Asia/Tokyo' }); c.result.time",
        &["target"],
    ),
    // An array of Promises.
    (
        "map with an async callback, no Promise.all",
        "const zones = ['UTC', 'Asia/Tokyo']; const times = zones.map(async (z) => await tools.time.get_current_time({ timezone: z })); times",
        &["Promise", "Promise.all"],
    ),
    (
        "await on the array instead of its Promises",
        "const names = ['a', 'b']; const found = await names.map((n) => tools.memory.search_nodes({ query: n })); ({ found })",
        &["Promise", "Promise.all"],
    ),
    // A value used as the wrong kind.
    (
        "JSON text read as an object",
        "await tools.memory.create_entities({ entities: [{ name: 'cfg', entityType: 'config', observations: ['{\"port\":8080}'] }] }); const r = await tools.memory.open_nodes({ names: ['cfg'] }); r.entities[0].observations[0].port.toFixed(0)",
        &["JSON.parse"],
    ),
    (
        "a number used as a string",
        "const r = await tools.memory.read_graph({}); r.entities.length.padStart(3)",
        &["number", "String("],
    ),
    // Host APIs the sandbox does not have, refused before the first call is made.
    (
        "require a module",
        "await tools.time.get_current_time({ timezone: 'UTC' }); const fs = require('fs'); fs.readFileSync('/tmp/x')",
        &["require", "tools."],
    ),
    (
        "fetch an API",
        "await tools.time.get_current_time({ timezone: 'UTC' }); const r = await fetch('https://api.github.com/repos/o/r'); await r.json()",
        &["fetch", "tools."],
    ),
    (
        "sleep with setTimeout",
        "await tools.memory.read_graph({}); await new Promise((r) => setTimeout(r, 1000)); await tools.memory.read_graph({})",
        &["setTimeout", "timers"],
    ),
    (
        "poll with setInterval",
        "setInterval(() => tools.git.git_status({ repo_path: REPO }), 1000)",
        &["setInterval", "timers"],
    ),
    (
        "a token from the environment",
        "const token = process.env.GITHUB_TOKEN; await tools.github.repos_get({ owner: 'o', repo: 'r', headers: { authorization: token } })",
        &["process", "credentials"],
    ),
    (
        "a file read with fs",
        "const text = fs.readFileSync(REPO + '/a.txt', 'utf8'); await tools.memory.add_observations({ observations: [{ entityName: 'a', contents: [text] }] })",
        &["fs", "tool"],
    ),
    (
        "a library loaded with import()",
        "const { z } = await import('zod'); await tools.time.get_current_time({ timezone: 'UTC' })",
        &["import", "tools."],
    ),
    (
        "an import statement",
        "import { readFileSync } from 'fs'; await tools.time.get_current_time({ timezone: 'UTC' })",
        &["import", "tools."],
    ),
    // Limits: the hint names a key that exists.
    (
        "everything kept in memory",
        "const all: number[][] = []; while (true) all.push(new Array(1e6).fill(1))",
        &["smaller pieces", "limits.memory"],
    ),
    (
        "recursion without end",
        "function depth(n: number): number { return depth(n + 1) + 1 } depth(0)",
        &["loop", "limits.stack"],
    ),
];

/// Mistakes the daemon absorbs since coercion (2026-11-26): the program runs with the value
/// coerced, the trace lists the coercion, and a warning names the fix (what to pass instead).
const ABSORBED: &[(&str, &str, &[&str])] = &[
    (
        "a string where a number is expected",
        "await tools.everything.get_sum({ a: '2', b: 3 })",
        &["number", "pass that instead"],
    ),
    (
        "a count as a string",
        "await tools.git.git_log({ repo_path: REPO, max_count: '5' })",
        &["max_count", "integer", "pass that instead"],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_fix() {
    let test = "errors_name_the_fix";
    let Some(corpus) = CorpusDaemon::start(test).await else {
        return;
    };
    let (d, repo) = (&corpus.daemon, corpus.repo.clone());

    let mut named = 0;
    let mut misses = Vec::new();
    for (what, program, fix) in CASES {
        let r = d.exec(&program.replace("REPO", &repo)).await;
        let error = serde_json::to_value(&r.error).unwrap();
        let read = agent_reads(&r);
        assert!(
            r.error.is_some(),
            "{what}: the mistake went unnoticed: {r:?}"
        );
        if let Some(explanation) = error.get("explanation").and_then(|v| v.as_str()) {
            let n = explanation.chars().count();
            assert!(
                n <= 300,
                "{what}: a {n}-character explanation: {explanation}"
            );
        }
        if what.starts_with("require")
            || what.starts_with("fetch")
            || what.starts_with("sleep")
            || what.starts_with("a token")
            || what.starts_with("a library")
        {
            assert!(r.tool_calls.is_empty(), "{what}: a call was sent: {r:?}");
        }
        if fix.iter().all(|word| read.contains(word)) {
            named += 1;
        } else {
            misses.push(format!("  MISSED {what}: wanted {fix:?} in:\n{read}"));
        }
    }
    for (what, program, fix) in ABSORBED {
        let r = d.exec(&program.replace("REPO", &repo)).await;
        assert!(r.error.is_none(), "{what}: not absorbed: {r:?}");
        assert!(
            r.tool_calls.iter().any(|c| !c.coercions.is_empty()),
            "{what}: no coercion in the trace: {r:?}"
        );
        let warned = r.warnings.join("\n");
        assert!(
            fix.iter().all(|word| warned.contains(word)),
            "{what}: wanted {fix:?} in the warnings: {warned}"
        );
    }
    let share = 100.0 * f64::from(named) / CASES.len() as f64;
    println!(
        "mistakes corpus: {named} of {} errors name the fix ({share:.1}%)",
        CASES.len()
    );
    for miss in &misses {
        println!("{miss}");
    }
    assert!(CASES.len() >= 60);
    assert!(share >= 95.0, "{share:.1}% of the errors name the fix");
    corpus.daemon.stop().await;
}
