//! Coercion of near misses (`coerce = "safe"`, the default) against real tool sources: a real
//! MCP server from npm (`@modelcontextprotocol/server-everything`), an OpenAPI source calling
//! a local HTTP server, and the fault server's tool whose results break its `outputSchema`.
//! Each rule is checked by what the service received and by the trace's `coercions`; each
//! refusal by the error the program got; `coerce = "off"` keeps today's errors.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{CoercePolicy, OpenApiSource as OpenApiConfig};
use airlock_supervisor::agent_api::{Coercion, CoercionPlace, CoercionRule, Status};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_supervisor::tools::sources::openapi::OpenApiSource;
use airlock_tests::mcp_peers::server_everything;
use airlock_tests::{DaemonOptions, TestDaemon, fault_server};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `(pointer, from, to)` of a call's coercions.
fn moves(coercions: &[Coercion]) -> Vec<(String, Value, Option<Value>)> {
    coercions
        .iter()
        .map(|c| (c.pointer.clone(), c.from.clone(), c.to.clone()))
        .collect()
}

fn mcp(config: airlock_policy::ToolServer) -> Arc<McpServer> {
    Arc::new(McpServer::new(config, Arc::new(SecretStore::empty())))
}

/// server-everything's `get-sum` gets numbers for numeric strings, `echo` a string for a
/// number, `get-annotated-message` its enum member and a boolean, `get-structured-content`
/// the city spelled as its enum spells it; literal near misses are contract warnings, not
/// refusals. What cannot be coerced is refused, and a server with `coerce = "off"` refuses it
/// all as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_misses_reach_server_everything_coerced_and_traced() {
    let test = "near_misses_reach_server_everything_coerced_and_traced";
    let Some(safe) = server_everything("everything", test) else {
        return;
    };
    let mut off = server_everything("strict", test).unwrap();
    off.coerce = CoercePolicy::Off;
    let d =
        TestDaemon::start_with(DaemonOptions::default().source(mcp(safe)).source(mcp(off))).await;
    let r = d
        .exec(
            r#"
const sum = await tools.everything.get_sum({ a: "100", b: 2 });
const echoed = await tools.everything.echo({ message: 5 });
const annotated = await tools.everything.get_annotated_message({ messageType: "ERROR", includeImage: "true" });
const plain = await tools.everything.get_annotated_message({ messageType: "success", includeImage: null });
const weather = await tools.everything.get_structured_content({ location: "chicago" });
async function fails(f: () => Promise<unknown>) {
  try { await f(); return null } catch (e: any) { return { code: e.code, message: e.message, hint: e.hint } }
}
// Not literals, so the contract check leaves them to the call-time check.
const dynamic = (args: any) => args;
const lossy = await fails(() => tools.everything.get_sum(dynamic({ a: "12abc", b: 1 })));
const spaced = await fails(() => tools.everything.get_sum(dynamic({ a: " 1", b: 1 })));
const yes = await fails(() => tools.everything.get_annotated_message(dynamic({ messageType: "error", includeImage: "yes" })));
const required = await fails(() => tools.everything.get_sum(dynamic({ a: null, b: 1 })));
const strict = await fails(() => tools.strict.get_sum(dynamic({ a: "100", b: 2 })));
const strictSum = await tools.strict.get_sum({ a: 100, b: 2 });
({ sum, echoed, annotated: annotated.map((c: any) => c.type), plain, weather, lossy, spaced, yes, required, strict, strictSum })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let v = &r.result;
    // What the server received, by what it answered.
    assert_eq!(v["sum"], json!("The sum of 100 and 2 is 102."), "{v}");
    assert_eq!(v["echoed"], json!("Echo: 5"), "{v}");
    assert!(
        v["annotated"].as_array().unwrap().contains(&json!("image")),
        "{v}"
    );
    assert!(
        // Without the image: one text block, which the program gets as its text.
        v["plain"] == json!("Operation completed successfully"),
        "{v}"
    );
    assert!(v["weather"]["temperature"].is_number(), "{v}");
    assert_eq!(v["strictSum"], json!("The sum of 100 and 2 is 102."), "{v}");

    // The trace: the program's arguments, and beside them what was coerced.
    let call = |i: usize| &r.tool_calls[i];
    assert_eq!(call(0).args, json!({"a": "100", "b": 2}));
    assert_eq!(
        moves(&call(0).coercions),
        [("/a".into(), json!("100"), Some(json!(100)))]
    );
    assert_eq!(call(0).coercions[0].place, CoercionPlace::Arguments);
    assert_eq!(call(0).coercions[0].rule, CoercionRule::NumberFromString);
    assert_eq!(
        moves(&call(1).coercions),
        [("/message".into(), json!(5), Some(json!("5")))]
    );
    assert_eq!(
        moves(&call(2).coercions),
        [
            ("/includeImage".into(), json!("true"), Some(json!(true))),
            ("/messageType".into(), json!("ERROR"), Some(json!("error"))),
        ]
    );
    assert_eq!(
        moves(&call(3).coercions),
        [("/includeImage".into(), Value::Null, None)]
    );
    assert_eq!(call(3).coercions[0].rule, CoercionRule::NullOmitted);
    assert_eq!(
        moves(&call(4).coercions),
        [("/location".into(), json!("chicago"), Some(json!("Chicago")))]
    );

    // Refused: lossy or ambiguous near misses, null for a required argument, and anything
    // where the source says coerce = "off". The errors say what the schema wants.
    for key in ["lossy", "spaced", "yes", "required", "strict"] {
        assert_eq!(v[key]["code"], "invalid_arguments", "{key}: {v}");
    }
    let lossy = v["lossy"]["message"].as_str().unwrap();
    assert!(
        lossy.contains("\"12abc\"") && lossy.contains("number"),
        "{lossy}"
    );
    assert!(
        v["lossy"]["hint"].as_str().unwrap().contains("a: number"),
        "{v}"
    );
    assert!(
        v["strict"]["message"].as_str().unwrap().contains("\"100\""),
        "{v}"
    );
    for i in 5..r.tool_calls.len() {
        assert!(call(i).coercions.is_empty(), "{:?}", call(i));
    }

    // The contract check warned about the literal near misses it saw before the run.
    let warned: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| w.contains("the daemon will coerce it"))
        .collect();
    assert!(
        warned.iter().any(|w| w.contains("get_sum")
            && w.contains("`a` (/a) is \"100\"")
            && w.contains("to 100")),
        "{:?}",
        r.warnings
    );
    assert!(
        warned.iter().any(|w| w.contains("by leaving it out")),
        "{:?}",
        r.warnings
    );
    // And the response names every coercion the calls made, not only the first: all six,
    // with the tool, the place, the pointer and both values.
    let made = r
        .warnings
        .iter()
        .find(|w| w.contains("coerced to their tools' schemas"))
        .unwrap_or_else(|| panic!("no coercion warning: {:?}", r.warnings));
    assert!(made.starts_with("6 value(s) were coerced"), "{made}");
    for named in [
        "tools.everything.get_sum arguments /a \"100\"→100",
        "tools.everything.echo arguments /message 5→\"5\"",
        "/includeImage \"true\"→true",
        "/messageType \"ERROR\"→\"error\"",
        "/includeImage null→left out",
        "tools.everything.get_structured_content arguments /location \"chicago\"→\"Chicago\"",
    ] {
        assert!(made.contains(named), "{named} missing from: {made}");
    }

    // A literal that cannot be coerced is still refused before the run.
    let refused = d
        .exec(r#"await tools.everything.get_sum({ a: "12abc", b: 1 })"#)
        .await;
    assert_eq!(refused.status, Status::Error, "{refused:?}");
    let e = refused.error.unwrap();
    assert_eq!(e.kind.as_str(), "contract");
    assert_eq!(
        e.message,
        "tools.everything.get_sum: argument `a` must be number, not string"
    );
    // And so is a literal near miss for the server that does not coerce.
    let refused = d
        .exec(r#"await tools.strict.get_sum({ a: "100", b: 1 })"#)
        .await;
    assert_eq!(refused.status, Status::Error, "{refused:?}");
    assert_eq!(refused.error.unwrap().kind.as_str(), "contract");

    // Counted in the metrics, by place and rule.
    let (_, metrics) = d.client().await.get("/metrics").await.unwrap();
    assert!(
        metrics.contains(
            "airlock_coercions_total{place=\"arguments\",rule=\"number_from_string\"} 1\n"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("airlock_coercions_total{place=\"arguments\",rule=\"enum_case\"} 2\n"),
        "{metrics}"
    );
    d.stop().await;
}

/// The fault server's `sloppy` tool answers a result that breaks its `outputSchema` in trivial
/// ways: the program gets it coerced and the trace marks each coercion as the result's. One
/// that breaks it for real still fails, and with `coerce = "off"` the trivial one fails too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_that_break_an_output_schema_trivially_are_coerced_and_marked() {
    let safe = fault_server::stdio("faults", &[]);
    let mut off = fault_server::stdio("strict", &[]);
    off.coerce = CoercePolicy::Off;
    let d =
        TestDaemon::start_with(DaemonOptions::default().source(mcp(safe)).source(mcp(off))).await;
    let r = d
        .exec(
            r#"
async function fails(f: () => Promise<unknown>) {
  try { await f(); return null } catch (e: any) { return { code: e.code, message: e.message } }
}
const mended = await tools.faults.sloppy({ kind: "trivial" });
const broken = await fails(() => tools.faults.sloppy({ kind: "broken" }));
const strict = await fails(() => tools.strict.sloppy({ kind: "trivial" }));
({ mended, broken, strict })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let v = &r.result;
    assert_eq!(
        v["mended"],
        json!({"count": 3, "status": "ok", "tags": ["x"]}),
        "{v}"
    );
    for key in ["broken", "strict"] {
        assert_eq!(v[key]["code"], "upstream_error", "{key}: {v}");
        assert!(
            v[key]["message"]
                .as_str()
                .unwrap()
                .contains("breaks its own outputSchema"),
            "{key}: {v}"
        );
    }
    let coercions = &r.tool_calls[0].coercions;
    assert!(
        coercions.iter().all(|c| c.place == CoercionPlace::Result),
        "{coercions:?}"
    );
    assert_eq!(
        moves(coercions),
        [
            ("/count".into(), json!("3"), Some(json!(3))),
            ("/note".into(), Value::Null, None),
            ("/status".into(), json!("OK"), Some(json!("ok"))),
            ("/tags".into(), json!("x"), Some(json!(["x"]))),
        ]
    );
    assert!(r.tool_calls[1].coercions.is_empty());
    assert!(r.tool_calls[2].coercions.is_empty());
    // What was withheld is reality contradicting the declared schema: counted as drift (the
    // mended result fits it, so it is not).
    let (_, metrics) = d.client().await.get("/metrics").await.unwrap();
    for (tool, n) in [("faults.sloppy", 1), ("strict.sloppy", 1)] {
        assert!(
            metrics.contains(&format!(
                "airlock_learned_type_drift_total{{tool=\"{tool}\"}} {n}\n"
            )),
            "{tool}: {metrics}"
        );
    }
    let (_, learned) = d
        .client()
        .await
        .get("/v1/sdk/learned?tool=faults.sloppy")
        .await
        .unwrap();
    assert!(
        learned.contains("at .count: declared integer, observed string in 1 of 2 calls"),
        "{learned}"
    );
    d.stop().await;
}

/// One request as the local API saw it.
#[derive(Debug, Clone)]
struct Seen {
    target: String,
    body: String,
}

/// A tiny HTTP/1.1 API on 127.0.0.1: `/stats` answers a result that breaks its declared
/// schema trivially; everything else echoes the request.
async fn local_api() -> (u16, Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(at) = text.find("\r\n\r\n") {
                        let head = text[..at].to_owned();
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if buf.len() >= at + 4 + length {
                            break (head, text[at + 4..at + 4 + length].to_owned());
                        }
                    }
                };
                let target = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                log.lock().unwrap().push(Seen {
                    target: target.clone(),
                    body: body.clone(),
                });
                let answer = if target.starts_with("/v1/stats") {
                    json!({"count": "3", "status": "OK", "tags": "x"})
                } else {
                    json!({"target": target, "body": serde_json::from_str::<Value>(&body).unwrap_or(Value::Null)})
                }
                .to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, seen, task)
}

const STORE_YAML: &str = r##"
openapi: 3.1.0
info: { title: store, version: "1" }
paths:
  /items/{itemId}:
    get:
      operationId: items/get
      parameters:
        - { name: itemId, in: path, required: true, schema: { type: integer } }
        - { name: tags, in: query, schema: { type: array, items: { type: string } } }
        - { name: fresh, in: query, schema: { type: boolean } }
      responses:
        "200": { description: the item }
  /items:
    post:
      operationId: items/create
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/NewItem" }
      responses:
        "201": { description: created }
  /stats:
    get:
      operationId: stats
      responses:
        "200":
          description: counts
          content:
            application/json:
              schema:
                type: object
                required: [count, status]
                properties:
                  count: { type: integer }
                  status: { type: string, enum: [ok, failed] }
                  tags: { type: array, items: { type: string } }
components:
  schemas:
    NewItem:
      type: object
      required: [name, version]
      additionalProperties: false
      properties:
        name: { type: string }
        kind: { type: string, enum: [book, disc] }
        price: { type: number }
        count: { type: integer }
        due: { type: string, format: date }
        at: { type: string, format: date-time }
        note: { type: string }
        version: { const: "v1" }
        sku: { type: string, pattern: "^[A-Z]{3}-[0-9]+$" }
"##;

/// An OpenAPI source: a numeric string for an integer path parameter, a scalar for an array
/// query parameter, `"false"` for a boolean, and in a JSON body an enum's case, numbers,
/// dates in the schema's format and `null` for an optional property, all as the API received
/// them. Refused: a lossy number, a `const` and a `pattern` mismatch; a date alone for a
/// date-time is not coerced (it goes as it came: formats are not asserted). The stats result
/// breaks its declared schema trivially and arrives coerced and marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openapi_source_gets_coerced_arguments_and_gives_coerced_results() {
    let (port, seen, task) = local_api().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("store.yaml");
    std::fs::write(&spec, STORE_YAML).unwrap();
    let config = |name: &str, coerce| OpenApiConfig {
        name: name.into(),
        spec: spec.clone(),
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        auth: None,
        call_timeout_ms: 10_000,
        max_concurrent_calls: 4,
        coerce,
        learn_types: true,
        include: Vec::new(),
        exclude: Vec::new(),
    };
    let secrets = Arc::new(SecretStore::empty());
    let store = OpenApiSource::load(config("store", CoercePolicy::Safe), secrets.clone()).unwrap();
    let strict = OpenApiSource::load(config("strict", CoercePolicy::Off), secrets).unwrap();
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .source(Arc::new(store))
            .source(Arc::new(strict)),
    )
    .await;
    let r = d
        .exec(
            r#"
async function fails(f: () => Promise<unknown>) {
  try { await f(); return null } catch (e: any) { return { code: e.code, message: e.message } }
}
const dynamic = (args: any) => args;
const item = await tools.store.items_get({ itemId: "7", tags: "new", fresh: "false" });
const created = await tools.store.items_create({
  name: 12, kind: "BOOK", price: "9.5", count: "3", due: "2026-11-20T00:00:00Z",
  at: "2026-11-20 10:00:00+0100", note: null, version: "v1", sku: "ABC-1",
});
const stats = await tools.store.stats({});
const strictStats = await tools.strict.stats({});
const lossy = await fails(() => tools.store.items_create(dynamic({ name: "a", version: "v1", count: "3.5" })));
const constant = await fails(() => tools.store.items_create(dynamic({ name: "a", version: "V1" })));
const pattern = await fails(() => tools.store.items_create(dynamic({ name: "a", version: "v1", sku: "abc-1" })));
// A date alone for a date-time is not coerced (the time and zone would be invented); the
// validator does not assert formats, so it goes as it came, as it did before coercion.
const zoneless = await tools.store.items_create(dynamic({ name: "a", version: "v1", at: "2026-11-20" }));
const strict = await fails(() => tools.strict.items_get(dynamic({ itemId: "7" })));
({ item, created, stats, strictStats, lossy, constant, pattern, zoneless, strict })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let v = &r.result;
    assert_eq!(
        v["item"]["target"],
        json!("/v1/items/7?tags=new&fresh=false"),
        "{v}"
    );
    assert_eq!(
        v["created"]["body"],
        json!({
            "name": "12", "kind": "book", "price": 9.5, "count": 3, "due": "2026-11-20",
            "at": "2026-11-20T10:00:00+01:00", "version": "v1", "sku": "ABC-1"
        }),
        "{v}"
    );
    assert_eq!(
        v["stats"],
        json!({"count": 3, "status": "ok", "tags": ["x"]}),
        "{v}"
    );
    // A source with coerce = "off" hands its results on as they came (it never checked them).
    assert_eq!(
        v["strictStats"],
        json!({"count": "3", "status": "OK", "tags": "x"}),
        "{v}"
    );
    assert_eq!(
        v["zoneless"]["body"],
        json!({"name": "a", "version": "v1", "at": "2026-11-20"}),
        "{v}"
    );
    for key in ["lossy", "constant", "pattern"] {
        assert_eq!(v[key]["code"], "invalid_arguments", "{key}: {v}");
    }
    assert_eq!(v["strict"]["code"], "invalid_arguments", "{v}");

    let rules = |i: usize| -> Vec<(String, CoercionRule)> {
        r.tool_calls[i]
            .coercions
            .iter()
            .map(|c| (c.pointer.clone(), c.rule))
            .collect()
    };
    assert_eq!(
        rules(0),
        [
            ("/fresh".into(), CoercionRule::BooleanFromString),
            ("/itemId".into(), CoercionRule::NumberFromString),
            ("/tags".into(), CoercionRule::WrapInArray),
        ]
    );
    assert_eq!(
        rules(1),
        [
            ("/at".into(), CoercionRule::DateFormat),
            ("/count".into(), CoercionRule::NumberFromString),
            ("/due".into(), CoercionRule::DateFormat),
            ("/kind".into(), CoercionRule::EnumCase),
            ("/name".into(), CoercionRule::StringFromScalar),
            ("/note".into(), CoercionRule::NullOmitted),
            ("/price".into(), CoercionRule::NumberFromString),
        ]
    );
    assert!(
        r.tool_calls[2]
            .coercions
            .iter()
            .all(|c| c.place == CoercionPlace::Result)
    );
    assert_eq!(r.tool_calls[2].coercions.len(), 3);
    for i in 3..r.tool_calls.len() {
        assert!(
            r.tool_calls[i].coercions.is_empty(),
            "{:?}",
            r.tool_calls[i]
        );
    }
    // Refused calls never reached the API.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5, "{seen:?}");
    // What went over the wire: the coerced values.
    assert_eq!(seen[0].target, "/v1/items/7?tags=new&fresh=false");
    let body: Value = serde_json::from_str(&seen[1].body).unwrap();
    assert_eq!((&body["count"], &body["kind"]), (&json!(3), &json!("book")));
    assert!(body.get("note").is_none(), "{body}");
    d.stop().await;
    task.abort();
}

/// The real `airlockd` takes `coerce` from its policy file, per source: the default coerces a
/// number for a string, `coerce = "off"` refuses it as before.
#[test]
fn the_policy_files_coerce_key_decides_per_source() {
    use airlock_supervisor::agent_api::ExecutionRequest;
    use airlock_supervisor::client::Client;
    use airlock_tests::real_daemon::{self, RealDaemon, fault_server_entry};

    let dir = tempfile::tempdir().unwrap();
    let sources = format!(
        "{}{}coerce = \"off\"\n",
        fault_server_entry("loose", 10_000, &[]),
        fault_server_entry("strict", 10_000, &[])
    );
    let mut daemon = RealDaemon::start(
        dir.path(),
        &real_daemon::policy(dir.path(), 0, &sources),
        |_| {},
    );
    let code = r#"
const dynamic = (a: any) => a;
const loose = await tools.loose.echo({ text: 5 });
let strict = null;
try { await tools.strict.echo(dynamic({ text: 5 })) } catch (e: any) { strict = e.code }
({ loose, strict })
"#;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let r = rt.block_on(async {
        let mut client = Client::connect(&daemon.socket).await.unwrap();
        client
            .execute(&ExecutionRequest {
                code: code.to_owned(),
                timeout_ms: Some(30_000),
                ..Default::default()
            })
            .await
            .unwrap()
    });
    assert_eq!(r.status, Status::Ok, "{r:?}\n{}", daemon.log());
    // `echo` refuses anything but a string `text`, so an answer means it got "5"; its text
    // answer "5" reaches the program as JSON, the number 5.
    assert_eq!(r.result, json!({"loose": 5, "strict": "invalid_arguments"}));
    assert_eq!(
        moves(&r.tool_calls[0].coercions),
        [("/text".into(), json!(5), Some(json!("5")))]
    );
    assert!(r.tool_calls[1].coercions.is_empty());
    assert!(daemon.stop().is_some_and(|s| s.success()));
}
