//! Explanations of errors on tool results, in Python's terms: `r["nodes"]: KeyError — r is
//! the result of tools.memory.read_graph (line 1), a dict with keys entities, relations; …`.
//!
//! Nothing happens at run time beyond the host remembering each tool's latest result text
//! ([`Remembered`]): results reach the program untouched. When a program ends on an uncaught
//! KeyError, AttributeError, TypeError or IndexError (or the ValueError of a format
//! specification the value's type does not take), [`explain`]:
//!
//! 1. reads what failed from the exception's type and message (`'nodes'`, `'dict' object has
//!    no attribute 'entities'`, `'NoneType' object is not subscriptable`, …);
//! 2. finds the failing expression in ruff's tree of the program by the position monty gives
//!    (`bindings`), and how the value it reads was bound: to a tool's result, a part of one,
//!    an element of one, or to a call's coroutine (no `await`);
//! 3. walks that path through the tool's latest result (`shapes`) and explains only when the
//!    value there fails the way the message says, by its shape: key names, types, lengths;
//!    never a value.
//!
//! Anything ambiguous gives no explanation: a name bound more than once, a tool called from
//! more than one place and answered more than once, a result too big to remember, a walk that
//! disagrees with the message. A wrong explanation is worse than none. It runs nothing of
//! the program's and sends nothing; every recursion here is bounded (`bindings`' depth and
//! alias limits, paths of at most 32 keys, loops over at most 1000 elements).

mod bindings;
mod shapes;

#[cfg(test)]
mod tests;

use bindings::{Key, Origin, Scan, literal_key};
use monty_types::{ExcType, MontyException, MontyObject};
use ruff_python_ast::Expr;
use ruff_text_size::Ranged;
use shapes::{Walk, child, keys, origin_text, shape, walk};
use std::collections::BTreeMap;

/// Longest explanation: what an agent reads must stay short.
pub const MAX_EXPLANATION: usize = 300;
/// Largest result remembered for an explanation.
const MAX_REMEMBERED_RESULT: usize = 1024 * 1024;
/// Bytes of results remembered in all: the worker's allocator counts them against the
/// program's memory limit, so they are kept few.
const MAX_REMEMBERED_BYTES: usize = 8 * 1024 * 1024;
/// Tools whose results are remembered, at most.
const MAX_TOOLS: usize = 256;

/// Each tool's latest result text (when small enough) and how many results it had.
#[derive(Debug, Default)]
pub struct Remembered {
    latest: BTreeMap<String, (u32, Option<String>)>,
    /// The bytes of the texts held.
    bytes: usize,
}

impl Remembered {
    /// Keeps `text` as `tool`'s latest result (forgetting its previous one), when it fits.
    pub fn record(&mut self, tool: &str, text: String) {
        if !self.latest.contains_key(tool) && self.latest.len() >= MAX_TOOLS {
            return;
        }
        let entry = self.latest.entry(tool.to_owned()).or_insert((0, None));
        entry.0 = entry.0.saturating_add(1);
        if let Some(previous) = entry.1.take() {
            self.bytes -= previous.len();
        }
        if text.len() <= MAX_REMEMBERED_RESULT && self.bytes + text.len() <= MAX_REMEMBERED_BYTES {
            self.bytes += text.len();
            entry.1 = Some(text);
        }
    }

    /// The result a name bound at the tool's call holds: the latest, unless the tool was
    /// called from several places and answered more than once.
    fn of(&self, scan: &Scan<'_>, tool: &str) -> Option<MontyObject> {
        let (results, text) = self.latest.get(tool)?;
        if *results > 1 && scan.call_sites(tool) > 1 {
            return None;
        }
        super::values::from_json(text.as_deref()?).ok()
    }
}

/// What the exception says failed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// `KeyError: 'k'`.
    Key(String),
    /// `'T' object has no attribute 'a'`.
    Attribute(String, String),
    /// `'T' object is not subscriptable`.
    NotSubscriptable(String),
    /// `'T' object is not iterable`.
    NotIterable(String),
    /// `'T' object is not callable`.
    NotCallable(String),
    /// `string indices must be integers, not 'str'`.
    StrIndices,
    /// `list indices must be integers or slices, not str`.
    ListIndices,
    /// `list index out of range`.
    IndexRange,
    /// `Unknown format code 'f' for object of type 'str'`, `Invalid format specifier '…' for
    /// object of type 'dict'`: a format specification the value's type does not take.
    Format(String),
    /// `can only concatenate str (not "int") to str`, `unsupported operand type(s) for +:
    /// 'int' and 'str'`: the two types.
    Operands(String, String),
}

impl Failure {
    fn of(kind: ExcType, message: &str) -> Option<Failure> {
        let quoted = |s: &str| -> Option<String> {
            let s = s.trim();
            s.strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .map(str::to_owned)
        };
        let object = |tail: &str| -> Option<String> {
            let rest = message.strip_prefix('\'')?;
            let (ty, after) = rest.split_once('\'')?;
            (after == tail).then(|| ty.to_owned())
        };
        match kind {
            // The key as monty prints it: bare, or quoted as a repr.
            ExcType::KeyError => Some(Failure::Key(
                quoted(message)
                    .or_else(|| {
                        let s = message.trim();
                        s.strip_prefix('"')?.strip_suffix('"').map(str::to_owned)
                    })
                    .unwrap_or_else(|| message.to_owned()),
            )),
            ExcType::AttributeError => {
                let rest = message.strip_prefix('\'')?;
                let (ty, after) = rest.split_once('\'')?;
                let attr = after.strip_prefix(" object has no attribute ")?;
                Some(Failure::Attribute(ty.to_owned(), quoted(attr)?))
            }
            ExcType::ValueError
                if message.starts_with("Unknown format code ")
                    || message.starts_with("Invalid format specifier ") =>
            {
                let (_, ty) = message.rsplit_once(" for object of type ")?;
                Some(Failure::Format(quoted(ty)?))
            }
            ExcType::IndexError if message == "list index out of range" => {
                Some(Failure::IndexRange)
            }
            ExcType::TypeError => {
                if let Some(ty) = object(" object is not subscriptable") {
                    return Some(Failure::NotSubscriptable(ty));
                }
                if let Some(ty) = object(" object is not iterable") {
                    return Some(Failure::NotIterable(ty));
                }
                if let Some(ty) = object(" object is not callable") {
                    return Some(Failure::NotCallable(ty));
                }
                if message.starts_with("string indices must be integers")
                    || message.starts_with("str indices must be integers")
                {
                    return Some(Failure::StrIndices);
                }
                if message.starts_with("list indices must be integers") {
                    return Some(Failure::ListIndices);
                }
                if let Some(rest) = message.strip_prefix("can only concatenate ") {
                    let (left, rest) = rest.split_once(" (not \"")?;
                    let (right, _) = rest.split_once('"')?;
                    return Some(Failure::Operands(left.to_owned(), right.to_owned()));
                }
                let rest = message.strip_prefix("unsupported operand type(s) for ")?;
                let (_, types) = rest.split_once(": '")?;
                let (left, right) = types.split_once("' and '")?;
                Some(Failure::Operands(
                    left.to_owned(),
                    right.trim_end_matches('\'').to_owned(),
                ))
            }
            _ => None,
        }
    }

    /// The type the failing value has, by the message.
    fn coroutine(&self) -> bool {
        match self {
            Failure::Attribute(ty, _)
            | Failure::NotSubscriptable(ty)
            | Failure::NotIterable(ty)
            | Failure::NotCallable(ty) => ty == "coroutine",
            Failure::Operands(a, b) => a == "coroutine" || b == "coroutine",
            _ => false,
        }
    }
}

/// The explanation of `e`, raised by `source`, or `None` when no tool's value accounts for it.
pub fn explain(source: &str, e: &MontyException, remembered: &Remembered) -> Option<String> {
    let failure = Failure::of(e.exc_type(), e.message().unwrap_or_default())?;
    let frame = e.traceback().last()?;
    let name = e.exc_type().to_string();
    let found = if source.contains("tools") || source.contains("environ") {
        Scan::of(source).and_then(|scan| {
            let start = scan.offset(frame.start.line, frame.start.column)?;
            let end = scan
                .offset(frame.end.line, frame.end.column)
                .unwrap_or(start)
                .max(start);
            Explaining {
                scan: &scan,
                failure: &failure,
                name: &name,
                remembered,
            }
            .at(start, end)
        })
    } else {
        None
    };
    let text = match found {
        Some(text) => text,
        None if failure.coroutine() => "a coroutine is what a tool call gives before it is \
            awaited: the call was not awaited — add `await` (`x = await tools.<namespace>.<tool>(…)`)"
            .to_owned(),
        None => return None,
    };
    Some(at_most(text))
}

/// Members a JavaScript array has that a list does not (the run loop's message says what
/// Python writes instead).
const JS_MEMBERS: &[&str] = &[
    "length", "push", "map", "filter", "forEach", "find", "includes", "join", "indexOf", "flatMap",
];

/// Whether a str holds a number (`float()` takes it); says nothing more of its content.
fn numeric(text: &str) -> bool {
    text.len() <= 64 && text.trim().parse::<f64>().is_ok()
}

/// `os.environ`.
fn is_environ(expr: &Expr) -> bool {
    matches!(expr, Expr::Attribute(a) if a.attr.as_str() == "environ"
        && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "os"))
}

/// Cuts an explanation to [`MAX_EXPLANATION`] characters.
fn at_most(text: String) -> String {
    if text.chars().count() <= MAX_EXPLANATION {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_EXPLANATION - 1).collect();
    cut.push('…');
    cut
}

struct Explaining<'a, 's> {
    scan: &'a Scan<'s>,
    failure: &'a Failure,
    /// The exception's name.
    name: &'a str,
    remembered: &'a Remembered,
}

impl Explaining<'_, '_> {
    /// The explanation of the failure at `start..end` in the source.
    fn at(&self, start: usize, end: usize) -> Option<String> {
        let enclosing = self.scan.enclosing(start, end);
        match self.failure {
            Failure::Key(_)
            | Failure::NotSubscriptable(_)
            | Failure::StrIndices
            | Failure::ListIndices
            | Failure::IndexRange => {
                let subscript = enclosing.iter().find_map(|e| match e {
                    Expr::Subscript(s) => Some(s),
                    _ => None,
                })?;
                if matches!(self.failure, Failure::Key(_)) && is_environ(&subscript.value) {
                    return Some(format!(
                        "{}: KeyError — the sandbox has no environment variables, and a program \
                         holds no credentials: the daemon adds them to the tool calls that need \
                         them, so call the tool without a token",
                        self.scan.text(subscript.range())?
                    ));
                }
                let key = literal_key(&subscript.slice);
                self.subject(subscript, &subscript.value, key.as_ref())
            }
            Failure::Attribute(_, attr) => {
                let attribute = enclosing.iter().find_map(|e| match e {
                    Expr::Attribute(a) if a.attr.as_str() == attr => Some(a),
                    _ => None,
                })?;
                self.subject(attribute, &attribute.value, None)
            }
            Failure::NotCallable(_) => {
                let call = enclosing.iter().find_map(|e| match e {
                    Expr::Call(c) => Some(c),
                    _ => None,
                })?;
                self.subject(call, &call.func, None)
            }
            Failure::NotIterable(_) => {
                // The iterated value is the innermost expression at the position that
                // resolves to a tool's value.
                enclosing
                    .iter()
                    .take(4)
                    .find_map(|e| self.subject(*e, e, None))
            }
            Failure::Format(_) => {
                // An f-string's value (the position is the value), or `'…'.format(value)`.
                if let Some(Expr::Call(call)) = enclosing.first()
                    && matches!(&*call.func, Expr::Attribute(a) if a.attr.as_str() == "format")
                {
                    return call
                        .arguments
                        .args
                        .iter()
                        .take(8)
                        .find_map(|arg| self.subject(arg, arg, None));
                }
                enclosing
                    .iter()
                    .take(4)
                    .find_map(|e| self.subject(*e, e, None))
            }
            Failure::Operands(..) => {
                let op = enclosing.iter().find_map(|e| match e {
                    Expr::BinOp(b) => Some(b),
                    _ => None,
                })?;
                self.subject(op, &op.left, None)
                    .or_else(|| self.subject(op, &op.right, None))
            }
        }
    }

    /// The explanation when `subject` (read by `whole`) is a tool's value that fails the way
    /// the message says.
    fn subject(&self, whole: &impl Ranged, subject: &Expr, key: Option<&Key>) -> Option<String> {
        let origin = self.scan.origin(subject)?;
        let subject_text = self.scan.text(subject.range())?;
        let whole_text = self.scan.text(whole.range())?;
        let head = format!("{whole_text}: {} — ", self.name);
        if origin.coroutine {
            return self.coroutine(&head, &subject_text, &origin);
        }
        let root = self.remembered.of(self.scan, &origin.tool)?;
        let values = match walk(&root, &origin.path) {
            Walk::Found(values) => values,
            Walk::Broke { step, parent } => {
                return self.loop_over_dict(&head, &subject_text, &origin, step, parent);
            }
        };
        let value = values.into_iter().find(|v| self.fails(v, key))?;
        let place = origin_text(&origin.tool, origin.line, &origin.path);
        let fix = self.fix(value, &subject_text, key);
        Some(format!(
            "{head}{subject_text} is {place}, {}{fix}",
            shape(value)
        ))
    }

    /// Whether `value` fails the way the message says (read with `key`, when literal).
    fn fails(&self, value: &MontyObject, key: Option<&Key>) -> bool {
        let ty = value.type_name();
        match self.failure {
            Failure::Key(k) => {
                matches!(value, MontyObject::Dict(_))
                    && child(value, &Key::Name(k.clone())).is_none()
                    && key.is_none_or(|key| *key == Key::Name(k.clone()))
            }
            Failure::Attribute(t, _)
            | Failure::NotSubscriptable(t)
            | Failure::NotIterable(t)
            | Failure::NotCallable(t)
            | Failure::Format(t) => ty == t,
            Failure::StrIndices => matches!(value, MontyObject::String(_)),
            Failure::ListIndices => matches!(value, MontyObject::List(_)),
            Failure::IndexRange => {
                matches!(value, MontyObject::List(_))
                    && key.is_none_or(|key| child(value, key).is_none())
            }
            Failure::Operands(a, b) => ty == a || ty == b,
        }
    }

    /// What to do instead, from what the value is.
    fn fix(&self, value: &MontyObject, subject: &str, key: Option<&Key>) -> String {
        let json = matches!(value, MontyObject::String(s) if shapes::json_text(s).is_some());
        match (self.failure, value) {
            (_, MontyObject::String(_)) if json => {
                format!("; parse it first: json.loads({subject})")
            }
            (Failure::Key(k), _) => format!(
                "; use one of its keys, or {subject}.get({k:?}) for a key that may be missing"
            ),
            (Failure::Attribute(_, attr), MontyObject::Dict(_)) => {
                match child(value, &Key::Name(attr.clone())) {
                    Some(_) => format!("; a dict's keys are read with {subject}[{attr:?}]"),
                    None => format!(
                        "; a dict's keys are read with {subject}[\"key\"], and it has no key {attr:?}"
                    ),
                }
            }
            // A JavaScript member (`.length`, `.push`): the message says what Python writes.
            (Failure::Attribute(_, attr), MontyObject::List(_))
                if JS_MEMBERS.contains(&attr.as_str()) =>
            {
                String::new()
            }
            (Failure::Attribute(..) | Failure::ListIndices, MontyObject::List(items)) => {
                let element = items.first().and_then(keys).map_or_else(
                    || format!("{subject}[0]"),
                    |_| match key {
                        Some(Key::Name(k)) => format!("{subject}[0][{k:?}]"),
                        _ => format!("{subject}[0]"),
                    },
                );
                format!("; take an element ({element}) or loop: for x in {subject}")
            }
            (Failure::IndexRange, MontyObject::List(_)) => {
                format!("; check len({subject}) before indexing")
            }
            (Failure::NotSubscriptable(_) | Failure::NotIterable(_), MontyObject::None) => {
                format!("; check `if {subject} is not None` first")
            }
            (Failure::Operands(..), MontyObject::Int(_) | MontyObject::Float(_)) => {
                format!("; convert it with str({subject}) or use an f-string")
            }
            (Failure::Format(_), MontyObject::String(text)) if numeric(text) => {
                format!("; convert it first: float({subject}) or int({subject})")
            }
            (Failure::Format(_), MontyObject::String(_)) => {
                "; it is text, not a number: format it without a number format, or take the \
                 number out of it first"
                    .to_owned()
            }
            (Failure::Format(_), MontyObject::Dict(_)) => {
                format!("; format one of its values ({subject}[\"key\"])")
            }
            (Failure::Format(_), MontyObject::List(_)) => {
                format!("; format its elements (for x in {subject})")
            }
            (Failure::Operands(..), MontyObject::Dict(_) | MontyObject::List(_)) => {
                format!("; use a part of it, or json.dumps({subject}) for its JSON text")
            }
            (Failure::Operands(..), MontyObject::String(text)) if !numeric(text) => {
                "; it is text: convert the other side with str(…), or use an f-string".to_owned()
            }
            (Failure::Operands(..), MontyObject::String(_)) => {
                format!("; convert it with int({subject}) or float({subject}), or use an f-string")
            }
            _ => String::new(),
        }
    }

    /// A loop over a dict (which gives its keys, as str) used its elements as dicts.
    fn loop_over_dict(
        &self,
        head: &str,
        subject: &str,
        origin: &Origin,
        step: usize,
        parent: &MontyObject,
    ) -> Option<String> {
        let MontyObject::Dict(pairs) = parent else {
            return None;
        };
        if step + 1 != origin.path.len()
            || origin.path[step] != Key::Each
            || !matches!(self.failure, Failure::StrIndices | Failure::Attribute(..))
        {
            return None;
        }
        let list = pairs.iter().find_map(|(k, v)| match (k, v) {
            (MontyObject::String(k), MontyObject::List(_)) => Some(k),
            _ => None,
        });
        let fix = match list {
            Some(k) => format!("; loop over a list in it instead, such as [{k:?}]"),
            None => String::new(),
        };
        Some(format!(
            "{head}{subject} is a key (a str) of {}, {}: a loop over a dict gives its keys{fix}",
            origin_text(&origin.tool, origin.line, &origin.path[..step]),
            shape(parent)
        ))
    }

    fn coroutine(&self, head: &str, subject: &str, origin: &Origin) -> Option<String> {
        if !self.failure.coroutine() {
            return None;
        }
        // The fix assigns the awaited result to the name, when the subject is one.
        let name = if subject.chars().all(|c| c.is_alphanumeric() || c == '_') {
            subject
        } else {
            "x"
        };
        Some(format!(
            "{head}{subject} is the coroutine of tools.{} (line {}), not its result: the call \
             was not awaited — add `await` (`{name} = await tools.{}(…)`)",
            origin.tool, origin.line, origin.tool
        ))
    }
}
