//! The executions that are running, by id: what cancelling one needs, and for a detached one
//! (`"wait": false`) its events so far ([`EventLog`]), which `GET /v1/executions/<id>` and its
//! event stream read while it runs. What outlives a run (a finished detached execution's
//! response, a waiting one's) is in the journal, not here.

use crate::agent_api::{
    CallOutcome, ConsoleStream, ExecutionEvent, ExecutionResponse, PeerInfo, Status, ToolCallRecord,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{oneshot, watch};

/// Running executions by id.
#[derive(Debug, Default)]
pub struct LiveExecutions {
    running: Arc<Mutex<HashMap<String, Entry>>>,
    /// Places taken by detached submissions that are not in `running` yet, by principal
    /// ([`LiveExecutions::reserve_detached`]). Locked after `running`, never before.
    reserved: Arc<Mutex<HashMap<String, usize>>>,
}

/// A place among a principal's `limits.max_waiting_executions`, taken for a detached
/// submission before anything else of it is done and held until it is in the table
/// ([`LiveExecutions::enter`]), so that submissions made at once cannot all pass the count.
/// Dropped unused (the submission failed), it is given back.
#[derive(Debug)]
pub struct DetachedPlace {
    reserved: Arc<Mutex<HashMap<String, usize>>>,
    principal: String,
    held: bool,
}

impl DetachedPlace {
    /// Gives the place back (the execution now counts in the table, or never will).
    fn release(&mut self) {
        if std::mem::take(&mut self.held) {
            let mut reserved = lock(&self.reserved);
            if let Some(n) = reserved.get_mut(&self.principal) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    reserved.remove(&self.principal);
                }
            }
        }
    }
}

impl Drop for DetachedPlace {
    fn drop(&mut self) {
        self.release();
    }
}

#[derive(Debug)]
struct Entry {
    /// The principal that started it: the only one that may act on it.
    principal: String,
    cancel: watch::Sender<bool>,
    /// A detached execution's events.
    log: Option<Arc<EventLog>>,
}

/// Most events a detached execution's log keeps (beyond them, only the final result is kept;
/// console output is bounded by `max_output` anyway, progress is not).
pub const MAX_LOGGED_EVENTS: usize = 10_000;
/// Most bytes of event JSON a detached execution's log keeps.
pub const MAX_LOGGED_BYTES: usize = 8 << 20;

/// The events of one detached execution, numbered from 1, for readers that come and go.
#[derive(Debug)]
pub struct EventLog {
    /// Who started it, and its session: what its snapshot says.
    principal: String,
    peer: PeerInfo,
    session: Option<String>,
    inner: Mutex<LogInner>,
    /// The number of the last event logged, and whether the log is complete (its final
    /// result logged): readers wait on it.
    last: watch::Sender<(u64, bool)>,
}

#[derive(Debug, Default)]
struct LogInner {
    events: Vec<(u64, ExecutionEvent)>,
    bytes: usize,
    /// Events not kept (over the bounds).
    dropped: u64,
    next: u64,
    /// It has taken its slot and runs (before: queued).
    running: bool,
}

impl EventLog {
    pub fn new(principal: &str, peer: PeerInfo, session: Option<String>) -> EventLog {
        EventLog {
            principal: principal.to_owned(),
            peer,
            session,
            inner: Mutex::new(LogInner {
                next: 1,
                ..LogInner::default()
            }),
            last: watch::channel((0, false)).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs an event; over the bounds only the final result is kept (it always is).
    pub fn push(&self, event: ExecutionEvent) {
        let done = matches!(event, ExecutionEvent::Result(_));
        let mut inner = self.lock();
        if matches!(event, ExecutionEvent::Started { .. }) {
            inner.running = true;
        }
        let size = serde_json::to_vec(&event).map_or(0, |v| v.len());
        let seq = inner.next;
        inner.next += 1;
        if !done
            && (inner.events.len() >= MAX_LOGGED_EVENTS || inner.bytes + size > MAX_LOGGED_BYTES)
        {
            inner.dropped += 1;
        } else {
            inner.bytes += size;
            inner.events.push((seq, event));
        }
        drop(inner);
        self.last.send_replace((seq, done));
    }

    /// The first `max` events numbered after `after`, and whether the log is complete. A
    /// reader takes a few at a time, so that many slow readers do not each hold a copy of the
    /// whole log.
    pub fn after(&self, after: u64, max: usize) -> (Vec<(u64, ExecutionEvent)>, bool) {
        let inner = self.lock();
        let start = inner.events.partition_point(|(seq, _)| *seq <= after);
        let end = start.saturating_add(max).min(inner.events.len());
        (inner.events[start..end].to_vec(), self.ended())
    }

    /// Whether the final result is logged: the execution has ended, though it may not have
    /// left the live table yet.
    pub fn ended(&self) -> bool {
        self.last.borrow().1
    }

    /// Wakes when an event is logged after `seen`.
    pub fn subscribe(&self) -> watch::Receiver<(u64, bool)> {
        self.last.subscribe()
    }

    /// Every event kept, as NDJSON lines with their numbers (what the journal keeps of a
    /// finished detached execution).
    pub fn ndjson(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();
        for (seq, event) in &inner.events {
            out.push_str(&numbered_line(*seq, event));
        }
        out
    }

    /// The execution so far, shaped as its response will be: `queued` or `running`, the
    /// output printed and the calls made until now (`result` and `stats` come at the end).
    pub fn snapshot(&self, id: &str) -> ExecutionResponse {
        let inner = self.lock();
        // Ended: the result event is the whole response. (The log can hold it a moment before
        // the execution leaves the live table; a reader that saw the result in the events
        // must not then be told the execution still runs.)
        if let Some((_, ExecutionEvent::Result(done))) = inner.events.last() {
            return (**done).clone();
        }
        let mut response = ExecutionResponse {
            id: id.to_owned(),
            status: if inner.running {
                Status::Running
            } else {
                Status::Queued
            },
            result: serde_json::Value::Null,
            stdout: String::new(),
            stderr: String::new(),
            error: None,
            tool_calls: Vec::new(),
            session: self.session.clone(),
            replayed_calls: 0,
            resumed_from: None,
            pending_calls: Vec::new(),
            pending_approvals: Vec::new(),
            determinism: None,
            stats: Default::default(),
            peer: self.peer,
            principal: self.principal.clone(),
            redactions: Vec::new(),
            warnings: Vec::new(),
        };
        if inner.dropped > 0 {
            response.warnings.push(format!(
                "{} events were not kept (a detached execution keeps at most {MAX_LOGGED_EVENTS} events, {MAX_LOGGED_BYTES} bytes)",
                inner.dropped
            ));
        }
        for (_, event) in &inner.events {
            match event {
                ExecutionEvent::Console { stream, text, .. } => {
                    let out = match stream {
                        ConsoleStream::Stdout => &mut response.stdout,
                        ConsoleStream::Stderr => &mut response.stderr,
                    };
                    out.push_str(text);
                    out.push('\n');
                }
                ExecutionEvent::ToolCallStarted { id, tool } => {
                    response.tool_calls.push(ToolCallRecord {
                        id: *id,
                        tool: tool.clone(),
                        args: serde_json::Value::Null,
                        outcome: CallOutcome::Pending,
                        error: None,
                        result: None,
                        result_truncated: false,
                        started_ms: 0.0,
                        duration_ms: 0.0,
                        replayed: false,
                        divergence: None,
                        redactions: Vec::new(),
                        coercions: Vec::new(),
                        flows: Vec::new(),
                    });
                }
                ExecutionEvent::ToolCallFinished {
                    id,
                    outcome,
                    duration_ms,
                    ..
                } => {
                    if let Some(call) = response.tool_calls.iter_mut().find(|c| c.id == *id) {
                        call.outcome = *outcome;
                        call.duration_ms = *duration_ms;
                    }
                }
                _ => {}
            }
        }
        response
    }
}

/// One event as a line of the event stream: its JSON with its number (`seq`), then a newline.
pub fn numbered_line(seq: u64, event: &ExecutionEvent) -> String {
    let mut value = serde_json::to_value(event).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("seq".into(), seq.into());
    }
    let mut line = value.to_string();
    line.push('\n');
    line
}

/// Why [`LiveExecutions::cancel`] did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CancelError {
    /// No execution of this principal runs under that id (it ended, never existed, or is
    /// another principal's, which is not told apart).
    #[error("no running execution `{0}` of yours")]
    NotFound(String),
}

/// What may stop an execution before its end.
#[derive(Debug)]
pub struct StopSignals {
    /// A client waiting for the whole response: its sender is dropped when the client hangs up.
    pub client: Option<oneshot::Receiver<()>>,
    /// Set by [`LiveExecutions::cancel`].
    pub cancel: watch::Receiver<bool>,
}

/// Holds an execution's place in the registry; dropping it removes the entry.
#[derive(Debug)]
pub struct LiveEntry {
    id: String,
    running: Arc<Mutex<HashMap<String, Entry>>>,
}

impl Drop for LiveEntry {
    fn drop(&mut self) {
        lock(&self.running).remove(&self.id);
    }
}

fn lock<T>(map: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map stays whole whatever panicked while holding it.
    map.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LiveExecutions {
    /// Registers execution `id` of `principal` (with `log` for a detached one); it is listed
    /// until the returned entry drops.
    pub fn enter(
        &self,
        id: &str,
        principal: &str,
        log: Option<Arc<EventLog>>,
        place: Option<DetachedPlace>,
    ) -> (LiveEntry, watch::Receiver<bool>) {
        let (cancel, cancelled) = watch::channel(false);
        let mut running = lock(&self.running);
        running.insert(
            id.to_owned(),
            Entry {
                principal: principal.to_owned(),
                cancel,
                log,
            },
        );
        // Under the table's lock: the execution is counted there from now, and its place no
        // longer, with no moment where it counts twice or not at all.
        if let Some(mut place) = place {
            place.release();
        }
        drop(running);
        (
            LiveEntry {
                id: id.to_owned(),
                running: self.running.clone(),
            },
            cancelled,
        )
    }

    /// Asks execution `id` of `principal` to stop; it ends with status `cancelled`.
    pub fn cancel(&self, id: &str, principal: &str) -> Result<(), CancelError> {
        let running = lock(&self.running);
        match running.get(id) {
            // A detached execution whose result is logged has ended (its status says so
            // already); it is only about to leave the table, and there is nothing to stop.
            Some(entry)
                if entry.principal == principal
                    && !entry.log.as_ref().is_some_and(|log| log.ended()) =>
            {
                entry.cancel.send_replace(true);
                Ok(())
            }
            _ => Err(CancelError::NotFound(id.to_owned())),
        }
    }

    /// Whether `principal`'s execution `id` runs now, and its event log if it is detached.
    pub fn find(&self, id: &str, principal: &str) -> Option<Option<Arc<EventLog>>> {
        lock(&self.running)
            .get(id)
            .filter(|e| e.principal == principal)
            .map(|e| e.log.clone())
    }

    /// A place for one more detached execution of `principal`, if its detached executions
    /// (running, waiting for a slot, or submitted and not yet in the table) and the `waiting`
    /// ones the journal keeps are fewer than `max`.
    pub fn reserve_detached(
        &self,
        principal: &str,
        waiting: u64,
        max: u32,
    ) -> Option<DetachedPlace> {
        let running = lock(&self.running);
        let mut reserved = lock(&self.reserved);
        let detached = running
            .values()
            .filter(|e| e.principal == principal && e.log.is_some())
            .count()
            + reserved.get(principal).copied().unwrap_or(0);
        if waiting.saturating_add(detached as u64) >= u64::from(max) {
            return None;
        }
        *reserved.entry(principal.to_owned()).or_default() += 1;
        Some(DetachedPlace {
            reserved: self.reserved.clone(),
            principal: principal.to_owned(),
            held: true,
        })
    }

    /// How many run now.
    pub fn len(&self) -> usize {
        lock(&self.running).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_starting_principal_cancels_and_entries_leave_when_dropped() {
        let live = LiveExecutions::default();
        let (entry, cancelled) = live.enter("ex_1", "alice", None, None);
        assert_eq!(live.len(), 1);
        assert_eq!(
            live.cancel("ex_1", "bob"),
            Err(CancelError::NotFound("ex_1".into()))
        );
        assert!(!*cancelled.borrow());
        live.cancel("ex_1", "alice").unwrap();
        assert!(*cancelled.borrow());
        drop(entry);
        assert!(live.is_empty());
        assert!(live.cancel("ex_1", "alice").is_err());
    }

    #[test]
    fn an_execution_whose_result_is_logged_is_not_cancelled() {
        // Its status already answers with the result; cancelling said `cancelling` until the
        // entry left the table a moment later (the Python client's detached test caught it).
        let live = LiveExecutions::default();
        let peer = PeerInfo {
            uid: 0,
            gid: 0,
            pid: None,
        };
        let log = Arc::new(EventLog::new("alice", peer, None));
        let (_entry, cancelled) = live.enter("ex_1", "alice", Some(log.clone()), None);
        log.push(ExecutionEvent::Started {
            id: "ex_1".into(),
            session: None,
        });
        let mut done = log.snapshot("ex_1");
        done.status = Status::Ok;
        log.push(ExecutionEvent::Result(Box::new(done)));
        assert_eq!(
            live.cancel("ex_1", "alice"),
            Err(CancelError::NotFound("ex_1".into()))
        );
        assert!(!*cancelled.borrow());
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;

    fn console(text: &str) -> ExecutionEvent {
        ExecutionEvent::Console {
            stream: ConsoleStream::Stdout,
            level: "log".into(),
            text: text.into(),
        }
    }

    /// Readers ask for what came after the last number they saw; past the bounds events are
    /// counted, not kept, and the final result is always kept.
    #[test]
    fn events_are_numbered_bounded_and_read_after_a_number() {
        let log = EventLog::new(
            "p",
            PeerInfo {
                uid: 0,
                gid: 0,
                pid: None,
            },
            None,
        );
        log.push(ExecutionEvent::Started {
            id: "e".into(),
            session: None,
        });
        log.push(console("a"));
        log.push(console("b"));
        let (events, done) = log.after(1, usize::MAX);
        assert_eq!(events.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [2, 3]);
        assert!(!done);
        let snapshot = log.snapshot("e");
        assert_eq!(snapshot.status, Status::Running);
        assert_eq!(snapshot.stdout, "a\nb\n");
        for _ in 0..MAX_LOGGED_EVENTS {
            log.push(console("x"));
        }
        assert_eq!(log.after(0, usize::MAX).0.len(), MAX_LOGGED_EVENTS);
        log.push(ExecutionEvent::Result(Box::new(snapshot)));
        let (events, done) = log.after(0, usize::MAX);
        assert_eq!(events.len(), MAX_LOGGED_EVENTS + 1);
        assert!(done);
        assert!(
            matches!(events.last(), Some((n, ExecutionEvent::Result(_))) if *n == 3 + MAX_LOGGED_EVENTS as u64 + 1)
        );
        let line = numbered_line(7, &console("z"));
        assert!(
            line.starts_with('{') && line.ends_with("}\n") && line.contains("\"seq\":7"),
            "{line}"
        );
    }

    /// Once the result is in the log, the snapshot is that result, even while the execution
    /// is still in the live table (a reader of the events saw it end).
    #[test]
    fn the_snapshot_of_an_ended_execution_is_its_result() {
        let peer = PeerInfo {
            uid: 0,
            gid: 0,
            pid: None,
        };
        let log = EventLog::new("p", peer, None);
        log.push(ExecutionEvent::Started {
            id: "e".into(),
            session: None,
        });
        log.push(console("a"));
        let mut done = log.snapshot("e");
        done.status = Status::Ok;
        done.result = serde_json::json!(42);
        log.push(ExecutionEvent::Result(Box::new(done)));
        let snapshot = log.snapshot("e");
        assert_eq!(snapshot.status, Status::Ok);
        assert_eq!(snapshot.result, serde_json::json!(42));
        assert_eq!(snapshot.stdout, "a\n");
    }
}
