//! Positions in the agent's code: byte offsets as 1-based lines and UTF-16 columns
//! ([`LineIndex`]), and the engine's positions in the evaluated script mapped back
//! ([`PositionMap`]: the code generator's source map, or a spliced program's own text), stack
//! traces included.

use super::WRAPPER_LINES_BEFORE;

/// Byte offset → 1-based line and UTF-16 column in the agent's code.
#[derive(Debug)]
pub struct LineIndex<'s> {
    text: &'s str,
    /// Byte offset at which each line starts.
    pub(super) starts: Vec<u32>,
}

impl<'s> LineIndex<'s> {
    pub fn new(text: &'s str) -> Self {
        let mut starts = vec![0u32];
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => starts.push(i as u32 + 1),
                b'\r' if bytes.get(i + 1) != Some(&b'\n') => starts.push(i as u32 + 1),
                // U+2028 and U+2029 (E2 80 A8/A9) end lines in JavaScript too.
                0xE2 if bytes.get(i + 1) == Some(&0x80)
                    && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) =>
                {
                    starts.push(i as u32 + 3);
                    i += 2;
                }
                _ => {}
            }
            i += 1;
        }
        LineIndex { text, starts }
    }

    /// 1-based (line, column) of a byte offset; offsets past the end clamp to the end.
    pub fn position(&self, offset: u32) -> (u32, u32) {
        position_in(self.text, &self.starts, offset)
    }
}

/// [`LineIndex::position`] of `text`, whose lines start at `starts`.
fn position_in(text: &str, starts: &[u32], offset: u32) -> (u32, u32) {
    let offset = offset.min(text.len() as u32);
    let line = starts.partition_point(|&s| s <= offset).max(1) - 1;
    let start = starts.get(line).map_or(0, |&s| s as usize);
    let mut end = offset as usize;
    while end > start && !text.is_char_boundary(end) {
        end -= 1;
    }
    let column = text.get(start..end).map_or(0, |t| t.encode_utf16().count());
    (line as u32 + 1, column as u32 + 1)
}

/// Maps (line, column) positions in the evaluated script back to the agent's code.
///
/// Built from the code generator's source map; stores, per generated line, the mappings
/// sorted by column. For a spliced program ([`splice`](super::completion::splice)), from its
/// text instead.
#[derive(Debug, Default)]
pub struct PositionMap {
    /// Index into `mappings` of the first mapping of each generated line; one more entry than
    /// there are lines.
    line_starts: Vec<u32>,
    /// (generated column, original line, original column), all 0-based.
    mappings: Vec<[u32; 3]>,
    /// A spliced program's text and what was spliced into it (the mappings are then empty).
    spliced: Option<SplicedPositions>,
}

/// The positions of a spliced program: its script is its own text with `return (` … `)`
/// spliced in, one line down.
#[derive(Debug)]
struct SplicedPositions {
    /// The agent's code.
    code: String,
    /// Byte offset at which each of its lines starts ([`LineIndex`]).
    starts: Vec<u32>,
    /// What was spliced in: (byte offset in `code`, length), in the script's order.
    inserts: Vec<(u32, u32)>,
}

impl SplicedPositions {
    /// [`PositionMap::original`]: the engine's column counts bytes of the script's line.
    fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let index = line.checked_sub(WRAPPER_LINES_BEFORE + 1)? as usize;
        let line_start = *self.starts.get(index)?;
        let code_len = u32::try_from(self.code.len()).unwrap_or(u32::MAX);
        // The line's last byte (its `\n`), or the end of the code.
        let line_end = self
            .starts
            .get(index + 1)
            .map_or(code_len, |&next| next.saturating_sub(1));
        // Spliced text never holds a line end, so the script's line is the code's, shifted
        // by what was spliced in before it.
        let before: u32 = self
            .inserts
            .iter()
            .take_while(|&&(at, _)| at < line_start)
            .map(|&(_, len)| len)
            .sum();
        let in_script = line_start
            .saturating_add(before)
            .saturating_add(column.saturating_sub(1));
        // Back to the code: take out what was spliced in before the position; a position in
        // spliced text is where it was spliced in.
        let mut spliced = 0u32;
        let mut offset = None;
        for &(at, len) in &self.inserts {
            let start = at.saturating_add(spliced);
            if in_script < start {
                break;
            }
            if in_script < start.saturating_add(len) {
                offset = Some(at);
                break;
            }
            spliced = spliced.saturating_add(len);
        }
        let offset = offset
            .unwrap_or(in_script.saturating_sub(spliced))
            .min(line_end)
            .max(line_start);
        Some(position_in(&self.code, &self.starts, offset))
    }
}

impl PositionMap {
    /// The map of a spliced program ([`splice`](super::completion::splice)).
    pub(super) fn spliced(code: &str, starts: Vec<u32>, inserts: Vec<(u32, u32)>) -> Self {
        PositionMap {
            spliced: Some(SplicedPositions {
                code: code.to_owned(),
                starts,
                inserts,
            }),
            ..PositionMap::default()
        }
    }

    /// Whether this is a spliced program's map.
    #[cfg(any(test, fuzzing))]
    pub(super) fn is_spliced(&self) -> bool {
        self.spliced.is_some()
    }

    pub(super) fn from_tokens(tokens: impl Iterator<Item = [u32; 4]>) -> Self {
        let mut line_starts = Vec::new();
        let mut mappings = Vec::new();
        for [dst_line, dst_col, src_line, src_col] in tokens {
            while line_starts.len() <= dst_line as usize {
                line_starts.push(mappings.len() as u32);
            }
            mappings.push([dst_col, src_line, src_col]);
        }
        line_starts.push(mappings.len() as u32);
        // Tokens arrive in generated order; keep each line sorted by column regardless.
        for w in line_starts.windows(2) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            if let Some(line) = mappings.get_mut(a..b) {
                line.sort_unstable_by_key(|m| m[0]);
            }
        }
        PositionMap {
            line_starts,
            mappings,
            spliced: None,
        }
    }

    fn line(&self, line: usize) -> &[[u32; 3]] {
        match (self.line_starts.get(line), self.line_starts.get(line + 1)) {
            (Some(&a), Some(&b)) => self.mappings.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Maps a 1-based (line, column) in the evaluated script to a 1-based (line, column) in
    /// the agent's code. `None` for positions in the wrapper around the program.
    pub fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        if let Some(spliced) = &self.spliced {
            return spliced.original(line, column);
        }
        let generated_line = line.checked_sub(WRAPPER_LINES_BEFORE + 1)? as usize;
        let line_count = self.line_starts.len().saturating_sub(1);
        if generated_line >= line_count {
            return None;
        }
        let col = column.saturating_sub(1);
        let here = self.line(generated_line);
        let found = match here.partition_point(|m| m[0] <= col) {
            0 => here.first().copied(),
            n => here.get(n - 1).copied(),
        };
        let found = found.or_else(|| {
            // No mapping on this line: the closest mapping on an earlier line.
            (0..generated_line)
                .rev()
                .find_map(|l| self.line(l).last().copied())
        })?;
        Some((found[1] + 1, found[2] + 1))
    }

    /// Rewrites every `filename:line:column` of a QuickJS stack trace to positions in the
    /// agent's code, and drops frames that point into the wrapper.
    ///
    /// QuickJS-ng frames look like `    at name (program.ts:3:5)`, `    at name (native)` and,
    /// for compile errors, `    at program.ts:3:5`.
    pub fn map_stack(&self, stack: &str, filename: &str) -> String {
        let mut out = String::with_capacity(stack.len());
        for line in stack.lines() {
            match self.map_frame(line, filename) {
                FrameMapping::Keep(mapped) => {
                    out.push_str(&mapped);
                    out.push('\n');
                }
                FrameMapping::Drop => {}
            }
        }
        out
    }

    /// The first position in `stack` that maps into the agent's code.
    pub fn first_position(&self, stack: &str, filename: &str) -> Option<(u32, u32)> {
        stack.lines().find_map(|line| {
            let (_, l, c, _) = parse_frame_position(line, filename)?;
            self.original(l, c)
        })
    }

    /// The position of the first frame in the program of a stack already mapped to the
    /// agent's code (a `stack` property the sandbox's `Error` has rewritten).
    pub fn first_mapped_position(stack: &str, filename: &str) -> Option<(u32, u32)> {
        stack.lines().find_map(|line| {
            let (_, l, c, _) = parse_frame_position(line, filename)?;
            Some((l, c))
        })
    }

    fn map_frame(&self, line: &str, filename: &str) -> FrameMapping {
        match parse_frame_position(line, filename) {
            None => FrameMapping::Keep(line.to_owned()),
            Some((head, l, c, tail)) => match self.original(l, c) {
                Some((ol, oc)) => FrameMapping::Keep(format!("{head}{ol}:{oc}{tail}")),
                None => FrameMapping::Drop,
            },
        }
    }
}

enum FrameMapping {
    Keep(String),
    Drop,
}

/// Splits `    at f (program.ts:3:5)` into (`    at f (program.ts:`, 3, 5, `)`).
fn parse_frame_position<'l>(line: &'l str, filename: &str) -> Option<(&'l str, u32, u32, &'l str)> {
    let at = line.find(filename)?;
    let after_name = at + filename.len();
    let rest = line.get(after_name..)?.strip_prefix(':')?;
    let line_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let l: u32 = rest.get(..line_len)?.parse().ok()?;
    let rest2 = rest.get(line_len..)?.strip_prefix(':')?;
    let col_len = rest2.bytes().take_while(u8::is_ascii_digit).count();
    let c: u32 = rest2.get(..col_len)?.parse().ok()?;
    let head = line.get(..after_name + 1)?;
    let tail = rest2.get(col_len..)?;
    Some((head, l, c, tail))
}
