//! What the Python program reaches outside the interpreter, answered by the worker at each
//! pause of the interpreter: the names `tools` and `progress`, tool calls, the
//! console (`print`), the clock (`datetime.now()`, `date.today()`), and the refusals for
//! everything else the interpreter would ask its host for (files, the environment).
//!
//! | the program writes              | the interpreter pauses at      | the worker                                       |
//! |---------------------------------|--------------------------------|--------------------------------------------------|
//! | `tools` / `tools.<ns>`          | a name / attribute lookup      | answers a host object (one per namespace)        |
//! | `tools.<ns>.<name>(**kwargs)`   | a method call on that object   | sends `ToolCall` (args: the kwargs as an object), answers a future |
//! | `print(…)`                      | nothing (a writer callback)    | sends one `Console` per line                      |
//! | `progress(value)`               | a function call                | sends `Progress`                                 |
//! | `store.get(key)`, `store.set(key, value)` | a method call on `store` | sends `ToolCall` of `$store.get` / `$store.set` (the supervisor answers it), answers a future |
//! | `datetime.now()`, `date.today()` | an OS call                    | answers the supervisor's clock                   |
//! | `open()`, `Path(…).read_text()`, `os.getenv` | an OS call        | refuses (no files), `None` / `{}` for the environment |
//!
//! Nothing here blocks: waiting for results is the run loop's (`super::Interpreter::run`).

use super::provenance::Remembered;
use super::values;
use crate::ipc::Ipc;
use airlock_proto::{
    ConsoleLevel, Determinism, Limits, SourcePosition, ToolFailure, WorkerMessage,
};
use monty_types::{
    DictPairs, ExcType, ExtFunctionResult, MontyClassInstance, MontyClassType, MontyDate,
    MontyDateTime, MontyException, MontyObject, MontyTimeZone, MontyUuid, NameLookupResult,
    OsFunctionCall, PrintWriterCallback,
};
use std::borrow::Cow;
use std::time::Instant;

/// Largest single console message; longer lines are cut (and say so).
const MAX_CONSOLE_MESSAGE_BYTES: usize = 1024 * 1024;
/// Largest `progress()` value, as JSON text.
const MAX_PROGRESS_BYTES: usize = 1024 * 1024;
/// Namespaces a program may name (each is one host object).
const MAX_NAMESPACES: usize = 4096;

/// The identity of the `tools` object; namespaces count up from the next one.
const TOOLS_ID: u128 = 1;
/// The identity of the `store` object: far above every namespace's.
const STORE_ID: u128 = 1 << 64;

/// Why the program is being stopped, whatever it is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    Timeout,
    Cancelled,
    OutputLimit,
    Ipc(String),
}

/// A tool call the program awaits: the interpreter's call id and the tool.
#[derive(Debug)]
pub struct Pending {
    pub monty_call_id: u32,
    pub tool: String,
}

/// The answer to a pause at a function call.
pub enum CallAnswer {
    /// A tool call went out: the program gets a future.
    Pending,
    Return(MontyObject),
    Raise(MontyException),
}

/// The program's side of the worker for one execution.
pub struct Host<'i> {
    pub ipc: &'i mut Ipc,
    pub limits: Limits,
    deadline: Instant,
    stop: Option<Stop>,
    /// The program's clock (ms since the epoch): the supervisor's, moved by each result.
    clock_ms: u64,
    next_id: u32,
    calls_started: u32,
    call_limit_hit: bool,
    /// Outstanding tool calls, by the worker's id (the one the supervisor sees).
    pub pending: std::collections::BTreeMap<u32, Pending>,
    output_used: u64,
    /// The line `print` is writing.
    line: String,
    /// The namespaces the program named, by the id of their host object.
    namespaces: Vec<String>,
    /// The Python text of every tool failure delivered, with the tool and the supervisor's
    /// message: an uncaught one is reported as a `ToolError`.
    pub failures: Vec<(String, String, String)>,
    /// Each tool's latest result, for the explanation of an error on it.
    pub results: Remembered,
    /// Where each tool is called in the program's text (`ns.name` → position), from the
    /// literal calls the contract check got; `None` for a tool called in several places.
    /// The interpreter does not say where a paused call is, so a call's position is known
    /// only when its tool has exactly one literal call site.
    call_sites: std::collections::HashMap<String, Option<SourcePosition>>,
}

impl<'i> Host<'i> {
    pub fn new(
        ipc: &'i mut Ipc,
        limits: Limits,
        determinism: &Determinism,
        deadline: Instant,
    ) -> Self {
        Host {
            ipc,
            limits,
            deadline,
            stop: None,
            clock_ms: determinism.clock_ms,
            next_id: 1,
            calls_started: 0,
            call_limit_hit: false,
            pending: std::collections::BTreeMap::new(),
            output_used: 0,
            line: String::new(),
            namespaces: Vec::new(),
            failures: Vec::new(),
            results: Remembered::default(),
            call_sites: std::collections::HashMap::new(),
        }
    }

    /// Remembers where the program's literal tool calls are (see `call_sites`).
    pub fn know_call_sites(&mut self, references: &airlock_proto::ToolReferences) {
        for call in &references.calls {
            let tool = format!("{}.{}", call.namespace, call.name);
            self.call_sites
                .entry(tool)
                .and_modify(|at| *at = None)
                .or_insert(Some(call.at));
        }
    }

    pub fn stop_reason(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// Records why the program stops; the first reason wins.
    pub fn set_stop(&mut self, reason: Stop) {
        if self.stop.is_none() {
            self.stop = Some(reason);
        }
    }

    pub fn deadline_passed(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Whether the program must stop now (recording a passed deadline).
    pub fn should_stop(&mut self) -> bool {
        if self.stop.is_none() && self.deadline_passed() {
            self.stop = Some(Stop::Timeout);
        }
        self.stop.is_some()
    }

    pub fn call_limit_hit(&self) -> bool {
        self.call_limit_hit
    }

    /// Moves the program's clock forward to an answer's time (never backwards).
    pub fn advance_clock(&mut self, clock_ms: u64) {
        self.clock_ms = self.clock_ms.max(clock_ms);
    }

    // ---------------------------------------------------------------------------------
    // Names

    /// Answers a name the program uses but never bound, or an attribute of a host object.
    pub fn lookup(&mut self, name: &str, object: Option<MontyUuid>) -> NameLookupResult {
        match object {
            None => match name {
                "tools" => NameLookupResult::Value(host_object("Tools", TOOLS_ID)),
                "store" => NameLookupResult::Value(host_object("Store", STORE_ID)),
                "progress" => NameLookupResult::Value(MontyObject::Function {
                    name: "progress".to_owned(),
                    docstring: Some(
                        "progress(value): report progress while the program runs".to_owned(),
                    ),
                }),
                _ => NameLookupResult::Undefined,
            },
            Some(id) if id == MontyUuid::from_u128(TOOLS_ID) => {
                let index = match self.namespaces.iter().position(|n| n == name) {
                    Some(i) => i,
                    None if self.namespaces.len() < MAX_NAMESPACES => {
                        self.namespaces.push(name.to_owned());
                        self.namespaces.len() - 1
                    }
                    None => {
                        return NameLookupResult::Error(MontyException::new(
                            ExcType::RuntimeError,
                            Some(format!(
                                "a program may name at most {MAX_NAMESPACES} tool namespaces"
                            )),
                        ));
                    }
                };
                let id = TOOLS_ID + 1 + index as u128;
                NameLookupResult::Value(host_object(&format!("tools.{name}"), id))
            }
            // `tools.<ns>.<name>` read without a call: the tools are called, not read.
            Some(_) => NameLookupResult::Error(MontyException::new(
                ExcType::AttributeError,
                Some(format!(
                    "tools are functions to call and await: write `await tools.<namespace>.{name}(key=value, …)`"
                )),
            )),
        }
    }

    fn namespace_of(&self, object: MontyUuid) -> Option<&str> {
        self.namespaces
            .iter()
            .enumerate()
            .find(|(i, _)| MontyUuid::from_u128(TOOLS_ID + 1 + *i as u128) == object)
            .map(|(_, n)| n.as_str())
    }

    // ---------------------------------------------------------------------------------
    // Calls

    /// Answers a pause at a function call: a tool, `progress`, or something unknown.
    pub fn call(
        &mut self,
        name: &str,
        object: Option<MontyUuid>,
        args: &[MontyObject],
        kwargs: &[(MontyObject, MontyObject)],
        monty_call_id: u32,
    ) -> CallAnswer {
        match object {
            Some(id) if id == MontyUuid::from_u128(STORE_ID) => {
                self.store_call(name, args, kwargs, monty_call_id)
            }
            Some(id) => match self.namespace_of(id).map(str::to_owned) {
                Some(namespace) => {
                    self.tool_call(&format!("{namespace}.{name}"), args, kwargs, monty_call_id)
                }
                None => CallAnswer::Raise(type_error(format!(
                    "`tools.{name}(…)` names no namespace: write `await tools.<namespace>.<tool>(key=value, …)`"
                ))),
            },
            None if name == "progress" => self.progress(args, kwargs),
            None => CallAnswer::Raise(MontyException::new(
                ExcType::NameError,
                Some(format!("name '{name}' is not defined")),
            )),
        }
    }

    /// `store.get(key)` / `store.set(key, value)`, positional or by keyword: a call of the
    /// store's reserved name with `{key}` / `{key, value}`, like a tool call's.
    fn store_call(
        &mut self,
        name: &str,
        args: &[MontyObject],
        kwargs: &[(MontyObject, MontyObject)],
        monty_call_id: u32,
    ) -> CallAnswer {
        let names: &[&str] = match name {
            "get" => &["key"],
            "set" => &["key", "value"],
            _ => {
                return CallAnswer::Raise(MontyException::new(
                    ExcType::AttributeError,
                    Some(format!(
                        "store has no `{name}`: use `await store.get(key)` and `await store.set(key, value)`"
                    )),
                ));
            }
        };
        if args.len() > names.len() {
            return CallAnswer::Raise(type_error(format!(
                "store.{name}() takes {} argument(s): {}",
                names.len(),
                names.join(", ")
            )));
        }
        let mut pairs: Vec<(MontyObject, MontyObject)> = names
            .iter()
            .zip(args)
            .map(|(n, v)| (MontyObject::String((*n).to_owned()), v.clone()))
            .collect();
        pairs.extend(kwargs.iter().cloned());
        let tool = if name == "get" {
            "$store.get"
        } else {
            "$store.set"
        };
        self.tool_call(tool, &[], &pairs, monty_call_id)
    }

    fn tool_call(
        &mut self,
        tool: &str,
        args: &[MontyObject],
        kwargs: &[(MontyObject, MontyObject)],
        monty_call_id: u32,
    ) -> CallAnswer {
        if self.calls_started >= self.limits.max_tool_calls {
            self.call_limit_hit = true;
            let failure = ToolFailure {
                code: "tool_call_limit".to_owned(),
                message: format!(
                    "this execution may start at most {} tool calls",
                    self.limits.max_tool_calls
                ),
                hint: Some("batch the work into fewer calls, or raise max_tool_calls".to_owned()),
            };
            return CallAnswer::Raise(self.tool_error(tool, &failure));
        }
        let argument = match (args, kwargs) {
            ([], kwargs) => MontyObject::Dict(kwargs.to_vec().into()),
            ([single @ MontyObject::Dict(_)], []) => single.clone(),
            _ => {
                return CallAnswer::Raise(type_error(format!(
                    "tools.{tool}: pass the arguments by keyword (`tools.{tool}(key=value, …)`) or as one dict"
                )));
            }
        };
        if let MontyObject::Dict(pairs) = &argument
            && let Some((key, _)) = pairs
                .iter()
                .find(|(k, _)| !matches!(k, MontyObject::String(_)))
        {
            return CallAnswer::Raise(type_error(format!(
                "tools.{tool}: argument names must be str, not {}",
                key.type_name()
            )));
        }
        let args_json = match values::to_json(&argument) {
            Ok(json) if json.len() > airlock_proto::MAX_TOOL_ARGS_BYTES => {
                return CallAnswer::Raise(type_error(format!(
                    "tools.{tool}: the arguments are {} bytes of JSON, over the 16 MiB limit",
                    json.len()
                )));
            }
            Ok(json) => json,
            Err(e) => {
                return CallAnswer::Raise(type_error(format!(
                    "tools.{tool}: the arguments are not JSON: {e}"
                )));
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        self.calls_started += 1;
        let sent = self.ipc.send(&WorkerMessage::ToolCall {
            id,
            tool: tool.to_owned(),
            args_json,
            at: self.call_sites.get(tool).copied().flatten(),
        });
        if let Err(e) = sent {
            self.set_stop(Stop::Ipc(e.to_string()));
            return CallAnswer::Raise(stopping());
        }
        self.pending.insert(
            id,
            Pending {
                monty_call_id,
                tool: tool.to_owned(),
            },
        );
        CallAnswer::Pending
    }

    /// The exception a tool failure raises in the program: a `RuntimeError` whose text
    /// carries the tool, the message, the code and the hint (monty has no way for a host to
    /// define an exception class; `except RuntimeError as e` catches it).
    pub fn tool_error(&mut self, tool: &str, failure: &ToolFailure) -> MontyException {
        let mut text = format!("{tool}: {} (code: {}", failure.message, failure.code);
        if let Some(hint) = &failure.hint {
            text.push_str(&format!("; hint: {hint}"));
        }
        text.push(')');
        if self.failures.len() < 1024 {
            self.failures
                .push((text.clone(), tool.to_owned(), failure.message.clone()));
        }
        MontyException::new(ExcType::RuntimeError, Some(text))
    }

    /// The answer of tool call `id`, as the interpreter takes it; `None` for an id that is not
    /// outstanding (ignored).
    pub fn settle(
        &mut self,
        id: u32,
        result: Result<String, ToolFailure>,
        clock_ms: u64,
    ) -> Option<(u32, ExtFunctionResult)> {
        let call = self.pending.remove(&id)?;
        self.advance_clock(clock_ms);
        let answer = match result {
            Ok(json) => match values::from_json(&json) {
                Ok(value) => {
                    self.results.record(&call.tool, json);
                    ExtFunctionResult::Return(value)
                }
                Err(e) => ExtFunctionResult::Error(self.tool_error(
                    &call.tool,
                    &ToolFailure {
                        code: "invalid_result".to_owned(),
                        message: format!(
                            "the tool's result is not JSON the program can take ({e})"
                        ),
                        hint: None,
                    },
                )),
            },
            Err(failure) => ExtFunctionResult::Error(self.tool_error(&call.tool, &failure)),
        };
        Some((call.monty_call_id, answer))
    }

    fn progress(
        &mut self,
        args: &[MontyObject],
        kwargs: &[(MontyObject, MontyObject)],
    ) -> CallAnswer {
        let value = match (args, kwargs) {
            ([], []) => MontyObject::None,
            ([value], []) => value.clone(),
            _ => return CallAnswer::Raise(type_error("progress() takes one value".to_owned())),
        };
        let value_json = match values::to_json(&value) {
            Ok(json) if json.len() > MAX_PROGRESS_BYTES => {
                return CallAnswer::Raise(type_error(format!(
                    "progress(): the value is {} bytes of JSON, over the 1 MiB limit",
                    json.len()
                )));
            }
            Ok(json) => json,
            Err(e) => {
                return CallAnswer::Raise(type_error(format!(
                    "progress(): the value is not JSON: {e}"
                )));
            }
        };
        match self.take_output_budget(value_json) {
            (Some(value_json), false) => {
                if let Err(e) = self.ipc.send(&WorkerMessage::Progress { value_json }) {
                    self.set_stop(Stop::Ipc(e.to_string()));
                    return CallAnswer::Raise(stopping());
                }
                CallAnswer::Return(MontyObject::None)
            }
            _ => {
                self.set_stop(Stop::OutputLimit);
                CallAnswer::Raise(stopping())
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // The clock and the host's other services

    /// Answers an OS call: the clock from the supervisor; no files; an empty environment.
    pub fn os_call(&self, call: &OsFunctionCall) -> ExtFunctionResult {
        match call {
            OsFunctionCall::DateTimeNow(tz) => {
                let offset = tz.as_ref().map_or(0, |t| t.offset_seconds);
                ExtFunctionResult::Return(MontyObject::DateTime(date_time(
                    self.clock_ms,
                    offset,
                    tz.as_ref(),
                )))
            }
            OsFunctionCall::DateToday => {
                let d = date_time(self.clock_ms, 0, None);
                ExtFunctionResult::Return(MontyObject::Date(MontyDate {
                    year: d.year,
                    month: d.month,
                    day: d.day,
                }))
            }
            OsFunctionCall::Getenv(args) => ExtFunctionResult::Return(args.default.clone()),
            OsFunctionCall::GetEnviron => {
                ExtFunctionResult::Return(MontyObject::Dict(DictPairs::default()))
            }
            other => ExtFunctionResult::Error(MontyException::new(
                ExcType::PermissionError,
                Some(format!(
                    "{}: there is no file system in the sandbox; read and write data through tools",
                    other.name()
                )),
            )),
        }
    }

    // ---------------------------------------------------------------------------------
    // Output

    /// Sends the line `print` left unfinished (at the end, and before waiting).
    pub fn flush_console(&mut self) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let _ = self.send_console(line);
        }
    }

    /// Says on stderr which tool calls the program made but never awaited (their results
    /// were never read), as CPython warns of a coroutine never awaited.
    pub fn warn_never_awaited(&mut self) {
        const SHOWN: usize = 3;
        let tools: Vec<String> = self.pending.values().map(|p| p.tool.clone()).collect();
        if tools.is_empty() {
            return;
        }
        let mut named: Vec<String> = tools
            .iter()
            .take(SHOWN)
            .map(|t| format!("tools.{t}"))
            .collect();
        if tools.len() > SHOWN {
            named.push(format!("{} more", tools.len() - SHOWN));
        }
        let text = format!(
            "RuntimeWarning: {} called but never awaited: its result was never read; add \
             `await` before the call (`x = await tools.<namespace>.<tool>(…)`)",
            named.join(", ")
        );
        // The program has ended: a warning over the output budget is dropped, and a broken
        // channel shows when the result is sent.
        if let (Some(text), _) = self.take_output_budget(text) {
            let _ = self.ipc.send(&WorkerMessage::Console {
                level: ConsoleLevel::Warn,
                text,
            });
        }
    }

    fn send_console(&mut self, mut text: String) -> Result<(), MontyException> {
        if self.stop.is_some() {
            return Err(stopping());
        }
        if text.len() > MAX_CONSOLE_MESSAGE_BYTES {
            let total = text.len();
            let mut cut = MAX_CONSOLE_MESSAGE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(&format!(
                " … [message cut: {total} bytes, over the 1 MiB per-message limit]"
            ));
        }
        let (text, exceeded) = self.take_output_budget(text);
        if let Some(text) = text
            && let Err(e) = self.ipc.send(&WorkerMessage::Console {
                level: ConsoleLevel::Log,
                text,
            })
        {
            self.set_stop(Stop::Ipc(e.to_string()));
            return Err(stopping());
        }
        if exceeded {
            self.set_stop(Stop::OutputLimit);
            return Err(stopping());
        }
        Ok(())
    }

    /// Charges `text` against `max_output_bytes` ([`crate::language::take_output_budget`]).
    fn take_output_budget(&mut self, text: String) -> (Option<String>, bool) {
        let budget = self.limits.max_output_bytes;
        crate::language::take_output_budget(&mut self.output_used, budget, text)
    }
}

impl PrintWriterCallback for Host<'_> {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        if self.stop.is_some() {
            return Err(stopping());
        }
        self.line.push_str(&output);
        if self.line.len() > MAX_CONSOLE_MESSAGE_BYTES {
            // One enormous line: send it now (cut) rather than hold it.
            let line = std::mem::take(&mut self.line);
            self.send_console(line)?;
        }
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        if end == '\n' {
            let line = std::mem::take(&mut self.line);
            self.send_console(line)
        } else {
            self.stdout_write(Cow::Owned(end.to_string()))
        }
    }

    /// The interpreter's periodic checkpoint: a passed deadline or a stop raises here, so a
    /// program that catches the first raise meets it again at the next checkpoint.
    fn poll_flush(&mut self) -> Result<(), MontyException> {
        if self.should_stop() {
            return Err(stopping());
        }
        Ok(())
    }
}

/// A host object the program reaches attributes of (`tools`, `tools.<ns>`).
fn host_object(name: &str, id: u128) -> MontyObject {
    MontyObject::ClassInstance(Box::new(MontyClassInstance {
        class_type: MontyClassType {
            name: name.to_owned(),
            id: MontyUuid::from_u128(id),
            host_defined: true,
            is_dataclass: false,
            attrs: DictPairs::default(),
        },
        instance_id: MontyUuid::from_u128(id),
        attrs: DictPairs::default(),
    }))
}

fn type_error(message: String) -> MontyException {
    MontyException::new(ExcType::TypeError, Some(message))
}

/// Raised where the program is when it must stop; the run loop reports the stop reason
/// instead of this exception.
pub fn stopping() -> MontyException {
    MontyException::new(
        ExcType::TimeoutError,
        Some("the program is being stopped".to_owned()),
    )
}

/// The civil date and time `offset_seconds` east of UTC at `clock_ms`.
fn date_time(clock_ms: u64, offset_seconds: i32, tz: Option<&MontyTimeZone>) -> MontyDateTime {
    let ms = i64::try_from(clock_ms).unwrap_or(i64::MAX);
    let local_ms = ms.saturating_add(i64::from(offset_seconds) * 1000);
    let days = local_ms.div_euclid(86_400_000);
    let in_day = local_ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    MontyDateTime {
        year,
        month,
        day,
        hour: (in_day / 3_600_000) as u8,
        minute: (in_day / 60_000 % 60) as u8,
        second: (in_day / 1000 % 60) as u8,
        microsecond: (in_day % 1000) as u32 * 1000,
        offset_seconds: tz.map(|t| t.offset_seconds),
        timezone_name: tz.and_then(|t| t.name.clone()),
    }
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = if m <= 2 { y + 1 } else { y };
    (i32::try_from(y).unwrap_or(i32::MAX), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_becomes_a_civil_date() {
        // 2026-03-01T12:34:56.789Z
        let d = date_time(1_772_368_496_789, 0, None);
        assert_eq!(
            (
                d.year,
                d.month,
                d.day,
                d.hour,
                d.minute,
                d.second,
                d.microsecond
            ),
            (2026, 3, 1, 12, 34, 56, 789_000)
        );
        let epoch = date_time(0, -3600, None);
        assert_eq!(
            (epoch.year, epoch.month, epoch.day, epoch.hour),
            (1969, 12, 31, 23)
        );
    }
}
