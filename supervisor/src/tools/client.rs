//! Client-owned tools: tools a request declares (`client_tools`) and the agent answers itself.
//! The program calls them as `tools.client.<name>(args)`; the daemon never runs them. A call
//! is answered from the results the agent gave (`client_results`, or those a waiting
//! execution kept), or held: once every call the program waits for is held, the execution
//! waits (`status: "waiting"`) and holds no worker; the agent's answers re-run it from the
//! start, earlier calls answered from the record.
//!
//! What the request declares is untrusted: names are identifiers, lists and texts are bounded,
//! and a schema that does not compile fails only its own tool's calls.

use crate::agent_api::{
    ClientResult, ClientToolSpec, PendingCall, Redaction, ToolError, ToolErrorCode,
};
use crate::sdk::sdk_files::SdkTool;
use crate::tools::ToolDescriptor;
use crate::tools::approval::Decisions;
use crate::tools::arguments::ArgumentSchema;
use crate::tools::naming::{closest, quote_list};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The namespace programs call client tools under.
pub const NAMESPACE: &str = airlock_policy::sources::CLIENT_NAMESPACE;

/// Most client tools one request may declare.
pub const MAX_CLIENT_TOOLS: usize = 128;
/// Longest client tool name.
const MAX_NAME_LEN: usize = 64;
/// Longest description kept (longer ones are cut at a character boundary).
const MAX_DESCRIPTION_LEN: usize = 4096;

/// Why a request's `client_tools` or results cannot be used. Each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientToolsError {
    #[error("client_tools declares {0} tools; at most {MAX_CLIENT_TOOLS} are allowed")]
    TooMany(usize),
    #[error(
        "client tool name `{0}` is not an identifier of at most {MAX_NAME_LEN} characters (letters, digits, _ and $, not starting with a digit)"
    )]
    BadName(String),
    #[error("client_tools declares `{0}` twice")]
    Duplicate(String),
    #[error("the input_schema of client tool `{0}` must be a JSON object (a JSON Schema)")]
    BadSchema(String),
    #[error("client_results are given but the request declares no client_tools")]
    ResultsWithoutTools,
    #[error("result {0} has both `ok` and `error`, or neither")]
    Ambiguous(u32),
    #[error("result {0} is given twice")]
    DuplicateResult(u32),
    #[error("result {id} answers no pending call (the pending ones are {pending})")]
    NotPending { id: u32, pending: String },
    #[error("the results are empty")]
    NoResults,
}

impl ClientToolsError {
    pub fn hint(&self) -> &'static str {
        match self {
            ClientToolsError::TooMany(_)
            | ClientToolsError::BadName(_)
            | ClientToolsError::Duplicate(_)
            | ClientToolsError::BadSchema(_) => {
                "declare each tool once as { \"name\": \"web_search\", \"description\": \"...\", \"input_schema\": { \"type\": \"object\", ... } }"
            }
            ClientToolsError::ResultsWithoutTools => {
                "send client_tools with client_results: the program's calls are checked against them"
            }
            ClientToolsError::Ambiguous(_) => {
                "answer each call with { \"id\": N, \"ok\": value } or { \"id\": N, \"error\": { \"message\": \"...\" } }"
            }
            ClientToolsError::DuplicateResult(_)
            | ClientToolsError::NotPending { .. }
            | ClientToolsError::NoResults => {
                "answer the ids of pending_calls in the last waiting response; GET the execution to see them again"
            }
        }
    }
}

/// The client tools of one request, checked.
#[derive(Debug)]
pub struct ClientTools {
    /// As declared (kept with a waiting execution, so its re-runs check the same way).
    pub specs: Vec<ClientToolSpec>,
    /// By name: the catalogue entry the contract check and the SDK use, and the compiled
    /// argument schema.
    tools: BTreeMap<String, (ToolDescriptor, ArgumentSchema)>,
    descriptors: Arc<[ToolDescriptor]>,
}

impl ClientTools {
    /// Checks what a request declares.
    pub fn new(specs: Vec<ClientToolSpec>) -> Result<ClientTools, ClientToolsError> {
        if specs.len() > MAX_CLIENT_TOOLS {
            return Err(ClientToolsError::TooMany(specs.len()));
        }
        let mut specs = specs;
        let mut tools = BTreeMap::new();
        for spec in &mut specs {
            if !is_identifier(&spec.name) {
                return Err(ClientToolsError::BadName(
                    spec.name.chars().take(80).collect(),
                ));
            }
            if spec.description.len() > MAX_DESCRIPTION_LEN {
                let mut cut = MAX_DESCRIPTION_LEN;
                while !spec.description.is_char_boundary(cut) {
                    cut -= 1;
                }
                spec.description.truncate(cut);
            }
            let schema = match &spec.input_schema {
                None => serde_json::json!({ "type": "object" }),
                Some(schema @ Value::Object(_)) => schema.clone(),
                Some(_) => return Err(ClientToolsError::BadSchema(spec.name.clone())),
            };
            let descriptor = ToolDescriptor {
                name: spec.name.clone(),
                description: spec.description.clone(),
                input_schema: schema.clone(),
                output_schema: None,
                // The daemon cannot know what the agent's tool does.
                read_only: false,
            };
            let compiled = ArgumentSchema::compile(&schema);
            if tools
                .insert(spec.name.clone(), (descriptor, compiled))
                .is_some()
            {
                return Err(ClientToolsError::Duplicate(spec.name.clone()));
            }
        }
        let descriptors = tools.values().map(|(d, _)| d.clone()).collect();
        Ok(ClientTools {
            specs,
            tools,
            descriptors,
        })
    }

    /// The catalogue entries, for the contract check.
    pub fn descriptors(&self) -> Arc<[ToolDescriptor]> {
        self.descriptors.clone()
    }

    /// The tools as the SDK shows them (`tools.client.<name>`).
    pub fn sdk_tools(&self) -> Vec<SdkTool> {
        self.tools
            .values()
            .map(|(d, _)| SdkTool {
                namespace: NAMESPACE.to_owned(),
                name: d.name.clone(),
                description: d.description.clone(),
                input_schema: d.input_schema.clone(),
                output_schema: None,
                learned: None,
            })
            .collect()
    }

    /// Checks a call of `tools.client.<name>` with `args`: the tool exists (else the closest
    /// names) and the arguments fit its schema.
    pub fn check(&self, name: &str, args: &Value) -> Result<(), ToolError> {
        let Some((_, schema)) = self.tools.get(name) else {
            let names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            let near = closest(name, names.iter().copied(), 3);
            let hint = if names.is_empty() {
                "the request declares no client tools; add them to client_tools".to_owned()
            } else if near.is_empty() {
                format!(
                    "the request declares {}",
                    quote_list(&names, "tools.client.", "")
                )
            } else {
                format!("did you mean {}?", quote_list(&near, "tools.client.", ""))
            };
            return Err(ToolError::new(
                ToolErrorCode::UnknownTool,
                format!("the request declares no client tool named `{name}`"),
            )
            .with_hint(hint));
        };
        schema.check(&format!("{NAMESPACE}.{name}"), args)
    }
}

/// `[A-Za-z_$][A-Za-z0-9_$]*`, at most [`MAX_NAME_LEN`] characters: callable as
/// `tools.client.<name>` and a file name in the SDK.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_NAME_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A client tool call's answer, as kept and as it reaches the program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientAnswer {
    /// The client tool it answers (an answer for another tool at that id does not apply: the
    /// program took another path).
    pub tool: String,
    pub result: Result<Value, String>,
    /// The program's clock when the answer came.
    pub clock_ms: u64,
}

/// The answers an execution's client calls get, by call id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientAnswers {
    pub by_id: HashMap<u32, ClientAnswer>,
}

impl ClientAnswers {
    /// The answer to call `id` of `tool`, if there is one for that tool.
    pub fn get(&self, id: u32, tool: &str) -> Option<&ClientAnswer> {
        self.by_id.get(&id).filter(|a| a.tool == tool)
    }

    /// Adds `results` for calls `pending` (every id must be one of them), at `clock_ms`.
    pub fn add(
        &mut self,
        results: Vec<ClientResult>,
        pending: &[PendingCall],
        clock_ms: u64,
    ) -> Result<(), ClientToolsError> {
        if results.is_empty() {
            return Err(ClientToolsError::NoResults);
        }
        let mut seen = Vec::with_capacity(results.len());
        let mut answers = Vec::with_capacity(results.len());
        for result in results {
            if seen.contains(&result.id) {
                return Err(ClientToolsError::DuplicateResult(result.id));
            }
            seen.push(result.id);
            let Some(call) = pending.iter().find(|p| p.id == result.id) else {
                return Err(ClientToolsError::NotPending {
                    id: result.id,
                    pending: pending_ids(pending),
                });
            };
            answers.push((result.id, answer(result, &call.tool, clock_ms)?));
        }
        self.by_id.extend(answers);
        Ok(())
    }

    /// The stateless form's answers: every result taken as given (a result for a call the
    /// program does not make, or makes as another tool, is simply not used).
    pub fn from_request(
        results: Vec<ClientResult>,
        clock_ms: u64,
    ) -> Result<ClientAnswers, ClientToolsError> {
        let mut by_id = HashMap::with_capacity(results.len());
        for result in results {
            let id = result.id;
            // The tool is not named in a stateless result: any client tool at that id.
            if by_id.insert(id, answer(result, "", clock_ms)?).is_some() {
                return Err(ClientToolsError::DuplicateResult(id));
            }
        }
        Ok(ClientAnswers { by_id })
    }

    /// The answer to call `id` in the stateless form (any client tool).
    pub fn get_any(&self, id: u32) -> Option<&ClientAnswer> {
        self.by_id.get(&id)
    }
}

fn answer(
    result: ClientResult,
    tool: &str,
    clock_ms: u64,
) -> Result<ClientAnswer, ClientToolsError> {
    let result = match (result.ok, result.error) {
        (Some(value), None) => Ok(value),
        (None, Some(failure)) => Err(failure.message),
        _ => return Err(ClientToolsError::Ambiguous(result.id)),
    };
    Ok(ClientAnswer {
        tool: tool.to_owned(),
        result,
        clock_ms,
    })
}

fn pending_ids(pending: &[PendingCall]) -> String {
    if pending.is_empty() {
        return "none".into();
    }
    pending
        .iter()
        .map(|p| p.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A client tool's answer as a waiting execution keeps it (posted with
/// `POST /v1/executions/<id>/results`): scanned once, when it was posted, and kept as the
/// program gets it, so a re-run hands it on without parsing, scanning or encoding it again.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptAnswer {
    pub tool: String,
    /// The result's JSON text, or the error the call gets.
    pub result: Result<String, ToolError>,
    /// What the scan redacted from it.
    pub redactions: Vec<Redaction>,
    pub clock_ms: u64,
}

/// The answer a client tool's call gets.
#[derive(Debug, Clone, Copy)]
pub enum Reply<'a> {
    /// As the request gave it (the stateless form): scanned on the way to the worker.
    Given(&'a ClientAnswer),
    /// As a waiting execution kept it: scanned already.
    Kept(&'a KeptAnswer),
}

/// What the calls of one execution that may wait need: the declared client tools and their
/// answers so far, and the decisions on calls that need approval.
#[derive(Debug)]
pub struct WaitScope {
    pub tools: ClientTools,
    /// Answers given with the request (the stateless form), or kept by a daemon of an earlier
    /// version in the waiting execution's row.
    pub answers: ClientAnswers,
    /// The answers a waiting execution keeps, by call id.
    pub kept: HashMap<u32, KeptAnswer>,
    /// The stateless form: answers are matched by id alone (the agent does not name tools).
    pub stateless: bool,
    pub decisions: Decisions,
}

impl WaitScope {
    /// The answer to call `id` of client tool `name`, if the agent gave one.
    pub fn answer(&self, id: u32, name: &str) -> Option<Reply<'_>> {
        if self.stateless {
            return self.answers.get_any(id).map(Reply::Given);
        }
        match self.kept.get(&id).filter(|k| k.tool == name) {
            Some(kept) => Some(Reply::Kept(kept)),
            None => self.answers.get(id, name).map(Reply::Given),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::ClientFailure;
    use serde_json::json;

    fn spec(name: &str, schema: Option<Value>) -> ClientToolSpec {
        ClientToolSpec {
            name: name.into(),
            description: "d".into(),
            input_schema: schema,
        }
    }

    #[test]
    fn declared_tools_are_checked() {
        let tools = ClientTools::new(vec![spec(
            "web_search",
            Some(json!({ "type": "object", "properties": { "query": { "type": "string" } }, "required": ["query"] })),
        )])
        .unwrap();
        tools.check("web_search", &json!({ "query": "x" })).unwrap();
        let e = tools
            .check("web_search", &json!({ "query": 1 }))
            .unwrap_err();
        assert_eq!(e.code, ToolErrorCode::InvalidArguments);
        let e = tools.check("web_serch", &json!({})).unwrap_err();
        assert_eq!(e.code, ToolErrorCode::UnknownTool);
        assert_eq!(
            e.hint.as_deref(),
            Some("did you mean tools.client.web_search?")
        );

        for bad in ["1x", "a-b", "", &"x".repeat(65)] {
            assert!(matches!(
                ClientTools::new(vec![spec(bad, None)]),
                Err(ClientToolsError::BadName(_))
            ));
        }
        assert_eq!(
            ClientTools::new(vec![spec("a", None), spec("a", None)]).unwrap_err(),
            ClientToolsError::Duplicate("a".into())
        );
        assert_eq!(
            ClientTools::new(vec![spec("a", Some(json!(true)))]).unwrap_err(),
            ClientToolsError::BadSchema("a".into())
        );
        let many: Vec<_> = (0..=MAX_CLIENT_TOOLS)
            .map(|i| spec(&format!("t{i}"), None))
            .collect();
        assert_eq!(
            ClientTools::new(many).unwrap_err(),
            ClientToolsError::TooMany(MAX_CLIENT_TOOLS + 1)
        );
    }

    #[test]
    fn answers_must_answer_pending_calls_once_with_ok_or_error() {
        let pending = vec![
            PendingCall {
                id: 2,
                tool: "s".into(),
                args: json!({}),
            },
            PendingCall {
                id: 3,
                tool: "s".into(),
                args: json!({}),
            },
        ];
        let ok = |id, v: Value| ClientResult {
            id,
            ok: Some(v),
            error: None,
        };
        let mut answers = ClientAnswers::default();
        assert_eq!(
            answers.add(vec![ok(4, json!(1))], &pending, 0).unwrap_err(),
            ClientToolsError::NotPending {
                id: 4,
                pending: "2, 3".into()
            }
        );
        assert_eq!(
            answers
                .add(vec![ok(2, json!(1)), ok(2, json!(2))], &pending, 0)
                .unwrap_err(),
            ClientToolsError::DuplicateResult(2)
        );
        let both = ClientResult {
            id: 2,
            ok: Some(json!(1)),
            error: Some(ClientFailure {
                message: "x".into(),
            }),
        };
        assert_eq!(
            answers.add(vec![both], &pending, 0).unwrap_err(),
            ClientToolsError::Ambiguous(2)
        );
        assert!(answers.by_id.is_empty(), "a refused batch adds nothing");
        answers.add(vec![ok(3, Value::Null)], &pending, 9).unwrap();
        assert_eq!(answers.get(3, "s").unwrap().result, Ok(Value::Null));
        assert!(answers.get(3, "other").is_none());
        assert!(answers.get(2, "s").is_none());
    }

    #[test]
    fn null_is_an_answer_and_absence_is_not() {
        let r: ClientResult = serde_json::from_value(json!({ "id": 1, "ok": null })).unwrap();
        assert_eq!(r.ok, Some(Value::Null));
        let r: ClientResult =
            serde_json::from_value(json!({ "id": 1, "error": { "message": "m" } })).unwrap();
        assert_eq!(r.ok, None);
    }
}
