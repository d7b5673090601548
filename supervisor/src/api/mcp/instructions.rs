//! The `instructions` of the facade: what an MCP client puts before its model. Short (the
//! namespaces, not the tools: a thousand GitHub tools would not fit), and specific to the
//! caller, since each principal sees its own tools.

use crate::sdk::Sdk;
use std::fmt::Write as _;

/// The instructions for a caller whose SDK is `sdk`.
pub fn instructions(sdk: &Sdk) -> String {
    let mut out = String::from(
        "Airlock runs TypeScript programs in a sandbox against the tools below (code mode). \
         Instead of calling tools one by one, write one program that calls them, combines \
         their results and returns only what you need.\n\n\
         1. search_tools with a few words finds tools: each match is a signature \
         `tools.<namespace>.<tool>(args): Promise<result>`.\n\
         2. read_sdk reads their types when a signature is not enough (README.md first).\n\
         3. execute runs the program: `const r = await tools.<namespace>.<tool>({ ... })`; \
         independent calls at once with Promise.all; the last expression is the result; \
         console.log output comes back with it. No fetch, files or processes: only tools.\n\
         4. A failed program answers with the line, a hint and the tool calls made. Fix it \
         and run it again with the session id the answer gave (`\"session\": \"new\"` the \
         first time): calls that already succeeded are not repeated.\n\n",
    );
    let namespaces = sdk.files.namespaces();
    if namespaces.is_empty() {
        out.push_str(
            "No tools are granted to you yet: programs can compute but call nothing. The \
             operator grants tools in the policy's [[principal]] allow list.\n",
        );
        return out;
    }
    let total: usize = namespaces.iter().map(|(_, n)| n).sum();
    let _ = writeln!(
        out,
        "Your tools: {total} in {} namespace(s):",
        namespaces.len()
    );
    for (namespace, count) in &namespaces {
        let _ = writeln!(out, "- tools.{namespace}: {count} tool(s)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::SdkTool;

    #[test]
    fn the_instructions_list_the_namespaces_and_how_to_start() {
        let tool = |ns: &str, name: &str| SdkTool {
            namespace: ns.into(),
            name: name.into(),
            description: "Does things.".into(),
            input_schema: serde_json::json!({ "type": "object" }),
            output_schema: None,
            learned: None,
        };
        let sdk = Sdk::new(&[
            tool("github", "create_issue"),
            tool("github", "list_issues"),
            tool("time", "now"),
        ]);
        let text = instructions(&sdk);
        assert!(text.contains("- tools.github: 2 tool(s)"), "{text}");
        assert!(text.contains("- tools.time: 1 tool(s)"), "{text}");
        assert!(text.contains("search_tools"), "{text}");
        let empty = instructions(&Sdk::new(&[]));
        assert!(empty.contains("No tools are granted"), "{empty}");
    }
}
