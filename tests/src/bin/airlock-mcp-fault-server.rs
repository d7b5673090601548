//! A fault-injection MCP server for the end-to-end tests and the MCP benchmark, built with the
//! official Rust SDK (`rmcp`) so everything it does right is done the way real servers do it,
//! and everything it does wrong is done on purpose.
//!
//! ```text
//! airlock-mcp-fault-server [--fail-start] [--require-env NAME] [--legacy] [--endless-pages] [--linger] [--http 127.0.0.1:PORT]
//! ```
//!
//! - default: MCP over stdio (newline-delimited JSON-RPC on stdin/stdout);
//! - `--http ADDR`: Streamable HTTP at `/mcp` on `ADDR` (port 0 picks a free port). The first
//!   line on stdout is always the endpoint's URL, `http://127.0.0.1:PORT/mcp`, so a test can
//!   start it with port 0 and read where it listens;
//! - `--fail-start`: exits with code 1 before reading anything (a server that cannot start);
//! - `--require-env NAME`: exits with code 2 unless `NAME` is in the environment. Either way it
//!   writes only the variable's *name* to stderr, never its value (it may be a secret);
//! - `--legacy`: supports only the protocol revisions that have `initialize` (up to
//!   2025-11-25), like servers built before 2026-07-28;
//! - `--endless-pages`: `tools/list` answers every page with one more tool and a `nextCursor`,
//!   for ever;
//! - `--linger`: when the session ends (stdin closed), stays alive instead of exiting, like a
//!   server that does not notice its client is gone: only a signal ends it.
//!
//! Tools (every one answers in either era of the protocol: rmcp's server handles both
//! `initialize` and `server/discover`, and without `--legacy` offers 2026-07-28 too):
//!
//! | tool | arguments | behaviour |
//! |---|---|---|
//! | `echo` | `{text}` | answers `text` |
//! | `sleep` | `{ms}` | answers `"slept"` after `ms` milliseconds (calls run concurrently) |
//! | `crash` | `{}` | the process exits with code 3 in the middle of the call, without answering |
//! | `hang` | `{}` | never answers |
//! | `cut` | `{}` | stdio: writes the first half of its answer (no newline), then closes stdout (every descriptor of the pipe; `/dev/null` goes in their place) and lives on until stdin closes |
//! | `big` | `{mb}` | answers a text result of `mb` MiB (`"xxx…"`) |
//! | `garbage` | `{kind?}` | breaks the JSON-RPC stream, see below, and never answers the call |
//! | `add_tool` | `{name, quiet?}` | adds a tool `name` (which echoes its arguments as JSON) and sends `notifications/tools/list_changed`, unless `quiet` is true (a server that misses telling) |
//! | `progress` | `{steps, delay_ms}` | sends `steps` progress notifications (1..=steps of `steps`, with a message) on the request's progress token, if it has one, then answers `"done"` |
//! | `stderr` | `{text}` | writes `text` to stderr, answers `"written"` |
//! | `meta` | `{}` | answers the request's `_meta` as a JSON object; annotated `readOnlyHint: true` |
//! | `sloppy` | `{kind}` | has an `outputSchema` (`{count: integer, status: "ok" \| "failed", tags?: string[], note?: string}`) and answers `{count: "3", status: "OK", tags: "x", note: null}` (`kind: "trivial"`: every field a near miss) or `count: "three"` (`"broken"`) |
//!
//! `garbage` kinds (stdio): `"text"` (default) writes the line `this is not JSON-RPC`;
//! `"shape"` writes well-formed JSON that is no JSON-RPC message; `"result"` writes a response
//! to this very call whose `result` is not a tool result. Over HTTP the tool's POST is instead
//! answered with `200 application/json` and a body that is not JSON.
//!
//! "Never answers" holds while the client is there: when stdin closes, `hang`, `garbage` and
//! open `subscriptions/listen` streams end, so the server exits at once (rmcp's server would
//! otherwise wait 5 s for them, and its client 3 s before SIGTERM, on every test teardown).

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{Request, Response, StatusCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig, ServerNotification, SubscriptionFilter,
    Tool, ToolAnnotations, ToolListChangedNotification,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext, SubscriptionSink};
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::convert::Infallible;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Refuse absurd `big` requests rather than exhaust the machine's memory.
const MAX_BIG_MB: u64 = 1024;

#[derive(Debug, Clone)]
struct FaultServer {
    /// Tools added by `add_tool`, shared by every session (HTTP makes one handler per session).
    added: Arc<Mutex<Vec<String>>>,
    /// Open `subscriptions/listen` streams (protocol 2026-07-28 and later, where list changes
    /// go only to clients that asked for them).
    /// Keyed by a number of their own: request ids may repeat across HTTP clients.
    listeners: Arc<Mutex<Vec<(u64, SubscriptionSink)>>>,
    /// Whether stdout is the JSON-RPC stream (`garbage` writes to it).
    stdio: bool,
    /// Only the revisions with `initialize` (`--legacy`).
    legacy: bool,
    /// `tools/list` never ends (`--endless-pages`).
    endless_pages: bool,
    /// Becomes `true` when the client closed stdin (never in HTTP mode).
    client_gone: tokio::sync::watch::Receiver<bool>,
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn object(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    schema(json!({"type": "object", "properties": properties, "required": required}))
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t)]).into())
}

fn invalid(message: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(message.into(), None)
}

impl FaultServer {
    fn tools(&self) -> Vec<Tool> {
        let int = json!({"type": "integer", "minimum": 0});
        let mut tools = vec![
            Tool::new(
                "echo",
                "Answers its text.",
                object(json!({"text": {"type": "string"}}), &["text"]),
            ),
            Tool::new(
                "sleep",
                "Answers after ms milliseconds.",
                object(json!({"ms": int}), &["ms"]),
            ),
            Tool::new(
                "crash",
                "Exits the server (code 3) without answering.",
                object(json!({}), &[]),
            ),
            Tool::new("hang", "Never answers.", object(json!({}), &[])),
            Tool::new(
                "cut",
                "Closes stdout in the middle of its answer.",
                object(json!({}), &[]),
            ),
            Tool::new(
                "big",
                "Answers a text of mb MiB.",
                object(json!({"mb": int}), &["mb"]),
            ),
            Tool::new(
                "garbage",
                "Writes something that is not a JSON-RPC message and never answers.",
                object(
                    json!({"kind": {"type": "string", "enum": ["text", "shape", "result"]}}),
                    &[],
                ),
            ),
            Tool::new(
                "add_tool",
                "Adds a tool that echoes its arguments and announces the change.",
                object(
                    json!({"name": {"type": "string"}, "quiet": {"type": "boolean"}}),
                    &["name"],
                ),
            ),
            Tool::new(
                "progress",
                "Reports progress steps times, then answers done.",
                object(json!({"steps": int, "delay_ms": int}), &["steps"]),
            ),
            Tool::new(
                "stderr",
                "Writes text to the server's stderr.",
                object(json!({"text": {"type": "string"}}), &["text"]),
            ),
            Tool::new(
                "meta",
                "Answers the _meta of its own request.",
                object(json!({}), &[]),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new(
                "sloppy",
                "Answers a result that breaks its own outputSchema: trivially, or not.",
                object(
                    json!({"kind": {"type": "string", "enum": ["trivial", "broken"]}}),
                    &["kind"],
                ),
            )
            .with_raw_output_schema(schema(json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer"},
                    "status": {"type": "string", "enum": ["ok", "failed"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "note": {"type": "string"}
                },
                "required": ["count", "status"]
            }))),
        ];
        let added = self
            .added
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        tools.extend(added.into_iter().map(|name| {
            Tool::new(
                name,
                "Added at run time; echoes its arguments.",
                schema(json!({"type": "object"})),
            )
        }));
        tools
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let str_arg = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        let int_arg = |key: &str| args.get(key).and_then(Value::as_u64);
        match request.name.as_ref() {
            "echo" => text(str_arg("text").ok_or_else(|| invalid("echo needs text"))?),
            "sleep" => {
                let ms = int_arg("ms").ok_or_else(|| invalid("sleep needs ms"))?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                text("slept")
            }
            "crash" => {
                eprintln!("crash: exiting with code 3 in the middle of a call");
                std::process::exit(3)
            }
            "hang" => Err(self.until_client_gone().await),
            "cut" => {
                if !self.stdio {
                    return Err(invalid("cut works over stdio only"));
                }
                let answer = json!({
                    "jsonrpc": "2.0",
                    "id": context.id,
                    "result": {"content": [{"type": "text", "text": "never finished"}]}
                })
                .to_string();
                {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(&answer.as_bytes()[..answer.len() / 2]);
                    let _ = out.flush();
                    close_stdout();
                }
                eprintln!("cut: stdout closed in the middle of an answer");
                Err(self.until_client_gone().await)
            }
            "big" => {
                let mb = int_arg("mb").ok_or_else(|| invalid("big needs mb"))?;
                if mb > MAX_BIG_MB {
                    return Err(invalid(format!("big answers at most {MAX_BIG_MB} MiB")));
                }
                text("x".repeat((mb as usize) << 20))
            }
            "garbage" => {
                let kind = str_arg("kind").unwrap_or_else(|| "text".to_owned());
                if !self.stdio {
                    // Over HTTP the request never reaches a handler: see `route`.
                    return Err(invalid("garbage over HTTP is handled by the HTTP layer"));
                }
                let line = match kind.as_str() {
                    "text" => "this is not JSON-RPC".to_owned(),
                    "shape" => json!({"this": "is JSON but not JSON-RPC"}).to_string(),
                    "result" => json!({
                        "jsonrpc": "2.0",
                        "id": context.id,
                        "result": {"content": "not a list of content blocks", "isError": "maybe"}
                    })
                    .to_string(),
                    other => return Err(invalid(format!("unknown garbage kind `{other}`"))),
                };
                // Written past rmcp's writer, as one short write(2): while this is the only
                // call in flight (as in the tests) nothing else is on the stream to tear.
                {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(format!("{line}\n").as_bytes());
                    let _ = out.flush();
                }
                Err(self.until_client_gone().await)
            }
            "add_tool" => {
                let name = str_arg("name").ok_or_else(|| invalid("add_tool needs name"))?;
                if self.tools().iter().any(|t| t.name == name) {
                    return Err(invalid(format!("a tool named `{name}` exists already")));
                }
                self.added
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(name.clone());
                // Announced after the change, so a client that lists again sees the new tool.
                if !args.get("quiet").and_then(Value::as_bool).unwrap_or(false) {
                    self.announce_list_change(&context).await;
                }
                text(format!("added {name}"))
            }
            "progress" => {
                let steps = int_arg("steps").ok_or_else(|| invalid("progress needs steps"))?;
                let delay = Duration::from_millis(int_arg("delay_ms").unwrap_or(0));
                let token = context.meta.get_progress_token();
                for step in 1..=steps {
                    tokio::time::sleep(delay).await;
                    // Without a token the client asked for no progress: only the delays remain.
                    if let Some(token) = &token {
                        let note = ProgressNotificationParam::new(token.clone(), step as f64)
                            .with_total(steps as f64)
                            .with_message(format!("step {step} of {steps}"));
                        if let Err(e) = context.peer.notify_progress(note).await {
                            eprintln!("progress: cannot send a notification: {e}");
                        }
                    }
                }
                text("done")
            }
            "stderr" => {
                let t = str_arg("text").ok_or_else(|| invalid("stderr needs text"))?;
                eprintln!("{t}");
                text("written")
            }
            "sloppy" => {
                // `count` a numeric string, `status` in the wrong case, `tags` a scalar, `note`
                // null: trivial; `count` not a number at all: broken.
                let count = match str_arg("kind").as_deref() {
                    Some("broken") => "three",
                    _ => "3",
                };
                Ok(CallToolResult::structured(json!({
                    "count": count, "status": "OK", "tags": "x", "note": null
                }))
                .into())
            }
            "meta" => {
                // rmcp moves the request's `_meta` into the context; whatever it left in the
                // params is shown too.
                let mut meta = context.meta.0.0.clone();
                meta.extend(request.meta.map(|m| m.0.0).unwrap_or_default());
                text(Value::Object(meta).to_string())
            }
            name => {
                let added = self
                    .added
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .iter()
                    .any(|n| n == name);
                if !added {
                    return Err(ErrorData::invalid_params(
                        format!("no tool named `{name}`"),
                        None,
                    ));
                }
                text(Value::Object(args).to_string())
            }
        }
    }
}

/// Closes this process's every descriptor of the stdout pipe (fd 1, and rmcp's own copy,
/// which it reopened through `/proc/self/fd/1`), so the client reads end of file; `/dev/null`
/// takes each one's place, so later writes cannot land on a reused descriptor.
fn close_stdout() {
    use std::os::fd::AsRawFd as _;
    let Ok(pipe) = std::fs::read_link("/proc/self/fd/1") else {
        return;
    };
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
        return;
    };
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        if std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|l| l == pipe) {
            // SAFETY: dup2 onto a descriptor of this process's stdout pipe; `null` stays open
            // until after the loop.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

impl FaultServer {
    /// Waits until the client hung up (forever over HTTP); the error is for nobody.
    async fn until_client_gone(&self) -> ErrorData {
        let mut gone = self.client_gone.clone();
        if gone.wait_for(|gone| *gone).await.is_err() {
            // The sender lives as long as stdin is read: without it, never.
            std::future::pending::<()>().await;
        }
        ErrorData::internal_error("the client hung up", None)
    }

    /// `notifications/tools/list_changed` the way the call's protocol era wants it: unasked
    /// on the session before 2026-07-28, on the client's `subscriptions/listen` streams after.
    async fn announce_list_change(&self, context: &RequestContext<RoleServer>) {
        let modern = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        if !modern {
            if let Err(e) = context.peer.notify_tool_list_changed().await {
                eprintln!("add_tool: cannot send tools/list_changed: {e}");
            }
            return;
        }
        let sinks = self
            .listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(_, sink)| sink.clone())
            .collect::<Vec<_>>();
        if sinks.is_empty() {
            eprintln!("add_tool: no client listens for tool-list changes");
        }
        for sink in sinks {
            let note = ServerNotification::ToolListChangedNotification(
                ToolListChangedNotification::default(),
            );
            if let Err(e) = sink.send(note).await {
                eprintln!("add_tool: cannot send tools/list_changed: {e}");
            }
        }
    }
}

impl ServerHandler for FaultServer {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.legacy {
            Cow::Borrowed(ProtocolVersion::known_up_to(
                &ProtocolVersion::LATEST_WITH_INITIALIZE,
            ))
        } else {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp narrows this to what the client asked for and what get_info advertises.
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let key = NEXT.fetch_add(1, Ordering::Relaxed);
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((key, context.sink().clone()));
        tokio::select! {
            () = context.cancelled() => {}
            _ = self.until_client_gone() => {}
        }
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(k, _)| *k != key);
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "airlock-mcp-fault-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if self.endless_pages {
            let page: u64 = request
                .and_then(|r| r.cursor)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let tool = Tool::new(
                format!("page_{page}"),
                "One of endless pages.",
                object(json!({}), &[]),
            );
            let mut result = ListToolsResult::with_all_items(vec![tool]);
            result.next_cursor = Some((page + 1).to_string());
            return Ok(result);
        }
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }
}

struct Options {
    fail_start: bool,
    legacy: bool,
    endless_pages: bool,
    linger: bool,
    require_env: Option<String>,
    http: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        fail_start: false,
        legacy: false,
        endless_pages: false,
        linger: false,
        require_env: None,
        http: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--fail-start" => options.fail_start = true,
            "--legacy" => options.legacy = true,
            "--linger" => options.linger = true,
            "--endless-pages" => options.endless_pages = true,
            "--require-env" => {
                options.require_env = Some(args.next().ok_or("--require-env needs a NAME")?);
            }
            "--http" => options.http = Some(args.next().ok_or("--http needs an ADDRESS")?),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(options)
}

type Body = BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, content_type: &str, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed());
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// Whether a POST body is a `tools/call` of `garbage` (which HTTP mode answers itself).
fn calls_garbage(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|m| m["method"] == "tools/call" && m["params"]["name"] == "garbage")
}

/// `/mcp` goes to rmcp's Streamable HTTP service, except `garbage`, which gets a body that is
/// not JSON; anything else is 404.
async fn route(
    service: StreamableHttpService<FaultServer, LocalSessionManager>,
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, Infallible> {
    if request.uri().path() != "/mcp" {
        return Ok(plain(StatusCode::NOT_FOUND, "text/plain", "not found\n"));
    }
    let (parts, body) = request.into_parts();
    // Buffered so the garbage call can be recognised; requests to a test server are small.
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return Ok(plain(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "unreadable body\n",
        ));
    };
    if calls_garbage(&body) {
        return Ok(plain(
            StatusCode::OK,
            "application/json",
            "this is not JSON-RPC\n",
        ));
    }
    let mut service = service;
    tower_service::Service::call(&mut service, Request::from_parts(parts, Full::new(body))).await
}

async fn serve_http(server: FaultServer, address: &str) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| format!("cannot listen on {address}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "http://{bound}/mcp")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write the URL to stdout: {e}"))?;
    drop(stdout);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("accept failed: {e}"))?;
        let service = service.clone();
        tokio::spawn(async move {
            let handler =
                hyper::service::service_fn(move |request| route(service.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), handler)
                .await;
        });
    }
}

/// Stdin that reports end of file (the client hung up) on `gone`.
struct WatchedStdin {
    inner: rmcp::transport::StdioReader,
    gone: tokio::sync::watch::Sender<bool>,
}

impl tokio::io::AsyncRead for WatchedStdin {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, std::task::Poll::Ready(Ok(()))) && buf.filled().len() == before {
            self.gone.send_replace(true);
        }
        polled
    }
}

async fn serve_stdio(
    server: FaultServer,
    gone: tokio::sync::watch::Sender<bool>,
) -> Result<(), String> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let stdin = WatchedStdin { inner: stdin, gone };
    let running = server
        .serve((stdin, stdout))
        .await
        .map_err(|e| format!("the MCP handshake failed: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("the MCP session failed: {e}"))?;
    Ok(())
}

fn main() {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("airlock-mcp-fault-server: {e}");
            std::process::exit(64);
        }
    };
    if options.fail_start {
        eprintln!("airlock-mcp-fault-server: --fail-start: exiting before the handshake");
        std::process::exit(1);
    }
    if let Some(name) = &options.require_env {
        if std::env::var_os(name).is_none() {
            eprintln!("airlock-mcp-fault-server: the environment has no {name}");
            std::process::exit(2);
        }
        eprintln!("airlock-mcp-fault-server: {name} is set");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("airlock-mcp-fault-server: no runtime: {e}");
            std::process::exit(70);
        }
    };
    let (gone, client_gone) = tokio::sync::watch::channel(false);
    let server = FaultServer {
        client_gone,
        added: Arc::default(),
        listeners: Arc::default(),
        stdio: options.http.is_none(),
        legacy: options.legacy,
        endless_pages: options.endless_pages,
    };
    let result = runtime.block_on(async {
        match &options.http {
            Some(address) => serve_http(server, address).await,
            None => serve_stdio(server, gone).await,
        }
    });
    if options.linger {
        // A server that does not notice its client is gone: only a signal ends it.
        eprintln!("airlock-mcp-fault-server: --linger: the session ended, staying alive");
        loop {
            std::thread::park();
        }
    }
    if let Err(e) = result {
        eprintln!("airlock-mcp-fault-server: {e}");
        std::process::exit(1);
    }
}
