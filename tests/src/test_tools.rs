//! The `test` tool namespace: in-process tools for end-to-end tests and the benchmark.

use airlock_supervisor::tools::ToolErrorCode;
use airlock_supervisor::tools::{
    CallContext, SecretsUsed, SourceAnswer, ToolDescriptor, ToolError, ToolFuture, ToolSource,
    ToolsFuture,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Tools: `echo` (returns its arguments), `add` ({a, b} → a + b), `sleep` ({ms} → waits),
/// `fail` ({message} → ToolError), `count` (counts calls), `big` ({bytes} → a string),
/// `progress` ({message, steps} → reports `steps` progress updates with that message).
#[derive(Debug, Default)]
pub struct TestTools {
    pub calls: AtomicU64,
}

impl TestTools {
    pub fn new() -> Arc<TestTools> {
        Arc::new(TestTools::default())
    }
}

fn tool(name: &str, description: &str) -> ToolDescriptor {
    ToolDescriptor {
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        read_only: false,
    }
}

impl ToolSource for TestTools {
    fn namespace(&self) -> &str {
        "test"
    }

    fn tools(&self) -> ToolsFuture<'_> {
        Box::pin(async { Ok(Self::descriptors().into()) })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a> {
        if tool == "progress" {
            self.calls.fetch_add(1, Ordering::Relaxed);
            return Box::pin(async move {
                let steps = args["steps"].as_u64().unwrap_or(1);
                let message = args["message"].as_str().map(str::to_owned);
                for step in 1..=steps {
                    // In-process: the call hands no secret to anything.
                    ctx.progress
                        .report(
                            step as f64,
                            Some(steps as f64),
                            message.clone(),
                            &SecretsUsed::default(),
                        )
                        .await;
                }
                Ok(json!({ "steps": steps })).into()
            });
        }
        self.call_impl(tool, args)
    }
}

impl TestTools {
    fn descriptors() -> Vec<ToolDescriptor> {
        vec![
            tool("echo", "returns its arguments"),
            tool("add", "adds a and b"),
            tool("sleep", "waits ms milliseconds"),
            tool("fail", "always fails with the given message"),
            tool("count", "counts its calls"),
            tool("big", "returns a string of the given number of bytes"),
            tool(
                "progress",
                "reports steps progress updates with the given message",
            ),
        ]
    }

    fn call_impl<'a>(&'a self, tool: &'a str, args: Value) -> ToolFuture<'a> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let answer = async move {
            match tool {
                "echo" => Ok(args),
                "add" => {
                    let a = args["a"].as_f64().unwrap_or(0.0);
                    let b = args["b"].as_f64().unwrap_or(0.0);
                    Ok(json!(a + b))
                }
                "sleep" => {
                    let ms = args["ms"].as_u64().unwrap_or(10);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(json!({ "slept": ms }))
                }
                "fail" => Err(ToolError::new(
                    ToolErrorCode::UpstreamError,
                    args["message"].as_str().unwrap_or("failed on purpose"),
                )),
                "count" => Ok(json!(self.calls.load(Ordering::Relaxed))),
                "big" => {
                    let n = args["bytes"].as_u64().unwrap_or(0) as usize;
                    Ok(Value::String("x".repeat(n)))
                }
                other => Err(ToolError::new(
                    ToolErrorCode::UnknownTool,
                    format!("no tool {other}"),
                )),
            }
        };
        Box::pin(async move { SourceAnswer::new(answer.await) })
    }
}
