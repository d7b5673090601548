//! The MCP server: rmcp's `ServerHandler` over the execution service and the generation in
//! force, and the Streamable HTTP service that serves it at `/mcp`.

use super::{instructions, render, tools};
use crate::agent_api::{
    ClientResult, ClientToolSpec, ExecutionEvent, ExecutionRequest, ExecutionResponse,
    RequestLanguage,
};
use crate::api::http::{HttpState, Peer};
use crate::execution::{Started, SubmitError, Tracked};
use crate::generation::PolicyGeneration;
use crate::tools::builtin;
use airlock_policy::Principal;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult,
    Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;

/// The Streamable HTTP service at `/mcp`. Stateless: each POST is answered on its own (with
/// JSON, or with an event stream when progress notifications precede the answer), so the
/// daemon keeps nothing per client and a restart loses nothing.
/// The largest body `/mcp` takes, as `POST /v1/executions/<id>/results` does: one client
/// result may fill a frame to the worker (16 MiB). Programs are held to the principal's
/// `max_code` by the service.
pub const MAX_REQUEST_BODY_BYTES: usize = 32 * 1024 * 1024;

pub fn service() -> StreamableHttpService<McpDoor, NeverSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    // The route reads the body first, to this bound; rmcp's own is the same.
    config.max_request_body_bytes = MAX_REQUEST_BODY_BYTES;
    // `Host` and `Origin` were checked by the route before the request got here, as for every
    // route of the socket (`api::http::local_only`): rmcp's own check is switched off, so
    // there is one rule and one answer for a foreign name.
    config.allowed_hosts = Vec::new();
    StreamableHttpService::new(
        || Ok(McpDoor),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// The handler. It has no state of its own: the daemon's state and the caller come with each
/// request, in the HTTP request's extensions (put there by the route).
#[derive(Debug, Clone, Copy, Default)]
pub struct McpDoor;

/// Who asks, under which policy: the peer as the route admitted it, under the generation it
/// was admitted by (the route puts it in the HTTP request's extensions).
#[derive(Clone)]
pub struct Admitted {
    pub state: Arc<HttpState>,
    pub peer: Arc<Peer>,
    pub generation: Arc<PolicyGeneration>,
    pub principal: Arc<Principal>,
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitted")
            .field("peer", &self.peer)
            .field("principal", &self.principal.name)
            .finish_non_exhaustive()
    }
}

impl Admitted {
    fn of(context: &RequestContext<RoleServer>) -> Result<Admitted, McpError> {
        context
            .extensions
            .get::<hyper::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Admitted>())
            .cloned()
            .ok_or_else(|| {
                McpError::internal_error(
                    "the request did not come through the daemon's socket",
                    None,
                )
            })
    }
}

impl ServerHandler for McpDoor {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        let caller = Admitted::of(&context)?;
        let view = caller.generation.catalogue_view(&caller.principal).await;
        Ok(result.with_instructions(instructions(&view.sdk)))
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        let caller = Admitted::of(&context)?;
        let view = caller.generation.catalogue_view(&caller.principal).await;
        let info = self.get_info().with_instructions(instructions(&view.sdk));
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::all().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        tools::all().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = Admitted::of(&context)?;
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let result = match request.name.as_ref() {
            tools::SEARCH_TOOLS => search_tools(&caller, args).await,
            tools::READ_SDK => read_sdk(&caller, args).await,
            tools::EXECUTE => execute(&caller, args, &context).await,
            tools::SUBMIT_RESULTS => submit_results(&caller, args, &context).await,
            tools::RESUME => resume(&caller, args, &context).await,
            tools::STATUS => status(&caller, args),
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "no tool `{other}`; the tools are search_tools, read_sdk, execute, submit_results, resume and status"
                    ),
                    None,
                ));
            }
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// The arguments of a tool, or a tool error saying what was wrong with them.
fn arguments<T: for<'de> Deserialize<'de>>(tool: &str, args: Value) -> Result<T, CallToolResult> {
    serde_json::from_value(args).map_err(|e| {
        render::refusal(
            &format!("the arguments of {tool} are not valid: {e}"),
            Some("tools/list gives each tool's input schema"),
        )
    })
}

/// The facade's names for the discovery tools, in the messages and hints of
/// [`builtin`]'s answers, which the facade shares with `tools.airlock.*`.
const CALLED_AS: builtin::CalledAs = builtin::CalledAs {
    search_tools: tools::SEARCH_TOOLS,
    read_sdk: tools::READ_SDK,
};

/// A refused discovery call, with the built-in's message and hint.
fn tool_error(e: &crate::agent_api::ToolError) -> CallToolResult {
    render::refusal(&e.message, e.hint.as_deref())
}

async fn search_tools(caller: &Admitted, args: Value) -> CallToolResult {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        query: String,
        #[serde(default)]
        limit: Option<usize>,
        #[serde(default)]
        language: Option<String>,
    }
    let args: Args = match arguments(tools::SEARCH_TOOLS, args) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let view = caller.generation.catalogue_view(&caller.principal).await;
    // The same JSON as GET /v1/tools/search and tools.airlock.search_tools; the text is it
    // as a model reads it.
    let asked =
        serde_json::json!({ "query": args.query, "limit": args.limit, "language": args.language });
    let found = match builtin::search_tools(&view, &asked, CALLED_AS) {
        Ok(found) => found,
        Err(e) => return tool_error(&e),
    };
    let hits = found["results"].as_array().cloned().unwrap_or_default();
    let mut text = String::new();
    if hits.is_empty() {
        text.push_str(
            "no tool matches; try other words, or read_sdk README.md for the namespaces\n",
        );
    }
    for hit in &hits {
        let field = |name: &str| hit[name].as_str().unwrap_or_default().to_owned();
        text.push_str(&format!(
            "{}\n  {} ({})\n",
            field("signature"),
            field("summary"),
            field("file")
        ));
    }
    for source in &view.unavailable {
        text.push_str(&format!(
            "note: the tools of `{}` are unavailable right now: {}\n",
            source.namespace, source.error
        ));
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(found);
    result
}

async fn read_sdk(caller: &Admitted, args: Value) -> CallToolResult {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        language: Option<String>,
    }
    let args: Args = match arguments(tools::READ_SDK, args) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    // A model may write the path with spaces around it or a leading slash.
    let path = args
        .path
        .as_deref()
        .map(|p| p.trim().trim_start_matches('/'));
    let view = caller.generation.catalogue_view(&caller.principal).await;
    let asked = serde_json::json!({ "path": path, "language": args.language });
    match builtin::read_sdk(&view, &asked, CALLED_AS) {
        // One file's text.
        Ok(Value::String(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
        // The tree (the same JSON as GET /v1/sdk), listed as a model reads it.
        Ok(tree) => {
            let mut text = String::from("SDK files (read README.md first):\n");
            for file in tree["files"].as_array().into_iter().flatten() {
                text.push_str(&format!(
                    "{} ({} bytes)\n",
                    file["path"].as_str().unwrap_or_default(),
                    file["bytes"]
                ));
            }
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(tree);
            result
        }
        Err(e) => tool_error(&e),
    }
}

async fn execute(
    caller: &Admitted,
    args: Value,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        code: String,
        #[serde(default)]
        language: RequestLanguage,
        #[serde(default)]
        session: Option<String>,
        #[serde(default)]
        timeout_ms: Option<u64>,
        #[serde(default)]
        client_tools: Vec<ClientToolSpec>,
    }
    let args: Args = match arguments(tools::EXECUTE, args) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let request = ExecutionRequest {
        code: args.code,
        language: args.language,
        session: args.session,
        timeout_ms: args.timeout_ms,
        client_tools: args.client_tools,
        ..ExecutionRequest::default()
    };
    let (events, rx) = progress_channel(context);
    let started = caller
        .state
        .executions
        .submit(crate::execution::Submission {
            request,
            peer: caller.peer.info,
            principal: caller.principal.clone(),
            generation: caller.generation.clone(),
            events,
            resumed_from: None,
        })
        .await;
    answer(started, rx, context).await
}

async fn submit_results(
    caller: &Admitted,
    args: Value,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        id: String,
        results: Vec<ClientResult>,
    }
    let args: Args = match arguments(tools::SUBMIT_RESULTS, args) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let (events, rx) = progress_channel(context);
    let started = caller
        .state
        .executions
        .answer_waiting(
            &args.id,
            args.results,
            caller.peer.info,
            caller.principal.clone(),
            caller.generation.clone(),
            events,
        )
        .await;
    answer(started, rx, context).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    id: String,
}

async fn resume(
    caller: &Admitted,
    args: Value,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let args: IdArgs = match arguments(tools::RESUME, args) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let (events, rx) = progress_channel(context);
    let started = caller
        .state
        .executions
        .resume(
            &args.id,
            caller.peer.info,
            caller.principal.clone(),
            caller.generation.clone(),
            events,
        )
        .await;
    answer(started, rx, context).await
}

fn status(caller: &Admitted, args: Value) -> CallToolResult {
    let args: IdArgs = match arguments(tools::STATUS, args) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let value = match caller
        .state
        .executions
        .lookup(&args.id, &caller.principal.name)
    {
        Ok(Tracked::Detached(log)) => serde_json::to_value(log.snapshot(&args.id)).ok(),
        Ok(Tracked::Attached) => Some(serde_json::json!({ "id": args.id, "status": "running" })),
        Ok(Tracked::Kept { response, .. }) => {
            // A whole response: shown as execute shows it.
            if let Ok(response) = serde_json::from_str::<ExecutionResponse>(&response) {
                return render::execution(&response);
            }
            serde_json::from_str(&response).ok()
        }
        Ok(Tracked::Row(row)) => serde_json::to_value(row).ok(),
        Err(e) => {
            return render::refusal(
                &e.to_string(),
                Some(
                    "the id is one an execute answer gave you; other principals' executions are not visible",
                ),
            );
        }
    };
    let value = value.unwrap_or(Value::Null);
    let mut result = CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(&value).unwrap_or_default(),
    )]);
    result.structured_content = Some(value);
    result
}

/// An event channel when the client asked for progress (a `progressToken`), else none.
fn progress_channel(
    context: &RequestContext<RoleServer>,
) -> (
    Option<mpsc::Sender<ExecutionEvent>>,
    Option<mpsc::Receiver<ExecutionEvent>>,
) {
    if context.meta.get_progress_token().is_some() {
        let (tx, rx) = mpsc::channel(64);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    }
}

/// Waits for the execution's response; with events, turns them into progress notifications
/// on the way. A client that cancels the request (or goes away) drops this future, and with
/// it the execution's handle or event channel, which stops the program as on the HTTP door.
async fn answer(
    started: Result<Started, SubmitError>,
    rx: Option<mpsc::Receiver<ExecutionEvent>>,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let started = match started {
        Ok(s) => s,
        Err(e) => return refused(&e),
    };
    let Some(mut rx) = rx else {
        let response = tokio::select! {
            r = started.response() => r,
            () = context.ct.cancelled() => return render::refusal("the request was cancelled; the program was stopped", None),
        };
        return match response {
            Ok(response) => render::execution(&response),
            Err(e) => refused(&e),
        };
    };
    // The result comes as the last event.
    drop(started);
    let token = context.meta.get_progress_token();
    let mut progress = 0.0;
    loop {
        let event = tokio::select! {
            e = rx.recv() => e,
            () = context.ct.cancelled() => return render::refusal("the request was cancelled; the program was stopped", None),
        };
        let Some(event) = event else {
            return render::refusal(
                "the execution ended without a result",
                Some(
                    "run the program again; if this repeats, the operator should check the airlockd log",
                ),
            );
        };
        let (message, total) = match event {
            ExecutionEvent::Result(response) => return render::execution(&response),
            ExecutionEvent::Started { id, .. } => (format!("execution {id} started"), None),
            ExecutionEvent::Progress { value } => (format!("progress: {value}"), None),
            ExecutionEvent::ToolCallStarted { id, tool } => (format!("call {id}: {tool}"), None),
            ExecutionEvent::ToolProgress {
                tool,
                progress: done,
                total,
                message,
                ..
            } => {
                let of = total.map(|t| format!("/{t}")).unwrap_or_default();
                let note = message.map(|m| format!(" {m}")).unwrap_or_default();
                (format!("{tool}: {done}{of}{note}"), None::<f64>)
            }
            ExecutionEvent::ToolCallFinished {
                id, tool, outcome, ..
            } => (
                format!("call {id}: {tool} {}", render::wire_name(&outcome)),
                None,
            ),
            // Console output comes back with the result.
            ExecutionEvent::Console { .. } => continue,
        };
        let Some(token) = token.clone() else { continue };
        // MCP progress must grow with every notification: each event is one step.
        progress += 1.0;
        let _ = context
            .peer
            .notify_progress({
                let param = ProgressNotificationParam::new(token, progress).with_message(message);
                match total {
                    Some(total) => param.with_total(total),
                    None => param,
                }
            })
            .await;
    }
}

fn refused(e: &SubmitError) -> CallToolResult {
    render::refusal(&e.to_string(), Some(&e.hint()))
}
