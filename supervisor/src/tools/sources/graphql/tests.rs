#![allow(clippy::unwrap_used)]
use super::schema::*;
use super::send::*;
use super::*;
use crate::tools::arguments::ArgumentSchema;
use airlock_policy::SchemaFormat;
use serde_json::{Value, json};

const SDL: &str = r#"
"A custom date."
scalar DateTime

schema { query: Root mutation: Mutations }

type Root {
  "Look up a repository."
  repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
  viewer: User!
  search(query: String!, type: SearchType!, first: Int): SearchResult
  node(id: ID!): Node
  count: Int
  query: String
}

type Mutations {
  createIssue(input: CreateIssueInput!): CreateIssuePayload
}

interface Node { id: ID! }

type Repository implements Node {
  id: ID!
  name: String!
  name: String!
  createdAt: DateTime
  owner: User
  issues(first: Int, after: String): IssueConnection!
  old: String @deprecated(reason: "no")
  secret(key: String!): String
}

type User implements Node { id: ID! login: String! repositories(first: Int): RepositoryConnection }
type IssueConnection { totalCount: Int! nodes: [Issue] }
type RepositoryConnection { totalCount: Int! nodes: [Repository] }
type Issue implements Node { id: ID! title: String state: IssueState }
enum IssueState { OPEN CLOSED }
enum SearchType { ISSUE REPOSITORY }
union SearchResult = Issue | Repository
type CreateIssuePayload { issue: Issue clientMutationId: String }
input CreateIssueInput {
  repositoryId: ID!
  title: String!
  labels: [String!]
  state: IssueState
  parent: CreateIssueInput
}
"#;

fn config(depth: u32) -> GraphQlSource {
    GraphQlSource {
        name: "gh".into(),
        schema: "/x/schema.graphql".into(),
        schema_format: SchemaFormat::Sdl,
        endpoint: "http://127.0.0.1:1/graphql".into(),
        headers: Vec::new(),
        selection_depth: depth,
        call_timeout_ms: 1000,
        max_concurrent_calls: 2,
        coerce: Default::default(),
        learn_types: true,
    }
}

fn tools(depth: u32) -> Vec<Tool> {
    build_tools(&config(depth), SDL).unwrap()
}

fn find<'t>(tools: &'t [Tool], name: &str) -> &'t Tool {
    tools.iter().find(|t| t.descriptor.name == name).unwrap()
}

fn selection(tool: &Tool) -> &str {
    match &tool.kind {
        ToolKind::Field { selection, .. } => selection,
        ToolKind::Custom(_) => panic!("custom"),
    }
}

/// Query fields and `query` only read; mutation fields and `mutate` may write.
#[test]
fn graphql_queries_are_read_only_and_mutations_are_not() {
    let tools = tools(2);
    let read_only: Vec<&str> = tools
        .iter()
        .filter(|t| t.descriptor.read_only)
        .map(|t| t.descriptor.name.as_str())
        .collect();
    assert_eq!(
        read_only,
        [
            "query",
            "repository",
            "viewer",
            "search",
            "node",
            "count",
            "query_2"
        ]
    );
    assert!(!find(&tools, "mutation_createIssue").descriptor.read_only);
    assert!(!find(&tools, "mutate").descriptor.read_only);
}

#[test]
fn graphql_fields_become_named_tools() {
    let tools = tools(2);
    let names: Vec<&str> = tools.iter().map(|t| t.descriptor.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "query",
            "mutate",
            "repository",
            "viewer",
            "search",
            "node",
            "count",
            "query_2",
            "mutation_createIssue"
        ]
    );
    let repo = find(&tools, "repository");
    assert_eq!(
        repo.descriptor.input_schema["required"],
        json!(["owner", "name"])
    );
    assert!(
        repo.descriptor
            .description
            .starts_with("Look up a repository.")
    );
    assert_eq!(
        repo.descriptor.input_schema["properties"]["followRenames"]["type"],
        json!(["boolean", "null"])
    );
}

#[test]
fn graphql_input_objects_and_enums_go_to_defs() {
    let tools = tools(2);
    let create = &find(&tools, "mutation_createIssue").descriptor.input_schema;
    let input = &create["$defs"]["CreateIssueInput"];
    assert_eq!(input["required"], json!(["repositoryId", "title"]));
    assert_eq!(
        input["properties"]["parent"]["anyOf"][0]["$ref"],
        "#/$defs/CreateIssueInput"
    );
    assert_eq!(
        create["$defs"]["IssueState"]["enum"],
        json!(["OPEN", "CLOSED"])
    );
    let schema = ArgumentSchema::compile(create);
    schema
        .check("t", &json!({"input": {"repositoryId": "R1", "title": "x", "state": "OPEN", "parent": {"repositoryId": 1, "title": "y"}}}))
        .unwrap();
    let err = schema
        .check(
            "t",
            &json!({"input": {"repositoryId": "R1", "title": "x", "state": "SHUT"}}),
        )
        .unwrap_err();
    assert_eq!(err.code.as_str(), "invalid_arguments");
    let search = &find(&tools, "search").descriptor.input_schema;
    assert_eq!(search["required"], json!(["query", "type"]));
}

#[test]
fn graphql_default_selection_is_bounded_and_parses() {
    let tools = tools(2);
    let repo = selection(find(&tools, "repository"));
    assert_eq!(
        repo,
        "{ id name createdAt owner { id login } issues(first: 10) { totalCount } }"
    );
    // Interfaces and unions carry __typename; small unions get fragments.
    assert_eq!(selection(find(&tools, "node")), "{ __typename id }");
    assert_eq!(
        selection(find(&tools, "search")),
        "{ __typename ... on Issue { id title state } ... on Repository { id name createdAt } }"
    );
    assert_eq!(selection(find(&tools, "count")), "");
    let deep = tools_depth_selection(3, "repository");
    assert!(
        deep.contains("issues(first: 10) { totalCount nodes { id title state } }"),
        "{deep}"
    );
    for t in &tools {
        if let ToolKind::Field { .. } = t.kind {
            let doc = field_document_for(t, &json!({"owner": "o", "name": "n"}));
            parses_as_document(&doc).unwrap();
        }
    }
}

/// The output type names exactly the selected fields, with GraphQL's nullability.
#[test]
fn graphql_output_schema_follows_the_default_selection() {
    use crate::sdk::schema_types::TypeScriptTypes;
    let tools = tools(2);
    let typed = |name: &str| {
        let schema = find(&tools, name).descriptor.output_schema.clone().unwrap();
        let mut types = TypeScriptTypes::new(&schema, "t");
        let t = types.type_of(&schema);
        (t, types.declarations())
    };
    // `Repository` is nullable; `issues` is `IssueConnection!`; `DateTime` is custom.
    assert_eq!(
        typed("repository").0,
        "{\n  createdAt: unknown;\n  id: string;\n  issues: {\n    totalCount: number;\n  };\n  name: string;\n  owner: {\n    id: string;\n    login: string;\n  } | null;\n} | null"
    );
    assert_eq!(typed("count").0, "number | null");
    assert_eq!(
        typed("node").0,
        "{\n  __typename: string;\n  id: string;\n} | null"
    );
    let (search, decls) = typed("search");
    assert_eq!(
        search,
        "({\n  __typename: \"Issue\";\n  id: string;\n  state: TIssueState | null;\n  title: string | null;\n} | {\n  __typename: \"Repository\";\n  createdAt: unknown;\n  id: string;\n  name: string;\n}) | null"
    );
    assert!(
        decls.contains("export type TIssueState = \"OPEN\" | \"CLOSED\";"),
        "{decls}"
    );
    assert_eq!(
        find(&tools, "query").descriptor.output_schema,
        None,
        "a custom document's answer has no fixed type"
    );
    // Lists of nullable items inside a non-null list.
    let deep = tools_depth_selection(3, "repository");
    assert!(deep.contains("nodes { id title state }"), "{deep}");
    let tools3 = super::tests::tools(3);
    let schema = find(&tools3, "repository")
        .descriptor
        .output_schema
        .clone()
        .unwrap();
    let nodes = &schema["properties"]["issues"]["properties"]["nodes"];
    assert_eq!(nodes["type"], json!(["array", "null"]));
    assert_eq!(nodes["items"]["type"], json!(["object", "null"]));
}

fn tools_depth_selection(depth: u32, name: &str) -> String {
    let tools = tools(depth);
    selection(find(&tools, name)).to_owned()
}

fn field_document_for(tool: &Tool, args: &Value) -> String {
    let ToolKind::Field {
        operation,
        field,
        args: declared,
        selection,
    } = &tool.kind
    else {
        panic!("custom");
    };
    field_document(*operation, field, declared, selection, args)
}

#[test]
fn graphql_documents_declare_only_given_variables() {
    let tools = tools(1);
    let repo = find(&tools, "repository");
    assert_eq!(
        field_document_for(repo, &json!({"owner": "o", "name": "n"})),
        "query airlock_repository($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id name createdAt } }"
    );
    assert_eq!(
        field_document_for(find(&tools, "count"), &json!({})),
        "query airlock_count { count }"
    );
    let create = find(&tools, "mutation_createIssue");
    assert!(
        field_document_for(create, &json!({"input": {}})).starts_with(
            "mutation airlock_createIssue($input: CreateIssueInput!) { createIssue(input: $input) {"
        )
    );
}

#[test]
fn graphql_documents_nested_without_end_fail_cleanly_on_a_small_stack() {
    // Programs send these documents, and they are parsed in the daemon: graphql-parser's
    // own recursion limit must hold on a runtime thread's 2 MiB stack (pinned here, so a
    // dependency update that drops it fails this test rather than the daemon).
    let outcome = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let n = 100_000;
            let selections = format!("{}a{}", "{ a ".repeat(n), " }".repeat(n));
            let lists = format!("{{ a(x: {}1{}) }}", "[".repeat(n), "]".repeat(n));
            let objects = format!("{{ a(x: {}1{}) }}", "{b: ".repeat(n), "}".repeat(n));
            [selections, lists, objects]
                .iter()
                .map(|doc| check_custom_document("gh.query", doc, Operation::Query).map(|_| ()))
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .expect("the parser overflowed a 2 MiB stack");
    for result in outcome {
        let e = result.unwrap_err();
        assert_eq!(e.code.as_str(), "invalid_arguments");
        assert!(
            e.message.contains("Recursion limit exceeded"),
            "{}",
            e.message
        );
    }
}

#[test]
fn graphql_custom_documents_are_checked() {
    assert!(!check_custom_document("gh.query", "{ viewer { login } }", Operation::Query).unwrap());
    assert!(
        !check_custom_document(
            "gh.query",
            "query Q($n: Int) { a(n: $n) }",
            Operation::Query,
        )
        .unwrap()
    );
    let e = check_custom_document("gh.query", "mutation { a }", Operation::Query).unwrap_err();
    assert!(e.message.contains("contains a mutation"), "{}", e.message);
    assert_eq!(
        e.hint.as_deref(),
        Some("gh.mutate runs documents with mutations")
    );
    // `mutate` says whether its document writes (the idempotency key goes only with a
    // mutation).
    assert!(check_custom_document("gh.mutate", "mutation { a }", Operation::Mutation).unwrap());
    assert!(
        check_custom_document(
            "gh.mutate",
            "query Q { a } mutation M { b }",
            Operation::Mutation
        )
        .unwrap()
    );
    assert!(!check_custom_document("gh.mutate", "{ a }", Operation::Mutation).unwrap());
    let e = check_custom_document("gh.query", "{ viewer { login }", Operation::Query).unwrap_err();
    assert_eq!(e.code.as_str(), "invalid_arguments");
    assert!(e.message.contains("does not parse at 1:"), "{}", e.message);
}

#[test]
fn graphql_malformed_sdl_names_file_line_and_column() {
    let err = match build_tools(&config(2), "type Query {\n  a: Int\n  b(: Int\n}\n") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("parsed"),
    };
    assert!(
        err.starts_with("/x/schema.graphql:3:5: invalid GraphQL schema of source `gh`"),
        "{err}"
    );
    let err = match build_tools(&config(2), "type Mutation { a: Int }") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("parsed"),
    };
    assert!(err.contains("has no query type"), "{err}");
    let mut json_config = config(2);
    json_config.schema_format = SchemaFormat::Introspection;
    let err = match build_tools(&json_config, "{\"__schema\": \n {\"types\": [}") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("parsed"),
    };
    assert!(err.starts_with("/x/schema.graphql:2:"), "{err}");
}

#[test]
fn graphql_introspection_results_load() {
    let introspection = json!({"data": {"__schema": {
        "queryType": {"name": "Query"},
        "mutationType": null,
        "types": [
            {"kind": "OBJECT", "name": "Query", "description": null, "fields": [
                {"name": "user", "description": "A user.", "isDeprecated": false,
                 "args": [{"name": "login", "description": null, "defaultValue": null,
                           "type": {"kind": "NON_NULL", "name": null, "ofType": {"kind": "SCALAR", "name": "String", "ofType": null}}}],
                 "type": {"kind": "OBJECT", "name": "User", "ofType": null}}
            ], "inputFields": null, "enumValues": null, "possibleTypes": null, "interfaces": []},
            {"kind": "OBJECT", "name": "User", "description": null, "fields": [
                {"name": "login", "description": null, "isDeprecated": false, "args": [],
                 "type": {"kind": "NON_NULL", "name": null, "ofType": {"kind": "SCALAR", "name": "String", "ofType": null}}}
            ]},
            {"kind": "SCALAR", "name": "String"}
        ]
    }}});
    let mut c = config(2);
    c.schema_format = SchemaFormat::Introspection;
    let tools = build_tools(&c, &introspection.to_string()).unwrap();
    let user = find(&tools, "user");
    assert_eq!(user.descriptor.input_schema["required"], json!(["login"]));
    assert_eq!(selection(user), "{ login }");
    assert!(user.descriptor.description.starts_with("A user."));
}

#[test]
fn graphql_errors_become_tool_errors() {
    let ok = interpret("gh.t", reqwest::StatusCode::OK, br#"{"data": {"a": 1}}"#).unwrap();
    assert_eq!(ok, json!({"a": 1}));
    let e = interpret(
        "gh.t",
        reqwest::StatusCode::OK,
        br#"{"data": null, "errors": [{"message": "Could not resolve", "path": ["repository", 0]}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.code.as_str(), "upstream_error");
    assert_eq!(
        e.message,
        "gh.t failed: Could not resolve (at repository.0)"
    );
    let e = interpret("gh.t", reqwest::StatusCode::BAD_GATEWAY, b"<html>").unwrap_err();
    assert!(e.message.contains("HTTP 502"), "{}", e.message);
}

#[test]
fn graphql_load_errors_name_the_file() {
    let mut c = config(2);
    c.schema = "/nonexistent/airlock/schema.graphql".into();
    let e = GraphQlApi::load(c, Arc::new(SecretStore::empty())).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "/nonexistent/airlock/schema.graphql: cannot read the schema of GraphQL source `gh`"
        ),
        "{e}"
    );
}
