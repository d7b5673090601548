//! Sessions and their replay journal: every tool call of a session's executions is recorded
//! (what the worker got, after the secret scan), so re-running edited code in the session
//! answers the calls already made from the record instead of repeating their side effects,
//! and an execution cut off by a restart can be finished by replay.
//!
//! - this file: [`Journal`] (the store, its health, its counters) and `SessionRun`, what one
//!   execution of a session asks of it (keys, lookups, records);
//! - [`canonical`]: RFC 8785 canonical JSON, for keys that do not depend on key order;
//! - [`store`]: the [`store::JournalStore`] trait and its rows; [`sqlite`]: the embedded store;
//! - [`session_store`]: the values a program keeps in its session (`store.set`/`store.get`),
//!   and their bounds;
//! - [`log`]: the intent log, where a live call's "sent" and outcome are appended (one write
//!   each) until they are folded into the store in one transaction (when an execution ends,
//!   before the store is read, at start).
//!
//! A call's key is (tool, hash of its canonical arguments, occurrence of that pair within the
//! execution), never its arrival order, so `Promise.all` replays the same way whichever call
//! finishes first. Nothing here calls a tool or speaks HTTP: the call pipeline
//! (`crate::tools::call`) asks, the execution service (`crate::execution`) opens sessions.

pub mod canonical;
pub mod log;
pub mod session_store;
pub mod sqlite;
pub mod store;
pub(crate) mod usage;

use crate::agent_api::{ReplayMode, ToolError, ToolErrorCode};
use airlock_policy::JournalSettings;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use store::{
    Bounds, CallKey, CallRow, CallState, Full, JournalStore, LogRecord, Outcome, Room, SessionRow,
    StoreError,
};
use tracing::warn;

/// The calls of one execution in call order: (tool, arguments hash) each.
pub(crate) type CallOrder = Arc<[(String, String)]>;

/// The journal of a daemon: its store, whether it works, and what it did.
#[derive(Debug)]
pub struct Journal {
    store: Arc<dyn JournalStore>,
    /// Where live calls' records go first ([`log`]), until folded into the store.
    log: log::IntentLog,
    pub settings: JournalSettings,
    /// The last failure to read or write the store, until a write succeeds again.
    failure: Mutex<Option<String>>,
    /// Sessions with an execution running now (never evicted), with how many.
    busy: Mutex<HashMap<String, u32>>,
    /// When eviction last ran (milliseconds since the epoch).
    last_eviction_ms: AtomicU64,
    /// Sessions with calls still in flight after their execution ended, with how many
    /// executions left such calls ([`Journal::settling`]); `settled` wakes whoever waits.
    settling: Mutex<HashMap<String, u32>>,
    settled: tokio::sync::Notify,
    pub replayed_calls: AtomicU64,
    pub journaled_calls: AtomicU64,
}

/// An execution reads its session's records at once when there are at most this many, with
/// results of at most [`PRELOAD_MAX_BYTES`] in all (then each call's lookup is a hash-map
/// hit, not a query); a larger session is looked up call by call.
const PRELOAD_MAX_CALLS: u64 = 20_000;
const PRELOAD_MAX_BYTES: u64 = 16 << 20;

/// Past this many bytes the intent log is folded into the store by the call that passed it,
/// rather than when an execution ends: a fold reads the whole log into memory, so this (plus
/// one record) bounds it.
const FOLD_AT_BYTES: u64 = 16 << 20;

/// Whether the journal works, as `/v1/health` names it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum JournalStatus {
    Ok,
    /// `[journal] enabled = false`.
    Disabled,
    /// It could not be opened, or a write failed (`error` says why).
    Unavailable,
}

/// What `/v1/health` says of the journal.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct JournalHealth {
    pub status: JournalStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// How a session request went wrong. Each says what to do next.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    #[error("there is no session `{0}` (or it belongs to another principal)")]
    NotFound(String),
    #[error("sessions are turned off on this daemon ([journal] enabled = false)")]
    Disabled,
    #[error("the daemon cannot use its journal: {0}")]
    Unavailable(String),
    /// A bound of the journal would be passed (nothing is wrong with it).
    #[error("{0}")]
    Full(Full),
}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Full(full) => SessionError::Full(full),
            other => SessionError::Unavailable(other.to_string()),
        }
    }
}

impl SessionError {
    pub fn hint(&self) -> &'static str {
        match self {
            SessionError::NotFound(_) => {
                "use \"session\": \"new\" for a new session (the response carries its id); sessions unused for [journal] session_ttl_hours are deleted"
            }
            SessionError::Disabled => {
                "leave \"session\" out to run one-shot, or ask the operator to enable [journal]"
            }
            SessionError::Unavailable(_) => {
                "leave \"session\" out to run one-shot meanwhile; the operator sees the cause in /v1/health and the airlockd log"
            }
            SessionError::Full(full) => full_hint(full),
        }
    }
}

/// What to do about a bound of the journal.
pub(crate) fn full_hint(full: &Full) -> &'static str {
    match full {
        Full::Sessions { .. } => {
            "delete sessions you no longer need (DELETE /v1/sessions/<id>, airlock session delete <id>); unused ones are deleted after [journal] session_ttl_hours"
        }
        Full::Waiting { .. } => {
            "answer or cancel (DELETE /v1/executions/<id>) the executions that wait, or use the stateless form (client_results), which keeps nothing"
        }
        Full::Session { .. } => {
            "start a new session (\"session\": \"new\"), or keep less in this one: a smaller program, smaller answers, fewer or smaller results"
        }
        Full::Principal { .. } | Full::Total { .. } => {
            "delete sessions you no longer need (airlock session delete <id>), and answer or cancel executions that wait: your idle sessions were deleted, oldest first, and that was not enough; the operator sets [journal] max_principal_size and max_size"
        }
    }
}

/// The state the daemon's journal is in.
#[derive(Debug, Clone)]
pub enum JournalState {
    Ready(Arc<Journal>),
    Disabled,
    /// It could not be opened (the reason): executions without sessions still run.
    Unavailable(String),
}

impl JournalState {
    /// Opens the journal `settings` ask for, in `default_directory` unless they name one.
    pub fn open(settings: &JournalSettings, default_directory: Option<&Path>) -> JournalState {
        if !settings.enabled {
            return JournalState::Disabled;
        }
        let Some(directory) = settings.directory.as_deref().or(default_directory) else {
            return JournalState::Unavailable(
                "no directory for the journal: set [journal] directory".into(),
            );
        };
        let opened = sqlite::SqliteStore::open(directory).and_then(|store| {
            let (log, _, torn) = log::IntentLog::open(directory)?;
            if torn > 0 {
                warn!(
                    bytes = torn,
                    "the journal's intent log ended in a record cut off by a crash; it was dropped (that call goes out again with its idempotency key)"
                );
            }
            let journal = Journal::new(Arc::new(store), log, settings.clone());
            // What the daemon appended before it last stopped (or was killed).
            journal.fold()?;
            Ok(journal)
        });
        match opened {
            Ok(journal) => {
                match journal.store.interrupt_running() {
                    Ok(0) => {}
                    Ok(n) => warn!(
                        executions = n,
                        "executions of sessions were cut off when the daemon last stopped; they are listed as interrupted and can be resumed"
                    ),
                    Err(e) => return JournalState::Unavailable(e.to_string()),
                }
                JournalState::Ready(Arc::new(journal))
            }
            Err(e) => {
                warn!(error = %e, "the journal cannot be opened; sessions are unavailable, one-shot executions still run");
                JournalState::Unavailable(e.to_string())
            }
        }
    }

    pub fn journal(&self) -> Result<&Arc<Journal>, SessionError> {
        match self {
            JournalState::Ready(journal) => Ok(journal),
            JournalState::Disabled => Err(SessionError::Disabled),
            JournalState::Unavailable(why) => Err(SessionError::Unavailable(why.clone())),
        }
    }

    pub fn health(&self) -> JournalHealth {
        match self {
            JournalState::Ready(journal) => journal.health(),
            JournalState::Disabled => JournalHealth {
                status: JournalStatus::Disabled,
                error: None,
                bytes: None,
            },
            JournalState::Unavailable(why) => JournalHealth {
                status: JournalStatus::Unavailable,
                error: Some(why.clone()),
                bytes: None,
            },
        }
    }
}

/// A fresh session id: `ses_` and 128 random bits.
fn new_session_id() -> String {
    let seed = crate::determinism::random_seed();
    format!("ses_{}", canonical::hex(&seed[..16]))
}

impl Journal {
    pub fn new(
        store: Arc<dyn JournalStore>,
        log: log::IntentLog,
        settings: JournalSettings,
    ) -> Journal {
        Journal {
            store,
            log,
            settings,
            failure: Mutex::new(None),
            busy: Mutex::new(HashMap::new()),
            last_eviction_ms: AtomicU64::new(0),
            settling: Mutex::new(HashMap::new()),
            settled: tokio::sync::Notify::new(),
            replayed_calls: AtomicU64::new(0),
            journaled_calls: AtomicU64::new(0),
        }
    }

    /// The store, with every record of the intent log folded in (a fold that fails is in
    /// health; the store then lacks the records still in the log).
    pub fn store(&self) -> &dyn JournalStore {
        let _ = self.fold();
        self.store.as_ref()
    }

    /// Folds the intent log into the store. A fold that wrote something and succeeded ends a
    /// failure in health; one that fails is one.
    pub fn fold(&self) -> Result<(), StoreError> {
        let busy = self.busy_sessions();
        let room = self.room(&busy);
        match self.log.fold(|records| self.store.apply(records, room)) {
            Ok(true) => self.noted(Ok(())),
            Ok(false) => Ok(()),
            Err(e) => self.noted(Err(e)),
        }
    }

    /// Notes the outcome of a store operation that writes for health (a failure, or a success
    /// that ends one); passes it on. A write whose failure refuses a request goes through it,
    /// or health would say `ok` while session requests are refused.
    pub(crate) fn noted<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        self.note(&result, true);
        result
    }

    /// Notes the outcome of a store operation that only reads, or may write nothing (eviction
    /// with nothing to evict): a failure counts, a success does not end one (a full disk
    /// still reads).
    pub(crate) fn noted_read<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        self.note(&result, false);
        result
    }

    /// The bounds of `[journal]`.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            total_bytes: self.settings.max_size_bytes,
            principal_bytes: self.settings.max_principal_size_bytes,
            session_bytes: self.settings.max_session_size_bytes,
            principal_sessions: self.settings.max_sessions,
        }
    }

    /// The bounds, with `busy` as the sessions that may not be evicted.
    pub fn room<'a>(&self, busy: &'a [String]) -> Room<'a> {
        Room {
            bounds: self.bounds(),
            busy,
        }
    }

    /// The sessions that may not be evicted now: those with an execution running, or calls
    /// of an ended one still settling.
    pub fn busy_sessions(&self) -> Vec<String> {
        self.busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Deletes `principal`'s session `id` with everything kept in it, and wipes it from the
    /// write-ahead log too; false if it has none by that id.
    pub fn delete_session(&self, id: &str, principal: &str) -> Result<bool, SessionError> {
        match self.session(id, principal) {
            Ok(_) => {}
            Err(SessionError::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e),
        }
        let deleted = self.noted(self.store.delete_session(id))?;
        if let Err(e) = self.store.checkpoint() {
            warn!(error = %e, "the journal could not checkpoint its write-ahead log");
        }
        Ok(deleted)
    }

    fn note<T>(&self, result: &Result<T, StoreError>, success_ends_failure: bool) {
        let mut failure = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match result {
            Ok(_) if success_ends_failure => *failure = None,
            Ok(_) => {}
            // A bound, not a failure: the journal works.
            Err(StoreError::Full(_)) => {}
            Err(e) => {
                if failure.is_none() {
                    warn!(error = %e, "the journal failed; calls of sessions fail with journal_unavailable until it works again");
                }
                *failure = Some(e.to_string());
            }
        }
    }

    pub fn health(&self) -> JournalHealth {
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        JournalHealth {
            status: if failure.is_some() {
                JournalStatus::Unavailable
            } else {
                JournalStatus::Ok
            },
            error: failure,
            bytes: self.store.size_bytes().ok(),
        }
    }

    /// A new session of `principal`, with the clock and seed its executions will replay.
    pub fn create_session(
        &self,
        principal: &str,
        determinism: airlock_proto::Determinism,
    ) -> Result<SessionRow, SessionError> {
        let now = crate::determinism::now_ms();
        let row = SessionRow {
            id: new_session_id(),
            principal: principal.to_owned(),
            created_ms: now,
            used_ms: now,
            clock_ms: determinism.clock_ms,
            seed: determinism.seed,
            bytes: 0,
            calls: 0,
        };
        let busy = self.busy_sessions();
        self.noted(self.store.create_session(&row, self.room(&busy)))?;
        Ok(row)
    }

    /// `principal`'s session `id`; another principal's is as absent as a missing one.
    pub fn session(&self, id: &str, principal: &str) -> Result<SessionRow, SessionError> {
        // Its records must all be in the store before an execution reads them.
        self.fold()
            .map_err(|e| SessionError::Unavailable(e.to_string()))?;
        match self.noted_read(self.store.session(id)) {
            Ok(Some(row)) if row.principal == principal => Ok(row),
            Ok(_) => Err(SessionError::NotFound(id.to_owned())),
            Err(e) => Err(SessionError::Unavailable(e.to_string())),
        }
    }

    /// Marks `session` as running one more execution (it is not evicted meanwhile).
    pub fn enter(&self, session: &str) {
        *self
            .busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(session.to_owned())
            .or_default() += 1;
    }

    /// Whether `session` has an execution running now.
    pub fn is_busy(&self, session: &str) -> bool {
        self.busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(session)
    }

    /// The calls (tool, arguments hash) of `session`'s last finished execution, in call
    /// order: what a re-run is compared with to tell it that it took another path (empty if
    /// none is recorded). Kept in the store, so a restart does not forget it.
    pub fn last_run(&self, session: &str) -> CallOrder {
        match self.noted_read(self.store.last_call_order(session)) {
            Ok(order) => Arc::from(order),
            Err(_) => Arc::from(Vec::new()),
        }
    }

    /// Marks `session` as having calls in flight that an ended execution left to settle: until
    /// the guard is dropped the session counts as busy (it is not evicted) and
    /// [`Journal::wait_settled`] waits for it.
    pub fn settling(self: &Arc<Self>, session: &str) -> Settling {
        self.enter(session);
        *self
            .settling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(session.to_owned())
            .or_default() += 1;
        Settling {
            journal: self.clone(),
            session: session.to_owned(),
        }
    }

    /// Whether an ended execution's calls are still settling in `session`.
    pub fn is_settling(&self, session: &str) -> bool {
        self.settling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(session)
    }

    /// Waits, for at most `max`, until no ended execution's call of `session` is in flight,
    /// so that a re-run finds their outcomes recorded instead of sending them again. Whether
    /// they all settled.
    pub async fn wait_settled(&self, session: &str, max: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max;
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            // Registered before the check, so a guard dropped in between still wakes us.
            notified.as_mut().enable();
            if !self.is_settling(session) {
                return true;
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(deadline) => return !self.is_settling(session),
            }
        }
    }

    /// One execution of `session` ended (its end and call order are recorded); every so
    /// often, stale and excess sessions go.
    pub fn leave(&self, session: &str) {
        let _ = self.fold();
        if let Err(e) = self.store.checkpoint() {
            warn!(error = %e, "the journal could not checkpoint its write-ahead log");
        }
        let busy: Vec<String> = {
            let mut busy = self
                .busy
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(n) = busy.get_mut(session) {
                *n -= 1;
                if *n == 0 {
                    busy.remove(session);
                }
            }
            busy.keys().cloned().collect()
        };
        let now = crate::determinism::now_ms();
        // At most once a minute: eviction reads every session's size.
        let last = self.last_eviction_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < 60_000
            || self
                .last_eviction_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let ttl_ms = self.settings.session_ttl_hours.saturating_mul(3_600_000);
        match self.noted_read(
            self.store
                .evict(now.saturating_sub(ttl_ms), self.room(&busy)),
        ) {
            Ok(evicted) if !evicted.is_empty() => {
                tracing::info!(
                    sessions = evicted.len(),
                    "evicted stale or excess sessions from the journal"
                );
            }
            _ => {}
        }
    }
}

/// Calls of an ended execution still in flight in a session (from [`Journal::settling`]):
/// dropped when the last of them has its outcome recorded.
#[derive(Debug)]
pub struct Settling {
    journal: Arc<Journal>,
    session: String,
}

impl Drop for Settling {
    fn drop(&mut self) {
        {
            let mut settling = self
                .journal
                .settling
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(n) = settling.get_mut(&self.session) {
                *n -= 1;
                if *n == 0 {
                    settling.remove(&self.session);
                }
            }
        }
        // Their outcomes are in the intent log; leaving folds them into the store.
        self.journal.leave(&self.session);
        self.journal.settled.notify_waiters();
    }
}

/// What one execution of a session asks of the journal.
#[derive(Debug)]
pub(crate) struct SessionRun {
    pub journal: Arc<Journal>,
    pub session: String,
    pub execution: String,
    pub replay: ReplayMode,
    /// Calls made so far of each (tool, arguments hash): the next one's occurrence; and every
    /// call's (tool, arguments hash) in call order.
    occurrences: Mutex<Occurrences>,
    /// The call order of the session's last finished execution.
    last_run: CallOrder,
    /// The session's records as they were when the execution started, when it read them at
    /// once (each is taken out when its call is looked up: an execution looks a key up once).
    records: Option<Mutex<HashMap<CallKey, CallRow>>>,
    /// The bytes the session keeps (read when the execution started, its results counted
    /// since), for `[journal] max_session_size`.
    bytes: AtomicU64,
    pub replayed: AtomicU32,
    pub live: AtomicU32,
}

#[derive(Debug, Default)]
struct Occurrences {
    counts: HashMap<(String, String), u32>,
    order: Vec<(String, String)>,
}

/// What the journal says of a call about to be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Answer it with this recorded result (and the clock it was recorded at).
    Replay { result: String, clock_ms: u64 },
    /// Make it, with this idempotency key; `resend` when it was sent before without a
    /// recorded outcome (the daemon died while it was in flight); `divergence` when the
    /// journal recorded the tool at this point with other arguments.
    Live {
        idempotency_key: String,
        resend: bool,
        divergence: Option<String>,
    },
}

impl SessionRun {
    /// An execution of `session` (as read when it starts) with this replay mode.
    pub fn new(
        journal: Arc<Journal>,
        session: &SessionRow,
        execution: String,
        replay: ReplayMode,
    ) -> SessionRun {
        let last_run = journal.last_run(&session.id);
        let records = if session.calls == 0 {
            // Nothing recorded: nothing to read.
            Some(Mutex::new(HashMap::new()))
        } else if session.calls <= PRELOAD_MAX_CALLS && session.bytes <= PRELOAD_MAX_BYTES {
            // A read that fails leaves the lookups to the store (and is in health).
            journal
                .noted_read(journal.store.records(&session.id))
                .ok()
                .map(|rows| Mutex::new(rows.into_iter().collect()))
        } else {
            None
        };
        SessionRun {
            journal,
            session: session.id.clone(),
            execution,
            replay,
            last_run,
            records,
            occurrences: Mutex::new(Occurrences::default()),
            bytes: AtomicU64::new(session.bytes),
            replayed: AtomicU32::new(0),
            live: AtomicU32::new(0),
        }
    }

    /// The key of the next call of `tool` with `args` (call order: the caller holds the
    /// execution's arrival order), and its position among the execution's calls.
    pub fn key(&self, tool: &str, args: &Value) -> (CallKey, usize) {
        let args_hash = canonical::hash(args);
        let mut occurrences = self
            .occurrences
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = occurrences
            .counts
            .entry((tool.to_owned(), args_hash.clone()))
            .or_default();
        let occurrence = *n;
        *n = n.saturating_add(1);
        let position = occurrences.order.len();
        occurrences.order.push((tool.to_owned(), args_hash.clone()));
        (
            CallKey {
                tool: tool.to_owned(),
                args_hash,
                occurrence,
            },
            position,
        )
    }

    /// The calls made so far, in call order (for [`Journal::leave`]).
    pub fn call_order(&self) -> Vec<(String, String)> {
        self.occurrences
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .order
            .clone()
    }

    /// The idempotency key of `key`'s `attempt` in this session ([`CallRow::attempt`]): the
    /// same whenever that attempt is sent (again after a crash, or after no answer came), a
    /// new one for the next attempt (the call made again on purpose). Derived, not drawn: a
    /// re-run of the session derives the same keys.
    pub fn idempotency_key(&self, key: &CallKey, attempt: u32) -> String {
        let mut h = Sha256::new();
        let occurrence = key.occurrence.to_string();
        let attempt = attempt.to_string();
        let mut parts = vec![
            self.session.as_bytes(),
            key.tool.as_bytes(),
            key.args_hash.as_bytes(),
            occurrence.as_bytes(),
        ];
        // The first attempt's key is what it was before attempts were counted.
        if attempt != "0" {
            parts.push(attempt.as_bytes());
        }
        for part in parts {
            h.update(part);
            h.update([0]);
        }
        format!("airlock-{}", &canonical::hex(&h.finalize())[..32])
    }

    /// Whether `key` is answered from the journal. A recorded success is, unless the mode
    /// says otherwise (`writes`: not for a tool recorded as read-only; `none`: never).
    pub fn lookup(&self, key: &CallKey, position: usize) -> Result<Lookup, ToolError> {
        let row = match &self.records {
            Some(records) => records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(key),
            None => self
                .journal
                .noted_read(self.journal.store.lookup(&self.session, key))
                .map_err(|e| unavailable(&e))?,
        };
        let attempt = row.as_ref().map_or(0, |row| row.attempt);
        let live = |resend: bool, divergence: Option<String>| Lookup::Live {
            idempotency_key: self.idempotency_key(key, attempt),
            resend,
            divergence,
        };
        let Some(row) = row else {
            // Never recorded: new code, or the program took another path than the session's
            // last run at this point.
            let divergence = match self.last_run.get(position) {
                Some((tool, hash))
                    if self.replay != ReplayMode::None
                        && (tool != &key.tool || hash != &key.args_hash) =>
                {
                    Some(if tool == &key.tool {
                        format!(
                            "the session's last run called {tool} with other arguments at this point; this call is new and ran live"
                        )
                    } else {
                        format!(
                            "the session's last run called {tool} at this point, not {}; this call is new and ran live",
                            key.tool
                        )
                    })
                }
                _ => None,
            };
            return Ok(live(false, divergence));
        };
        match row.state {
            CallState::Ok { result, clock_ms } => {
                let replay = match self.replay {
                    ReplayMode::All => true,
                    ReplayMode::Writes => !row.read_only,
                    ReplayMode::None => false,
                };
                if replay {
                    return Ok(Lookup::Replay { result, clock_ms });
                }
                Ok(live(false, None))
            }
            CallState::Sent => Ok(live(true, None)),
            CallState::Failed => Ok(live(false, None)),
        }
    }

    /// Records that `key` is about to be sent: before it is, so a daemon that dies while it
    /// is in flight sends it again with the same key.
    pub fn sent(&self, key: &CallKey, read_only: bool) -> Result<(), ToolError> {
        let record = LogRecord::Sent {
            session: self.session.clone(),
            key: key.clone(),
            execution: self.execution.clone(),
            read_only,
            at_ms: crate::determinism::now_ms(),
        };
        self.journal
            .noted_read(self.journal.log.append(&record))
            .map_err(|e| unavailable(&e))?;
        self.live.fetch_add(1, Ordering::Relaxed);
        self.journal.journaled_calls.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Records a sent call's outcome: its result, or how it failed (a failure the tool
    /// reported makes a retry a new attempt, with a new idempotency key; any other keeps the
    /// key, since the call may have taken effect). A result over the session's size cap is
    /// not kept (the call stays `sent`: a re-run sends it again, with its idempotency key).
    /// Returns a warning for the response when the outcome could not be recorded.
    pub fn outcome(
        &self,
        key: &CallKey,
        result: Result<&str, &ToolError>,
        clock_ms: u64,
    ) -> Option<String> {
        let outcome = match result {
            Ok(text) => {
                let size = text.len() as u64;
                let before = self.bytes.fetch_add(size, Ordering::Relaxed);
                if before.saturating_add(size) > self.journal.settings.max_session_size_bytes {
                    self.bytes.fetch_sub(size, Ordering::Relaxed);
                    return Some(format!(
                        "the result of {} was not recorded: the session's journal is full ([journal] max_session_size); a re-run makes this call again",
                        key.tool
                    ));
                }
                Outcome::Ok {
                    result: text.to_owned(),
                    clock_ms,
                }
            }
            Err(e) if e.is_reported_by_tool() => Outcome::Failed,
            Err(_) => Outcome::Unsettled,
        };
        let record = LogRecord::Outcome {
            session: self.session.clone(),
            key: key.clone(),
            outcome,
            at_ms: crate::determinism::now_ms(),
        };
        match self.journal.noted_read(self.journal.log.append(&record)) {
            Ok(()) => {
                if self.journal.log.unfolded_bytes() > FOLD_AT_BYTES {
                    // A failure is in health; the records stay in the log for the next fold.
                    let _ = self.journal.fold();
                }
                None
            }
            Err(e) => Some(format!(
                "the outcome of {} could not be recorded in the journal ({e}); a re-run makes this call again, with the same idempotency key",
                key.tool
            )),
        }
    }

    /// A replayed call was answered.
    pub fn replayed(&self) {
        self.replayed.fetch_add(1, Ordering::Relaxed);
        self.journal.replayed_calls.fetch_add(1, Ordering::Relaxed);
    }
}

fn unavailable(e: &StoreError) -> ToolError {
    ToolError::new(
        ToolErrorCode::JournalUnavailable,
        format!("the daemon cannot use its journal, so this call of a session is not made: {e}"),
    )
    .with_hint("run the program without a session meanwhile; the operator sees the cause in /v1/health and the airlockd log")
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
