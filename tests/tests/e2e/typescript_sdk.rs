//! The generated TypeScript SDK is valid TypeScript: `tsc` (the `typescript` package from npm,
//! installed by `.ci/run`) checks it strictly, for hostile schemas and for a real server's
//! catalogue, and a program written against it is type-checked for real.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::sdk::{SdkFiles, SdkTool};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::ToolSource;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::type_check::{check, tsc};
use serde_json::{Value, json};
use std::sync::Arc;

fn tool(namespace: &str, name: &str, input: Value) -> SdkTool {
    SdkTool {
        namespace: namespace.into(),
        name: name.into(),
        description: format!("The {name} tool."),
        input_schema: input,
        output_schema: None,
        learned: None,
    }
}

#[test]
fn hostile_schemas_still_give_valid_typescript() {
    let Some(tsc) = tsc("hostile_schemas_still_give_valid_typescript") else {
        return;
    };
    let mut deep = json!({"type": "string"});
    for _ in 0..300 {
        deep = json!({"type": "object", "properties": {"next": deep}});
    }
    let many: serde_json::Map<String, Value> = (0..10_000)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"type": "integer", "description": format!("field {i}")}),
            )
        })
        .collect();
    let tools = vec![
        tool("hostile", "deep", deep),
        tool(
            "hostile",
            "wide",
            json!({"type": "object", "properties": many}),
        ),
        tool(
            "hostile",
            "recursive",
            json!({
                "$ref": "#/$defs/a",
                "$defs": {
                    "a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}, "self": {"$ref": "#/$defs/a"}}},
                    "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "array", "items": {"$ref": "#/$defs/b"}}]},
                    "loop1": {"$ref": "#/$defs/loop2"},
                    "loop2": {"oneOf": [{"$ref": "#/$defs/loop1"}, {"type": "null"}]},
                    "uses_loop": {"$ref": "#/$defs/loop1"}
                }
            }),
        ),
        tool(
            "hostile",
            "loops",
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/l1"}}, "$defs": {"l1": {"$ref": "#/$defs/l2"}, "l2": {"$ref": "#/$defs/l1"}}}),
        ),
        tool(
            "hostile",
            "names",
            json!({
                "type": "object",
                "description": "closes */ the comment /* and @param tricks",
                "properties": {
                    "delete": {"type": "string", "description": "a keyword */ injected"},
                    "class": {"type": "string"},
                    "constructor": {"type": "number"},
                    "__proto__": {"type": "boolean"},
                    "a*/b": {"type": "string"},
                    "quote\"back\\slash": {"type": "string"},
                    "new\nline": {"type": "string"},
                    "ünïcode ✓": {"type": "string"},
                    "": {"type": "string"},
                    "123": {"type": "string"}
                },
                "required": ["delete", "a*/b"]
            }),
        ),
        tool(
            "hostile",
            "odd_values",
            json!({
                "type": "object",
                "properties": {
                    "e": {"enum": ["*/", "a\"b", 1.5, -2, true, null, {"x": 1}, [1]]},
                    "c": {"const": "x\u{2028}y"},
                    "t": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "number"}},
                    "old_tuple": {"type": "array", "items": [{"type": "string"}, {"type": "boolean"}], "additionalItems": false},
                    "mixed": {"type": ["string", "integer", "null", "array", "object"], "items": {"type": "string"}},
                    "nullable_oas": {"type": "string", "nullable": true},
                    "bare_ref": {"$ref": "http://example.com/elsewhere.json"},
                    "bad_ref": {"$ref": "#/nowhere/at/all"},
                    "extra": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "number"}},
                    "map": {"type": "object", "additionalProperties": {"type": "boolean"}},
                    "closed": {"type": "object", "additionalProperties": false},
                    "never": false,
                    "anything": true,
                    "all": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"required": ["a"]}]},
                    "not_a_schema": 42
                }
            }),
        ),
        tool("hostile", "not_an_object", json!("nonsense")),
        tool("hostile", "delete", json!({"type": "object"})),
        tool("hostile", "getX", json!({})),
        tool("hostile", "get_x", json!({})),
        tool(
            "plain",
            "echo",
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        ),
    ];
    // The same hostile schemas as output schemas, with descriptions that try to close the
    // comment around them.
    let tools: Vec<SdkTool> = tools
        .into_iter()
        .flat_map(|t| {
            let mut typed = t.clone();
            typed.name = format!("{}_out", t.name);
            typed.output_schema = Some(match t.input_schema.clone() {
                Value::Object(mut o) => {
                    o.insert(
                        "description".into(),
                        json!("result */ export const y = 2; /*"),
                    );
                    Value::Object(o)
                }
                other => other,
            });
            [t, typed]
        })
        .collect();
    let started = std::time::Instant::now();
    let sdk = SdkFiles::generate(&tools);
    eprintln!(
        "generated {} files in {:?}",
        sdk.files.len(),
        started.elapsed()
    );
    assert_eq!(
        SdkFiles::generate(&tools),
        sdk,
        "generation is deterministic"
    );
    assert!(
        sdk.files.values().all(|text| !text.contains("result */")),
        "a description closed a comment"
    );
    let (ok, out) = check(&tsc, &sdk, &[]);
    assert!(ok, "tsc rejected the generated SDK:\n{out}");
}

#[test]
fn programs_are_checked_against_the_types() {
    let Some(tsc) = tsc("programs_are_checked_against_the_types") else {
        return;
    };
    let tools = vec![
        SdkTool {
            namespace: "math".into(),
            name: "add".into(),
            description: "Adds.".into(),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            output_schema: Some(
                json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}),
            ),
            learned: None,
        },
        tool("math", "delete", json!({"type": "object"})),
    ];
    let sdk = SdkFiles::generate(&tools);
    let good = "const r = await tools.math.add({ a: 1, b: 2 });\nconst n: number = r.sum;\nawait tools.math.delete({});\ntry { await tools.math.add({ a: 1, b: 2 }) } catch (e) { if (e instanceof ToolError) console.log(e.code, e.hint) }\nprogress({ done: n });\nconst id: string = crypto.randomUUID();\nconst bytes: Uint8Array = crypto.getRandomValues(new Uint8Array(4));\nconst took: number = performance.now();\nconsole.log(id, bytes, took);\n";
    let (ok, out) = check(&tsc, &sdk, &[("program.ts", good)]);
    assert!(ok, "a correct program was rejected:\n{out}");
    for (bad, expected) in [
        ("await tools.math.add({ a: \"1\", b: 2 });\n", "TS2322"),
        ("await tools.math.add({ a: 1 });\n", "TS2741"),
        ("await tools.math.sub({ a: 1, b: 2 });\n", "TS2339"),
        (
            "const s: string = (await tools.math.add({ a: 1, b: 2 })).sum;\n",
            "TS2322",
        ),
        ("await fetch(\"https://example.com\");\n", "TS2304"),
        (
            "const r = await tools.math.add({ a: 1, b: 2 });\nconsole.log(r.total);\n",
            "TS2339",
        ),
    ] {
        let (ok, out) = check(&tsc, &sdk, &[("program.ts", bad)]);
        assert!(!ok, "tsc accepted a wrong program: {bad}");
        assert!(out.contains(expected), "{bad}: expected {expected}:\n{out}");
    }
}

/// A real server's whole catalogue (server-everything from npm) through the real MCP client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_servers_catalogue_type_checks() {
    let Some(tsc) = tsc("a_real_servers_catalogue_type_checks") else {
        return;
    };
    let Some(config) = airlock_tests::mcp_peers::server_everything(
        "everything",
        "a_real_servers_catalogue_type_checks",
    ) else {
        return;
    };
    let server = McpServer::new(config, Arc::new(SecretStore::empty()));
    let tools: Vec<SdkTool> = server
        .tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.sdk_tool("everything"))
        .collect();
    server.shutdown().await;
    assert!(tools.len() >= 10, "{tools:?}");
    let sdk = SdkFiles::generate(&tools);
    let program = "const s = await tools.everything.get_sum({ a: 1, b: 2 });\nconst e = await tools.everything.echo({ message: \"hi\" });\n";
    let (ok, out) = check(&tsc, &sdk, &[("program.ts", program)]);
    assert!(ok, "tsc rejected server-everything's SDK:\n{out}");
    let file = &sdk.files["servers/everything/get_sum.ts"];
    assert!(file.contains("a: number;"), "{file}");
}

/// server-everything's `get-structured-content` declares an `outputSchema` and answers with
/// `structuredContent`: the SDK the daemon serves types the result by it, a program using the
/// typed field passes `tsc` and runs through the daemon with that value, and a program that
/// misuses the field is rejected by `tsc`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_content_is_typed_end_to_end() {
    let test = "structured_content_is_typed_end_to_end";
    let Some(tsc) = tsc(test) else {
        return;
    };
    let Some(config) = airlock_tests::mcp_peers::server_everything("everything", test) else {
        return;
    };
    let server = Arc::new(McpServer::new(config, Arc::new(SecretStore::empty())));
    let d = airlock_tests::TestDaemon::start_with(
        airlock_tests::DaemonOptions::default().source(server.clone()),
    )
    .await;
    // The SDK as the daemon serves it.
    let mut client = d.client().await;
    let (_, listing) = client.get("/v1/sdk").await.unwrap();
    let listing: Value = serde_json::from_str(&listing).unwrap();
    let mut files = std::collections::BTreeMap::new();
    for file in listing["files"].as_array().unwrap() {
        let path = file["path"].as_str().unwrap();
        let (status, text) = client.get(&format!("/v1/sdk/{path}")).await.unwrap();
        assert!(status.is_success(), "{path}: {text}");
        files.insert(path.to_owned(), text);
    }
    let file = &files["servers/everything/get_structured_content.ts"];
    assert!(
        file.contains("temperature: number;") && file.contains("conditions: string;"),
        "{file}"
    );
    assert!(
        file.contains("=> Promise<GetStructuredContentOutput>;"),
        "{file}"
    );
    let sdk = SdkFiles { files };
    let program = "const w = await tools.everything.get_structured_content({ location: \"Chicago\" });\nconst t: number = w.temperature;\nconst c: string = w.conditions;\n({ warmer: t + 1, c, humidity: w.humidity });\n";
    let (ok, out) = check(&tsc, &sdk, &[("program.ts", program)]);
    assert!(ok, "a correct program was rejected:\n{out}");
    let r = d.exec(program).await;
    assert_eq!(
        r.result,
        json!({"warmer": 37, "c": "Light rain / drizzle", "humidity": 82}),
        "{r:?}"
    );
    for (misuse, code) in [
        (
            "const w = await tools.everything.get_structured_content({ location: \"Chicago\" });\nconst t: string = w.temperature;\n",
            "TS2322",
        ),
        (
            "const w = await tools.everything.get_structured_content({ location: \"Chicago\" });\nw.wind;\n",
            "TS2339",
        ),
    ] {
        let (ok, out) = check(&tsc, &sdk, &[("program.ts", misuse)]);
        assert!(
            !ok && out.contains(code),
            "{misuse}: expected {code}:\n{out}"
        );
    }
    d.stop().await;
    server.shutdown().await;
}
