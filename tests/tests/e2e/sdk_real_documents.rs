//! The SDK of real, large catalogues: the GitHub REST document (`@octokit/openapi`, 1,223
//! operations), OpenAPI 3.1 examples (`@readme/oas-examples`), the GitHub GraphQL schema
//! (`@octokit/graphql-schema`) and server-everything, all from npm (installed by `.ci/run`).
//!
//! - `airlock sdk stats` against the real daemon: the entry point stays ≤ 1,000 tokens and
//!   saves ≥ 98% against the classic tool-calling prompt for the GitHub REST API (the issue's
//!   targets); the figures of the other catalogues are printed.
//! - The generated files type-check with `tsc`, with a program that uses a real tool's
//!   output type.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::sdk::{SdkFiles, SdkTool};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::graphql::GraphQlApi;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_supervisor::tools::sources::openapi::OpenApiSource;
use airlock_supervisor::tools::{ToolDescriptor, ToolSource};
use airlock_tests::binaries;
use airlock_tests::type_check::{check, tsc};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use airlock_tests::mcp_peers::npm_package as npm;
use airlock_tests::mcp_peers::{closed_github_graphql, closed_openapi};

fn openapi(name: &str, spec: PathBuf) -> OpenApiSource {
    OpenApiSource::load(closed_openapi(name, spec), Arc::new(SecretStore::empty())).unwrap()
}

fn github_graphql(schema: PathBuf) -> GraphQlApi {
    GraphQlApi::load(
        closed_github_graphql(schema),
        Arc::new(SecretStore::empty()),
    )
    .unwrap()
}

fn sdk_tools(namespace: &str, descriptors: &[ToolDescriptor]) -> Vec<SdkTool> {
    descriptors.iter().map(|t| t.sdk_tool(namespace)).collect()
}

/// `airlock sdk stats --json` against a daemon with `source`, as a principal denied the
/// test daemon's in-process test tools and the daemon's own `airlock.*` tools (so the
/// figures are the source's alone, and `GET /v1/tools` is seen to follow the principal).
async fn stats(source: Arc<dyn ToolSource>) -> Value {
    let d = TestDaemon::start_with(DaemonOptions::default().source(source).policy(|p| {
        p.principals[0].deny = vec!["test.*".into(), "airlock.*".into()];
    }))
    .await;
    let socket = d.socket_path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(binaries::airlock_cli())
            .arg("--socket")
            .arg(&socket)
            .args(["sdk", "stats", "--json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d.stop().await;
    serde_json::from_str(&text).unwrap()
}

/// The targets on the GitHub REST document, measured through the real daemon and CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_github_rest_entry_point_is_small_and_saves_98_percent() {
    let test = "the_github_rest_entry_point_is_small_and_saves_98_percent";
    let Some(spec) = npm("@octokit/openapi/generated/api.github.com.json", test) else {
        return;
    };
    let figures = stats(Arc::new(openapi("github", spec))).await;
    eprintln!("GitHub REST: {figures}");
    assert_eq!(figures["tools"], 1_223, "{figures}");
    let entry = figures["entry_point_tokens"].as_u64().unwrap();
    let classic = figures["definitions_tokens"].as_u64().unwrap();
    assert!(entry <= 1_000, "entry point of {entry} tokens: {figures}");
    assert!(classic > 100_000, "{figures}");
    assert!(
        figures["reduction_percent"].as_f64().unwrap() >= 98.0,
        "{figures}"
    );
}

/// The figures for the GitHub GraphQL schema and server-everything (reported, with loose
/// sanity bounds: the targets are set on the REST document).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_figures_of_the_graphql_schema_and_server_everything() {
    let test = "token_figures_of_the_graphql_schema_and_server_everything";
    if let Some(schema) = npm("@octokit/graphql-schema/schema.graphql", test) {
        let figures = stats(Arc::new(github_graphql(schema))).await;
        eprintln!("GitHub GraphQL: {figures}");
        assert!(figures["entry_point_tokens"].as_u64().unwrap() <= 1_000);
        assert!(figures["reduction_percent"].as_f64().unwrap() > 90.0);
    }
    if let Some(config) = airlock_tests::mcp_peers::server_everything("everything", test) {
        let server = Arc::new(McpServer::new(config, Arc::new(SecretStore::empty())));
        let figures = stats(server.clone()).await;
        server.shutdown().await;
        eprintln!("server-everything: {figures}");
        assert!(figures["tools"].as_u64().unwrap() >= 10, "{figures}");
        assert!(figures["entry_point_tokens"].as_u64().unwrap() <= 1_000);
        assert!(figures["definitions_tokens"].as_u64().unwrap() > 0);
    }
}

/// The whole GitHub REST SDK (1,223 tool files with input and output types) type-checks, and
/// so does a program that uses `repos_get`'s output type; one that misuses it does not.
#[test]
fn the_github_rest_sdk_type_checks() {
    let test = "the_github_rest_sdk_type_checks";
    let (Some(tsc), Some(spec)) = (
        tsc(test),
        npm("@octokit/openapi/generated/api.github.com.json", test),
    ) else {
        return;
    };
    let source = openapi("github", spec);
    let tools = sdk_tools("github", source.descriptors());
    let typed = tools.iter().filter(|t| t.output_schema.is_some()).count();
    eprintln!(
        "{typed} of {} GitHub REST tools have an output type",
        tools.len()
    );
    // The others answer 204 or another body without a JSON schema (926 of 1,223 in
    // @octokit/openapi 23.0.2, counted independently from the document).
    assert!(typed >= 900, "{typed}");
    let sdk = SdkFiles::generate(&tools);
    let program = "const repo = await tools.github.repos_get({ owner: \"octocat\", repo: \"hello-world\" });\nconst stars: number = repo.stargazers_count;\nconst name: string = repo.full_name;\nconst login: string = repo.owner.login;\nconst issues = await tools.github.issues_list_for_repo({ owner: \"octocat\", repo: \"hello-world\" });\nconst titles: string[] = issues.map(i => i.title);\nconsole.log(stars, name, login, titles);\n";
    let (ok, out) = check(&tsc, &sdk, &[("program.ts", program)]);
    assert!(
        ok,
        "tsc rejected the GitHub REST SDK or the program:\n{out}"
    );
    let misuse = "const repo = await tools.github.repos_get({ owner: \"octocat\", repo: \"hello-world\" });\nconst stars: string = repo.stargazers_count;\n";
    let (ok, out) = check(&tsc, &sdk, &[("program.ts", misuse)]);
    assert!(!ok && out.contains("TS2322"), "{out}");
}

/// OpenAPI 3.1 examples and the GitHub GraphQL schema type-check too.
#[test]
fn oas_31_examples_and_the_github_graphql_sdk_type_check() {
    let test = "oas_31_examples_and_the_github_graphql_sdk_type_check";
    let Some(tsc) = tsc(test) else {
        return;
    };
    let mut tools = Vec::new();
    if let Some(root) = npm("@readme/oas-examples/3.1/json", test) {
        for (name, file) in [
            ("petstore", "petstore.json"),
            ("train", "train-travel.json"),
            ("types", "schema-types.json"),
            ("params", "parameters-style.json"),
            ("security", "security.json"),
        ] {
            let source = openapi(name, root.join(file));
            tools.extend(sdk_tools(name, source.descriptors()));
        }
    }
    if let Some(schema) = npm("@octokit/graphql-schema/schema.graphql", test) {
        let api = github_graphql(schema);
        let graphql = sdk_tools("ghql", api.descriptors());
        assert!(graphql.iter().filter(|t| t.output_schema.is_some()).count() > 200);
        tools.extend(graphql);
    }
    let sdk = SdkFiles::generate(&tools);
    let program = "const repo = await tools.ghql.repository({ owner: \"octocat\", name: \"hello-world\" });\nif (repo !== null) { const d: string | null = repo.description; const merge: boolean = repo.autoMergeAllowed; console.log(d, merge); }\n";
    let (ok, out) = check(&tsc, &sdk, &[("program.ts", program)]);
    assert!(ok, "tsc rejected the SDK or the program:\n{out}");
    // The result is nullable: using it unchecked is an error (TS18047: possibly null).
    let misuse = "const repo = await tools.ghql.repository({ owner: \"octocat\", name: \"hello-world\" });\nconsole.log(repo.autoMergeAllowed);\n";
    let (ok, out) = check(&tsc, &sdk, &[("program.ts", misuse)]);
    assert!(!ok && out.contains("TS18047"), "{out}");
}
