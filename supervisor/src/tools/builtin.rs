//! The daemon's built-in tools, `tools.airlock.<tool>()`: discovery from inside a program, so
//! a program finds and reads the tools it may call without a round trip through the model.
//!
//! - `search_tools({ query, limit?, language? })`: what `GET /v1/tools/search?q=` answers;
//! - `read_sdk({ path?, language? })`: the SDK's file tree (`GET /v1/sdk`), or one file's
//!   text (`GET /v1/sdk/<path>`).
//!
//! `language` is `"typescript"` (the default) or `"python"` (the `.pyi` tree, Python
//! signatures); a path ending in `.pyi` is read from the Python tree without it.
//!
//! They are a [`ToolSource`] that every generation registers under the reserved namespace
//! `airlock`, so they are tools like any other: in the SDK, `GET /v1/tools` and search, held
//! by the contract check, granted only by a principal's `allow` (never implicitly), and called
//! through the whole pipeline (budget, policy, arguments, journal, rate, scan, size, trace).
//! They answer in the daemon (no server process, no network) from the caller's catalogue,
//! which the pipeline puts in every call's context from the execution's call scope
//! ([`CallContext::catalogue`]): the view of the execution's principal under the
//! execution's generation, so a program sees exactly what its principal's `GET /v1/sdk`
//! shows, never another principal's tools. Their answers are a function of that catalogue.

use crate::sdk::Language;
use crate::tools::catalogue::CatalogueView;
use crate::tools::naming::{near_paths, quote_list};
use crate::tools::{
    CallContext, SourceAnswer, ToolDescriptor, ToolError, ToolErrorCode, ToolFuture, ToolSource,
    ToolsFuture,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// The namespace programs call the built-in tools under.
pub const NAMESPACE: &str = airlock_policy::sources::AIRLOCK_NAMESPACE;

/// `tools.airlock.search_tools`.
pub const SEARCH_TOOLS: &str = "search_tools";
/// `tools.airlock.read_sdk`.
pub const READ_SDK: &str = "read_sdk";

/// Results `search_tools` gives when the call does not say.
pub const DEFAULT_LIMIT: usize = 10;
/// Most results one `search_tools` call gives (a larger `limit` is taken as this).
pub const MAX_LIMIT: usize = 50;

/// How the caller calls the two tools, for the messages and hints that tell it what to do: a
/// program calls `tools.airlock.search_tools`, an MCP client the facade's `search_tools`
/// ([`crate::api::mcp`]), which answers with these same functions.
#[derive(Debug, Clone, Copy)]
pub struct CalledAs {
    pub search_tools: &'static str,
    pub read_sdk: &'static str,
}

/// A program's names for them.
pub const IN_PROGRAM: CalledAs = CalledAs {
    search_tools: "tools.airlock.search_tools",
    read_sdk: "tools.airlock.read_sdk",
};

/// The built-in tools, as a source.
#[derive(Debug)]
pub struct BuiltinTools {
    /// Made once, so the catalogue sees the same list (the same `Arc`) every time.
    tools: Arc<[ToolDescriptor]>,
}

impl Default for BuiltinTools {
    fn default() -> Self {
        BuiltinTools::new()
    }
}

impl BuiltinTools {
    pub fn new() -> BuiltinTools {
        BuiltinTools {
            tools: descriptors().into(),
        }
    }
}

impl ToolSource for BuiltinTools {
    fn namespace(&self) -> &str {
        NAMESPACE
    }

    fn tools(&self) -> ToolsFuture<'_> {
        let tools = self.tools.clone();
        Box::pin(async move { Ok(tools) })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a> {
        // Answered in the daemon, from the caller's catalogue: no secret is handed anywhere.
        Box::pin(async move { SourceAnswer::new(answer(tool, &args, ctx).await) })
    }
}

/// The built-in tool `tool`'s answer for the caller the context names.
async fn answer(tool: &str, args: &Value, ctx: &CallContext) -> Result<Value, ToolError> {
    let Some(caller) = &ctx.catalogue else {
        return Err(ToolError::new(
            ToolErrorCode::Internal,
            format!(
                "tools.{NAMESPACE}.{tool} answers only inside an execution, which knows its caller"
            ),
        ));
    };
    match tool {
        SEARCH_TOOLS => search_tools(&caller.view().await, args, IN_PROGRAM),
        READ_SDK => read_sdk(&caller.view().await, args, IN_PROGRAM),
        other => Err(ToolError::new(
            ToolErrorCode::UnknownTool,
            format!("server `{NAMESPACE}` has no tool named `{other}`"),
        )
        .with_hint(format!(
            "tools on `{NAMESPACE}`: {SEARCH_TOOLS}, {READ_SDK}"
        ))),
    }
}

/// `search_tools`: the caller's tools for `query`, ranked as `GET /v1/tools/search` ranks them.
/// `args` passed the input schema.
pub fn search_tools(
    view: &CatalogueView,
    args: &Value,
    called: CalledAs,
) -> Result<Value, ToolError> {
    let query = args
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if query.trim().is_empty() {
        return Err(ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!(
                "{} needs words to search for; `query` is empty",
                called.search_tools
            ),
        )
        .with_hint(format!(
            "say what the tool should do, for example {}({{ query: \"create issue\" }})",
            called.search_tools
        )));
    }
    let language = language(args, called.search_tools)?;
    Ok(view.search_in(query, limit(args.get("limit")), language))
}

/// The `language` argument: TypeScript when left out; anything but the two names refused.
fn language(args: &Value, tool: &str) -> Result<Language, ToolError> {
    let refused = |message: String| {
        ToolError::new(ToolErrorCode::InvalidArguments, message).with_hint(format!(
            "leave `language` out for TypeScript, or call {tool}({{ language: \"python\" }})"
        ))
    };
    match args.get("language") {
        None | Some(Value::Null) => Ok(Language::TypeScript),
        Some(Value::String(name)) => {
            Language::parse_optional(Some(name)).map_err(|e| refused(format!("{tool}: {e}")))
        }
        Some(other) => Err(refused(format!(
            "{tool}: `language` must be a string, got {other}"
        ))),
    }
}

/// The number of results asked for: [`DEFAULT_LIMIT`] when not given, else clamped to
/// 1..=[`MAX_LIMIT`].
fn limit(asked: Option<&Value>) -> usize {
    match asked.and_then(Value::as_f64) {
        // In range, so the conversion is exact (the schema asks for an integer).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(n) => n.clamp(1.0, MAX_LIMIT as f64) as usize,
        None => DEFAULT_LIMIT,
    }
}

/// `read_sdk`: without a path the caller's SDK tree, with one that file's text.
pub fn read_sdk(view: &CatalogueView, args: &Value, called: CalledAs) -> Result<Value, ToolError> {
    let asked = language(args, called.read_sdk)?;
    let path = match args.get("path") {
        None | Some(Value::Null) => return Ok(view.tree_in(asked)),
        Some(Value::String(path)) if path.is_empty() => return Ok(view.tree_in(asked)),
        Some(Value::String(path)) => path,
        // The input schema refused anything else.
        Some(other) => {
            return Err(ToolError::new(
                ToolErrorCode::InvalidArguments,
                format!("`path` must be a string, got {other}"),
            ));
        }
    };
    let language = file_language(
        path,
        args.get("language").is_some_and(|l| !l.is_null()),
        asked,
    );
    if let Some(text) = view.sdk.files_in(language).files.get(path) {
        return Ok(Value::String(text.clone()));
    }
    let lister = match language {
        Language::TypeScript => format!("{}({{}})", called.read_sdk),
        Language::Python => format!("{}({{ language: \"python\" }})", called.read_sdk),
    };
    let hint = missing_file_hint(view, path, &lister, language);
    // The program's own text, echoed: a few hundred characters of it say enough.
    let shown: String = if path.chars().count() > 200 {
        path.chars().take(200).chain(['…']).collect()
    } else {
        path.clone()
    };
    Err(ToolError::new(
        ToolErrorCode::InvalidArguments,
        format!("the SDK has no file `{shown}`"),
    )
    .with_hint(hint))
}

/// The hint for an SDK path that is not there: the nearest files, and how to list them all
/// (`lister`: `GET /v1/sdk`, `tools.airlock.read_sdk({})`, the facade's `read_sdk({})`).
pub fn missing_file_hint(
    view: &CatalogueView,
    path: &str,
    lister: &str,
    language: Language,
) -> String {
    let near = near_paths(
        path,
        view.sdk.files_in(language).files.keys().map(String::as_str),
    );
    let list = format!("{lister} lists the files; start with README.md");
    if near.is_empty() {
        list
    } else {
        format!("did you mean {}? {list}", quote_list(&near, "`", "`"))
    }
}

/// The tree a file is read from: the one asked for, else the Python tree for a `.pyi` path
/// (a Python search hit's `file`), else TypeScript.
pub fn file_language(path: &str, asked_explicitly: bool, asked: Language) -> Language {
    if asked_explicitly {
        asked
    } else if path.ends_with(".pyi") {
        Language::Python
    } else {
        Language::TypeScript
    }
}

/// The `language` property of both tools' input schemas.
fn language_schema(what: &str) -> Value {
    json!({
        "type": "string",
        "enum": Language::NAMES,
        "description": format!("\"typescript\" (the default) or \"python\": {what}.")
    })
}

/// What the two tools look like in the catalogue.
fn descriptors() -> Vec<ToolDescriptor> {
    let unavailable = json!({
        "type": "array",
        "description": "Sources whose tools could not be listed (a server that does not start), and why.",
        "items": {
            "type": "object",
            "properties": {
                "namespace": { "type": "string" },
                "error": { "type": "string" }
            },
            "required": ["namespace", "error"]
        }
    });
    let tree = json!({
        "type": "object",
        "description": "The file tree, when no path is given.",
        "properties": {
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": { "type": "string" },
                        "bytes": { "type": "integer" }
                    },
                    "required": ["path", "bytes"]
                }
            },
            "tools": { "type": "integer", "description": "How many tools the SDK describes." },
            "unavailable": unavailable
        },
        "required": ["files", "tools", "unavailable"]
    });
    vec![
        ToolDescriptor {
            name: SEARCH_TOOLS.to_owned(),
            description: format!(
                "Search the tools this program may call, by what they do; ranked as GET /v1/tools/search ranks them.\n\n\
                 Each result is a tool's name (`namespace.tool`), its one-line signature with its argument and result types, \
                 the first sentence of its description, and the SDK file with its full types \
                 (read it with tools.{NAMESPACE}.{READ_SDK}({{ path: result.file }})). \
                 Then call the tool itself: tools.<namespace>.<tool>(args)."
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Words for what the tool should do, e.g. \"create issue\" or \"current time\"."
                    },
                    "limit": {
                        "type": "integer",
                        "description": format!("How many results, best first: {DEFAULT_LIMIT} when left out, at most {MAX_LIMIT} (more is taken as {MAX_LIMIT}).")
                    },
                    "language": language_schema("the signatures' language (Python: `async def name(*, key: T) -> R`) and their files'")
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string" },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "tool": { "type": "string", "description": "`namespace.tool`." },
                                "signature": { "type": "string", "description": "`tools.namespace.tool({ a: number }): Promise<…>`." },
                                "summary": { "type": "string", "description": "The first sentence of its description." },
                                "file": { "type": "string", "description": "The SDK file with its types, for read_sdk." },
                                "score": { "type": "number" }
                            },
                            "required": ["tool", "signature", "summary", "file", "score"]
                        }
                    },
                    "unavailable": unavailable
                },
                "required": ["query", "results", "unavailable"]
            })),
            read_only: true,
        },
        ToolDescriptor {
            name: READ_SDK.to_owned(),
            description: "Read the TypeScript SDK of the tools this program may call, as GET /v1/sdk serves it.\n\n\
                 Without `path`: the file tree (each file's path and size) and how many tools there are. \
                 With `path`: that file's text, for example \"README.md\", \"servers/<namespace>/index.ts\" \
                 (a namespace's tools) or \"servers/<namespace>/<tool>.ts\" (one tool's input and output types). \
                 With `language: \"python\"`: the SDK in Python (`.pyi` stubs, \"servers/<namespace>/<tool>.pyi\")."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "A file of the tree, e.g. \"README.md\"; left out, the tree itself."
                    },
                    "language": language_schema("the SDK in Python is `.pyi` stubs (a `.pyi` path is read from it without this)")
                },
                "additionalProperties": false
            }),
            output_schema: Some(json!({
                "description": "The file tree without a path; the file's text with one.",
                "anyOf": [tree, { "type": "string", "description": "The file's text." }]
            })),
            read_only: true,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::catalogue::ToolCatalogue;
    use crate::tools::{ToolRegistry, ToolsFuture};
    use airlock_policy::Principal;

    /// A source with a few tools under `namespace`.
    struct Listed(&'static str, Arc<[ToolDescriptor]>);

    fn listed(namespace: &'static str, names: &[(&str, &str)]) -> Arc<Listed> {
        Arc::new(Listed(
            namespace,
            names
                .iter()
                .map(|(name, description)| ToolDescriptor {
                    name: (*name).to_owned(),
                    description: (*description).to_owned(),
                    input_schema: json!({ "type": "object", "properties": { "a": { "type": "number" } } }),
                    output_schema: None,
                    read_only: true,
                })
                .collect::<Vec<_>>()
                .into(),
        ))
    }

    impl ToolSource for Listed {
        fn namespace(&self) -> &str {
            self.0
        }
        fn tools(&self) -> ToolsFuture<'_> {
            let tools = self.1.clone();
            Box::pin(async move { Ok(tools) })
        }
        fn call<'a>(&'a self, _: &'a str, args: Value, _: &'a CallContext) -> ToolFuture<'a> {
            Box::pin(async move { Ok(args).into() })
        }
    }

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register(listed(
            "math",
            &[
                ("add", "Adds two numbers."),
                ("negate", "Negates a number."),
            ],
        ));
        registry.register(listed("clock", &[("now", "The current time.")]));
        registry.register(Arc::new(BuiltinTools::new()));
        registry
    }

    async fn view_for(allow: &[&str]) -> CatalogueView {
        ToolCatalogue::default()
            .view(&registry(), &Principal::new("p", vec![], allow))
            .await
    }

    /// The source answers only with a caller; through the caller it answers with its view.
    #[tokio::test]
    async fn answers_from_the_callers_catalogue() {
        let source = BuiltinTools::new();
        let err = source
            .call(
                SEARCH_TOOLS,
                json!({ "query": "add" }),
                &CallContext::new("ex", "p", 1),
            )
            .await
            .into_result()
            .unwrap_err();
        assert_eq!(err.code, ToolErrorCode::Internal);
        let mut ctx = CallContext::new("ex", "p", 1);
        ctx.catalogue = Some(crate::tools::catalogue::CallerCatalogue::new(
            Arc::new(ToolCatalogue::default()),
            registry(),
            Arc::new(Principal::new("p", vec![], &["math.*", "airlock.*"])),
        ));
        let found = source
            .call(SEARCH_TOOLS, json!({ "query": "add numbers" }), &ctx)
            .await
            .into_result()
            .unwrap();
        assert_eq!(found["results"][0]["tool"], "math.add", "{found}");
        let tree = source
            .call(READ_SDK, json!({}), &ctx)
            .await
            .into_result()
            .unwrap();
        // math's two tools and the two built-ins; clock is not granted.
        assert_eq!(tree["tools"], 4, "{tree}");
    }

    #[tokio::test]
    async fn search_is_the_endpoints_answer_for_the_principal() {
        let view = view_for(&["math.*", "airlock.*"]).await;
        let found = search_tools(
            &view,
            &json!({ "query": "add numbers", "limit": 1 }),
            IN_PROGRAM,
        )
        .unwrap();
        assert_eq!(found, view.search("add numbers", 1));
        assert_eq!(found["results"].as_array().unwrap().len(), 1);
        assert_eq!(found["results"][0]["tool"], "math.add");
        assert!(
            found["results"][0]["signature"]
                .as_str()
                .unwrap()
                .starts_with("tools.math.add({ a?: number })"),
            "{found}"
        );
        // Another principal's tools are not found.
        let found = search_tools(&view, &json!({ "query": "current time" }), IN_PROGRAM).unwrap();
        assert!(
            found["results"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| !r["tool"].as_str().unwrap().starts_with("clock.")),
            "{found}"
        );
        // The built-ins find themselves.
        let found = search_tools(&view, &json!({ "query": "search tools" }), IN_PROGRAM).unwrap();
        assert_eq!(
            found["results"][0]["tool"], "airlock.search_tools",
            "{found}"
        );
    }

    #[test]
    fn a_programs_names_are_the_namespaces() {
        assert_eq!(
            IN_PROGRAM.search_tools,
            format!("tools.{NAMESPACE}.{SEARCH_TOOLS}")
        );
        assert_eq!(IN_PROGRAM.read_sdk, format!("tools.{NAMESPACE}.{READ_SDK}"));
    }

    #[tokio::test]
    async fn limit_defaults_and_is_clamped() {
        assert_eq!(limit(None), DEFAULT_LIMIT);
        assert_eq!(limit(Some(&json!(0))), 1);
        assert_eq!(limit(Some(&json!(-3))), 1);
        assert_eq!(limit(Some(&json!(7))), 7);
        assert_eq!(limit(Some(&json!(1000))), MAX_LIMIT);
        assert_eq!(limit(Some(&json!(u64::MAX))), MAX_LIMIT);
        let view = view_for(&["*"]).await;
        let found = search_tools(&view, &json!({ "query": "a", "limit": 0 }), IN_PROGRAM).unwrap();
        assert!(found["results"].as_array().unwrap().len() <= 1, "{found}");
    }

    #[tokio::test]
    async fn an_empty_query_says_what_to_write() {
        let view = view_for(&["*"]).await;
        let err = search_tools(&view, &json!({ "query": "  " }), IN_PROGRAM).unwrap_err();
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert!(err.hint.unwrap().contains("query: \"create issue\""));
    }

    #[tokio::test]
    async fn read_sdk_gives_the_tree_and_files_of_the_principal() {
        let view = view_for(&["math.add", "airlock.read_sdk"]).await;
        let tree = read_sdk(&view, &json!({}), IN_PROGRAM).unwrap();
        assert_eq!(tree, view.tree());
        assert_eq!(tree["tools"], 2, "{tree}");
        let paths: Vec<&str> = tree["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert!(paths.contains(&"servers/math/add.ts"), "{paths:?}");
        assert!(paths.contains(&"servers/airlock/read_sdk.ts"), "{paths:?}");
        assert!(!paths.contains(&"servers/math/negate.ts"), "{paths:?}");
        assert!(!paths.iter().any(|p| p.contains("clock")), "{paths:?}");
        assert_eq!(
            read_sdk(&view, &json!({ "path": "" }), IN_PROGRAM).unwrap(),
            tree
        );

        let file = read_sdk(&view, &json!({ "path": "servers/math/add.ts" }), IN_PROGRAM).unwrap();
        assert_eq!(
            file.as_str(),
            Some(view.sdk.files.files["servers/math/add.ts"].as_str())
        );
        let readme = read_sdk(&view, &json!({ "path": "README.md" }), IN_PROGRAM).unwrap();
        assert!(
            readme.as_str().unwrap().contains("`tools.math`: 1 tool(s)"),
            "{readme}"
        );
    }

    #[tokio::test]
    async fn an_unknown_path_says_what_to_read_instead() {
        let view = view_for(&["math.*", "clock.*", "airlock.*"]).await;
        let err = read_sdk(&view, &json!({ "path": "add.ts" }), IN_PROGRAM).unwrap_err();
        assert_eq!(err.code, ToolErrorCode::InvalidArguments);
        assert_eq!(err.message, "the SDK has no file `add.ts`");
        assert_eq!(
            err.hint.as_deref(),
            Some(
                "did you mean `servers/math/add.ts`? tools.airlock.read_sdk({}) lists the files; start with README.md"
            )
        );
        let err = read_sdk(&view, &json!({ "path": "a/".repeat(20_000) }), IN_PROGRAM).unwrap_err();
        assert!(err.message.len() < 300, "{}", err.message);
        let err = read_sdk(
            &view,
            &json!({ "path": "nothing/like/this.txt" }),
            IN_PROGRAM,
        )
        .unwrap_err();
        assert_eq!(
            err.hint.as_deref(),
            Some("tools.airlock.read_sdk({}) lists the files; start with README.md")
        );
        // A file of a tool the principal is not granted does not exist for it, and is not
        // suggested.
        let narrow = view_for(&["math.add", "airlock.*"]).await;
        let err = read_sdk(
            &narrow,
            &json!({ "path": "servers/clock/now.ts" }),
            IN_PROGRAM,
        )
        .unwrap_err();
        assert!(!err.hint.unwrap().contains("clock"));
    }

    /// `language: "python"` reads and searches the SDK in Python; a `.pyi` path needs no
    /// `language`; anything but the two names is refused, naming them; TypeScript stays the
    /// default.
    #[tokio::test]
    async fn the_sdk_in_python_on_request() {
        let view = view_for(&["math.*", "airlock.*"]).await;
        let tree = read_sdk(&view, &json!({ "language": "python" }), IN_PROGRAM).unwrap();
        assert_eq!(tree, view.tree_in(Language::Python));
        let paths: Vec<&str> = tree["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert!(paths.contains(&"servers/math/add.pyi"), "{paths:?}");
        assert!(paths.contains(&"tools.pyi"), "{paths:?}");
        assert!(!paths.iter().any(|p| p.ends_with(".ts")), "{paths:?}");
        for args in [
            json!({ "path": "servers/math/add.pyi" }),
            json!({ "path": "servers/math/add.pyi", "language": "python" }),
        ] {
            let file = read_sdk(&view, &args, IN_PROGRAM).unwrap();
            assert!(
                file.as_str()
                    .unwrap()
                    .contains("async def add(*, a: float = ...) -> AddOutput:"),
                "{file}"
            );
        }
        let readme = read_sdk(
            &view,
            &json!({ "path": "README.md", "language": "python" }),
            IN_PROGRAM,
        )
        .unwrap();
        assert!(
            readme.as_str().unwrap().contains("asyncio.gather"),
            "{readme}"
        );
        // The default is TypeScript, as it always was.
        assert_eq!(
            read_sdk(&view, &json!({ "path": "README.md" }), IN_PROGRAM).unwrap(),
            json!(view.sdk.files.files["README.md"])
        );
        assert_eq!(
            read_sdk(&view, &json!({}), IN_PROGRAM).unwrap(),
            view.tree()
        );
        let err = read_sdk(
            &view,
            &json!({ "path": "servers/math/add.ts", "language": "python" }),
            IN_PROGRAM,
        )
        .unwrap_err();
        assert!(
            err.hint
                .as_deref()
                .unwrap()
                .contains("`servers/math/add.pyi`"),
            "{err:?}"
        );
        assert!(
            err.hint
                .as_deref()
                .unwrap()
                .contains("tools.airlock.read_sdk({ language: \"python\" })"),
            "{err:?}"
        );

        let found = search_tools(
            &view,
            &json!({ "query": "add", "language": "python" }),
            IN_PROGRAM,
        )
        .unwrap();
        assert_eq!(found["results"][0]["tool"], "math.add", "{found}");
        assert_eq!(found["results"][0]["file"], "servers/math/add.pyi");
        assert!(
            found["results"][0]["signature"]
                .as_str()
                .unwrap()
                .starts_with("async def add(*, a: float = ...) -> "),
            "{found}"
        );

        for (tool, args) in [
            ("read", json!({ "language": "rust" })),
            ("search", json!({ "query": "add", "language": "Python" })),
            ("read", json!({ "language": 3 })),
        ] {
            let err = if tool == "read" {
                read_sdk(&view, &args, IN_PROGRAM).unwrap_err()
            } else {
                search_tools(&view, &args, IN_PROGRAM).unwrap_err()
            };
            assert_eq!(err.code, ToolErrorCode::InvalidArguments, "{err:?}");
            if args["language"].is_string() {
                assert!(
                    err.message
                        .contains("the accepted ones are `typescript` (the default) and `python`"),
                    "{}",
                    err.message
                );
            }
        }
    }

    /// The built-ins' own SDK files: typed, with the tree-or-text union for `read_sdk`.
    #[tokio::test]
    async fn the_builtins_are_typed_in_the_sdk() {
        let view = view_for(&["airlock.*"]).await;
        let files = &view.sdk.files.files;
        let search = &files["servers/airlock/search_tools.ts"];
        assert!(search.contains("query: string;"), "{search}");
        assert!(search.contains("limit?: number;"), "{search}");
        assert!(search.contains("signature: string;"), "{search}");
        let read = &files["servers/airlock/read_sdk.ts"];
        assert!(read.contains("path?: string;"), "{read}");
        assert!(read.contains("| string"), "{read}");
        assert!(files["tools.d.ts"].contains("readonly airlock: AirlockTools;"));
    }
}
