//! One call on a running server: the `tools/call` request (with the call's idempotency
//! key in its `_meta`), its progress forwarded to the agent, the deadline, and the answer
//! mapped to the value the program receives.

use super::McpServer;
use super::connection::{AbandonedCall, InFlight, Live};
use super::stdio::MAX_STDIO_MESSAGE;
use crate::tools::coercion::OutputSchema;
use crate::tools::{
    CallContext, CallDeadline, IDEMPOTENCY_META_KEY, SecretsUsed, SourceAnswer, ToolError,
    ToolErrorCode, ToolProgress,
};
use airlock_policy::CoercePolicy;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ProgressNotificationParam, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long a call that ended short of its announced progress total waits for the updates
/// still on their way.
const PROGRESS_GRACE: Duration = Duration::from_millis(200);

impl McpServer {
    /// One call on the running server (started if needed). The answer carries the secret
    /// values the server was started with, whatever the outcome: anything it says may echo
    /// them.
    pub(super) async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
    ) -> SourceAnswer {
        let live = match self.connected().await {
            Ok(live) => live,
            Err(e) => return SourceAnswer::new(Err(e)),
        };
        let secrets = SecretsUsed::clone(&live.secrets);
        let answer = match self.tool_result(tool, args, ctx, live, &secrets).await {
            Ok((result, output)) => to_value(
                &self.config.name,
                tool,
                result,
                output.as_deref(),
                self.config.coerce,
            ),
            Err(e) => SourceAnswer::new(Err(e)),
        };
        answer.with_secrets(secrets)
    }

    /// The server's answer to one `tools/call` on `live`, with the tool's compiled output
    /// schema; its progress goes to the agent with `secrets` redacted.
    async fn tool_result(
        &self,
        tool: &str,
        args: Value,
        ctx: &CallContext,
        live: Live,
        secrets: &SecretsUsed,
    ) -> Result<(CallToolResult, Option<Arc<OutputSchema>>), ToolError> {
        let Live {
            generation,
            oversized,
            dropped,
            in_flight,
            peer,
            catalogue,
            progress: routes,
            ..
        } = live;
        let oversized_before = oversized.load(Ordering::Relaxed);
        let Some(found) = catalogue.tools.iter().find(|t| t.descriptor.name == tool) else {
            return Err(ToolError::new(
                ToolErrorCode::UnknownTool,
                format!("server `{}` has no tool named `{tool}`", self.config.name),
            ));
        };
        let params = request(&found.original, args, ctx.idempotency_key.as_deref())?;
        // The pipeline's deadline (a direct call without one gets the server's own timeout).
        let deadline = ctx.deadline.unwrap_or(CallDeadline {
            at: tokio::time::Instant::now() + self.gate.timeout(),
            after: self.gate.timeout(),
        });
        let timeout = deadline.remaining();
        // rmcp sends `notifications/cancelled` itself when this timeout passes.
        let handle = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                PeerRequestOptions::with_timeout(timeout),
            )
            .await
            .map_err(|e| self.call_failed(tool, &e))?;
        let mut abandoned = AbandonedCall {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let (mut progress, _route) = routes.subscribe(handle.progress_token.clone());
        let response = handle.await_response();
        tokio::pin!(response);
        let _waiting = InFlight::enter(&in_flight);
        let mut last_progress: Option<(f64, Option<f64>)> = None;
        let answer = loop {
            let notified = dropped.notified();
            tokio::pin!(notified);
            tokio::select! {
                answer = &mut response => break answer,
                Some(update) = progress.recv() => {
                    last_progress = Some((update.progress, update.total));
                    forward(&ctx.progress, update, secrets).await;
                }
                () = &mut notified => {
                    // A message was too big to read. With no other call waiting it can only
                    // have been this call's answer; otherwise each waiting call learns of it
                    // when its timeout passes (below).
                    if in_flight.load(Ordering::Relaxed) == 1 {
                        // (The abandoned-call guard tells the server to stop.)
                        return Err(self.too_large(tool));
                    }
                }
            }
        };
        abandoned.peer = None;
        last_progress_updates(&mut progress, last_progress, &ctx.progress, secrets).await;
        let result = match answer {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(ServerResult::InputRequiredResult(_)) => {
                return Err(ToolError::new(
                    ToolErrorCode::UpstreamError,
                    format!(
                        "{}.{tool} asked for input from a user, which a sandboxed program cannot give",
                        self.config.name
                    ),
                ));
            }
            Ok(ServerResult::CreateTaskResult(_)) => {
                return Err(ToolError::new(
                    ToolErrorCode::UpstreamError,
                    format!(
                        "{}.{tool} answered with a long-running task, which Airlock does not follow yet",
                        self.config.name
                    ),
                ));
            }
            Ok(_) => {
                return Err(self.call_failed(tool, &ServiceError::UnexpectedResponse));
            }
            Err(ServiceError::Timeout { .. })
                if oversized.load(Ordering::Relaxed) > oversized_before =>
            {
                return Err(self.too_large(tool));
            }
            Err(ServiceError::Timeout { .. }) => {
                self.discard_if_unresponsive(&peer, generation).await;
                return Err(deadline.error(&format!("{}.{tool}", self.config.name)));
            }
            Err(e) => {
                if matches!(
                    e,
                    ServiceError::TransportSend(_) | ServiceError::TransportClosed
                ) {
                    self.discard(generation).await;
                }
                return Err(self.call_failed(tool, &e));
            }
        };
        Ok((result, found.output.clone()))
    }

    fn too_large(&self, tool: &str) -> ToolError {
        ToolError::new(ToolErrorCode::ResultTooLarge,
            format!(
                "{}.{tool}: the server sent a message of over {} MiB, which was dropped unread; the result cannot reach the program",
                self.config.name,
                MAX_STDIO_MESSAGE >> 20
            ),
        )
        .with_hint("ask the tool for less at a time (pagination, filters, a smaller range)")
    }

    fn call_failed(&self, tool: &str, e: &ServiceError) -> ToolError {
        let detail = match e {
            ServiceError::TransportClosed => {
                "the connection to the server closed before it answered (the server may have crashed; it is started again on the next call)".to_owned()
            }
            ServiceError::McpError(error) => format!("the server answered with an error: {}", error.message),
            ServiceError::TransportSend(e) => {
                // rmcp's message starts with the transport's Rust type name, which tells a
                // program nothing.
                let text = e.to_string();
                let reason = text.split_once("] error: ").map_or(text.as_str(), |(_, r)| r);
                format!("the request could not be delivered: {reason}")
            }
            other => other.to_string(),
        };
        ToolError::new(
            ToolErrorCode::UpstreamError,
            format!("calling {}.{tool} failed: {detail}", self.config.name),
        )
    }
}

async fn forward(
    progress: &ToolProgress,
    update: ProgressNotificationParam,
    secrets: &SecretsUsed,
) {
    progress
        .report(update.progress, update.total, update.message, secrets)
        .await;
}

/// The `tools/call` request for the server's tool `original`, with `key` (the call's
/// idempotency key) in its `_meta`.
fn request(
    original: &str,
    args: Value,
    key: Option<&str>,
) -> Result<CallToolRequestParams, ToolError> {
    let Value::Object(arguments) = args else {
        return Err(ToolError::new(
            ToolErrorCode::InvalidArguments,
            "arguments must be an object",
        ));
    };
    let mut params = CallToolRequestParams::new(original.to_owned()).with_arguments(arguments);
    if let Some(key) = key {
        // In the request's own `_meta`: rmcp adds its progress token (and, for 2026-07-28
        // servers, the client context) beside it when it sends the request.
        let mut meta = RequestMetaObject::new();
        meta.insert(
            IDEMPOTENCY_META_KEY.to_owned(),
            Value::String(key.to_owned()),
        );
        params.meta = Some(meta);
    }
    Ok(params)
}

/// The progress updates of a call that has its answer: those already queued, and, when the
/// last one seen (`last`) was short of its total, those that come within [`PROGRESS_GRACE`].
async fn last_progress_updates(
    updates: &mut tokio::sync::mpsc::Receiver<ProgressNotificationParam>,
    mut last: Option<(f64, Option<f64>)>,
    progress: &ToolProgress,
    secrets: &SecretsUsed,
) {
    // Updates that arrived just before the answer still reach the agent, in order.
    while let Ok(update) = updates.try_recv() {
        last = Some((update.progress, update.total));
        forward(progress, update, secrets).await;
    }
    // rmcp hands notifications to the handler on their own tasks, so the last updates can
    // land just after the answer. When the last one seen was short of its total, give
    // the rest a moment.
    if let Some((done, Some(total))) = last
        && done < total
    {
        let grace = tokio::time::sleep(PROGRESS_GRACE);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                Some(update) = updates.recv() => {
                    let finished = update.total.is_some_and(|t| update.progress >= t);
                    forward(progress, update, secrets).await;
                    if finished {
                        break;
                    }
                }
                () = &mut grace => break,
            }
        }
    }
}

/// Maps an MCP tool result to the value the program receives:
/// - `isError: true` → a `ToolError` carrying the server's text;
/// - for a tool with an `outputSchema` (`output`): `structuredContent`, or, from a server
///   that sends only the serialised copy MCP asks for alongside it, its one text block
///   parsed as JSON; the value must satisfy the schema, else the call fails with
///   `upstream_error` (MCP says clients should check, and the SDK types the result by the
///   schema, so a program never gets a value of another shape), unless it breaks it only
///   trivially and `coerce` (the server's) is `safe`: then it is coerced to fit, with the
///   coercions in the answer ([`crate::tools::coercion`]); a value withheld so is in the
///   answer as `withheld`, for the pipeline to count as drift;
/// - otherwise `structuredContent` when present;
/// - otherwise one text block → its JSON value if it is JSON, else the string;
/// - otherwise (several blocks, images, resources) → an array of the content blocks as MCP
///   defines them (`{type: "text", text}`, `{type: "image", data, mimeType}`, …).
fn to_value(
    server: &str,
    tool: &str,
    result: CallToolResult,
    output: Option<&OutputSchema>,
    coerce: CoercePolicy,
) -> SourceAnswer {
    let texts = || -> String {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if result.is_error == Some(true) {
        let message = texts();
        return SourceAnswer::new(Err(ToolError::new(
            ToolErrorCode::UpstreamError,
            format!(
                "{server}.{tool} failed: {}",
                if message.is_empty() {
                    "the server reported an error without a message"
                } else {
                    &message
                }
            ),
        )
        .reported_by_tool()));
    }
    if let Some(output) = output {
        return checked(server, tool, result, output, coerce);
    }
    if let Some(structured) = result.structured_content {
        return SourceAnswer::new(Ok(structured));
    }
    SourceAnswer::new(match result.content.as_slice() {
        [] => Ok(Value::Null),
        [ContentBlock::Text(text)] => {
            Ok(serde_json::from_str(&text.text)
                .unwrap_or_else(|_| Value::String(text.text.clone())))
        }
        blocks => serde_json::to_value(blocks).map_err(|e| {
            ToolError::new(
                ToolErrorCode::UpstreamError,
                format!("cannot represent the result of {server}.{tool}: {e}"),
            )
        }),
    })
}

/// The result of a tool with an `outputSchema` (see [`to_value`]): of that shape, coerced to
/// it, or withheld.
fn checked(
    server: &str,
    tool: &str,
    result: CallToolResult,
    output: &OutputSchema,
    coerce: CoercePolicy,
) -> SourceAnswer {
    let broken = |why: String| {
        ToolError::new(ToolErrorCode::UpstreamError,
            format!("{server}.{tool} answered with a result that breaks its own outputSchema: {why}"),
        )
        .with_hint("this is a problem of the tool server; the result was withheld because the program's types promise that shape")
    };
    let value = match (result.structured_content, result.content.as_slice()) {
        (Some(structured), _) => structured,
        (None, [ContentBlock::Text(text)]) => match serde_json::from_str(&text.text) {
            Ok(value) => value,
            Err(_) => {
                return SourceAnswer::new(Err(broken(
                    "no structuredContent, and its text is not JSON".into(),
                )));
            }
        },
        (None, _) => return SourceAnswer::new(Err(broken("no structuredContent".into()))),
    };
    let first_error = output
        .validator
        .iter_errors(&value)
        .next()
        .map(|error| (error.instance_path().to_string(), error.to_string()));
    let Some((at, mut why)) = first_error else {
        return SourceAnswer::new(Ok(value));
    };
    if coerce.is_safe()
        && let Some((coerced, made)) = output.coerce(&value)
    {
        return SourceAnswer {
            coercions: made,
            ..SourceAnswer::new(Ok(coerced))
        };
    }
    // The validator's message quotes the offending value, which may be large.
    if why.chars().count() > 300 {
        why = format!("{}…", why.chars().take(300).collect::<String>());
    }
    let error = broken(format!(
        "at `{}`: {why}",
        if at.is_empty() { "/" } else { &at }
    ));
    // Withheld from the program, but the pipeline counts it as drift.
    SourceAnswer {
        withheld: Some(value),
        ..SourceAnswer::new(Err(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_map_predictably() {
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        assert_eq!(
            to_value("s", "t", text("{\"a\":1}"), None, CoercePolicy::Off)
                .result
                .unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            to_value("s", "t", text("plain words"), None, CoercePolicy::Off)
                .result
                .unwrap(),
            serde_json::json!("plain words")
        );
        let mut structured = text("ignored");
        structured.structured_content = Some(serde_json::json!({"n": 2}));
        assert_eq!(
            to_value("s", "t", structured, None, CoercePolicy::Off)
                .result
                .unwrap(),
            serde_json::json!({"n": 2})
        );
        let err = to_value(
            "s",
            "t",
            CallToolResult::error(vec![ContentBlock::text("boom")]),
            None,
            CoercePolicy::Off,
        )
        .result
        .unwrap_err();
        assert_eq!(err.code.as_str(), "upstream_error");
        assert!(err.message.contains("s.t failed: boom"), "{}", err.message);
        let two = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(
            to_value("s", "t", two, None, CoercePolicy::Off)
                .result
                .unwrap(),
            serde_json::json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
        );
    }

    /// A tool with an `outputSchema` gives the program a value of that shape or an error:
    /// before, a server that sent only text (or broke its schema) handed the program a
    /// string or an object of another shape where the SDK promised the schema's type.
    #[test]
    fn results_of_tools_with_an_output_schema_have_its_shape() {
        let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]});
        let validator = OutputSchema::compile(&schema).unwrap();
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        let mut structured = text("{\"n\": 1}");
        structured.structured_content = Some(serde_json::json!({"n": 2}));
        assert_eq!(
            to_value("s", "t", structured, Some(&validator), CoercePolicy::Off)
                .result
                .unwrap(),
            serde_json::json!({"n": 2})
        );
        // Only the serialised copy: parsed, checked, used.
        assert_eq!(
            to_value(
                "s",
                "t",
                text("{\"n\": 3}"),
                Some(&validator),
                CoercePolicy::Off
            )
            .result
            .unwrap(),
            serde_json::json!({"n": 3})
        );
        for broken in [
            text("plain words"),
            text("{\"n\": \"3\"}"),
            CallToolResult::success(vec![]),
        ] {
            let err = to_value("s", "t", broken, Some(&validator), CoercePolicy::Off)
                .result
                .unwrap_err();
            assert_eq!(err.code.as_str(), "upstream_error");
            assert!(
                err.message.contains("breaks its own outputSchema"),
                "{}",
                err.message
            );
            assert!(err.hint.is_some());
        }
        // With coercion allowed, a trivial break is mended and the mend recorded.
        let mended = to_value(
            "s",
            "t",
            text("{\"n\": \"3\"}"),
            Some(&validator),
            CoercePolicy::Safe,
        );
        assert_eq!(mended.result.unwrap(), serde_json::json!({"n": 3}));
        assert_eq!(mended.withheld, None);
        let made = mended.coercions;
        assert_eq!(made.len(), 1);
        assert_eq!(
            (made[0].pointer.as_str(), &made[0].from),
            ("/n", &serde_json::json!("3"))
        );
        assert_eq!(made[0].place, crate::agent_api::CoercionPlace::Result);
        // Not a near miss: still an error, and the value is kept for the drift count.
        let withheld = to_value(
            "s",
            "t",
            text("{\"n\": \"three\"}"),
            Some(&validator),
            CoercePolicy::Safe,
        );
        assert_eq!(withheld.withheld, Some(serde_json::json!({"n": "three"})));
        assert!(withheld.coercions.is_empty());
        let err = withheld.result.unwrap_err();
        assert!(
            err.message.contains("breaks its own outputSchema"),
            "{}",
            err.message
        );
        let mut wrong = text("{}");
        wrong.structured_content = Some(serde_json::json!({"m": 1}));
        let err = to_value("s", "t", wrong, Some(&validator), CoercePolicy::Off)
            .result
            .unwrap_err();
        assert!(err.message.contains("at `/`"), "{}", err.message);
        // A large wrong value is not quoted whole.
        let mut huge = text("{}");
        huge.structured_content = Some(serde_json::json!({"n": "x".repeat(100_000)}));
        let err = to_value("s", "t", huge, Some(&validator), CoercePolicy::Off)
            .result
            .unwrap_err();
        assert!(err.message.contains("at `/n`"), "{}", &err.message[..200]);
        assert!(err.message.len() < 1_000, "{} bytes", err.message.len());
    }
}
