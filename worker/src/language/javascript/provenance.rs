//! Explanations of TypeErrors on tool results: "g.nodes is undefined: g is the result of
//! tools.memory.read_graph (line 1), an object with keys entities (array of 3), …".
//!
//! The prelude tags what tool calls return (their promises, and each object and array of
//! their results) and notes the last property read on a tagged value that found nothing
//! (`lastMiss`). When a program ends on an uncaught TypeError, the engine's message, the
//! error's position in the submitted code and the source text there are held against that
//! last miss: only when they agree (the missed key is read at the error's position, in the way
//! the message says failed) is the error explained. A miss the program caught long ago, or a
//! TypeError about some other value, must not be explained: a wrong explanation is worse than
//! none.
//!
//! Pure text work; it runs once per failed execution.

/// The last read on a tool's value that found nothing, as the prelude's `lastMiss` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Miss {
    /// The key read (`Symbol.iterator` for iteration).
    pub key: String,
    /// The value read from is a tool call's promise, not its result.
    pub promise: bool,
    /// The tool, `namespace.name`.
    pub tool: String,
    /// Line of the tool call in the submitted code.
    pub call_line: Option<u32>,
    /// Where in the result the value sits (`.items[0]`), empty for the result itself.
    pub path: String,
    /// The value's shape: keys, types, lengths, never content.
    pub shape: String,
    /// The key is a method of this kind of value (`a string`), not of this one.
    pub method_of: Option<String>,
}

/// What the engine's message says failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure<'m> {
    /// `cannot read property 'P' of undefined` (or `set`, or `null`): the value before `.P`
    /// is missing.
    PropertyOf(&'m str),
    /// `not a function`.
    NotAFunction,
    /// `value is not iterable`.
    NotIterable,
    /// `Cannot convert undefined or null to object` (destructuring, `Object.keys`).
    ToObject,
}

fn failure(message: &str) -> Option<Failure<'_>> {
    let property = |verb: &str| {
        let rest = message.strip_prefix(verb)?.strip_prefix(" property '")?;
        let (name, tail) = rest.split_once("' of ")?;
        matches!(tail, "undefined" | "null").then_some(Failure::PropertyOf(name))
    };
    if let Some(f) = property("cannot read").or_else(|| property("cannot set")) {
        return Some(f);
    }
    match message {
        "not a function" => Some(Failure::NotAFunction),
        "value is not iterable" => Some(Failure::NotIterable),
        "Cannot convert undefined or null to object" => Some(Failure::ToObject),
        _ => None,
    }
}

/// The explanation of an uncaught TypeError with `message` at `position` (1-based line and
/// UTF-16 column in `source`), or `None` when the last miss does not account for it.
pub(super) fn explain(
    source: &str,
    message: &str,
    position: Option<(u32, u32)>,
    miss: &Miss,
) -> Option<String> {
    let failure = failure(message)?;
    if miss.key == "Symbol.iterator"
        && !matches!(
            failure,
            Failure::NotIterable | Failure::PropertyOf(_) | Failure::ToObject
        )
    {
        return None;
    }
    let at = position.and_then(|(line, column)| offset_of(source, line, column));
    let found = at
        .and_then(|at| at_position(source, at, failure, &miss.key))
        .or_else(|| destructured(source, failure, &miss.key));
    let (subject, object) = found?;
    let head = match failure {
        Failure::NotAFunction => format!("{subject} is not a function"),
        Failure::NotIterable => format!("{subject} is not iterable"),
        Failure::PropertyOf(_) | Failure::ToObject => format!("{subject} is undefined"),
    };
    let line = miss
        .call_line
        .map(|l| format!(" (line {l})"))
        .unwrap_or_default();
    let tail = if miss.promise {
        format!(
            "{object} is the Promise that tools.{}{line} returned, not its result — add await",
            miss.tool
        )
    } else {
        let origin = if miss.path.is_empty() {
            format!("the result of tools.{}", miss.tool)
        } else {
            format!("{} of the result of tools.{}", miss.path, miss.tool)
        };
        let not = match (&miss.method_of, failure) {
            (Some(kind), Failure::NotAFunction) => format!(", not {kind}"),
            _ => String::new(),
        };
        format!("{object} is {origin}{line}, {}{not}", miss.shape)
    };
    Some(format!("{head}: {tail}"))
}

/// Byte offset of a 1-based line and UTF-16 column.
fn offset_of(source: &str, line: u32, column: u32) -> Option<usize> {
    let start = if line <= 1 {
        0
    } else {
        let mut n = 1;
        let mut found = None;
        for (i, b) in source.bytes().enumerate() {
            if b == b'\n' {
                n += 1;
                if n == line {
                    found = Some(i + 1);
                    break;
                }
            }
        }
        found?
    };
    let mut units = 1;
    for (i, c) in source[start..].char_indices() {
        if units >= column {
            return Some(start + i);
        }
        if c == '\n' {
            return None;
        }
        units += c.len_utf16() as u32;
    }
    None
}

/// One step of a member chain.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// The chain's head: a name, or a parenthesised expression (`None`).
    Head,
    /// `.name` or `?.name`.
    Name(String),
    /// `[expr]`: the key when it is a literal.
    Index(Option<String>),
    /// `(args)`.
    Call,
}

#[derive(Debug)]
struct Segment {
    start: usize,
    end: usize,
    step: Step,
}

const MAX_EXPRESSION: usize = 80;

/// The expression and the object before the missed key, found in the member chain that covers
/// `at`, checked against what the message says failed.
fn at_position(
    source: &str,
    at: usize,
    failure: Failure<'_>,
    key: &str,
) -> Option<(String, String)> {
    let start = chain_start(source, at)?;
    let chain = parse_chain(source, start);
    let last = chain.last()?;
    if at > last.end {
        return None;
    }
    if key == "Symbol.iterator" {
        // The whole chain is the value iterated over (`for (const x of g)`, `[...g]`).
        if failure != Failure::NotIterable {
            return None;
        }
        let text = compact(&source[start..last.end])?;
        return Some((text.clone(), text));
    }
    for (i, segment) in chain.iter().enumerate().skip(1) {
        let reads_key = match &segment.step {
            Step::Name(name) => name == key,
            Step::Index(Some(literal)) => literal == key,
            Step::Index(None) => true,
            _ => false,
        };
        if !reads_key {
            continue;
        }
        let next = chain.get(i + 1).map(|s| &s.step);
        let agrees = match failure {
            Failure::PropertyOf("Symbol.iterator") | Failure::ToObject => next.is_none(),
            Failure::PropertyOf(p) => match next {
                Some(Step::Name(name)) => name == p,
                Some(Step::Index(Some(literal))) => literal == p,
                Some(Step::Index(None)) => true,
                _ => false,
            },
            Failure::NotAFunction => next == Some(&Step::Call),
            Failure::NotIterable => false,
        };
        if agrees {
            let subject = compact(&source[start..segment.end])?;
            let object = compact(&source[start..segment.start])?;
            return Some((subject, object.trim_end_matches('?').to_owned()));
        }
    }
    None
}

/// A destructured key that is missing, found anywhere in the program (QuickJS gives no
/// reliable position for destructuring): `{ key: { … } }` or `{ … } = obj.key`, when exactly
/// one place in the program reads `key` that way.
fn destructured(source: &str, failure: Failure<'_>, key: &str) -> Option<(String, String)> {
    if !matches!(
        failure,
        Failure::ToObject | Failure::PropertyOf("Symbol.iterator")
    ) || key == "Symbol.iterator"
        || !is_name(key)
    {
        return None;
    }
    let mut found = Vec::new();
    let bytes = source.as_bytes();
    let mut from = 0;
    while let Some(i) = source[from..].find(key).map(|i| i + from) {
        from = i + key.len();
        let before = source[..i].chars().next_back();
        let after = source[from..].chars().next();
        if before.is_some_and(is_name_char) || after.is_some_and(is_name_char) {
            continue;
        }
        let prev = skip_back_ws(bytes, i);
        let next = skip_ws(bytes, from);
        // `{ key: { … } }` or `{ key: [ … ] }` in a pattern.
        if matches!(prev.and_then(|p| bytes.get(p)), Some(b'{' | b','))
            && bytes.get(next) == Some(&b':')
            && matches!(bytes.get(skip_ws(bytes, next + 1)), Some(b'{' | b'['))
        {
            found.push((
                format!("the destructured {key}"),
                "the object it is read from".to_owned(),
            ));
            continue;
        }
        // `{ … } = obj.key` or `[ … ] = obj.key`.
        if matches!(prev.and_then(|p| bytes.get(p)), Some(b'.'))
            && let Some(start) = chain_start(source, i)
        {
            let chain = parse_chain(source, start);
            let ends_here = chain.last().is_some_and(|s| s.end == from);
            let eq = skip_back_ws(bytes, start);
            let pattern = eq
                .filter(|&e| bytes[e] == b'=' && e > 0)
                .and_then(|e| skip_back_ws(bytes, e));
            if ends_here
                && eq.is_some_and(|e| e == 0 || !matches!(bytes[e - 1], b'=' | b'!' | b'<' | b'>'))
                && matches!(pattern.map(|p| bytes[p]), Some(b'}' | b']'))
                && let (Some(subject), Some(object)) = (
                    compact(&source[start..from]),
                    chain.last().and_then(|s| compact(&source[start..s.start])),
                )
            {
                found.push((subject, object.trim_end_matches('?').to_owned()));
            }
        }
    }
    (found.len() == 1).then(|| found.remove(0))
}

/// Where the member chain around `at` begins: back over `.name`, `?.name`, `[…]` and `(…)`.
fn chain_start(source: &str, at: usize) -> Option<usize> {
    let bytes = source.as_bytes();
    let mut p = at;
    // Into the start of the name `at` is in.
    while p > 0 && is_name_byte(bytes[p - 1]) {
        p -= 1;
    }
    if !bytes
        .get(p)
        .is_some_and(|&b| is_name_byte(b) || b == b'(' || b == b'[')
    {
        return None;
    }
    while let Some(prev) = skip_back_ws(bytes, p) {
        let attached = matches!(bytes[p], b'[' | b'(');
        let (before, dotted) = match bytes[prev] {
            b'.' if prev > 0 && bytes[prev - 1] == b'.' => break,
            b'.' => {
                let q = if prev > 0 && bytes[prev - 1] == b'?' {
                    prev - 1
                } else {
                    prev
                };
                match skip_back_ws(bytes, q) {
                    Some(b) => (b, true),
                    None => break,
                }
            }
            // TypeScript's non-null assertion: `g!.nodes`.
            b'!' if prev > 0 && is_name_byte(bytes[prev - 1]) => (prev - 1, true),
            _ if attached => (prev, false),
            _ => break,
        };
        match bytes[before] {
            b if is_name_byte(b) => {
                let mut s = before;
                while s > 0 && is_name_byte(bytes[s - 1]) {
                    s -= 1;
                }
                // `return (x).y` or `await (x)`: the keyword is not the callee.
                if !dotted && is_keyword(&source[s..=before]) {
                    break;
                }
                p = s;
            }
            b')' | b']' => match matching_open(bytes, before) {
                Some(open) => p = open,
                None => return None,
            },
            _ => break,
        }
    }
    Some(p)
}

/// The chain's segments from its head at `start`.
fn parse_chain(source: &str, start: usize) -> Vec<Segment> {
    let bytes = source.as_bytes();
    let mut segments = Vec::new();
    let head_end = if bytes.get(start) == Some(&b'(') || bytes.get(start) == Some(&b'[') {
        match matching_close(bytes, start) {
            Some(close) => close + 1,
            None => return segments,
        }
    } else {
        name_end(bytes, start)
    };
    if head_end == start {
        return segments;
    }
    segments.push(Segment {
        start,
        end: head_end,
        step: Step::Head,
    });
    let mut p = head_end;
    loop {
        let mut q = skip_ws(bytes, p);
        if bytes.get(q) == Some(&b'!') && bytes.get(q + 1) != Some(&b'=') {
            q += 1;
        }
        let seg_start = q;
        let optional = bytes.get(q) == Some(&b'?') && bytes.get(q + 1) == Some(&b'.');
        if optional {
            q += 2;
        }
        match bytes.get(q) {
            Some(b'.') if !optional && bytes.get(q + 1) != Some(&b'.') => {
                let n = skip_ws(bytes, q + 1);
                let end = name_end(bytes, n);
                if end == n {
                    break;
                }
                segments.push(Segment {
                    start: seg_start,
                    end,
                    step: Step::Name(source[n..end].to_owned()),
                });
                p = end;
            }
            Some(b) if optional && is_name_byte(*b) => {
                let end = name_end(bytes, q);
                segments.push(Segment {
                    start: seg_start,
                    end,
                    step: Step::Name(source[q..end].to_owned()),
                });
                p = end;
            }
            Some(b'[') => {
                let Some(close) = matching_close(bytes, q) else {
                    break;
                };
                let literal = literal_key(source[q + 1..close].trim());
                segments.push(Segment {
                    start: seg_start,
                    end: close + 1,
                    step: Step::Index(literal),
                });
                p = close + 1;
            }
            Some(b'(') => {
                let Some(close) = matching_close(bytes, q) else {
                    break;
                };
                segments.push(Segment {
                    start: seg_start,
                    end: close + 1,
                    step: Step::Call,
                });
                p = close + 1;
            }
            _ => break,
        }
    }
    segments
}

/// `'k'`, `"k"` or `0` inside brackets: the key read.
fn literal_key(text: &str) -> Option<String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Some(text.to_owned());
    }
    let quoted = text
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))?;
    (!quoted.contains(['\\', '\'', '"'])).then(|| quoted.to_owned())
}

/// The expression as one line without layout whitespace, or `None` when too long to show.
fn compact(text: &str) -> Option<String> {
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line.trim());
    }
    let out = out.trim().to_owned();
    (!out.is_empty() && out.len() <= MAX_EXPRESSION).then_some(out)
}

fn skip_ws(bytes: &[u8], mut p: usize) -> usize {
    while bytes.get(p).is_some_and(u8::is_ascii_whitespace) {
        p += 1;
    }
    p
}

/// The last non-whitespace byte before `p`.
fn skip_back_ws(bytes: &[u8], p: usize) -> Option<usize> {
    let mut q = p;
    while q > 0 {
        q -= 1;
        if !bytes[q].is_ascii_whitespace() {
            return Some(q);
        }
    }
    None
}

fn name_end(bytes: &[u8], mut p: usize) -> usize {
    while bytes.get(p).is_some_and(|&b| is_name_byte(b)) {
        p += 1;
    }
    p
}

/// Names and identifiers: ASCII letters, digits, `_`, `$`, and anything non-ASCII.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

fn is_name(key: &str) -> bool {
    !key.is_empty()
        && key.chars().all(is_name_char)
        && !key.starts_with(|c: char| c.is_ascii_digit())
}

fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "return"
            | "await"
            | "typeof"
            | "void"
            | "delete"
            | "in"
            | "of"
            | "new"
            | "yield"
            | "case"
            | "throw"
            | "instanceof"
            | "else"
            | "do"
    )
}

/// The bracket that closes the one at `open`, skipping strings (bounded by the source).
fn matching_close(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut p = open;
    while p < bytes.len() {
        match bytes[p] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(p);
                }
            }
            q @ (b'\'' | b'"' | b'`') => {
                p += 1;
                while p < bytes.len() && bytes[p] != q {
                    if bytes[p] == b'\\' {
                        p += 1;
                    }
                    p += 1;
                }
            }
            _ => {}
        }
        p += 1;
    }
    None
}

/// The bracket that opens the one closing at `close` (strings are not skipped backwards:
/// a bracket inside a string only makes the chain unrecognised).
fn matching_open(bytes: &[u8], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut p = close + 1;
    while p > 0 {
        p -= 1;
        match bytes[p] {
            b')' | b']' | b'}' => depth += 1,
            b'(' | b'[' | b'{' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(p);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn miss(key: &str) -> Miss {
        Miss {
            key: key.to_owned(),
            promise: false,
            tool: "memory.read_graph".to_owned(),
            call_line: Some(1),
            path: String::new(),
            shape: "an object with keys entities (array of 3)".to_owned(),
            method_of: None,
        }
    }

    #[test]
    fn messages() {
        assert_eq!(
            failure("cannot read property 'map' of undefined"),
            Some(Failure::PropertyOf("map"))
        );
        assert_eq!(
            failure("cannot set property 'x' of null"),
            Some(Failure::PropertyOf("x"))
        );
        assert_eq!(failure("not a function"), Some(Failure::NotAFunction));
        assert_eq!(failure("x is not defined"), None);
    }

    #[test]
    fn chains() {
        let src = "const z = g\n  .nodes\n  .map(x => x);";
        let at = offset_of(src, 1, 11).unwrap();
        assert_eq!(
            explain(
                src,
                "cannot read property 'map' of undefined",
                Some((1, 11)),
                &miss("nodes")
            )
            .as_deref(),
            Some(
                "g.nodes is undefined: g is the result of tools.memory.read_graph (line 1), an object with keys entities (array of 3)"
            )
        );
        assert_eq!(chain_start(src, at), Some(10));
        let src = "return r.items[0]!.name.first;";
        let e = explain(
            src,
            "cannot read property 'first' of undefined",
            Some((1, 8)),
            &miss("name"),
        );
        assert_eq!(
            e.as_deref().map(|e| e.split(':').next().unwrap()),
            Some("r.items[0]!.name is undefined")
        );
        // The key read at the position is another one: nothing is said.
        assert_eq!(
            explain(
                src,
                "cannot read property 'first' of undefined",
                Some((1, 8)),
                &miss("items")
            ),
            None
        );
        let src = "const s = t.split(',');";
        let e = explain(
            src,
            "not a function",
            Some((1, 13)),
            &Miss {
                method_of: Some("a string".into()),
                ..miss("split")
            },
        );
        assert!(
            e.as_deref()
                .unwrap()
                .starts_with("t.split is not a function: t is "),
            "{e:?}"
        );
        assert!(e.as_deref().unwrap().ends_with(", not a string"), "{e:?}");
    }

    #[test]
    fn destructuring_without_position() {
        let src = "const g = await tools.a.b();\nconst { x: { y } } = g;\ny";
        let e = explain(
            src,
            "Cannot convert undefined or null to object",
            None,
            &miss("x"),
        );
        assert!(
            e.as_deref().unwrap().starts_with(
                "the destructured x is undefined: the object it is read from is the result"
            ),
            "{e:?}"
        );
        let src = "const { nodes } = g.graph;";
        let e = explain(
            src,
            "Cannot convert undefined or null to object",
            Some((1, 1)),
            &miss("graph"),
        );
        assert!(
            e.as_deref()
                .unwrap()
                .starts_with("g.graph is undefined: g is"),
            "{e:?}"
        );
        // Two places destructure the key: which one failed is unknown.
        let src = "const { x: { y } } = g;\nconst { x: { z } } = h;";
        assert_eq!(
            explain(
                src,
                "Cannot convert undefined or null to object",
                None,
                &miss("x")
            ),
            None
        );
    }
}
