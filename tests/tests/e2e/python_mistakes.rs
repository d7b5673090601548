//! A corpus of mistakes models make in Python programs, run against the same real catalogues
//! as the TypeScript corpus (`mistakes_corpus`): the npm `server-memory` and
//! `server-everything`, PyPI's `mcp-server-time` and `mcp-server-git`, and GitHub's REST
//! document (nothing sent: its base URL is a closed port).
//!
//! Each case is a program with one mistake of a kind models make in Python — a tool name
//! guessed, an argument named or typed after another API, a positional argument, a missing
//! `await`, a key the result lacks, an attribute read on a dict, JSON text used as a dict,
//! `import requests` or the environment or a file, `time.sleep`, a plain `def` returning a
//! call (monty runs `asyncio.run(main())` wrappers as CPython does), `except ToolError`, JavaScript habits, string building on results — and the
//! words that name the fix, written down from the mistake before looking at what the daemon
//! answers. A case passes when every word is in what the agent reads about the failure: the
//! error's `message`, `hint` and `explanation`, and the response's `warnings` (not the
//! excerpt, which quotes the program back). The test prints every miss and asserts the share.
//!
//! Run: `cargo test -p airlock-tests --test e2e python_mistakes -- --nocapture` (with
//! `AIRLOCK_SHOW_CORPUS=1` it prints what every case's agent reads).

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, RequestLanguage};
use airlock_tests::mcp_peers::{CorpusDaemon, agent_reads};
use airlock_tests::test_daemon::TestDaemon;

/// The share of cases whose error names the fix, at least: the share measured when the
/// corpus was written (48 of 48).
const BAR: f64 = 100.0;

/// (what the model did wrong, the program, the words that name the fix).
const CASES: &[(&str, &str, &[&str])] = &[
    // Tool names guessed.
    (
        "camelCase name",
        "await tools.memory.createEntities(entities=[])",
        &["create_entities"],
    ),
    (
        "verb only",
        "await tools.memory.search(query='x')",
        &["search_nodes"],
    ),
    (
        "git name without its prefix",
        "await tools.git.status(repo_path=REPO)",
        &["git_status"],
    ),
    (
        "short time name",
        "t = await tools.time.get_time(timezone='UTC')\nt",
        &["get_current_time"],
    ),
    (
        "GitHub: verb first",
        "await tools.github.create_issue(owner='o', repo='r', title='t')",
        &["issues_create"],
    ),
    (
        "namespace capitalised",
        "await tools.Memory.read_graph()",
        &["tools.memory"],
    ),
    (
        "add for sum",
        "await tools.everything.add(a=1, b=2)",
        &["get_sum"],
    ),
    // Arguments named or typed after another API, as keywords.
    (
        "short argument name",
        "await tools.memory.search_nodes(q='alice')",
        &["query"],
    ),
    (
        "tz for timezone",
        "await tools.time.get_current_time(tz='UTC')",
        &["timezone"],
    ),
    (
        "path for repo_path",
        "await tools.git.git_status(path=REPO)",
        &["repo_path"],
    ),
    (
        "a number where a string is expected",
        "await tools.time.convert_time(source_timezone='UTC', time=1430, target_timezone='Asia/Tokyo')",
        &["time", "string"],
    ),
    (
        "GitHub: owner/repo as one string",
        "await tools.github.repos_get(repository='octo/hello')",
        &["owner", "repo"],
    ),
    (
        "text for message",
        "await tools.everything.echo(text='hi')",
        &["message"],
    ),
    (
        "required argument left out",
        "await tools.time.get_current_time()",
        &["timezone"],
    ),
    (
        "GitHub: required title left out",
        "await tools.github.issues_create(owner='o', repo='r', body='x')",
        &["title"],
    ),
    (
        "GitHub: an enum value guessed",
        "await tools.github.pulls_list(owner='o', repo='r', state='opened')",
        &["open"],
    ),
    // Positional arguments where keywords are needed.
    (
        "a positional argument",
        "await tools.time.get_current_time('UTC')",
        &["keyword", "timezone"],
    ),
    (
        "a positional query",
        "await tools.memory.search_nodes('alice')",
        &["keyword", "query"],
    ),
    // A missing await.
    (
        "a missing await, then a key",
        "r = tools.memory.read_graph()\nr['entities']",
        &["await"],
    ),
    (
        "a missing await in a loop",
        "r = tools.memory.read_graph()\nfor e in r:\n    print(e)",
        &["await"],
    ),
    (
        "a coroutine returned",
        "tools.time.get_current_time(timezone='UTC')",
        &["await"],
    ),
    (
        "a JavaScript .then",
        "tools.memory.read_graph().then(lambda r: r['entities'])",
        &["await"],
    ),
    // A result's shape guessed wrong.
    (
        "a key the result does not have",
        "r = await tools.memory.read_graph()\n[n['name'] for n in r['nodes']]",
        &["entities", "relations"],
    ),
    (
        "an attribute on a dict",
        "r = await tools.memory.read_graph()\nlen(r.entities)",
        &["r[\"entities\"]"],
    ),
    (
        "an attribute on a time result",
        "t = await tools.time.get_current_time(timezone='UTC')\nt.datetime",
        &["t[\"datetime\"]"],
    ),
    (
        "the result wrapped in data",
        "r = await tools.memory.read_graph()\nr['data']['entities']",
        &["entities"],
    ),
    (
        "a field name guessed",
        "t = await tools.time.get_current_time(timezone='UTC')\nt['time']",
        &["datetime"],
    ),
    (
        "the first element of an empty list",
        "r = await tools.memory.search_nodes(query='nobody')\nr['entities'][0]['name']",
        &["empty"],
    ),
    (
        "a list read as a dict",
        "r = await tools.memory.read_graph()\nr['entities']['name']",
        &["for x in"],
    ),
    (
        "a text result read as a dict",
        "log = await tools.git.git_log(repo_path=REPO, max_count=1)\nlog['commits']",
        &["a str"],
    ),
    (
        "a loop over the result dict",
        "r = await tools.memory.read_graph()\nfor e in r:\n    print(e['name'])",
        &["entities"],
    ),
    // A value used as the wrong kind.
    (
        "JSON text used as a dict",
        "await tools.memory.create_entities(entities=[{'name': 'cfg', 'entityType': 'config', 'observations': ['{\"port\": 8080}']}])\nr = await tools.memory.open_nodes(names=['cfg'])\nobs = r['entities'][0]['observations'][0]\nobs['port']",
        &["json.loads"],
    ),
    (
        "a dict added to a str",
        "t = await tools.time.get_current_time(timezone='UTC')\n'now: ' + t",
        &["datetime"],
    ),
    (
        "an attribute in an f-string",
        "r = await tools.memory.read_graph()\nprint(f'{len(r.relations)} relations')",
        &["r[\"relations\"]"],
    ),
    (
        "a time format on a dict",
        "t = await tools.time.get_current_time(timezone='UTC')\nf'{t:%H:%M}'",
        &["datetime"],
    ),
    (
        "a number format on a text result",
        "s = await tools.everything.get_sum(a=1, b=2)\nf'{s:.2f}'",
        &["a str"],
    ),
    (
        "JavaScript .length on a list",
        "r = await tools.memory.read_graph()\nr['entities'].length",
        &["len("],
    ),
    (
        "JavaScript .push on a list",
        "names = []\nr = await tools.memory.read_graph()\nnames.push(r)",
        &["append"],
    ),
    (
        "JSON.parse",
        "t = await tools.git.git_status(repo_path=REPO)\nJSON.parse(t)",
        &["json.loads"],
    ),
    (
        "console.log",
        "t = await tools.time.get_current_time(timezone='UTC')\nconsole.log(t)",
        &["print("],
    ),
    (
        "JavaScript literals",
        "await tools.git.git_log(repo_path=REPO, max_count=1)\nx = null",
        &["None"],
    ),
    // Host APIs the sandbox does not have.
    (
        "import requests",
        "import requests\nrequests.get('https://api.github.com/repos/o/r').json()",
        &["requests", "tools."],
    ),
    (
        "a token from the environment",
        "import os\ntoken = os.environ['GITHUB_TOKEN']\nawait tools.github.repos_get(owner='o', repo='r')",
        &["environment", "credentials"],
    ),
    (
        "a file read with open",
        "text = open('/tmp/notes.txt').read()\nawait tools.memory.add_observations(observations=[{'entityName': 'a', 'contents': [text]}])",
        &["file", "tools"],
    ),
    (
        "time.sleep between calls",
        "import time\nawait tools.memory.read_graph()\ntime.sleep(1)",
        &["sleep"],
    ),
    (
        "a plain def that calls a tool",
        "def graph():\n    return tools.memory.read_graph()\ng = graph()\ng['entities']",
        &["await"],
    ),
    // Tool errors.
    (
        "except ToolError",
        "try:\n    await tools.time.get_current_time(timezone='Mars/Olympus')\nexcept ToolError as e:\n    print(e)",
        &["except RuntimeError"],
    ),
    (
        "e.code on a tool failure",
        "try:\n    await tools.time.get_current_time(timezone='Mars/Olympus')\nexcept Exception as e:\n    e.code",
        &["str(e)"],
    ),
];

async fn py(d: &TestDaemon, code: &str) -> ExecutionResponse {
    d.client()
        .await
        .execute(&ExecutionRequest {
            code: code.to_owned(),
            language: RequestLanguage::Python,
            ..Default::default()
        })
        .await
        .expect("execution request failed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_errors_name_the_fix() {
    let test = "python_errors_name_the_fix";
    let Some(corpus) = CorpusDaemon::start(test).await else {
        return;
    };
    let (d, repo) = (&corpus.daemon, corpus.repo.clone());

    let mut named = 0;
    let mut misses = Vec::new();
    for (what, program, fix) in CASES {
        let r = py(d, &program.replace("REPO", &repo)).await;
        let error = serde_json::to_value(&r.error).unwrap();
        let read = agent_reads(&r);
        if r.error.is_none() {
            misses.push(format!("  UNNOTICED {what}: {:?}", r.result));
            continue;
        }
        if let Some(explanation) = error.get("explanation").and_then(|v| v.as_str()) {
            let n = explanation.chars().count();
            assert!(
                n <= 300,
                "{what}: a {n}-character explanation: {explanation}"
            );
        }
        if std::env::var_os("AIRLOCK_SHOW_CORPUS").is_some() {
            println!("  {what}:\n{read}");
        }
        if fix.iter().all(|word| read.contains(word)) {
            named += 1;
        } else {
            misses.push(format!("  MISSED {what}: wanted {fix:?} in:\n{read}"));
        }
    }
    let share = 100.0 * f64::from(named) / CASES.len() as f64;
    println!(
        "python mistakes corpus: {named} of {} errors name the fix ({share:.1}%)",
        CASES.len()
    );
    for miss in &misses {
        println!("{miss}");
    }
    assert!(CASES.len() >= 30);
    assert!(share >= BAR, "{share:.1}% of the errors name the fix");
    corpus.daemon.stop().await;
}
