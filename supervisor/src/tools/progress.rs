//! A tool call's progress on its way to the agent: the source's own words, so the secret
//! values the call used are redacted and the scanner runs, as for the call's result. The
//! pipeline owns the reporter and lends it to the source with the call's context; what it
//! replaced stays with it, for the call's trace.

use crate::agent_api::{ExecutionEvent, Redaction, RedactionPlace};
use crate::secrets::scanner::{KNOWN_SECRET_RULE, SecretScanner};
use crate::tools::SecretsUsed;
use std::sync::Mutex;

/// Progress of one tool call, streamed to the agent as `tool_progress` events when it asked
/// for a stream, and dropped otherwise. A progress message is the tool's own text going
/// straight to the agent, so it passes the secret scanner first, like the call's result; what
/// the scanner replaced is kept for the call's `redactions` in the trace.
#[derive(Debug, Default)]
pub struct ToolProgress {
    events: Option<tokio::sync::mpsc::Sender<ExecutionEvent>>,
    call_id: u32,
    tool: String,
    scanner: Option<SecretScanner>,
    /// What was replaced so far (a source reports through a shared borrow of the context).
    redactions: Mutex<Vec<Redaction>>,
}

impl ToolProgress {
    pub fn new(
        events: Option<tokio::sync::mpsc::Sender<ExecutionEvent>>,
        call_id: u32,
        tool: String,
        scanner: Option<SecretScanner>,
    ) -> Self {
        ToolProgress {
            events,
            call_id,
            tool,
            scanner,
            redactions: Mutex::default(),
        }
    }

    /// Whether anybody listens (so a source need not ask its server for progress at all).
    pub fn wanted(&self) -> bool {
        self.events.is_some()
    }

    /// Reports one step, with `secrets` the secret values the call has handed its service so
    /// far (redacted from the message before the scan). Waits while the agent's stream is full
    /// rather than drop the event: the stream is bounded, and a slow reader slows only its own
    /// execution.
    pub async fn report(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
        secrets: &SecretsUsed,
    ) {
        let Some(events) = &self.events else {
            return;
        };
        let message = message.map(|text| {
            let (text, found) = secrets.redact_text_noting(text);
            if !found.is_empty() {
                let mut kept = self.redactions.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend(found.into_iter().map(|r| Redaction {
                    rule: KNOWN_SECRET_RULE.to_owned(),
                    place: RedactionPlace::Progress,
                    pointer: None,
                    secret: r.secret,
                }));
            }
            text
        });
        let message = match (message, &self.scanner) {
            (Some(text), Some(scanner)) => {
                let (clean, findings) = scanner.scan_text(&text);
                if findings.is_empty() {
                    Some(text)
                } else {
                    let clean = clean.into_owned();
                    let mut kept = self.redactions.lock().unwrap_or_else(|e| e.into_inner());
                    kept.extend(
                        findings
                            .iter()
                            .map(|f| f.redaction(RedactionPlace::Progress)),
                    );
                    Some(clean)
                }
            }
            (message, _) => message,
        };
        let _ = events
            .send(ExecutionEvent::ToolProgress {
                id: self.call_id,
                tool: self.tool.clone(),
                progress,
                total,
                message,
            })
            .await;
    }

    /// What the scanner replaced in this call's progress messages so far (taken: a second
    /// call returns only later ones).
    pub fn take_redactions(&self) -> Vec<Redaction> {
        std::mem::take(&mut *self.redactions.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
