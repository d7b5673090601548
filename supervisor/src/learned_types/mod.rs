//! Learned output types: for tools that declare no output schema, the shape of what they
//! really return, inferred from every result the daemon hands a program and merged across
//! calls; for tools that declare one, where reality contradicts it (drift).
//!
//! - this file: [`LearnedTypes`] (the daemon's learned shapes in memory, what is persisted,
//!   counts, drift, metrics), [`ToolContract`] (a tool's schema version and declared output
//!   schema), [`Observation`] (one result's shape and contradiction), [`Learning`] (what a
//!   generation learns: the store and the sources whose learning the policy turned off);
//! - [`shape`]: inference and merging (pure, bounded: depth, properties, size; shapes only);
//! - `drift`: a result compared with a declared output schema;
//! - `store`: the SQLite file, written in batches by `run_writer` and at once for a tool
//!   whose result a program failed on ([`LearnedTypes::persist`]).
//!
//! What may live here: shapes, counts and dates, never a value (no string's text, no set of
//! observed values). It calls no tool, reads no policy and renders no TypeScript: the call
//! pipeline (`crate::tools::call`) hands it observations, the catalogue
//! (`crate::tools::catalogue`) shows what it learned in the SDK of tools a principal may
//! see, and only there.

pub(crate) mod drift;
pub mod shape;
pub(crate) mod store;

use serde::Serialize;
use serde_json::{Value, json};
use shape::Shape;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tracing::warn;

/// Tools with a learned type at most; further tools are not learned (logged once).
pub(crate) const MAX_TOOLS: usize = 10_000;
/// Distinct contradictions kept per tool; further ones are counted under
/// [`OTHER_CONTRADICTIONS`].
const MAX_DRIFT_KINDS: usize = 8;
const OTHER_CONTRADICTIONS: &str = "other contradictions";
/// How often the writer persists what changed.
pub(crate) const WRITE_INTERVAL: Duration = Duration::from_secs(2);
/// A result that changes only a learned type's counts (not the type, not its drift) moves
/// the epoch at most this often: an SDK rebuild of a large catalogue takes hundreds of
/// milliseconds, so counts in the SDK may lag this much (`GET /v1/sdk/learned` is exact).
pub(crate) const COUNT_REFRESH_MS: u64 = 5_000;

/// How learned types went wrong. Each says what to do next ([`LearnedError::hint`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LearnedError {
    #[error(
        "nothing is learned of `{0}` (no result seen since the tool last changed, or you may not call it)"
    )]
    NotLearned(String),
    #[error("`{0}` is not a tool name: write it as namespace.tool")]
    BadName(String),
    #[error("the learned types' file cannot be used: {0}")]
    Store(String),
}

impl LearnedError {
    pub fn hint(&self) -> &'static str {
        match self {
            LearnedError::NotLearned(_) => {
                "types are learned from a tool's successful results; call the tool, then ask again (`airlock sdk learned` lists what is learned)"
            }
            LearnedError::BadName(_) => "for example `airlock sdk learned everything.echo`",
            LearnedError::Store(_) => {
                "the daemon still learns in memory; the operator sees the cause in the airlockd log (the file is learned.sqlite in the state directory)"
            }
        }
    }
}

/// Whose calls taught what: a learned type belongs to the principal whose calls' results it
/// was learned from, and only that principal's SDK shows it (a shared tool's property names,
/// which a principal can steer through what it stores, must not reach another principal's
/// model context).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub principal: String,
    pub source: String,
    pub tool: String,
}

impl Key {
    pub fn new(principal: &str, source: &str, tool: &str) -> Key {
        Key {
            principal: principal.to_owned(),
            source: source.to_owned(),
            tool: tool.to_owned(),
        }
    }
}

/// Tools with a learned type per principal at most: one principal's calls cannot take every
/// slot of [`MAX_TOOLS`].
pub(crate) const MAX_TOOLS_PER_PRINCIPAL: usize = 2_500;

/// One tool's learned type.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The [`ToolContract::version`] it was learned under.
    pub version: String,
    pub shape: Shape,
    /// Results it was learned from.
    pub results: u64,
    /// When the first of them was seen, and the last (ms since the epoch).
    pub since_ms: u64,
    pub updated_ms: u64,
    /// Results compared with the tool's declared output schema.
    pub checked: u64,
    /// Contradiction → results that showed it.
    pub drift: BTreeMap<String, u64>,
    /// Changed since it was last written.
    pub dirty: bool,
}

impl Entry {
    fn new(version: &str, now: u64) -> Entry {
        Entry {
            version: version.to_owned(),
            shape: Shape::default(),
            results: 0,
            since_ms: now,
            updated_ms: now,
            checked: 0,
            drift: BTreeMap::new(),
            dirty: true,
        }
    }

    /// The learned shape as JSON Schema.
    pub fn schema(&self) -> Value {
        self.shape.to_schema()
    }

    /// `2026-11-20`: the UTC day of the first result.
    pub fn since_day(&self) -> String {
        let text =
            crate::audit_log::timestamp::format_utc(i64::try_from(self.since_ms).unwrap_or(0));
        text.chars().take(10).collect()
    }

    /// Results that contradicted the declared schema.
    pub fn drifted(&self) -> u64 {
        self.drift.values().sum()
    }

    /// `declared array, observed null in 3 of 40 calls`, one per contradiction, most
    /// frequent first.
    pub fn drift_lines(&self) -> Vec<String> {
        let mut kinds: Vec<(&String, &u64)> = self.drift.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        kinds
            .into_iter()
            .map(|(what, n)| format!("{what} in {n} of {} calls", self.checked))
            .collect()
    }
}

/// What a result is compared with and learned under: the tool's schema version (a hash of
/// its input and output schemas, so a changed tool starts a fresh learned type; the
/// description is left out, since rewording a tool changes nothing it returns) and its
/// declared output schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolContract {
    pub version: String,
    pub declared: Option<Value>,
}

impl ToolContract {
    pub fn of(input_schema: &Value, output_schema: Option<&Value>) -> ToolContract {
        let hash = crate::journal::canonical::hash(&json!({
            "input": input_schema,
            "output": output_schema,
        }));
        ToolContract {
            version: hash.chars().take(16).collect(),
            declared: output_schema.cloned(),
        }
    }
}

/// What one result showed: its shape, and (for a tool that declares an output schema) the
/// first contradiction of it, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub shape: Shape,
    /// `None`: no declared schema; `Some(None)`: the result fits it.
    pub contradiction: Option<Option<String>>,
}

impl Observation {
    /// Infers `value`'s shape and compares it with the contract's declared schema: the cost
    /// of learning, paid once per result (see the `learned_types` benchmark).
    pub fn of(value: &Value, contract: &ToolContract) -> Observation {
        Observation {
            shape: Shape::of(value),
            contradiction: contract
                .declared
                .as_ref()
                .map(|schema| drift::contradiction(schema, value)),
        }
    }
}

/// The learned types of a daemon: in memory (what the SDK shows), and persisted in batches.
#[derive(Debug, Default)]
pub struct LearnedTypes {
    /// (source, tool) → its entry.
    entries: Mutex<HashMap<Key, Entry>>,
    store: Option<store::LearnedStore>,
    /// Moves when a learned type changes (and for count-only changes at most every
    /// [`COUNT_REFRESH_MS`]), so SDK caches know to rebuild.
    epoch: AtomicU64,
    /// When the epoch last moved (ms since the epoch).
    epoch_moved_ms: AtomicU64,
    /// Results learned from since the daemon started.
    learned: AtomicU64,
    full_warned: AtomicBool,
    /// The last failure to write the file, until a write succeeds.
    failure: Mutex<Option<String>>,
}

fn now_ms() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

impl LearnedTypes {
    /// Learned types kept in memory only (tests, and a daemon whose file cannot be opened).
    pub fn in_memory() -> LearnedTypes {
        LearnedTypes::default()
    }

    /// Whether they live in memory only (no file).
    pub fn is_in_memory(&self) -> bool {
        self.store.is_none()
    }

    /// Opens `<directory>/learned.sqlite` and reads what earlier daemons learned.
    pub fn open(directory: &Path) -> Result<LearnedTypes, LearnedError> {
        let store = store::LearnedStore::open(directory)?;
        let (rows, unreadable) = store.load()?;
        if unreadable > 0 {
            warn!(
                rows = unreadable,
                "learned types that cannot be read were skipped; those tools are learned afresh"
            );
        }
        let entries = rows.into_iter().take(MAX_TOOLS).collect();
        Ok(LearnedTypes {
            entries: Mutex::new(entries),
            store: Some(store),
            ..LearnedTypes::default()
        })
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Merges one result's observation into `principal`'s type of `source`'s `tool` (learned
    /// under `contract`; a different version starts afresh). Cheap: the shapes are bounded,
    /// and the value was walked before (in [`Observation::of`]), outside the lock.
    pub fn record(
        &self,
        principal: &str,
        source: &str,
        tool: &str,
        contract: &ToolContract,
        observation: Observation,
    ) {
        let now = now_ms();
        let mut entries = self.entries();
        let key = Key::new(principal, source, tool);
        let full = !entries.contains_key(&key)
            && (entries.len() >= MAX_TOOLS
                || entries.keys().filter(|k| k.principal == principal).count()
                    >= MAX_TOOLS_PER_PRINCIPAL);
        if full {
            if !self.full_warned.swap(true, Ordering::Relaxed) {
                warn!(
                    tools = MAX_TOOLS,
                    per_principal = MAX_TOOLS_PER_PRINCIPAL,
                    "learned types are kept for at most this many tools (and this many per principal); further tools are not learned (`airlock sdk forget` makes room)"
                );
            }
            return;
        }
        let mut material = !entries.contains_key(&key);
        let entry = entries
            .entry(key)
            .or_insert_with(|| Entry::new(&contract.version, now));
        if entry.version != contract.version {
            *entry = Entry::new(&contract.version, now);
            material = true;
        }
        let before = entry.shape.fingerprint();
        entry.shape.merge(observation.shape);
        material |= entry.shape.fingerprint() != before;
        entry.results += 1;
        entry.updated_ms = now;
        entry.dirty = true;
        if let Some(contradiction) = observation.contradiction {
            entry.checked += 1;
            if let Some(what) = contradiction {
                let what = if entry.drift.contains_key(&what) || entry.drift.len() < MAX_DRIFT_KINDS
                {
                    what
                } else {
                    OTHER_CONTRADICTIONS.to_owned()
                };
                material |= !entry.drift.contains_key(&what);
                *entry.drift.entry(what).or_default() += 1;
            }
        }
        drop(entries);
        self.learned.fetch_add(1, Ordering::Relaxed);
        let moved = self.epoch_moved_ms.load(Ordering::Relaxed);
        if material || now.saturating_sub(moved) >= COUNT_REFRESH_MS {
            self.move_epoch(now);
        }
    }

    fn move_epoch(&self, now: u64) {
        self.epoch_moved_ms.store(now, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// `principal`'s type of `source`'s `tool` as learned under `version` (another
    /// version's is none).
    pub fn get(&self, principal: &str, source: &str, tool: &str, version: &str) -> Option<Entry> {
        self.entries()
            .get(&Key::new(principal, source, tool))
            .filter(|e| e.version == version)
            .cloned()
    }

    /// Whether `principal` learned anything of `source`'s `tool` (under any version).
    pub fn has(&self, principal: &str, source: &str, tool: &str) -> bool {
        self.entries()
            .contains_key(&Key::new(principal, source, tool))
    }

    /// Drops what `principal` learned of `source`'s `tool`, in memory and in the file at
    /// once (never another principal's); whether there was anything.
    pub fn forget(&self, principal: &str, source: &str, tool: &str) -> Result<bool, LearnedError> {
        let key = Key::new(principal, source, tool);
        let removed = self.entries().remove(&key).is_some();
        self.move_epoch(now_ms());
        if let Some(store) = &self.store {
            self.noted(store.delete(&key))?;
        }
        Ok(removed)
    }

    /// Writes `principal`'s type of `source`'s `tool` now (a program failed on its result:
    /// what was learned of it must survive whatever comes next).
    pub fn persist(&self, principal: &str, source: &str, tool: &str) -> Result<(), LearnedError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let row = {
            let mut entries = self.entries();
            let key = Key::new(principal, source, tool);
            match entries.get_mut(&key) {
                Some(entry) if entry.dirty => {
                    entry.dirty = false;
                    Some((key, entry.clone()))
                }
                _ => None,
            }
        };
        let Some(row) = row else { return Ok(()) };
        let written = self.noted(store.write(std::slice::from_ref(&row)));
        if written.is_err() {
            self.mark_dirty(std::slice::from_ref(&row));
        }
        written
    }

    /// Writes every entry that changed since it was last written, in one transaction; how
    /// many.
    pub fn flush(&self) -> Result<usize, LearnedError> {
        let Some(store) = &self.store else {
            return Ok(0);
        };
        let rows: Vec<store::Row> = {
            let mut entries = self.entries();
            entries
                .iter_mut()
                .filter(|(_, e)| e.dirty)
                .map(|(key, e)| {
                    e.dirty = false;
                    (key.clone(), e.clone())
                })
                .collect()
        };
        let written = self.noted(store.write(&rows));
        if written.is_err() {
            self.mark_dirty(&rows);
        }
        written.map(|()| rows.len())
    }

    /// Marks the entries of rows that could not be written as changed again (unless they
    /// changed meanwhile or are gone).
    fn mark_dirty(&self, rows: &[store::Row]) {
        let mut entries = self.entries();
        for (key, _) in rows {
            if let Some(e) = entries.get_mut(key) {
                e.dirty = true;
            }
        }
    }

    fn noted<T>(&self, result: Result<T, LearnedError>) -> Result<T, LearnedError> {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Ok(_) => *failure = None,
            Err(e) => {
                if failure.is_none() {
                    warn!(error = %e, "learned types cannot be written; they are kept in memory and written when the file works again");
                }
                *failure = Some(e.to_string());
            }
        }
        result
    }

    /// Moves on every change (an SDK built at another epoch may be stale).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Every entry with its key, in key order (principal, source, tool).
    pub fn list(&self) -> Vec<(Key, Entry)> {
        let mut all: Vec<_> = self
            .entries()
            .iter()
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The metrics of `GET /metrics`: results learned from, tools with a learned type, and
    /// per tool (the catalogue's tools only, so the labels are bounded) the results that
    /// contradicted its declared output schema.
    pub fn metrics_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let list = self.list();
        let _ = writeln!(
            out,
            "# HELP airlock_learned_results_total Tool results the daemon learned output types from since it started.\n# TYPE airlock_learned_results_total counter\nairlock_learned_results_total {}",
            self.learned.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP airlock_learned_types Tools with a learned output type.\n# TYPE airlock_learned_types gauge\nairlock_learned_types {}",
            list.len()
        );
        let _ = writeln!(
            out,
            "# HELP airlock_learned_type_drift_total Results that contradicted their tool's declared output schema, per tool (since it was learned afresh).\n# TYPE airlock_learned_type_drift_total counter"
        );
        // Per tool, over the principals that learned it (the operator's view).
        let mut drifted: BTreeMap<String, u64> = BTreeMap::new();
        for (key, entry) in list.iter().filter(|(_, e)| e.checked > 0) {
            *drifted
                .entry(format!("{}.{}", key.source, key.tool))
                .or_default() += entry.drifted();
        }
        for (tool, drifted) in drifted {
            let label = tool
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            let _ = writeln!(
                out,
                "airlock_learned_type_drift_total{{tool=\"{label}\"}} {drifted}"
            );
        }
        out
    }
}

/// Persists what changed every [`WRITE_INTERVAL`] until `types` is dropped elsewhere (the
/// daemon writes the rest when it stops).
pub(crate) async fn run_writer(types: std::sync::Weak<LearnedTypes>) {
    let mut tick = tokio::time::interval(WRITE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(types) = types.upgrade() else { return };
        let _ = tokio::task::spawn_blocking(move || types.flush()).await;
    }
}

/// What a generation learns: the daemon's learned types (none when the daemon keeps none),
/// and the sources whose policy entry says `learn_types = false`.
#[derive(Debug, Clone, Default)]
pub struct Learning {
    types: Option<Arc<LearnedTypes>>,
    off: Arc<BTreeSet<String>>,
}

impl Learning {
    pub fn new(
        types: Option<Arc<LearnedTypes>>,
        off: impl IntoIterator<Item = String>,
    ) -> Learning {
        Learning {
            types,
            off: Arc::new(off.into_iter().collect()),
        }
    }

    /// The learned types, when `source` learns (the daemon's own `airlock` tools and the
    /// agent's `client` tools never do).
    pub fn learns(&self, source: &str) -> Option<&Arc<LearnedTypes>> {
        if source == "airlock" || source == "client" || self.off.contains(source) {
            return None;
        }
        self.types.as_ref()
    }

    /// The learned types, whatever the sources say.
    pub fn types(&self) -> Option<&Arc<LearnedTypes>> {
        self.types.as_ref()
    }
}

/// One tool's learned type as the agent API shows it (`GET /v1/sdk/learned`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LearnedReport {
    /// `namespace.tool`.
    pub tool: String,
    /// Results it was learned from, and the UTC day of the first.
    pub results: u64,
    pub since: String,
    /// The tool's schema version it was learned under.
    pub version: String,
    /// The learned type as JSON Schema.
    pub schema: Value,
    /// The tool declares an output schema.
    pub declared: bool,
    /// Results compared with it, and the contradictions (`declared array, observed null in
    /// 3 of 40 calls`).
    pub checked: u64,
    pub drift: Vec<String>,
}

impl LearnedReport {
    pub fn of(tool: String, entry: &Entry, declared: bool) -> LearnedReport {
        LearnedReport {
            tool,
            results: entry.results,
            since: entry.since_day(),
            version: entry.version.clone(),
            schema: entry.schema(),
            declared,
            checked: entry.checked,
            drift: entry.drift_lines(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract(output: Option<Value>) -> ToolContract {
        ToolContract::of(&json!({"type": "object"}), output.as_ref())
    }

    #[test]
    fn results_merge_and_a_changed_tool_starts_afresh() {
        let types = LearnedTypes::in_memory();
        let c = contract(None);
        for v in [json!({"a": 1}), json!({"a": 2, "b": "x"})] {
            types.record("p", "s", "t", &c, Observation::of(&v, &c));
        }
        let e = types
            .get("p", "s", "t", &c.version)
            .unwrap_or_else(|| panic!("learned"));
        assert_eq!(e.results, 2);
        assert_eq!(
            e.schema(),
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]})
        );
        let changed = ToolContract::of(&json!({"type": "object", "properties": {"q": {}}}), None);
        assert_ne!(changed.version, c.version);
        assert_eq!(types.get("p", "s", "t", &changed.version), None);
        types.record(
            "p",
            "s",
            "t",
            &changed,
            Observation::of(&json!("x"), &changed),
        );
        let e = types
            .get("p", "s", "t", &changed.version)
            .unwrap_or_else(|| panic!("learned"));
        assert_eq!((e.results, e.schema()), (1, json!({"type": "string"})));
    }

    /// The epoch (which makes SDK caches rebuild) moves when a type changes, not for every
    /// result of the same shape.
    #[test]
    fn the_epoch_moves_with_the_type() {
        let types = LearnedTypes::in_memory();
        let c = contract(None);
        types.record("p", "s", "t", &c, Observation::of(&json!({"a": 1}), &c));
        let first = types.epoch();
        types.record("p", "s", "t", &c, Observation::of(&json!({"a": 2}), &c));
        assert_eq!(types.epoch(), first);
        types.record("p", "s", "t", &c, Observation::of(&json!({"a": "x"}), &c));
        assert!(types.epoch() > first);
        let second = types.epoch();
        types
            .forget("p", "s", "t")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(types.epoch() > second);
    }

    #[test]
    fn drift_is_counted_per_contradiction() {
        let types = LearnedTypes::in_memory();
        let c = contract(Some(json!({"type": "array"})));
        for v in [json!([]), json!(null), json!([1]), json!(null), json!("x")] {
            types.record("p", "s", "t", &c, Observation::of(&v, &c));
        }
        let e = types
            .get("p", "s", "t", &c.version)
            .unwrap_or_else(|| panic!("learned"));
        assert_eq!(
            e.drift_lines(),
            [
                "declared array, observed null in 2 of 5 calls",
                "declared array, observed string in 1 of 5 calls"
            ]
        );
        let metrics = types.metrics_text();
        assert!(
            metrics.contains("airlock_learned_type_drift_total{tool=\"s.t\"} 3"),
            "{metrics}"
        );
        assert!(
            metrics.contains("airlock_learned_results_total 5"),
            "{metrics}"
        );
    }

    #[test]
    fn each_principal_learns_its_own_and_forgets_only_its_own() {
        let types = LearnedTypes::in_memory();
        let c = contract(None);
        types.record(
            "a",
            "s",
            "t",
            &c,
            Observation::of(&json!({"planted": 1}), &c),
        );
        assert!(types.has("a", "s", "t"));
        assert!(!types.has("b", "s", "t"));
        assert_eq!(types.get("b", "s", "t", &c.version), None);
        assert!(
            !types
                .forget("b", "s", "t")
                .unwrap_or_else(|e| panic!("{e}"))
        );
        assert!(types.has("a", "s", "t"));
    }

    /// A file of the version that kept one type per tool, whoever's calls taught it, is
    /// upgraded: those rows cannot be given to a principal, so they go.
    #[test]
    fn a_version_1_file_is_upgraded_without_its_ownerless_rows() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        {
            let conn = rusqlite::Connection::open(dir.path().join(store::FILE_NAME))
                .unwrap_or_else(|e| panic!("{e}"));
            conn.execute_batch(
                "CREATE TABLE learned (source TEXT NOT NULL, tool TEXT NOT NULL, version TEXT NOT NULL, shape TEXT NOT NULL, results INTEGER NOT NULL, since_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, checked INTEGER NOT NULL, drift TEXT NOT NULL, PRIMARY KEY (source, tool)) WITHOUT ROWID;
                 INSERT INTO learned VALUES ('s', 't', 'v', '{}', 1, 1, 1, 0, '{}');
                 PRAGMA user_version = 1;",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let types = LearnedTypes::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(types.list().is_empty());
        let c = contract(None);
        types.record("a", "s", "t", &c, Observation::of(&json!(1), &c));
        assert_eq!(types.flush().unwrap_or_else(|e| panic!("{e}")), 1);
    }

    #[test]
    fn learned_types_survive_a_restart_and_forget_is_at_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let c = contract(None);
        {
            let types = LearnedTypes::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
            types.record(
                "p",
                "s",
                "t",
                &c,
                Observation::of(&json!({"at": "2026-11-20"}), &c),
            );
            types.record("p", "s", "u", &c, Observation::of(&json!(1), &c));
            // One tool at once (a type error), the other by the batch writer.
            types
                .persist("p", "s", "t")
                .unwrap_or_else(|e| panic!("{e}"));
            let reopened = store::LearnedStore::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
            let (rows, _) = reopened.load().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(rows.len(), 1);
            assert_eq!(types.flush().unwrap_or_else(|e| panic!("{e}")), 1);
            assert_eq!(types.flush().unwrap_or_else(|e| panic!("{e}")), 0);
        }
        let types = LearnedTypes::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let e = types
            .get("p", "s", "t", &c.version)
            .unwrap_or_else(|| panic!("survived"));
        assert_eq!(
            e.schema(),
            json!({"type": "object", "properties": {"at": {"type": "string", "format": "date"}}, "required": ["at"]})
        );
        assert!(
            types
                .forget("p", "s", "u")
                .unwrap_or_else(|e| panic!("{e}"))
        );
        assert!(
            !types
                .forget("p", "s", "u")
                .unwrap_or_else(|e| panic!("{e}"))
        );
        let types = LearnedTypes::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(types.has("p", "s", "t") && !types.has("p", "s", "u"));
        let mode = std::os::unix::fs::MetadataExt::mode(
            &std::fs::metadata(dir.path().join(store::FILE_NAME)).unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn learning_can_be_turned_off_per_source() {
        let learning = Learning::new(
            Some(Arc::new(LearnedTypes::in_memory())),
            ["quiet".to_owned()],
        );
        assert!(learning.learns("loud").is_some());
        assert!(learning.learns("quiet").is_none());
        assert!(learning.learns("airlock").is_none() && learning.learns("client").is_none());
        assert!(Learning::default().learns("loud").is_none());
    }
}
