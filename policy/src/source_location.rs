//! Where in a policy file something is: turns byte offsets (as toml reports them) into
//! 1-based line and column numbers that an operator can jump to.

use std::fmt;

/// A position in a policy file, displayed as `origin:line:column`.
///
/// `line` and `column` count from 1; `column` counts characters, not bytes, so it matches what
/// editors show for non-ASCII lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file path, or `<embedded default>` for the policy built into the daemon.
    pub origin: String,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column number, in characters.
    pub column: usize,
}

impl Location {
    /// Locates byte `offset` of `text` (clamped to the text's length).
    pub fn of_offset(origin: &str, text: &str, offset: usize) -> Location {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        Location {
            origin: origin.to_owned(),
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.origin, self.line, self.column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_byte_is_line_one_column_one() {
        let at = Location::of_offset("p.toml", "a = 1\n", 0);
        assert_eq!(at.to_string(), "p.toml:1:1");
    }

    #[test]
    fn counts_lines_and_characters() {
        let text = "a = 1\nb = \"é\" x\n";
        let offset = text.find('x').unwrap();
        let at = Location::of_offset("p.toml", text, offset);
        assert_eq!((at.line, at.column), (2, 9));
    }

    #[test]
    fn offsets_past_the_end_are_clamped() {
        let at = Location::of_offset("p.toml", "ab\ncd", 99);
        assert_eq!((at.line, at.column), (2, 3));
    }

    #[test]
    fn offsets_inside_a_character_round_down() {
        let at = Location::of_offset("p.toml", "é", 1);
        assert_eq!((at.line, at.column), (1, 1));
    }
}
