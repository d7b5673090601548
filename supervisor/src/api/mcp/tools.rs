//! The facade's tools as a model sees them: names, descriptions and input schemas. The
//! descriptions teach code mode: the model writes one TypeScript program that calls many
//! tools, instead of calling them one at a time.

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::sync::Arc;

pub const SEARCH_TOOLS: &str = "search_tools";
pub const READ_SDK: &str = "read_sdk";
pub const EXECUTE: &str = "execute";
pub const SUBMIT_RESULTS: &str = "submit_results";
pub const RESUME: &str = "resume";
pub const STATUS: &str = "status";

/// Every tool of the facade, in the order a model should meet them. Built once: rmcp asks for
/// a tool's schema on every request (header validation), and the list is fixed.
pub fn all() -> &'static [Tool] {
    static TOOLS: std::sync::OnceLock<Vec<Tool>> = std::sync::OnceLock::new();
    TOOLS.get_or_init(build)
}

fn build() -> Vec<Tool> {
    vec![
        tool(
            SEARCH_TOOLS,
            "Find the tools your program can call. Give a few words saying what you want to do \
             (\"create issue\", \"read file\"); the answer lists the best matches, each as a \
             TypeScript signature `tools.<namespace>.<tool>(args): Promise<result>` with a \
             one-line summary and the SDK file holding its types. Search before you write a \
             program; read the file with read_sdk when you need the exact argument or result \
             types.",
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What you want to do, in a few words." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 50, "description": "How many matches (default 10)." },
                    "language": { "type": "string", "enum": ["typescript", "python"], "description": "Default typescript; python answers with Python signatures (`async def name(*, key: T) -> R`) and `.pyi` files, for a program you will run with language python." }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            true,
        ),
        tool(
            READ_SDK,
            "Read the typed SDK of your tools. Without `path`: the list of files. With `path`: \
             one file, e.g. `README.md` (start here: the namespaces and how to call tools), \
             `servers/<namespace>/index.ts` (a namespace's tools) or \
             `servers/<namespace>/<tool>.ts` (one tool's input and result types). Read only \
             the files you need.",
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "An SDK file, e.g. README.md; omit it for the list of files." },
                    "language": { "type": "string", "enum": ["typescript", "python"], "description": "Default typescript; python reads the SDK as Python stubs (`servers/<namespace>/<tool>.pyi`), for a program you will run with language python. A .pyi path is read from it without this." }
                },
                "additionalProperties": false
            }),
            true,
        ),
        tool(
            EXECUTE,
            "Run a TypeScript program in a sandbox and get its result. The program calls tools \
             as `await tools.<namespace>.<tool>({ ...args })`, can run independent calls at once \
             with `Promise.all`, filters and joins their results, and its last expression (or \
             the value it returns) is the answer. `console.log` output comes back with the \
             result; `progress(value)` is reported while it runs. There is no fetch, file \
             system or process: only `tools`. A failed program answers with the error, the \
             line of your code, a hint saying what to change and the tool calls it made: fix \
             the program and run it again in the same `session` (send `\"session\": \"new\"` \
             the first time, then the id the answer gives): calls that already succeeded are \
             answered from the session's journal instead of being repeated.",
            json!({
                "type": "object",
                "properties": {
                    "code": { "type": "string", "description": "The program (TypeScript, or JavaScript or Python with language)." },
                    "language": { "type": "string", "enum": ["typescript", "javascript", "python"], "description": "Default typescript. In python, tools are `await tools.<namespace>.<tool>(key=value)`, `asyncio.gather` runs calls at once, `print` is the console, and the last expression is the answer; search_tools and read_sdk with language python give the tools' Python signatures and stubs." },
                    "session": { "type": "string", "description": "\"new\" to start a session, or the id of one: reruns in a session replay the calls that already succeeded." },
                    "timeout_ms": { "type": "integer", "minimum": 1, "description": "Deadline for the whole program (the policy caps it)." },
                    "client_tools": {
                        "type": "array",
                        "description": "Tools you answer yourself: the program calls tools.client.<name>(args), the execution waits and this tool answers with status waiting and pending_calls; answer them with submit_results.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": { "type": "string" },
                                "description": { "type": "string" },
                                "input_schema": { "type": "object" }
                            },
                            "required": ["name"]
                        }
                    }
                },
                "required": ["code"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            SUBMIT_RESULTS,
            "Answer the pending client tool calls of a waiting execution (the `pending_calls` an \
             execute answer listed). The execution then runs on from where it waited and this \
             answers like execute: the result, an error, or waiting again.",
            json!({
                "type": "object",
                "properties": {
                    "id": { "type": "string", "description": "The waiting execution's id." },
                    "results": {
                        "type": "array",
                        "description": "One entry per pending call: {\"id\": <call id>, \"ok\": <value>} or {\"id\": <call id>, \"error\": {\"message\": \"...\"}}.",
                        "items": { "type": "object" }
                    }
                },
                "required": ["id", "results"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            RESUME,
            "Run an interrupted execution again (one the daemon stopped by a restart or a \
             crash), in its session: every call it had made is answered from the journal, so \
             nothing is done twice. Answers like execute.",
            json!({
                "type": "object",
                "properties": { "id": { "type": "string", "description": "The interrupted execution's id." } },
                "required": ["id"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            STATUS,
            "The state of an execution you started: running, waiting (and for what), or its \
             whole answer once finished. Use it for an execution that waits for a person's \
             approval.",
            json!({
                "type": "object",
                "properties": { "id": { "type": "string", "description": "The execution's id." } },
                "required": ["id"],
                "additionalProperties": false
            }),
            true,
        ),
    ]
}

fn tool(name: &'static str, description: &'static str, schema: Value, read_only: bool) -> Tool {
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    let mut tool = Tool::new(name, description, Arc::new(schema));
    // Hints only (clients may show them): the reads change nothing; a program may call any
    // tool the policy grants, so execute promises nothing.
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(read_only);
    annotations.open_world_hint = Some(!read_only);
    tool.annotations = Some(annotations);
    tool
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_a_description() {
        let tools = all();
        assert_eq!(tools.len(), 6);
        for t in tools {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                t.name
            );
            assert!(
                t.description.as_ref().is_some_and(|d| d.len() > 80),
                "{}",
                t.name
            );
        }
    }
}
