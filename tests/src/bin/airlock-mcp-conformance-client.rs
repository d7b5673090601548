//! The client side of the MCP conformance suite (`@modelcontextprotocol/conformance`, client
//! mode): the suite starts a test server for one scenario and runs this program with the
//! server's URL as its last argument and the scenario's name in `MCP_CONFORMANCE_SCENARIO`.
//!
//! What is tested is Airlock's own MCP client, `airlock_supervisor::tools::sources::mcp::McpServer`,
//! used exactly as the daemon uses it: a `[[server]]` with a `url`, its tools listed, and
//! tools called through `ToolSource::call` (schema check included). The program exits 0 when
//! every step the scenario needs succeeded, 1 otherwise, and prints what it did.

use airlock_policy::{ServerTransport, StartMode, ToolServer};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_supervisor::tools::{CallContext, ToolSource};
use anyhow::{Context, bail};
use serde_json::{Value, json};
use std::sync::Arc;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("airlock-mcp-conformance-client: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::args()
        .next_back()
        .filter(|a| a.starts_with("http"))
        .context("usage: airlock-mcp-conformance-client <server-url>")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let server = McpServer::new(
        ToolServer {
            name: "conformance".into(),
            transport: ServerTransport::Http {
                url,
                headers: Vec::new(),
            },
            start: StartMode::Lazy,
            call_timeout_ms: 20_000,
            max_concurrent_calls: 4,
            coerce: Default::default(),
            learn_types: true,
            dynamic_tools: false,
            confinement: Default::default(),
        },
        Arc::new(SecretStore::empty()),
    );
    let tools = server.tools().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "scenario {scenario:?}: connected with protocol {}, {} tool(s): {}",
        server.protocol_version().await.unwrap_or_default(),
        tools.len(),
        tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let calls: Vec<(&str, Value)> = match scenario.as_str() {
        "initialize" => Vec::new(),
        "tools_call" => vec![("add_numbers", json!({ "a": 5, "b": 3 }))],
        "sse-retry" => vec![("test_reconnection", json!({}))],
        "elicitation-sep1034-client-defaults" => {
            vec![("test_client_elicitation_defaults", json!({}))]
        }
        // Any other scenario: call every tool that takes no required arguments.
        _ => tools
            .iter()
            .filter(|t| {
                t.input_schema
                    .get("required")
                    .and_then(Value::as_array)
                    .is_none_or(|r| r.is_empty())
            })
            .map(|t| (t.name.as_str(), json!({})))
            .collect(),
    };
    let mut failed = 0;
    for (i, (tool, args)) in calls.into_iter().enumerate() {
        let ctx = CallContext::new(
            "conformance",
            "conformance",
            u32::try_from(i + 1).unwrap_or(u32::MAX),
        );
        match server.call(tool, args, &ctx).await.into_result() {
            Ok(value) => println!("{tool}: ok: {value}"),
            Err(e) => {
                failed += 1;
                println!("{tool}: {}: {}", e.code, e.message);
            }
        }
    }
    server.shutdown().await;
    if failed > 0 {
        bail!("{failed} call(s) failed");
    }
    Ok(())
}
