//! The `ledger` tool namespace: an in-process service with side effects, to see how many times
//! a call really reached it. `create` ({name, delay_ms?}) appends a record and returns it with
//! its sequence number (after `delay_ms`, or a delay the ledger chooses to reorder
//! completions); `list` ({}) returns every record; `count` ({}) the number of records;
//! `flaky` ({name}) fails the first time it is called with a name and creates the record the
//! next time. With [`Ledger::honour_keys`], `create` and `flaky` answer a call whose
//! idempotency key they saw before with that call's answer, without acting again, as a
//! payments API does.

use airlock_supervisor::tools::{
    CallContext, ToolDescriptor, ToolError, ToolErrorCode, ToolFuture, ToolSource, ToolsFuture,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug, Default)]
pub struct Ledger {
    records: Mutex<Vec<Value>>,
    /// The idempotency keys `create` was called with, in arrival order.
    pub keys: Mutex<Vec<Option<String>>>,
    /// When set, a `create` without `delay_ms` waits longer the smaller its `n` argument, so
    /// calls made together finish in reverse order; otherwise in order.
    pub reverse: AtomicBool,
    /// Names `flaky` has failed for once.
    failed_once: Mutex<Vec<Value>>,
    /// Whether a key seen before is answered from `answered`.
    honour_keys: AtomicBool,
    /// The answer given to each idempotency key.
    answered: Mutex<HashMap<String, Result<Value, ToolError>>>,
}

impl Ledger {
    pub fn records(&self) -> Vec<Value> {
        self.records.lock().expect("ledger lock").clone()
    }

    pub fn set_reverse(&self, reverse: bool) {
        self.reverse.store(reverse, Ordering::Relaxed);
    }

    /// Answers a write whose idempotency key was seen before with the first answer to it.
    pub fn honour_keys(&self) {
        self.honour_keys.store(true, Ordering::Relaxed);
    }
}

fn tool(name: &str, description: &str, read_only: bool) -> ToolDescriptor {
    ToolDescriptor {
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        read_only,
    }
}

impl ToolSource for Ledger {
    fn namespace(&self) -> &str {
        "ledger"
    }

    fn tools(&self) -> ToolsFuture<'_> {
        Box::pin(async {
            Ok(vec![
                tool("create", "appends a record", false),
                tool("list", "every record", true),
                tool("count", "the number of records", true),
                tool("flaky", "fails once per name, then appends a record", false),
            ]
            .into())
        })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let honoured = ctx
                .idempotency_key
                .clone()
                .filter(|_| self.honour_keys.load(Ordering::Relaxed) && tool != "list");
            if let Some(key) = &honoured
                && let Some(answer) = self.answered.lock().expect("ledger lock").get(key)
            {
                return answer.clone().into();
            }
            let answer = self.act(tool, args, ctx).await;
            if let Some(key) = honoured {
                self.answered
                    .lock()
                    .expect("ledger lock")
                    .insert(key, answer.clone());
            }
            answer.into()
        })
    }
}

impl Ledger {
    async fn act(&self, tool: &str, args: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        match tool {
            "create" => {
                self.keys
                    .lock()
                    .expect("ledger lock")
                    .push(ctx.idempotency_key.clone());
                let delay = match args["delay_ms"].as_u64() {
                    Some(ms) => ms,
                    None => {
                        let n = args["n"].as_u64().unwrap_or(0).min(50);
                        if self.reverse.load(Ordering::Relaxed) {
                            (50 - n) * 4
                        } else {
                            n * 4
                        }
                    }
                };
                tokio::time::sleep(Duration::from_millis(delay)).await;
                let mut records = self.records.lock().expect("ledger lock");
                let record = json!({ "seq": records.len() + 1, "name": args["name"] });
                records.push(record.clone());
                Ok(record)
            }
            "flaky" => {
                let mut failed = self.failed_once.lock().expect("ledger lock");
                if !failed.contains(&args["name"]) {
                    failed.push(args["name"].clone());
                    return Err(ToolError::new(
                        ToolErrorCode::UpstreamError,
                        "the ledger is busy; try again",
                    )
                    .reported_by_tool());
                }
                let mut records = self.records.lock().expect("ledger lock");
                let record = json!({ "seq": records.len() + 1, "name": args["name"] });
                records.push(record.clone());
                Ok(record)
            }
            "list" => Ok(Value::Array(self.records())),
            "count" => Ok(json!(self.records.lock().expect("ledger lock").len())),
            other => Err(ToolError::new(
                ToolErrorCode::UnknownTool,
                format!("no tool ledger.{other}"),
            )),
        }
    }
}
