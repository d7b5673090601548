//! Names and literals read as they were spelled, for [`super::scan::Scan`]: where an escape or a
//! numeric separator is one oxc's lexer would have refused (its report can be lost in a
//! TypeScript program, see `Scan::check_spelling`).

use super::scan::Unsupported;
use oxc::syntax::identifier::{is_identifier_part, is_identifier_start};

/// Where in `name` (as written) an escape does not spell a character a name can have, and
/// what is wrong with it: a backslash that begins no `\uXXXX` or `\u{X…}` (at most 10FFFF),
/// or an escape spelling a character no name can have there (`cons\u0020a`).
pub(super) fn misspelled_name(name: &str) -> Option<(usize, Unsupported)> {
    let bytes = name.as_bytes();
    // A private name's `#` is not part of what it spells.
    let first = usize::from(bytes.first() == Some(&b'#'));
    let mut i = first;
    while let Some(offset) = bytes.get(i..)?.iter().position(|&b| b == b'\\') {
        let at = i + offset;
        // Pointed at where oxc's own report points: the character after the backslash.
        let Some((value, length)) = unicode_escape(&bytes[at + 1..]) else {
            return Some((at + 1, Unsupported::InvalidEscape));
        };
        // A surrogate is no character: the lexer calls it an invalid escape, as here.
        let Some(spelled) = char::from_u32(value) else {
            return Some((at + 1, Unsupported::InvalidEscape));
        };
        let fits = if at == first {
            is_identifier_start(spelled)
        } else {
            is_identifier_part(spelled)
        };
        if !fits {
            return Some((at, Unsupported::InvalidNameCharacter));
        }
        i = at + 1 + length;
    }
    None
}

/// Where in a string literal (as written, quotes included) a `\x` or `\u` escape is
/// malformed. Other escapes are one character each (a line continuation, `\n`, an identity
/// escape); octal ones are refused in strict code by the semantic checks, which read the
/// tree, not the lexer's reports, so none of them is lost.
pub(super) fn misspelled_string(literal: &str) -> Option<(usize, Unsupported)> {
    let bytes = literal.as_bytes();
    let mut i = 0;
    while let Some(offset) = bytes.get(i..)?.iter().position(|&b| b == b'\\') {
        let at = i + offset;
        let rest = &bytes[at + 1..];
        let length = match rest {
            [b'x', tail @ ..] => {
                (tail.len() >= 2 && tail[..2].iter().all(u8::is_ascii_hexdigit)).then_some(3)
            }
            [b'u', ..] => unicode_escape(rest).map(|(_, length)| length),
            _ => Some(1),
        };
        let Some(length) = length else {
            return Some((at, Unsupported::InvalidStringEscape));
        };
        i = at + 1 + length;
    }
    None
}

/// Where in a number or bigint literal (as written) a `_` stands other than between two
/// digits (`1_`, `1_.5`, `1_n`, `0x_1`), or follows a leading zero (`0_1`).
pub(super) fn misspelled_number(literal: &str) -> Option<(usize, Unsupported)> {
    let bytes = literal.as_bytes();
    let first = bytes.iter().position(|&b| b == b'_')?;
    let hex = matches!(bytes, [b'0', b'x' | b'X', ..]);
    let digit = |b: &u8| {
        if hex {
            b.is_ascii_hexdigit()
        } else {
            b.is_ascii_digit()
        }
    };
    // `0_1` and `01_2` would be legacy octal-like literals, which take no separator.
    let leading_zero = matches!(bytes, [b'0', b'0'..=b'9' | b'_', ..]);
    let misplaced = (first..bytes.len()).find(|&at| {
        bytes[at] == b'_'
            && (leading_zero
                || !(at > 0 && digit(&bytes[at - 1]) && bytes.get(at + 1).is_some_and(digit)))
    })?;
    Some((misplaced, Unsupported::InvalidNumericSeparator))
}

/// The code point a `\u` escape spells (`rest` begins after the backslash), and how many bytes
/// of `rest` it takes: `uXXXX`, or `u{X…}` with any number of digits up to 10FFFF.
fn unicode_escape(rest: &[u8]) -> Option<(u32, usize)> {
    let (digits, length) = match rest {
        [b'u', b'{', tail @ ..] => {
            let count = tail.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            if count == 0 || tail.get(count) != Some(&b'}') {
                return None;
            }
            (&tail[..count], count + 3)
        }
        [b'u', tail @ ..] if tail.len() >= 4 && tail[..4].iter().all(u8::is_ascii_hexdigit) => {
            (&tail[..4], 5)
        }
        _ => return None,
    };
    // Bounded at each digit, so `u{000…0041}` is fine and no value overflows.
    let value = digits.iter().try_fold(0u32, |value, &b| {
        let value = value * 16 + char::from(b).to_digit(16)?;
        (value <= 0x10FFFF).then_some(value)
    })?;
    Some((value, length))
}
