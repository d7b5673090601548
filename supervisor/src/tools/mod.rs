//! Tools: how a program's `tools.<namespace>.<tool>(args)` reaches something real.
//!
//! - this file: the [`ToolSource`] trait every source implements, [`ToolDescriptor`], the
//!   [`CallContext`] a source gets with each call and the [`SourceAnswer`] it hands back;
//! - `call`: the call pipeline every tool call goes through, in order (budget, policy,
//!   readable arguments, rate, resolve, argument schema, gate, the source, redaction and scan);
//! - `registry`: namespaces → sources, and name resolution with did-you-mean;
//! - [`arguments`]: arguments checked against a tool's JSON Schema;
//! - [`coercion`]: near misses (`"100"` for a number) coerced to a tool's schemas;
//! - `catalogue`: a caller's tools as an SDK and search index, cached per principal;
//! - `client`: client-owned tools, which a request declares and the agent answers itself;
//! - `builtin`: the daemon's own tools (`tools.airlock.search_tools`, `read_sdk`), which
//!   answer from the caller's catalogue;
//! - `approval`: calls that wait for a person's decision (`approve` in the policy);
//! - `flow`: information flow: untrusted results recorded as they are delivered, sink calls
//!   checked against them at arrival (`trust`, `sink` and `[[flow]]` in the policy);
//! - `naming`: near-name suggestions;
//! - `progress`: a call's progress, scanned, on its way to the agent;
//! - `redaction`: the secret values a call used, redacted from what came back;
//! - [`sources`]: the adapters (MCP, OpenAPI, GraphQL) and their shared settings and HTTP
//!   helpers.
//!
//! Nothing here knows about workers, HTTP front doors or how an execution ends; the codes a
//! program sees ([`ToolErrorCode`]) are part of the agent API.

pub(crate) mod approval;
pub mod arguments;
pub(crate) mod builtin;
pub(crate) mod call;
pub(crate) mod catalogue;
pub(crate) mod client;
pub mod coercion;
pub(crate) mod flow;
pub(crate) mod naming;
pub(crate) mod progress;
pub(crate) mod redaction;
pub(crate) mod registry;
pub mod sources;

pub use crate::agent_api::{ToolError, ToolErrorCode};
pub use call::CallGate;
pub use progress::ToolProgress;
pub use redaction::SecretsUsed;
pub use registry::ToolRegistry;

use airlock_policy::CoercePolicy;
use serde::Serialize;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future, so `ToolSource` can be used as a trait object.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = SourceAnswer> + Send + 'a>>;

/// The answer to [`ToolSource::tools`].
/// Shared, so that looking a tool up on every call costs no copy of the catalogue.
pub type ToolsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Arc<[ToolDescriptor]>, ToolError>> + Send + 'a>>;

/// One tool as the catalogue knows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolDescriptor {
    /// Name within its namespace, as programs write it (`tools.<namespace>.<name>`).
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// JSON Schema of the value a successful call resolves to, when the source knows it (an
    /// MCP tool's `outputSchema`, an OpenAPI operation's success response, a GraphQL
    /// field's default selection). Sources declare it only when the program really gets
    /// a value of that shape; the SDK types the result `unknown` otherwise.
    pub output_schema: Option<Value>,
    /// The tool only reads: calling it changes nothing at its service, so a replay that asks
    /// for fresh reads runs it again. Sources mark what their protocol says only reads: an MCP
    /// tool with `annotations.readOnlyHint: true`, an OpenAPI `GET`, `HEAD` or `OPTIONS`
    /// operation, a GraphQL query field (and the query-only `query` tool). Anything else is
    /// `false`, "may write": a replay must not run a tool twice on a guess.
    pub read_only: bool,
}

impl ToolDescriptor {
    /// The tool as the SDK shows it, under `namespace`.
    pub fn sdk_tool(&self, namespace: &str) -> crate::sdk::SdkTool {
        crate::sdk::SdkTool {
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
            learned: None,
        }
    }

    /// Its schema version and declared output schema, which results are learned under and
    /// compared with.
    pub fn contract(&self) -> crate::learned_types::ToolContract {
        crate::learned_types::ToolContract::of(&self.input_schema, self.output_schema.as_ref())
    }
}

/// What a call knows about its caller, and what the pipeline asks of the source. The source
/// borrows it for the call and hands back what it learned in its [`SourceAnswer`]; nothing of
/// the source's flows back through the context (its progress reporter is the pipeline's own,
/// which keeps what it redacted from the messages for the call's trace).
#[derive(Debug)]
pub struct CallContext {
    pub execution_id: String,
    pub principal: String,
    /// Position of this call within its execution (1-based, call order).
    pub call_id: u32,
    /// Where the source reports the call's progress (MCP progress notifications): the
    /// pipeline's reporter, which redacts and scans each message on its way to the agent.
    pub progress: ToolProgress,
    /// When the source's `call_timeout_ms` runs out (set by the pipeline's gate). The source
    /// stops waiting for its service then ([`CallContext::before_deadline`], or its protocol's
    /// own cancellation); the pipeline stops waiting for the source shortly after regardless.
    pub deadline: Option<CallDeadline>,
    /// A key that stays the same when the same call (same session, tool, arguments and
    /// occurrence) is sent again after a crash or a replay, so a service that honours it does
    /// the work once. The pipeline fills it for the calls of a journaled session; `None`
    /// otherwise. Sources pass it on where their protocol has a place for it and the call may
    /// write: OpenAPI as the `Idempotency-Key` header of `POST`, `PUT`, `PATCH` and `DELETE`
    /// requests, GraphQL as the same header on requests that carry a mutation, MCP in the
    /// `tools/call` request's `_meta` under [`IDEMPOTENCY_META_KEY`].
    pub idempotency_key: Option<String>,
    /// The caller's catalogue: its principal's tools under its execution's generation, which
    /// the daemon's built-in tools (`builtin`) answer from. The pipeline fills it from the
    /// execution's call scope; `None` in a context made outside an execution.
    pub catalogue: Option<catalogue::CallerCatalogue>,
}

/// Everything a source learned from one call, handed back as its answer: the pipeline takes
/// nothing from a source any other way.
#[derive(Debug)]
pub struct SourceAnswer {
    /// The value the program receives, or why the call failed.
    pub result: Result<Value, ToolError>,
    /// Coercions the source made to a result that broke the tool's declared output schema
    /// trivially, under its `coerce` policy (place `result`, [`coercion`]).
    pub coercions: Vec<crate::agent_api::Coercion>,
    /// A result the source withheld because it breaks the tool's declared output schema (the
    /// program gets an error): the pipeline counts it as drift from the declared type (stage
    /// 12) after scanning it like any result.
    pub withheld: Option<Value>,
    /// The secret values the call handed the source's service (credentials, a server's
    /// environment): the pipeline redacts them from the answer, the error included.
    pub secrets: SecretsUsed,
}

impl SourceAnswer {
    /// An answer with nothing learned beside `result`.
    pub fn new(result: Result<Value, ToolError>) -> SourceAnswer {
        SourceAnswer {
            result,
            coercions: Vec::new(),
            withheld: None,
            secrets: SecretsUsed::default(),
        }
    }

    /// The answer of a call whose value may have been mended to the tool's output schema
    /// (`result` carries the coercions made), with the secret values it handed its service.
    pub fn mended(
        result: Result<(Value, Vec<crate::agent_api::Coercion>), ToolError>,
        secrets: SecretsUsed,
    ) -> SourceAnswer {
        let answer = match result {
            Ok((value, coercions)) => SourceAnswer {
                coercions,
                ..SourceAnswer::new(Ok(value))
            },
            Err(e) => SourceAnswer::new(Err(e)),
        };
        answer.with_secrets(secrets)
    }

    /// The same answer, noting the secret values the call handed its service.
    pub fn with_secrets(mut self, secrets: SecretsUsed) -> SourceAnswer {
        self.secrets = secrets;
        self
    }

    /// The value or error alone (for callers outside the pipeline, which redact nothing).
    pub fn into_result(self) -> Result<Value, ToolError> {
        self.result
    }
}

impl From<Result<Value, ToolError>> for SourceAnswer {
    fn from(result: Result<Value, ToolError>) -> SourceAnswer {
        SourceAnswer::new(result)
    }
}

/// The HTTP header that carries [`CallContext::idempotency_key`] (IETF httpapi
/// `Idempotency-Key` draft; the name Stripe-style APIs read).
pub(crate) const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// The `_meta` key of an MCP `tools/call` that carries [`CallContext::idempotency_key`]
/// (MCP `_meta` keys are a prefix label, `/`, then the name).
pub const IDEMPOTENCY_META_KEY: &str = "airlock/idempotency-key";

impl CallContext {
    /// A context with no progress listener, no deadline, no idempotency key and no caller's
    /// catalogue.
    pub fn new(execution_id: &str, principal: &str, call_id: u32) -> CallContext {
        CallContext {
            execution_id: execution_id.to_owned(),
            principal: principal.to_owned(),
            call_id,
            progress: ToolProgress::default(),
            deadline: None,
            idempotency_key: None,
            catalogue: None,
        }
    }

    /// The same context with `key` as its idempotency key.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> CallContext {
        self.idempotency_key = Some(key.into());
        self
    }
}

impl CallContext {
    /// `exchange`, given up at the call's deadline with the standard `timeout` error naming
    /// `tool` (as the program wrote it). Without a deadline it runs to its end.
    pub async fn before_deadline<T>(
        &self,
        tool: &str,
        exchange: impl Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        match self.deadline {
            Some(deadline) => tokio::time::timeout_at(deadline.at, exchange)
                .await
                .unwrap_or_else(|_| Err(deadline.error(tool))),
            None => exchange.await,
        }
    }
}

/// A call's deadline: the source's `call_timeout_ms` from when its permit was granted.
#[derive(Debug, Clone, Copy)]
pub struct CallDeadline {
    pub at: tokio::time::Instant,
    /// The timeout it came from, for the error.
    pub after: std::time::Duration,
}

impl CallDeadline {
    /// What is left of it now.
    pub fn remaining(&self) -> std::time::Duration {
        self.at
            .saturating_duration_since(tokio::time::Instant::now())
    }

    /// The error of a call that passed it (`tool` as the program wrote it).
    pub fn error(&self, tool: &str) -> ToolError {
        ToolError::new(
            ToolErrorCode::Timeout,
            format!("{tool} did not answer within {} ms", self.after.as_millis()),
        )
        .with_hint("the server's call_timeout_ms is set in the policy")
    }
}

/// A provider of tools under one namespace: an adapter that speaks one protocol. Everything
/// around the call itself (policy, rates, argument checks, concurrency, the deadline,
/// redaction and scanning) is the pipeline's (`call`).
pub trait ToolSource: Send + Sync + 'static {
    /// The namespace programs use: `tools.<namespace>.<tool>()`.
    fn namespace(&self) -> &str;
    /// The tools this source offers now. May start the source (a lazily started server), so
    /// it can fail, with an error that says why the source is unavailable.
    fn tools(&self) -> ToolsFuture<'_>;
    /// Performs one call. `args` is the JSON object the program passed, already checked
    /// against the tool's input schema (and coerced to it where [`ToolSource::coerce`] is
    /// `safe`). The answer carries everything the call learned ([`SourceAnswer`]): a source
    /// that holds results to a declared output schema coerces a result that breaks it
    /// trivially under the same policy and returns the coercions ([`coercion`]), or withholds
    /// it; every secret value the call handed its service is in the answer, whatever the
    /// outcome, so that the pipeline redacts it.
    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a>;

    /// The concurrency limit and call timeout from the source's policy entry; `None` for
    /// in-process sources (an embedder's, tests') that need neither.
    fn gate(&self) -> Option<&CallGate> {
        None
    }

    /// Whether values of its calls may be coerced to its tools' schemas (the source's
    /// `coerce` in the policy; in-process sources take the default, `safe`).
    fn coerce(&self) -> CoercePolicy {
        CoercePolicy::Safe
    }

    /// Whether a tool missing from the source's list may be added while a program runs, so
    /// that calling it is let run rather than refused before the program starts: an MCP
    /// server with `dynamic_tools = true` that announces `tools/list_changed`.
    fn tools_may_change(&self) -> bool {
        false
    }

    /// The tools, listed again first if the list is older than `max_age` and the source's
    /// list can change (an MCP server that announces `tools/list_changed`): what the contract
    /// check consults before it refuses a name the last list lacks.
    fn tools_listed_within(&self, max_age: std::time::Duration) -> ToolsFuture<'_> {
        let _ = max_age;
        self.tools()
    }

    /// Whether the daemon should start this source when it starts (instead of on first use).
    fn starts_eagerly(&self) -> bool {
        false
    }

    /// Releases what the source holds (child processes, connections) when the daemon stops.
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }
}
