//! The nesting guard ([`check_nesting`]): a linear scan of the program's text, before oxc's
//! recursive parser sees it, that refuses programs nested deeper than oxc's recursion can go
//! on the worker's stack.

use super::diagnostics::syntax_error;
use super::positions::LineIndex;
use airlock_proto::ExecError;

/// Rejects programs nested too deeply for oxc's recursive parser and visitors.
///
/// A Rust stack overflow would kill the worker instead of reporting an error, so before
/// parsing, a linear scan bounds the depth of the syntax tree:
///
/// - brackets `(`, `[`, `{` and template holes `${` may nest at most [`MAX_NESTING`] deep
///   (counted outside strings, comments and regular-expression literals; a regex is told from
///   a division by the previous token, as JavaScript tokenizers without a parser do);
/// - nesting without brackets (`!!!!x`, `a ? b : c ? …`, `x => y => …`, `a.b.c…`, `f()()…`,
///   `1 + 1 + …`, `else if` chains) is bounded by counting operator tokens per bracket level
///   between statement or element boundaries (`;`, `,`, a new statement after an expression).
///   Each bracket level costs [`BRACKET_WEIGHT`] and each operator 1, except `<`, which costs
///   a bracket level; the total must stay within [`MAX_DEPTH_UNITS`].
///
/// Measured on an 8 MiB stack in a debug build, oxc overflows after ~4,400 nested functions
/// (the costliest bracket level, ~1.9 KiB each), ~17,700 chained arrows (the costliest
/// operator, ~470 bytes each) and fewer than 8,000 chained `<` (`c<st<st<…`: oxc tries
/// TypeScript type arguments at each, ~1.3 KiB a level); the limits keep the worst case under
/// half of that stack.
pub fn check_nesting(code: &str) -> Result<(), ExecError> {
    let Some((offset, what)) = NestingScanner::default().scan(code.as_bytes()) else {
        return Ok(());
    };
    let (line, column) = LineIndex::new(code).position(offset as u32);
    let message = match what {
        TooDeep::Brackets => format!(
            "program nests more than {MAX_NESTING} levels deep; flatten the nesting \
             (build deep data with loops instead of literals)"
        ),
        TooDeep::Chain => format!(
            "program is nested too deeply: one expression chains more than \
             {MAX_DEPTH_UNITS} operators, calls and brackets; split it into several statements"
        ),
    };
    Err(syntax_error(message, line, column))
}

/// Deepest bracket nesting accepted before parsing (see [`check_nesting`]).
pub const MAX_NESTING: usize = 1000;
/// Budget for the syntax-tree depth bound of [`check_nesting`].
pub const MAX_DEPTH_UNITS: u32 = 8000;
/// What one bracket level costs of [`MAX_DEPTH_UNITS`].
pub const BRACKET_WEIGHT: u32 = 4;

/// The byte offset where a limit is exceeded, and which.
type Exceeded = (usize, TooDeep);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TooDeep {
    Brackets,
    Chain,
}

/// What kind of opening bracket a scanner frame stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// The whole program.
    Top,
    /// `(`; `control` when it is the head of `if`/`while`/`for`/`with` (a regex may follow `)`).
    Paren {
        control: bool,
    },
    Bracket,
    /// `{`; `block` when it opens a statement block (a regex may follow `}`).
    Brace {
        block: bool,
    },
    /// `${` inside a template literal; its `}` resumes the template.
    TemplateHole,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    open: Open,
    /// Operator tokens since the last boundary at this level: a bound on how deep the syntax
    /// tree nests here without brackets.
    chain: u32,
}

/// The last significant token, enough to tell a regex literal from a division and to see
/// where a new statement starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// Start of input, an operator or punctuator after which an expression starts.
    ExpressionStart,
    /// An identifier, literal, `)`, `]` or `}` ending an expression: `/` divides.
    ExpressionEnd,
    /// `}` closing a block: `/` starts a regex, a word starts a new statement.
    StatementEnd,
    /// `)` closing an `if`/`while`/`for`/`with` head: `/` starts a regex, and what follows
    /// is the statement's body (nested, not a new statement).
    ControlHeadEnd,
    /// A keyword that may precede a regex (`return`, `typeof`, …).
    Keyword,
    /// `if`, `while`, `for`, `with`: their `(` is a control head.
    ControlKeyword,
}

#[derive(Debug)]
struct NestingScanner {
    frames: Vec<Frame>,
    /// Σ over frames of (bracket weight + chain).
    units: u32,
    prev: Prev,
    /// A `;` or `,` was seen: the next token starts a new statement or element unless it is
    /// `else` (whose `if` nests the chain that follows).
    pending_reset: bool,
}

impl Default for NestingScanner {
    fn default() -> Self {
        NestingScanner {
            frames: vec![Frame {
                open: Open::Top,
                chain: 0,
            }],
            units: 0,
            prev: Prev::ExpressionStart,
            pending_reset: false,
        }
    }
}

/// Keywords that continue an expression or statement after an expression ends.
const CONTINUING_KEYWORDS: &[&[u8]] = &[
    b"in",
    b"instanceof",
    b"of",
    b"as",
    b"satisfies",
    b"else",
    b"extends",
    b"implements",
    b"keyof",
    b"is",
    b"asserts",
    b"infer",
    b"unique",
    b"readonly",
];

impl NestingScanner {
    /// Returns the byte offset where a limit is first exceeded, and which.
    fn scan(mut self, s: &[u8]) -> Option<Exceeded> {
        let mut i = 0;
        while i < s.len() {
            // Whitespace and comments are not tokens.
            if let Some(next) = skip_trivia(s, i) {
                i = next;
                continue;
            }
            match self.token(s, i) {
                Ok(next) => i = next,
                Err(exceeded) => return Some(exceeded),
            }
        }
        None
    }

    /// Reads the token that starts at `i`: where the next one may start, or where a limit is
    /// exceeded.
    fn token(&mut self, s: &[u8], i: usize) -> Result<usize, Exceeded> {
        let c = s[i];
        let is_word =
            c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'\\' || c >= 0x80;
        let word_end = if is_word { word_end(s, i) } else { i };
        let word = &s[i..word_end];
        self.end_chain_before(word, is_word || c == b'\'' || c == b'"');
        match c {
            b'/' => self.slash(s, i),
            b'\'' | b'"' => {
                let next = skip_string(s, i + 1, c);
                self.prev = Prev::ExpressionEnd;
                Ok(next)
            }
            b'`' => self.template(s, i),
            b'(' | b'[' | b'{' => self.open_bracket(s, i),
            b')' | b']' | b'}' => self.close_bracket(s, i),
            b';' | b',' => {
                self.pending_reset = true;
                self.prev = Prev::ExpressionStart;
                Ok(i + 1)
            }
            _ if is_word => self.word(c, word, word_end),
            b'.' if s.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                // A number such as `.5`.
                let next = word_end_from(s, i + 1);
                self.prev = Prev::ExpressionEnd;
                Ok(next)
            }
            b'+' | b'-' if s.get(i + 1) == Some(&c) => {
                // `++`/`--` keep whatever came before (`a++ / 2` divides).
                let next = i + 2;
                if self.operator() {
                    return Err((next, TooDeep::Chain));
                }
                Ok(next)
            }
            _ => self.punctuator(c, i),
        }
    }

    /// Ends the chain at this level before a token that starts a new statement or element:
    /// any token after `;` or `,` but `else` (whose `if` nests the chain that follows), and
    /// an operand (`starts_operand`) right after an expression.
    fn end_chain_before(&mut self, word: &[u8], starts_operand: bool) {
        if self.pending_reset {
            self.pending_reset = false;
            if word != b"else" {
                self.reset_chain();
            }
        }
        // A new statement after an expression (automatic semicolon insertion) ends the
        // chain; keywords such as `in`, `as` or `else` continue it.
        if starts_operand
            && matches!(self.prev, Prev::ExpressionEnd | Prev::StatementEnd)
            && !CONTINUING_KEYWORDS.contains(&word)
        {
            self.reset_chain();
        }
    }

    /// A `/` at `i`: a regular expression where an expression may start, else a division.
    fn slash(&mut self, s: &[u8], i: usize) -> Result<usize, Exceeded> {
        if matches!(
            self.prev,
            Prev::ExpressionStart | Prev::StatementEnd | Prev::ControlHeadEnd | Prev::Keyword
        ) {
            let next = skip_regex(s, i + 1);
            self.prev = Prev::ExpressionEnd;
            return Ok(next);
        }
        let mut next = i + 1;
        if s.get(next) == Some(&b'=') {
            next += 1;
        }
        if self.operator() {
            return Err((next, TooDeep::Chain));
        }
        self.prev = Prev::ExpressionStart;
        Ok(next)
    }

    /// A template literal whose backtick is at `i`.
    fn template(&mut self, s: &[u8], i: usize) -> Result<usize, Exceeded> {
        // A template right after an expression is a tagged call.
        if self.prev == Prev::ExpressionEnd && self.operator() {
            return Err((i, TooDeep::Chain));
        }
        self.scan_template(s, i + 1)
            .map_err(|too_deep| (i, too_deep))
    }

    /// An opening bracket at `i`.
    fn open_bracket(&mut self, s: &[u8], i: usize) -> Result<usize, Exceeded> {
        let c = s[i];
        // A call or index after an expression nests like an operator.
        if c != b'{' && self.prev == Prev::ExpressionEnd && self.operator() {
            return Err((i, TooDeep::Chain));
        }
        let open = match c {
            b'(' => Open::Paren {
                control: self.prev == Prev::ControlKeyword,
            },
            b'[' => Open::Bracket,
            _ => Open::Brace {
                block: matches!(self.prev, Prev::StatementEnd | Prev::ControlHeadEnd)
                    || (self.prev == Prev::ExpressionStart && brace_is_block(s, i)),
            },
        };
        if let Some(too_deep) = self.open(open) {
            return Err((i, too_deep));
        }
        self.prev = Prev::ExpressionStart;
        Ok(i + 1)
    }

    /// A closing bracket at `i`.
    fn close_bracket(&mut self, s: &[u8], i: usize) -> Result<usize, Exceeded> {
        let c = s[i];
        let open = self.close();
        let next = i + 1;
        if c == b'}' && open == Some(Open::TemplateHole) {
            // Back inside the template literal that opened this hole.
            return self
                .scan_template(s, next)
                .map_err(|too_deep| (next, too_deep));
        }
        self.prev = match open {
            Some(Open::Paren { control: true }) => Prev::ControlHeadEnd,
            Some(Open::Brace { block: true }) => Prev::StatementEnd,
            _ => Prev::ExpressionEnd,
        };
        Ok(next)
    }

    /// A name, keyword or number (`word`, which starts with `c`) that ends at `end`.
    fn word(&mut self, c: u8, word: &[u8], end: usize) -> Result<usize, Exceeded> {
        self.prev = if c.is_ascii_digit() {
            Prev::ExpressionEnd
        } else {
            match word {
                b"if" | b"while" | b"for" | b"with" => Prev::ControlKeyword,
                b"return" | b"typeof" | b"new" | b"delete" | b"void" | b"throw" | b"case"
                | b"do" | b"yield" | b"await" => Prev::Keyword,
                w if CONTINUING_KEYWORDS.contains(&w) => Prev::Keyword,
                _ => Prev::ExpressionEnd,
            }
        };
        // Keywords that nest what follows them count like operators.
        if self.prev != Prev::ExpressionEnd && self.operator() {
            return Err((end, TooDeep::Chain));
        }
        Ok(end)
    }

    /// Any other punctuator (`c`, at `i`) is an operator: `!`, `.`, `?`, `:`, `=>`, `+`, …
    fn punctuator(&mut self, c: u8, i: usize) -> Result<usize, Exceeded> {
        // `<` may open TypeScript type arguments, which oxc tries to parse at every `<` of a
        // chain, one recursion deeper each (`c<st<st<…`, ~1.3 KiB of stack per level in a
        // debug build): it costs a bracket level.
        let next = i + 1;
        let cost = if c == b'<' { BRACKET_WEIGHT } else { 1 };
        if self.operator_costing(cost) {
            return Err((next, TooDeep::Chain));
        }
        self.prev = Prev::ExpressionStart;
        Ok(next)
    }

    /// Counts one operator in the innermost frame; `true` when over budget.
    fn operator(&mut self) -> bool {
        self.operator_costing(1)
    }

    /// Counts an operator that costs `units` in the innermost frame; `true` when over budget.
    fn operator_costing(&mut self, units: u32) -> bool {
        if let Some(top) = self.frames.last_mut() {
            top.chain += units;
        }
        self.units += units;
        self.units > MAX_DEPTH_UNITS
    }

    fn reset_chain(&mut self) {
        if let Some(top) = self.frames.last_mut() {
            self.units -= top.chain;
            top.chain = 0;
        }
    }

    fn open(&mut self, open: Open) -> Option<TooDeep> {
        self.frames.push(Frame { open, chain: 0 });
        self.units += BRACKET_WEIGHT;
        // The top-level frame is not a bracket.
        if self.frames.len() - 1 > MAX_NESTING {
            Some(TooDeep::Brackets)
        } else if self.units > MAX_DEPTH_UNITS {
            Some(TooDeep::Chain)
        } else {
            None
        }
    }

    /// Pops the innermost bracket (never the top-level frame; stray closers are oxc's to
    /// report).
    fn close(&mut self) -> Option<Open> {
        if self.frames.len() <= 1 {
            return None;
        }
        let frame = self.frames.pop()?;
        self.units -= BRACKET_WEIGHT + frame.chain;
        self.pending_reset = false;
        Some(frame.open)
    }

    /// Scans template text from `i` up to its closing backtick or a `${` hole. A hole opens
    /// [`Open::TemplateHole`] and returns to the main loop, whose `}` comes back here.
    fn scan_template(&mut self, s: &[u8], mut i: usize) -> Result<usize, TooDeep> {
        self.prev = Prev::ExpressionEnd;
        while i < s.len() {
            match s[i] {
                b'\\' => i += 2,
                b'`' => return Ok(i + 1),
                b'$' if s.get(i + 1) == Some(&b'{') => {
                    if let Some(too_deep) = self.open(Open::TemplateHole) {
                        return Err(too_deep);
                    }
                    self.prev = Prev::ExpressionStart;
                    return Ok(i + 2);
                }
                _ => i += 1,
            }
        }
        Ok(i)
    }
}

/// Past the whitespace or comment at `i`, or `None` when a token starts there.
fn skip_trivia(s: &[u8], mut i: usize) -> Option<usize> {
    match s[i] {
        b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => Some(i + 1),
        b'/' if s.get(i + 1) == Some(&b'/') => {
            while i < s.len() && s[i] != b'\n' {
                i += 1;
            }
            Some(i)
        }
        b'/' if s.get(i + 1) == Some(&b'*') => {
            i += 2;
            while i < s.len() && !(s[i] == b'*' && s.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            Some(i + 2)
        }
        _ => None,
    }
}

/// Whether a `{` after an expression-start token opens a block rather than an object.
/// Only `=>` and statement boundaries (`;`, `{`, `}`, start of input) make a block here.
fn brace_is_block(s: &[u8], i: usize) -> bool {
    let mut j = i;
    while j > 0 && matches!(s[j - 1], b' ' | b'\t' | b'\n' | b'\r') {
        j -= 1;
    }
    j == 0 || matches!(s[j - 1], b';' | b'>' | b'{' | b'}')
}

fn word_end(s: &[u8], i: usize) -> usize {
    word_end_from(s, i)
}

fn word_end_from(s: &[u8], mut i: usize) -> usize {
    while i < s.len()
        && (s[i].is_ascii_alphanumeric()
            || s[i] == b'_'
            || s[i] == b'$'
            || s[i] == b'\\'
            || s[i] >= 0x80)
    {
        i += 1;
    }
    i
}

fn skip_string(s: &[u8], mut i: usize, quote: u8) -> usize {
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}

fn skip_regex(s: &[u8], mut i: usize) -> usize {
    let mut in_class = false;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            b'[' => {
                in_class = true;
                i += 1;
            }
            b']' => {
                in_class = false;
                i += 1;
            }
            b'/' if !in_class => {
                i += 1;
                while i < s.len() && s[i].is_ascii_alphabetic() {
                    i += 1;
                }
                return i;
            }
            _ => i += 1,
        }
    }
    i
}
