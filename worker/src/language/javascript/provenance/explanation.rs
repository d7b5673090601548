//! The error's expression, held against the value: the member chain at the error's position
//! ([`at_position`]) or a destructuring with no reliable position ([`destructured`]), walked
//! through its tool's latest result; explained only when the walk breaks where the engine's
//! message says the program failed.

use super::Failure;
use super::bindings::{Key, Origin, Scan};
use super::results::{PROMISE_METHODS, Results, Walk, is_object_method, method_of, walk};
use super::shapes::{Wanted, conversion, not_an_object, origin_text, shape_at};
use super::source_text::{Segment, Step, chain_start, compact, is_name, parse_chain};
use rquickjs::{Ctx, Type, Value};

/// The key a chain step reads, when it is known.
fn step_key(step: &Step) -> Option<Key> {
    match step {
        Step::Name(name) => Some(Key::Name(name.clone())),
        Step::Index(Some(literal)) => Some(Key::of(literal)),
        _ => None,
    }
}

/// The step reads property `p` (a computed key might).
fn reads(step: Option<&Step>, p: &str) -> bool {
    match step {
        Some(Step::Name(name)) => name == p,
        Some(Step::Index(Some(literal))) => literal == p,
        Some(Step::Index(None)) => true,
        _ => false,
    }
}

/// The explanation of the error at byte offset `at` from the member chain there.
pub(super) fn at_position(
    scan: &Scan<'_>,
    source: &str,
    at: usize,
    failure: Failure<'_>,
    results: &Results<'_, '_>,
) -> Option<String> {
    let chain = ChainAt::read(scan, source, at)?;
    if chain.origin.promise {
        return chain.explain_promise(failure);
    }
    let root = results.of(&chain.origin.tool)?;
    let walked = ChainInResult::new(&chain, results.ctx, root);
    if walked.base == 0 && walked.root.is_null() {
        // The result itself is `null`.
        return chain.explain_null_result(failure);
    }
    match failure {
        Failure::PropertyOf(..) | Failure::ToObject => walked.explain_missing(failure),
        Failure::NotAFunction => walked.explain_not_a_function(),
        Failure::NotIterable => walked.explain_not_iterable(),
    }
}

/// The member chain at the error's position (`g.nodes.map(…)`), whose head is a name with a
/// known origin.
struct ChainAt<'s> {
    source: &'s str,
    /// Byte offset of the error.
    at: usize,
    /// Where the chain starts in `source`.
    start: usize,
    chain: Vec<Segment>,
    /// The chain's head: the name whose value it reads.
    head: &'s str,
    /// Where the head's value came from.
    origin: Origin,
}

impl<'s> ChainAt<'s> {
    fn read(scan: &Scan<'_>, source: &'s str, at: usize) -> Option<ChainAt<'s>> {
        let start = chain_start(source, at)?;
        let chain = parse_chain(source, start);
        let last = chain.last()?;
        if at > last.end {
            return None;
        }
        let head = &source[chain.first()?.start..chain.first()?.end];
        if !is_name(head) {
            return None;
        }
        let origin = scan.resolve(head, start, 0)?;
        Some(ChainAt {
            source,
            at,
            start,
            chain,
            head,
            origin,
        })
    }

    /// The chain's text up to `end`, as one line.
    fn text(&self, end: usize) -> Option<String> {
        compact(&self.source[self.start..end])
    }

    /// The value before step `i`, named in the program.
    fn object(&self, i: usize) -> Option<String> {
        self.text(self.chain[i].start)
            .map(|t| t.trim_end_matches(['?', '!']).to_owned())
    }

    /// Step `i` of the chain, if it has one.
    fn step(&self, i: usize) -> Option<&Step> {
        self.chain.get(i).map(|s| &s.step)
    }

    /// The head holds a tool's promise: the chain failed on the promise, not on its result.
    fn explain_promise(&self, failure: Failure<'_>) -> Option<String> {
        let (head, tool, line) = (self.head, &self.origin.tool, self.origin.line);
        let promise_tail = |object: &str| {
            format!(
                "{object} is the Promise that tools.{tool} (line {line}) returned, not its result — add await"
            )
        };
        let member = self
            .step(1)
            .and_then(step_key)
            .is_some_and(|k| !matches!(&k, Key::Name(n) if PROMISE_METHODS.contains(&n.as_str()) || is_object_method(n)));
        match failure {
            Failure::PropertyOf(p, false) if member && reads(self.step(2), p) => Some(format!(
                "{} is undefined: {}",
                self.text(self.chain[1].end)?,
                promise_tail(head)
            )),
            Failure::NotAFunction if member && self.step(2) == Some(&Step::Call) => Some(format!(
                "{} is not a function: {}",
                self.text(self.chain[1].end)?,
                promise_tail(head)
            )),
            Failure::NotIterable if self.chain.len() == 1 => {
                Some(format!("{head} is not iterable: {}", promise_tail(head)))
            }
            _ => None,
        }
    }

    /// The tool's result itself is `null`.
    fn explain_null_result(&self, failure: Failure<'_>) -> Option<String> {
        let (head, tool, line) = (self.head, &self.origin.tool, self.origin.line);
        match failure {
            Failure::PropertyOf(p, true) if reads(self.step(1), p) => Some(format!(
                "{head} is null: {head} is the result of tools.{tool} (line {line})"
            )),
            _ => None,
        }
    }
}

/// The chain held against its tool's latest result.
struct ChainInResult<'c, 's, 'js> {
    chain: &'c ChainAt<'s>,
    ctx: &'c Ctx<'js>,
    /// The tool's latest result, parsed.
    root: Value<'js>,
    /// The keys the chain reads, up to its first call or computed key.
    keys: Vec<Key>,
    /// How deep in the result the chain's head is (the length of its origin's path).
    base: usize,
}

impl<'c, 's, 'js> ChainInResult<'c, 's, 'js> {
    fn new(chain: &'c ChainAt<'s>, ctx: &'c Ctx<'js>, root: Value<'js>) -> Self {
        let keys = chain.chain[1..]
            .iter()
            .map_while(|s| step_key(&s.step))
            .collect();
        ChainInResult {
            chain,
            ctx,
            root,
            keys,
            base: chain.origin.path.len(),
        }
    }

    /// The path in the result to the value before chain step `i` (step 0 is the name). The
    /// walks below always start from the result, so a loop's every element is walked.
    fn path_to(&self, i: usize) -> Vec<Key> {
        let mut path = self.chain.origin.path.clone();
        path.extend(self.keys[..i - 1].iter().cloned());
        path
    }

    /// The walk of `path` from the result.
    fn walk(&self, path: &[Key]) -> Walk<'js> {
        walk(self.ctx, self.root.clone(), path)
    }

    /// A read of a property of `undefined` or `null`, or a destructuring of one.
    fn explain_missing(&self, failure: Failure<'_>) -> Option<String> {
        let c = self.chain;
        let (head, tool, line) = (c.head, &c.origin.tool, c.origin.line);
        let base = self.base;
        let (p, is_null) = match failure {
            Failure::PropertyOf(p, n) => (Some(p), n),
            _ => (None, false),
        };
        let Walk::Broke { i, parent, null } = self.walk(&self.path_to(self.keys.len() + 1)) else {
            return None;
        };
        let what = if null { "null" } else { "undefined" };
        if i + 1 < base {
            return None;
        }
        if i + 1 == base {
            // The name itself is missing or null (`const { graph } = …; graph.nodes`).
            if p.is_none_or(|p| null != is_null || !reads(c.step(1), p)) {
                return None;
            }
            return Some(format!(
                "{head} is {what}: the object it is read from is {} (line {line}), {}{}",
                origin_text(tool, &c.origin.path[..i]),
                shape_at(&parent, &c.origin.path[..i]),
                not_an_object(&parent, &c.origin.path[i]),
            ));
        }
        let i = i - base + 1; // the chain's step that found nothing
        let agrees = match p {
            Some("Symbol.iterator") | None => i + 1 == c.chain.len(),
            Some(p) => null == is_null && reads(c.step(i + 1), p),
        };
        if !agrees {
            return None;
        }
        let object = c.object(i)?;
        Some(format!(
            "{} is {what}: {object} is {} (line {line}), {}{}{}",
            c.text(c.chain[i].end)?,
            origin_text(tool, &self.path_to(i)),
            shape_at(&parent, &self.path_to(i)),
            not_an_object(&parent, &self.keys[i - 1]),
            conversion(self.ctx, &parent, &object, Wanted::Object),
        ))
    }

    /// A call of a member that is not a function.
    fn explain_not_a_function(&self) -> Option<String> {
        let c = self.chain;
        let (tool, line) = (&c.origin.tool, c.origin.line);
        // The called member: the one at the error's position, else the chain's only call
        // of a member.
        let called: Vec<usize> = (1..c.chain.len())
            .filter(|&i| step_key(&c.chain[i].step).is_some() && c.step(i + 1) == Some(&Step::Call))
            .collect();
        let i = called
            .iter()
            .copied()
            .find(|&i| c.chain[i].start <= c.at && c.at < c.chain[i].end)
            .or_else(|| (called.len() == 1).then(|| called[0]))?;
        if i > self.keys.len() {
            return None;
        }
        let key = &self.keys[i - 1];
        let called = c.text(c.chain[i].end)?;
        let Walk::Found(receiver) = self.walk(&self.path_to(i)) else {
            return None;
        };
        let object = c.object(i)?;
        let not = match self.walk(&self.path_to(i + 1)) {
            // A JSON value is never a function: say what the member is.
            Walk::Found(member) => {
                let path = self.path_to(i + 1);
                return Some(format!(
                    "{called} is not a function: {called} is {} (line {line}), {}",
                    origin_text(tool, &path),
                    shape_at(&member, &path),
                ));
            }
            Walk::Broke {
                i: at, null: false, ..
            } if at + 1 == self.base + i => match key {
                Key::Name(name) => {
                    let kind = method_of(&receiver, name)
                        .map(|kind| format!(", not {kind}"))
                        .unwrap_or_default();
                    let wanted = Wanted::method(name);
                    format!("{kind}{}", conversion(self.ctx, &receiver, &object, wanted))
                }
                _ => String::new(),
            },
            _ => return None,
        };
        Some(format!(
            "{called} is not a function: {object} is {} (line {line}), {}{not}",
            origin_text(tool, &self.path_to(i)),
            shape_at(&receiver, &self.path_to(i)),
        ))
    }

    /// A loop over (or spread of) a value that is not iterable.
    fn explain_not_iterable(&self) -> Option<String> {
        let c = self.chain;
        let (tool, line) = (&c.origin.tool, c.origin.line);
        if self.keys.len() + 1 != c.chain.len() {
            return None;
        }
        let path = self.path_to(c.chain.len());
        let Walk::Found(value) = self.walk(&path) else {
            return None;
        };
        if matches!(value.type_of(), Type::Array | Type::String) {
            return None;
        }
        let whole = c.text(c.chain.last()?.end)?;
        Some(format!(
            "{whole} is not iterable: {whole} is {} (line {line}), {}{}",
            origin_text(tool, &path),
            shape_at(&value, &path),
            conversion(self.ctx, &value, &whole, Wanted::Array),
        ))
    }
}

/// A destructuring that needs a missing value to be an object: the engine gives no reliable
/// position for these, so the one declaration (at the position, if any) whose value is
/// missing in its tool's result.
pub(super) fn destructured(
    scan: &Scan<'_>,
    source: &str,
    at: Option<usize>,
    failure: Failure<'_>,
    results: &Results<'_, '_>,
) -> Option<String> {
    let array = failure != Failure::ToObject;
    let mut found = Vec::new();
    for required in &scan.required {
        if required.array != array {
            continue;
        }
        let Some(origin) = scan.origin(&required.init, required.span.start as usize, 0) else {
            continue;
        };
        if origin.promise {
            continue;
        }
        let mut path = origin.path.clone();
        path.extend(required.path.iter().cloned());
        let Some(root) = results.of(&origin.tool) else {
            continue;
        };
        let Walk::Broke { i, parent, null } = walk(results.ctx, root, &path) else {
            continue;
        };
        if i + 1 != path.len() {
            continue;
        }
        let what = if null { "null" } else { "undefined" };
        let tail = format!(
            "(line {}), {}{}",
            origin.line,
            shape_at(&parent, &path[..i]),
            not_an_object(&parent, &path[i])
        );
        let text = match &required.key {
            Some(key) => format!(
                "the destructured {key} is {what}: the object it is read from is {} {tail}",
                origin_text(&origin.tool, &path[..i])
            ),
            None => {
                // `{ … } = g.graph`: name the initializer as the program wrote it.
                let start = required.init_start as usize;
                let chain = parse_chain(source, start);
                let (Some(last), Some(before)) = (chain.last(), chain.len().checked_sub(1)) else {
                    continue;
                };
                if before == 0 {
                    continue;
                }
                let (Some(subject), Some(object)) = (
                    compact(&source[start..last.end]),
                    compact(&source[start..chain[before].start]),
                ) else {
                    continue;
                };
                format!(
                    "{subject} is {what}: {} is {} {tail}",
                    object.trim_end_matches(['?', '!']),
                    origin_text(&origin.tool, &path[..i])
                )
            }
        };
        let here = at.is_some_and(|at| {
            (required.span.start as usize) <= at && at < required.span.end as usize
        });
        found.push((here, text));
    }
    if found.iter().filter(|(here, _)| *here).count() == 1 {
        return found.into_iter().find(|(here, _)| *here).map(|(_, t)| t);
    }
    (found.len() == 1).then(|| found.remove(0).1)
}
