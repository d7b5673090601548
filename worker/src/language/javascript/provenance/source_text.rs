//! The source text around the error: the member chain at a position (`g.nodes.map(…)`), read
//! from the text the agent sent, not from the syntax tree.

/// Byte offset of a 1-based line and UTF-16 column.
pub(super) fn offset_of(source: &str, line: u32, column: u32) -> Option<usize> {
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
pub(super) enum Step {
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
pub(super) struct Segment {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) step: Step,
}

/// Where the member chain around `at` begins: back over `.name`, `?.name`, `[…]` and `(…)`.
pub(super) fn chain_start(source: &str, at: usize) -> Option<usize> {
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
pub(super) fn parse_chain(source: &str, start: usize) -> Vec<Segment> {
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

/// Longest expression quoted in an explanation.
const MAX_EXPRESSION: usize = 80;

/// The expression as one line without layout whitespace, or `None` when too long to show.
pub(super) fn compact(text: &str) -> Option<String> {
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

pub(super) fn is_name(key: &str) -> bool {
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
