//! How well `GET /v1/tools/search` finds the tool a model means, measured on real
//! catalogues: the GitHub REST document (`@octokit/openapi`, 1,223 operations), the GitHub
//! GraphQL schema (`@octokit/graphql-schema`), and the tool lists of four real MCP servers
//! (npm `server-memory` and `server-everything`, PyPI `mcp-server-time` and `mcp-server-git`),
//! each loaded through the daemon's own sources and indexed as the daemon indexes them.
//!
//! Every query is something a model would type, written without looking at the tool's
//! description, with the one tool that does it. The test prints top-1 and top-3 accuracy and
//! every miss, and asserts top-3 ≥ 90% and top-1 ≥ 70%. It also prints the time of a search
//! over the REST index (not asserted: debug builds are slow; `cargo bench --bench sdk` is the
//! release figure).
//!
//! Run: `cargo test -p airlock-tests --test tool_search_quality -- --nocapture`.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::sdk::{SdkTool, ToolSearch};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::graphql::GraphQlApi;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_supervisor::tools::sources::openapi::OpenApiSource;
use airlock_supervisor::tools::{ToolDescriptor, ToolSource};
use airlock_tests::mcp_peers::{
    closed_github_graphql, four_real_servers, github_rest_source, npm_package,
};
use std::sync::Arc;
use std::time::Instant;

/// Which index a query runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Catalogue {
    /// GitHub REST, namespace `github`.
    Rest,
    /// GitHub GraphQL, namespace `ghql`.
    GraphQl,
    /// The four MCP servers together, as one principal granted all of them sees them.
    Mcp,
}

use Catalogue::{GraphQl, Mcp, Rest};

/// (catalogue, query, the tool that does it).
const CASES: &[(Catalogue, &str, &str)] = &[
    // GitHub REST: six everyday tasks first.
    (
        Rest,
        "create a comment on an issue",
        "github.issues_create_comment",
    ),
    (Rest, "list open pull requests", "github.pulls_list"),
    (Rest, "open a new issue", "github.issues_create"),
    (Rest, "close an issue", "github.issues_update"),
    (Rest, "fork a repository", "github.repos_create_fork"),
    (Rest, "delete a branch", "github.git_delete_ref"),
    // GitHub REST.
    (Rest, "get details about a repo", "github.repos_get"),
    (Rest, "merge a pull request", "github.pulls_merge"),
    (Rest, "add labels to an issue", "github.issues_add_labels"),
    (
        Rest,
        "list all issues in a repository",
        "github.issues_list_for_repo",
    ),
    (Rest, "show a single issue", "github.issues_get"),
    (Rest, "edit the title of an issue", "github.issues_update"),
    (Rest, "open a pull request", "github.pulls_create"),
    (Rest, "publish a new release", "github.repos_create_release"),
    (Rest, "list commits in a repo", "github.repos_list_commits"),
    (
        Rest,
        "read a file from a repository",
        "github.repos_get_content",
    ),
    (
        Rest,
        "create or update a file in a repo",
        "github.repos_create_or_update_file_contents",
    ),
    (Rest, "search code", "github.search_code"),
    (Rest, "search for repositories", "github.search_repos"),
    (
        Rest,
        "list workflow runs for a repository",
        "github.actions_list_workflow_runs_for_repo",
    ),
    (
        Rest,
        "request reviewers for a pull request",
        "github.pulls_request_reviewers",
    ),
    (
        Rest,
        "get the authenticated user",
        "github.users_get_authenticated",
    ),
    (Rest, "list branches", "github.repos_list_branches"),
    (
        Rest,
        "create a new repository for me",
        "github.repos_create_for_authenticated_user",
    ),
    (Rest, "delete a repository", "github.repos_delete"),
    (
        Rest,
        "add a collaborator to a repo",
        "github.repos_add_collaborator",
    ),
    (Rest, "create a gist", "github.gists_create"),
    (Rest, "list releases", "github.repos_list_releases"),
    (
        Rest,
        "assign someone to an issue",
        "github.issues_add_assignees",
    ),
    (
        Rest,
        "remove a label from an issue",
        "github.issues_remove_label",
    ),
    (
        Rest,
        "edit a comment on an issue",
        "github.issues_update_comment",
    ),
    (Rest, "lock an issue", "github.issues_lock"),
    (
        Rest,
        "files changed in a pull request",
        "github.pulls_list_files",
    ),
    (
        Rest,
        "get the latest release",
        "github.repos_get_latest_release",
    ),
    (Rest, "compare two commits", "github.repos_compare_commits"),
    (Rest, "create a branch", "github.git_create_ref"),
    (
        Rest,
        "list members of an organization",
        "github.orgs_list_members",
    ),
    (Rest, "get the readme of a repo", "github.repos_get_readme"),
    (
        Rest,
        "list comments on an issue",
        "github.issues_list_comments",
    ),
    (
        Rest,
        "delete an issue comment",
        "github.issues_delete_comment",
    ),
    (Rest, "fetch a pull request", "github.pulls_get"),
    (
        Rest,
        "remove a collaborator",
        "github.repos_remove_collaborator",
    ),
    // GitHub GraphQL.
    (
        GraphQl,
        "add a comment to an issue",
        "ghql.mutation_addComment",
    ),
    (GraphQl, "close an issue", "ghql.mutation_closeIssue"),
    (GraphQl, "reopen an issue", "ghql.mutation_reopenIssue"),
    (
        GraphQl,
        "open a pull request",
        "ghql.mutation_createPullRequest",
    ),
    (
        GraphQl,
        "merge a pull request",
        "ghql.mutation_mergePullRequest",
    ),
    (GraphQl, "star a repository", "ghql.mutation_addStar"),
    (
        GraphQl,
        "look up a repository by owner and name",
        "ghql.repository",
    ),
    (GraphQl, "get a user by login", "ghql.user"),
    (GraphQl, "check my rate limit", "ghql.rateLimit"),
    (GraphQl, "follow a user", "ghql.mutation_followUser"),
    (GraphQl, "delete a branch", "ghql.mutation_deleteRef"),
    (GraphQl, "create a new issue", "ghql.mutation_createIssue"),
    // The MCP servers.
    (Mcp, "what time is it in Tokyo", "time.get_current_time"),
    (
        Mcp,
        "convert 3pm New York time to London",
        "time.convert_time",
    ),
    (
        Mcp,
        "add entities to the knowledge graph",
        "memory.create_entities",
    ),
    (Mcp, "link two entities", "memory.create_relations"),
    (
        Mcp,
        "remember a fact about a person",
        "memory.add_observations",
    ),
    (Mcp, "search the memory", "memory.search_nodes"),
    (Mcp, "dump the whole knowledge graph", "memory.read_graph"),
    (Mcp, "remove an entity", "memory.delete_entities"),
    (Mcp, "git status of the working tree", "git.git_status"),
    (Mcp, "show the commit history", "git.git_log"),
    (Mcp, "commit my changes", "git.git_commit"),
    (Mcp, "stage files", "git.git_add"),
    (Mcp, "switch to another branch", "git.git_checkout"),
    (Mcp, "create a new branch", "git.git_create_branch"),
    (Mcp, "echo a message back", "everything.echo"),
    (Mcp, "add two numbers", "everything.get_sum"),
];

fn sdk_tools(namespace: &str, descriptors: &[ToolDescriptor]) -> Vec<SdkTool> {
    descriptors.iter().map(|t| t.sdk_tool(namespace)).collect()
}

fn rest_tools(test: &str) -> Option<Vec<SdkTool>> {
    let source =
        OpenApiSource::load(github_rest_source(test)?, Arc::new(SecretStore::empty())).unwrap();
    Some(sdk_tools("github", source.descriptors()))
}

fn graphql_tools(test: &str) -> Option<Vec<SdkTool>> {
    let schema = npm_package("@octokit/graphql-schema/schema.graphql", test)?;
    let api = GraphQlApi::load(
        closed_github_graphql(schema),
        Arc::new(SecretStore::empty()),
    )
    .unwrap();
    Some(sdk_tools("ghql", api.descriptors()))
}

/// The tools of the four MCP servers, listed by the daemon's MCP client from the running
/// servers. `None` when any of them is missing (the skip is reported).
async fn mcp_tools(test: &str, repository: &std::path::Path) -> Option<Vec<SdkTool>> {
    let configs = four_real_servers(test, repository)?;
    let mut tools = Vec::new();
    for config in configs {
        let namespace = config.name.clone();
        let server = McpServer::new(config, Arc::new(SecretStore::empty()));
        let listed = server.tools().await;
        server.shutdown().await;
        tools.extend(sdk_tools(&namespace, &listed.unwrap()));
    }
    Some(tools)
}

/// The 1-based rank of `expected` among the first three results, if it is there.
fn rank(index: &ToolSearch, query: &str, expected: &str) -> (Option<usize>, Vec<String>) {
    let hits: Vec<String> = index.search(query, 3).into_iter().map(|h| h.tool).collect();
    (hits.iter().position(|t| t == expected).map(|i| i + 1), hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_the_tool_a_model_means() {
    let test = "search_finds_the_tool_a_model_means";
    let (Some(rest), Some(graphql)) = (rest_tools(test), graphql_tools(test)) else {
        return;
    };
    let repository = tempfile::tempdir().unwrap();
    let Some(mcp) = mcp_tools(test, repository.path()).await else {
        return;
    };
    let rest_index = ToolSearch::new(&rest);
    let graphql_index = ToolSearch::new(&graphql);
    let mcp_index = ToolSearch::new(&mcp);
    eprintln!(
        "indexes: GitHub REST {} tools, GitHub GraphQL {} tools, MCP servers {} tools",
        rest_index.len(),
        graphql_index.len(),
        mcp_index.len()
    );

    let (mut top1, mut top3) = (0usize, 0usize);
    let mut misses = Vec::new();
    for &(catalogue, query, expected) in CASES {
        let index = match catalogue {
            Rest => &rest_index,
            GraphQl => &graphql_index,
            Mcp => &mcp_index,
        };
        assert!(
            index.search(expected, 1).first().map(|h| h.tool.as_str()) == Some(expected),
            "{expected} is not a tool of the {catalogue:?} catalogue"
        );
        let (found, hits) = rank(index, query, expected);
        match found {
            Some(1) => {
                top1 += 1;
                top3 += 1;
            }
            Some(_) => {
                top3 += 1;
                misses.push(format!(
                    "  top-3 only  {query:?}: {expected} at {}, got {hits:?}",
                    found.unwrap()
                ));
            }
            None => misses.push(format!(
                "  MISSED      {query:?}: {expected} not in {hits:?}"
            )),
        }
    }
    let n = CASES.len() as f64;
    let (p1, p3) = (100.0 * top1 as f64 / n, 100.0 * top3 as f64 / n);
    eprintln!(
        "tool search quality over {} queries: top-1 {top1} ({p1:.1}%), top-3 {top3} ({p3:.1}%)",
        CASES.len()
    );
    for miss in &misses {
        eprintln!("{miss}");
    }

    // The time of one search over the REST index (a debug build: the benchmark has release).
    let queries = [
        "create a comment on an issue",
        "list open pull requests",
        "delete a branch",
        "repos_get",
    ];
    let rounds = 50;
    let started = Instant::now();
    for _ in 0..rounds {
        for query in queries {
            std::hint::black_box(rest_index.search(query, 10));
        }
    }
    let per_search = started.elapsed().as_secs_f64() * 1e6 / (rounds * queries.len()) as f64;
    eprintln!(
        "search over {} REST tools: {per_search:.0} µs per query (mean of {})",
        rest_index.len(),
        rounds * queries.len()
    );

    assert!(p3 >= 90.0, "top-3 accuracy {p3:.1}% < 90%");
    assert!(p1 >= 70.0, "top-1 accuracy {p1:.1}% < 70%");
}
