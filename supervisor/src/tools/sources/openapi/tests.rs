use super::load::*;
use super::request_body::BodyShape;
use super::schema::*;
use super::send::*;
use super::*;
use crate::tools::arguments::ArgumentSchema;
use serde_json::{Map, Value, json};
use std::path::Path;

fn config(spec: &Path) -> OpenApiConfig {
    OpenApiConfig {
        name: "api".into(),
        spec: spec.to_owned(),
        base_url: None,
        auth: None,
        call_timeout_ms: 5_000,
        max_concurrent_calls: 4,
        coerce: Default::default(),
        learn_types: true,
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

fn load_text(
    file_name: &str,
    text: &str,
) -> (tempfile::TempDir, Result<OpenApiSource, OpenApiError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file_name);
    std::fs::write(&path, text).unwrap();
    let result = OpenApiSource::load(config(&path), Arc::new(SecretStore::empty()));
    (dir, result)
}

fn load(document: Value) -> OpenApiSource {
    let (_dir, result) = load_text("api.json", &document.to_string());
    result.unwrap()
}

fn tool<'s>(source: &'s OpenApiSource, name: &str) -> &'s ToolDescriptor {
    source
        .descriptors()
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}: {:?}", names(source)))
}

fn names(source: &OpenApiSource) -> Vec<&str> {
    source
        .descriptors()
        .iter()
        .map(|t| t.name.as_str())
        .collect()
}

fn pets() -> Value {
    json!({
        "openapi": "3.0.3",
        "info": { "title": "pets", "version": "1" },
        "servers": [{ "url": "https://{region}.example.com/v1", "variables": { "region": { "default": "eu" } } }],
        "paths": {
            "/pets/{petId}": {
                "parameters": [{ "name": "petId", "in": "path", "required": true, "schema": { "type": "integer" } }],
                "get": {
                    "operationId": "pets/get",
                    "summary": "One pet",
                    "parameters": [
                        { "name": "fields", "in": "query", "schema": { "type": "array", "items": { "type": "string" } } },
                        { "name": "fields", "in": "header", "schema": { "type": "string" } },
                        { "name": "Accept", "in": "header", "schema": { "type": "string" } },
                        { "$ref": "#/components/parameters/Verbose" }
                    ]
                },
                "put": {
                    "requestBody": { "$ref": "#/components/requestBodies/Pet" },
                    "parameters": [{ "name": "body", "in": "query", "schema": { "type": "string" } }]
                }
            }
        },
        "components": {
            "parameters": { "Verbose": { "name": "verbose", "in": "query", "required": true, "schema": { "type": "boolean" } } },
            "requestBodies": { "Pet": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pet" } } } } },
            "schemas": {
                "Pet": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": { "type": "string", "nullable": true },
                        "age": { "type": "integer", "minimum": 0, "exclusiveMinimum": true },
                        "parent": { "$ref": "#/components/schemas/Pet" }
                    }
                }
            }
        }
    })
}

/// 200, else 201, else the first 2xx; JSON media types only; resolved like inputs.
#[test]
fn success_responses_become_output_schemas() {
    let pet = json!({ "$ref": "#/components/schemas/Pet" });
    let responses = |r: Value| json!({ "responses": r });
    let json_body = |schema: &Value| json!({ "content": { "application/json; charset=utf-8": { "schema": schema } } });
    let op = |r: Value| responses(r).as_object().cloned().unwrap();
    let doc = pets();
    let out = output_schema(&doc, &op(json!({ "201": json_body(&json!({"type": "string"})), "200": json_body(&pet), "404": json_body(&json!({"type": "number"})) }))).unwrap();
    assert_eq!(out["$ref"], "#/$defs/Pet");
    assert_eq!(
        out["$defs"]["Pet"]["properties"]["name"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(
        out["$defs"]["Pet"]["properties"]["parent"]["$ref"],
        "#/$defs/Pet"
    );
    let out = output_schema(&doc, &op(json!({ "202": json_body(&json!({"type": "number"})), "201": json_body(&json!({"type": "string"})) }))).unwrap();
    assert_eq!(out, json!({"type": "string"}));
    let out = output_schema(
        &doc,
        &op(
            json!({ "204": {"description": "none"}, "202": json_body(&json!({"type": "number"})) }),
        ),
    )
    .unwrap();
    assert_eq!(out, json!({"type": "number"}), "the first 2xx in order");
    let vendor = json!({ "200": { "content": { "application/vnd.github+json": { "schema": {"type": "boolean"} } } } });
    assert_eq!(
        output_schema(&doc, &op(vendor)),
        Some(json!({"type": "boolean"}))
    );
    for without in [
        json!({ "200": { "content": { "text/plain": { "schema": {"type": "string"} } } } }),
        json!({ "204": { "description": "no content" } }),
        json!({ "404": json_body(&json!({"type": "string"})) }),
        json!({ "200": json_body(&json!({"$ref": "#/components/schemas/Missing"})) }),
    ] {
        assert_eq!(output_schema(&doc, &op(without.clone())), None, "{without}");
    }
    // The descriptor carries it.
    let mut doc = pets();
    doc["paths"]["/pets/{petId}"]["get"]["responses"] = json!({ "200": json_body(&pet) });
    let source = load(doc);
    assert!(tool(&source, "pets_get").output_schema.is_some());
    assert!(tool(&source, "put_pets_petId").output_schema.is_none());
}

#[test]
fn operations_become_tools_with_one_argument_object() {
    let source = load(pets());
    assert_eq!(names(&source), ["pets_get", "put_pets_petId"]);
    assert_eq!(source.base_url(), "https://eu.example.com/v1");

    let get = tool(&source, "pets_get");
    assert!(
        get.description.starts_with("One pet"),
        "{}",
        get.description
    );
    assert!(
        get.description.ends_with("GET /pets/{petId}"),
        "{}",
        get.description
    );
    let schema = &get.input_schema;
    let props = schema["properties"].as_object().unwrap();
    // Path first, then query; the header `fields` yields to the query one; Accept is ignored.
    assert_eq!(
        props.keys().collect::<Vec<_>>(),
        ["fields", "fields_header", "petId", "verbose"]
    );
    assert_eq!(schema["required"], json!(["petId", "verbose"]));
    assert_eq!(schema["additionalProperties"], json!(false));

    let put = tool(&source, "put_pets_petId");
    let schema = &put.input_schema;
    // The JSON body's properties are arguments of their own; `name` is required because
    // the body is and the body requires it.
    assert_eq!(schema["required"], json!(["petId", "name"]));
    assert_eq!(
        schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["age", "body_query", "name", "parent", "petId"]
    );
    // The query parameter called `body` yields to the request body.
    assert!(schema["properties"]["body_query"].is_object(), "{schema}");
    // A recursive component is copied once; 3.0 keywords are rewritten.
    let pet = &schema["$defs"]["Pet"];
    assert_eq!(
        pet["properties"]["parent"],
        json!({ "$ref": "#/$defs/Pet" })
    );
    assert_eq!(pet["properties"]["name"]["type"], json!(["string", "null"]));
    assert_eq!(
        pet["properties"]["age"],
        json!({ "type": "integer", "exclusiveMinimum": 0 })
    );
}

#[test]
fn arguments_are_checked_against_the_built_schema() {
    let source = load(pets());
    let op = &source.operations["put_pets_petId"];
    let schema = ArgumentSchema::compile(&op.input_schema);
    schema
        .check(
            "api.put_pets_petId",
            &json!({ "petId": 1, "name": null, "parent": { "name": "x" } }),
        )
        .unwrap();
    let e = schema
        .check("api.put_pets_petId", &json!({ "petId": "one", "name": 1 }))
        .unwrap_err();
    assert_eq!(e.code.as_str(), "invalid_arguments");
    let e = schema
        .check("api.put_pets_petId", &json!({ "petId": 1 }))
        .unwrap_err();
    assert!(e.message.contains("name"), "{}", e.message);
    let e = schema
        .check(
            "api.put_pets_petId",
            &json!({ "petId": 1, "name": "a", "nmae": 1 }),
        )
        .unwrap_err();
    assert!(e.message.contains("nmae"), "{}", e.message);
    // The old nested shape is an unknown argument now.
    let e = schema
        .check(
            "api.put_pets_petId",
            &json!({ "petId": 1, "body": { "name": "a" } }),
        )
        .unwrap_err();
    assert!(e.message.contains("body"), "{}", e.message);
}

fn bodies() -> Value {
    let json_body = |required: bool, schema: Value| json!({ "required": required, "content": { "application/json": { "schema": schema } } });
    json!({
        "openapi": "3.1.0",
        "info": { "title": "bodies", "version": "1" },
        "paths": {
            "/repos/{owner}/{repo}/issues/{issue_number}/comments": { "post": {
                "operationId": "issues/create-comment",
                "parameters": [
                    { "name": "owner", "in": "path", "required": true, "schema": { "type": "string" } },
                    { "name": "repo", "in": "path", "required": true, "schema": { "type": "string" } },
                    { "name": "issue_number", "in": "path", "required": true, "schema": { "type": "integer" } }
                ],
                "requestBody": json_body(true, json!({ "type": "object", "required": ["body"],
                    "properties": { "body": { "type": "string", "description": "The comment." } } }))
            } },
            "/variables/{name}": { "patch": {
                "operationId": "update-variable",
                "parameters": [
                    { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } },
                    { "name": "dry_run", "in": "query", "schema": { "type": "boolean" } }
                ],
                "requestBody": json_body(true, json!({ "type": "object", "required": ["name"],
                    "properties": { "name": { "type": "string" }, "value": { "type": "string" },
                        "dry_run": { "type": "integer" } } }))
            } },
            "/labels": {
                "put": { "operationId": "set-labels",
                    "requestBody": json_body(true, json!({ "type": "array", "items": { "type": "string" } })) },
                "post": { "operationId": "add-labels",
                    "requestBody": json_body(false, json!({ "oneOf": [
                        { "type": "string" }, { "type": "array", "items": { "type": "string" } } ] })) },
                "patch": { "operationId": "free-form",
                    "requestBody": json_body(true, json!({ "type": "object" })) }
            },
            "/optional": { "post": {
                "operationId": "optional",
                "requestBody": json_body(false, json!({ "type": "object", "required": ["a"],
                    "properties": { "a": { "type": "string" }, "b": { "type": "string" } },
                    "anyOf": [{ "required": ["a"] }, { "required": ["b"] }] }))
            } }
        }
    })
}

/// The issue's shapes: flattened properties, a collision under `body`, bodies that are not
/// objects under `body` whole, required only when the body is.
#[test]
fn object_bodies_are_flattened_into_the_arguments() {
    let source = load_with_base(bodies());
    let comment = &tool(&source, "issues_create_comment").input_schema;
    assert_eq!(
        comment["required"],
        json!(["owner", "repo", "issue_number", "body"])
    );
    assert_eq!(
        comment["properties"]["body"],
        json!({ "type": "string", "description": "The comment." })
    );
    assert_eq!(
        source.operations["issues_create_comment"]
            .body
            .as_ref()
            .unwrap()
            .shape,
        BodyShape::Flat {
            properties: vec!["body".into()],
            nested: vec![]
        }
    );

    // `name` and `dry_run` are parameters too: the body's stay under `body`.
    let variable = &tool(&source, "update_variable").input_schema;
    assert_eq!(variable["required"], json!(["name", "body"]));
    let props = variable["properties"].as_object().unwrap();
    assert_eq!(
        props.keys().collect::<Vec<_>>(),
        ["body", "dry_run", "name", "value"]
    );
    assert_eq!(props["dry_run"]["type"], "boolean");
    assert_eq!(props["body"]["required"], json!(["name"]));
    assert_eq!(
        props["body"]["properties"],
        json!({ "dry_run": { "type": "integer" }, "name": { "type": "string" } })
    );
    assert_eq!(props["body"]["additionalProperties"], json!(false));

    // Not objects (or free-form ones): the whole body is `body`.
    let set = &tool(&source, "set_labels").input_schema;
    assert_eq!(set["required"], json!(["body"]));
    assert_eq!(set["properties"]["body"]["type"], "array");
    let add = &tool(&source, "add_labels").input_schema;
    assert!(add.get("required").is_none(), "{add}");
    assert!(add["properties"]["body"]["oneOf"].is_array(), "{add}");
    let free = &tool(&source, "free_form").input_schema;
    assert_eq!(free["properties"]["body"]["type"], "object");
    for name in ["set_labels", "add_labels", "free_form"] {
        assert_eq!(
            source.operations[name].body.as_ref().unwrap().shape,
            BodyShape::Nested,
            "{name}"
        );
    }

    // An optional body's required properties are optional arguments; its constraints on
    // the object as a whole move up with its properties.
    let optional = &tool(&source, "optional").input_schema;
    assert!(optional.get("required").is_none(), "{optional}");
    assert_eq!(
        optional["anyOf"],
        json!([{ "required": ["a"] }, { "required": ["b"] }])
    );
    let schema = ArgumentSchema::compile(optional);
    schema.check("api.optional", &json!({ "b": "x" })).unwrap();
    schema.check("api.optional", &json!({})).unwrap_err();

    let schema = ArgumentSchema::compile(variable);
    schema
        .check(
            "api.update_variable",
            &json!({ "name": "OLD", "value": "v", "body": { "name": "NEW" } }),
        )
        .unwrap();
    let e = schema
        .check(
            "api.update_variable",
            &json!({ "name": "OLD", "value": "v" }),
        )
        .unwrap_err();
    assert!(e.message.contains("body"), "{}", e.message);
}

#[test]
fn hostile_schemas_fail_only_their_own_tool() {
    let many: Map<String, Value> = (0..10_000)
        .map(|i| (format!("p{i}"), json!({ "type": "string" })))
        .collect();
    let mut deep = json!({ "type": "string" });
    // 50 schema levels are 100 JSON levels: under the parser's limit of 128 (a document
    // nested deeper than that fails as a whole, with the line and column).
    for _ in 0..50 {
        deep = json!({ "type": "object", "properties": { "a": deep } });
    }
    let body = |schema: Value| json!({ "requestBody": { "content": { "application/json": { "schema": schema } } } });
    let doc = json!({
        "openapi": "3.1.0",
        "info": { "title": "t", "version": "1" },
        "paths": {
            "/many": { "post": body(json!({ "type": "object", "properties": many })) },
            "/deep": { "post": body(deep) },
            "/remote": { "post": body(json!({ "$ref": "https://evil.example/schema.json" })) },
            "/missing": { "post": body(json!({ "$ref": "#/components/schemas/Nope" })) },
            "/cycle": { "post": body(json!({ "$ref": "#/x/a" })) },
            "/keywords": {
                "get": {
                    "operationId": "delete",
                    "description": "ends a comment */ and has /* another",
                    "parameters": [
                        { "name": "class", "in": "query", "schema": { "type": "string" } },
                        { "name": "a*/b", "in": "query", "schema": { "type": "string", "description": "*/ evil" } }
                    ]
                }
            }
        },
        "x": { "a": { "properties": { "b": { "$ref": "#/x/a" } } } }
    });
    let source = load_with_base(doc);
    let problem = |t: &str| {
        source
            .problem(t)
            .unwrap_or_else(|| panic!("{t} should have a problem"))
            .to_owned()
    };
    assert!(
        problem("post_many").contains("10000 properties"),
        "{}",
        problem("post_many")
    );
    assert!(
        problem("post_deep").contains("nested more than"),
        "{}",
        problem("post_deep")
    );
    assert!(
        problem("post_remote").contains("remote $ref"),
        "{}",
        problem("post_remote")
    );
    assert!(
        problem("post_missing").contains("unresolved $ref"),
        "{}",
        problem("post_missing")
    );
    assert!(
        problem("post_cycle").contains("cycle"),
        "{}",
        problem("post_cycle")
    );
    assert!(
        tool(&source, "post_many")
            .description
            .contains("Unavailable:")
    );
    // Keywords and comment terminators are names and text like any other.
    assert_eq!(source.problem("delete"), None);
    let kw = tool(&source, "delete");
    assert!(kw.input_schema["properties"]["class"].is_object());
    assert!(kw.input_schema["properties"]["a*/b"].is_object());
    assert!(kw.description.contains("*/"));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt
        .block_on(source.call_tool("post_many", json!({}), &CallContext::new("e", "p", 1)))
        .into_result()
        .unwrap_err();
    assert_eq!(e.code.as_str(), "invalid_schema");
    assert!(
        e.message.starts_with("api.post_many cannot be called: "),
        "{}",
        e.message
    );
}

fn load_with_base(document: Value) -> OpenApiSource {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api.json");
    std::fs::write(&path, document.to_string()).unwrap();
    let mut config = config(&path);
    config.base_url = Some("http://127.0.0.1:9/api/".into());
    OpenApiSource::load(config, Arc::new(SecretStore::empty())).unwrap()
}

#[test]
fn nested_and_self_multiplying_yaml_documents_are_refused_on_a_small_stack() {
    // The YAML parser's recursion and alias-repetition limits, pinned on a runtime
    // thread's 2 MiB stack: a policy drop-in may point at a document someone else wrote.
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("deep.yaml");
    std::fs::write(
        &deep,
        format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)),
    )
    .unwrap();
    let laughs = dir.path().join("laughs.yaml");
    let mut text = String::from("a: &a [x,x,x,x,x,x,x,x,x]\n");
    for (name, previous) in [
        ("b", "a"),
        ("c", "b"),
        ("d", "c"),
        ("e", "d"),
        ("f", "e"),
        ("g", "f"),
        ("h", "g"),
        ("i", "h"),
    ] {
        text.push_str(&format!(
            "{name}: &{name} [{}]\n",
            vec![format!("*{previous}"); 9].join(",")
        ));
    }
    std::fs::write(&laughs, text).unwrap();
    let errors = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            [deep, laughs]
                .iter()
                .map(|p| read_document(p).unwrap_err().to_string())
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .expect("the YAML parser overflowed a 2 MiB stack");
    assert!(
        errors[0].contains("recursion limit exceeded"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("repetition limit exceeded"),
        "{}",
        errors[1]
    );
}

#[test]
fn malformed_documents_name_the_file_and_position() {
    let (_d, r) = load_text(
        "bad.json",
        "{\n  \"openapi\": \"3.1.0\",\n  \"paths\": {,}\n}",
    );
    let e = r.unwrap_err().to_string();
    assert!(e.contains("/bad.json:3:13: invalid JSON"), "{e}");
    let (_d, r) = load_text("bad.yaml", "openapi: 3.1.0\npaths:\n  /a: [unclosed\n");
    let e = r.unwrap_err().to_string();
    assert!(e.contains("/bad.yaml:"), "{e}");
    assert!(e.contains("invalid YAML"), "{e}");
    let (_d, r) = load_text("swagger.yaml", "swagger: '2.0'\n");
    assert!(r.unwrap_err().to_string().contains("Swagger 2.0"));
    let (_d, r) = load_text(
        "v.json",
        r#"{"openapi": "3.1.0", "servers": [{"url": "http://h"}], "paths": {"/a": 1}}"#,
    );
    let e = r.unwrap_err().to_string();
    assert!(e.contains("#/paths/~1a: expected a path item"), "{e}");
    let (_d, r) = load_text(
        "v.json",
        r#"{"openapi": "3.1.0", "servers": [{"url": "/v1"}]}"#,
    );
    assert!(
        r.unwrap_err()
            .to_string()
            .contains("not an absolute http(s) URL")
    );
    let e = OpenApiSource::load(
        config(Path::new("/nonexistent/x.json")),
        Arc::new(SecretStore::empty()),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("/nonexistent/x.json: cannot read"), "{e}");
}

#[test]
fn yaml_documents_load_and_include_exclude_filter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api.yml");
    std::fs::write(
        &path,
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\nservers:\n  - url: http://localhost:8080\npaths:\n  /a:\n    get:\n      operationId: getA\n      responses:\n        200:\n          description: ok\n  /b:\n    get:\n      operationId: getB\n    delete:\n      operationId: deleteB\n",
    )
    .unwrap();
    let mut config = config(&path);
    config.include = vec!["get*".into(), "delete*".into()];
    config.exclude = vec!["getB".into()];
    let source = OpenApiSource::load(config, Arc::new(SecretStore::empty())).unwrap();
    assert_eq!(names(&source), ["deleteB", "getA"]);
    assert_eq!(source.base_url(), "http://localhost:8080/");
}

/// The safe methods only read; everything else may write.
#[test]
fn get_head_options_and_trace_operations_are_read_only() {
    let operations: Map<String, Value> = METHODS
        .iter()
        .map(|m| ((*m).to_owned(), json!({ "operationId": format!("op_{m}") })))
        .collect();
    let doc = json!({
        "openapi": "3.1.0",
        "info": { "title": "t", "version": "1" },
        "paths": { "/things": operations }
    });
    let source = load_with_base(doc);
    let read_only: Vec<&str> = source
        .descriptors()
        .iter()
        .filter(|t| t.read_only)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(read_only, ["op_get", "op_head", "op_options", "op_trace"]);
    assert!(!tool(&source, "op_post").read_only);
    let source = load(pets());
    assert!(tool(&source, "pets_get").read_only);
    assert!(!tool(&source, "put_pets_petId").read_only);
}

#[test]
fn only_writing_methods_carry_the_idempotency_key() {
    let carries: Vec<&str> = METHODS
        .iter()
        .filter(|m| {
            carries_idempotency_key(
                &reqwest::Method::from_bytes(m.to_ascii_uppercase().as_bytes()).unwrap(),
            )
        })
        .copied()
        .collect();
    assert_eq!(carries, ["put", "post", "delete", "patch"]);
}

#[test]
fn request_pieces() {
    assert_eq!(
        method_path_name("get", "/pets/{petId}/toys"),
        "get_pets_petId_toys"
    );
    assert_eq!(percent_encode("a/b?c#d e~"), "a%2Fb%3Fc%23d%20e~");
    let pieces: Vec<String> = template_pieces("/r/{owner}/{repo}.git")
        .into_iter()
        .map(|p| match p {
            Piece::Literal(t) => format!("L{t}"),
            Piece::Var(v) => format!("V{v}"),
        })
        .collect();
    assert_eq!(pieces, ["L/r/", "Vowner", "L/", "Vrepo", "L.git"]);
    let param = |style: Option<&str>, explode| Param {
        arg: "q".into(),
        name: "q".into(),
        location: Location::Query,
        style: style.map(str::to_owned),
        explode,
    };
    assert_eq!(
        query_pairs(&param(None, true), &json!([1, 2])),
        [("q".into(), "1".into()), ("q".into(), "2".into())]
    );
    assert_eq!(
        query_pairs(&param(None, false), &json!([1, 2])),
        [("q".to_owned(), "1,2".to_owned())]
    );
    assert_eq!(
        query_pairs(&param(Some("deepObject"), true), &json!({"a": 1})),
        [("q[a]".to_owned(), "1".to_owned())]
    );
    let long = "x".repeat(5000);
    let e = excerpt(&long);
    assert!(e.starts_with(&"x".repeat(MAX_EXCERPT_BYTES)));
    assert!(e.ends_with("… (5000 bytes in all)"), "{e}");
    assert!(e.len() < MAX_EXCERPT_BYTES + 40);
    let a = Url::parse("https://h:443/x").unwrap();
    assert!(same_origin(&a, &Url::parse("https://h/y").unwrap()));
    assert!(!same_origin(&a, &Url::parse("http://h/y").unwrap()));
    assert!(!same_origin(&a, &Url::parse("https://h:8443/y").unwrap()));
}
