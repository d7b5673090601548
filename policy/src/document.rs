//! The parsed policy document: typed, located access to toml's spanned tree.
//!
//! toml's `DeTable` keeps the byte span of every key and value. A [`TableReader`] wraps one table
//! together with its dotted key path (`principal[1]`), rejects keys it does not know, and hands out
//! [`Field`]s whose conversions (`u64_in`, `byte_size_in`, `string`, ...) turn every failure into a
//! [`PolicyError`] that names the file, line, column and key.

use std::fmt::Display;
use std::ops::{Range, RangeInclusive};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::byte_size::{format_byte_size, parse_byte_size};
use crate::duration::{format_duration_ms, parse_duration_ms, seconds_to_ms};
use crate::error::PolicyError;
use crate::source_location::Location;

/// The text of a policy file and where it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source<'a> {
    pub text: &'a str,
    pub origin: &'a str,
}

impl Source<'_> {
    pub fn locate(&self, offset: usize) -> Location {
        Location::of_offset(self.origin, self.text, offset)
    }
}

/// One table of the document, with the keys it accepts.
#[derive(Debug)]
pub(crate) struct TableReader<'a> {
    source: Source<'a>,
    path: String,
    span: Range<usize>,
    table: &'a DeTable<'a>,
}

impl<'a> TableReader<'a> {
    /// The document's top-level table.
    /// The document's top-level table, and the error for its first unknown key if it has
    /// one: the known keys can still be read, so one typo does not hide the file's other
    /// problems.
    pub fn root_reporting(
        source: Source<'a>,
        table: &'a Spanned<DeTable<'a>>,
        known_keys: &'static [&'static str],
    ) -> (Self, Option<PolicyError>) {
        let reader = TableReader {
            source,
            path: String::new(),
            span: table.span(),
            table: table.get_ref(),
        };
        let unknown = reader.reject_unknown_keys(known_keys).err();
        (reader, unknown)
    }

    /// The dotted key path of this table (`""` for the top level).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where the table starts (its `[header]`, or `{` of an inline table).
    pub fn location(&self) -> Location {
        self.source.locate(self.span.start)
    }

    /// How messages name this table: `[daemon]`, `principal[0]`, `the top level`.
    fn label(&self) -> String {
        if self.path.is_empty() {
            "the top level".to_owned()
        } else if self.path.ends_with(']') {
            self.path.clone()
        } else {
            format!("[{}]", self.path)
        }
    }

    fn reject_unknown_keys(&self, known_keys: &'static [&'static str]) -> Result<(), PolicyError> {
        // Report the first unknown key in file order, not in the map's (sorted) order.
        let unknown = self
            .table
            .keys()
            .filter(|key| !known_keys.contains(&key.get_ref().as_ref()))
            .min_by_key(|key| key.span().start);
        let Some(key) = unknown else {
            return Ok(());
        };
        let name = key.get_ref().as_ref();
        Err(PolicyError::UnknownKey {
            at: self.source.locate(key.span().start),
            key: self.child_path(name),
            name: name.to_owned(),
            expected: known_keys,
            suggestion: closest(name, known_keys),
        })
    }

    fn child_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<Field<'a>> {
        self.table.get(key).map(|value| Field {
            source: self.source,
            path: self.child_path(key),
            value,
        })
    }

    /// The value of `key`, which must be present.
    pub fn require(&self, key: &str) -> Result<Field<'a>, PolicyError> {
        self.get(key).ok_or_else(|| PolicyError::MissingKey {
            at: self.location(),
            key: self.child_path(key),
            table: self.label(),
        })
    }
}

/// One value of the document with its key path.
#[derive(Debug, Clone)]
pub(crate) struct Field<'a> {
    source: Source<'a>,
    path: String,
    value: &'a Spanned<DeValue<'a>>,
}

impl<'a> Field<'a> {
    /// The dotted key path, e.g. `principal[1].users[2]`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where the value starts.
    pub fn location(&self) -> Location {
        self.source.locate(self.value.span().start)
    }

    /// The value exactly as written in the file (quotes included).
    pub fn as_written(&self) -> &'a str {
        self.source
            .text
            .get(self.value.span())
            .unwrap_or_default()
            .trim()
    }

    pub fn value(&self) -> &'a DeValue<'a> {
        self.value.get_ref()
    }

    pub fn wrong_type(&self, expected: &'static str) -> PolicyError {
        PolicyError::WrongType {
            at: self.location(),
            key: self.path.clone(),
            expected,
            found: self.value.get_ref().type_str(),
        }
    }

    pub fn invalid(&self, reason: impl Display) -> PolicyError {
        PolicyError::InvalidValue {
            at: self.location(),
            key: self.path.clone(),
            reason: reason.to_string(),
        }
    }

    pub fn out_of_range(&self, allowed: impl Display) -> PolicyError {
        PolicyError::OutOfRange {
            at: self.location(),
            key: self.path.clone(),
            value: self.as_written().to_owned(),
            allowed: allowed.to_string(),
        }
    }

    pub fn string(&self, expected: &'static str) -> Result<&'a str, PolicyError> {
        match self.value.get_ref() {
            DeValue::String(s) => Ok(s.as_ref()),
            _ => Err(self.wrong_type(expected)),
        }
    }

    /// `true` or `false`.
    pub fn boolean(&self) -> Result<bool, PolicyError> {
        match self.value.get_ref() {
            DeValue::Boolean(value) => Ok(*value),
            _ => Err(self.wrong_type("true or false")),
        }
    }

    /// An integer of any sign and radix, widened so that nothing TOML allows can overflow.
    pub fn integer(&self, expected: &'static str) -> Result<i128, PolicyError> {
        match self.value.get_ref() {
            DeValue::Integer(n) => i128::from_str_radix(n.as_str(), n.radix())
                .map_err(|_| self.out_of_range("a 64-bit integer")),
            _ => Err(self.wrong_type(expected)),
        }
    }

    /// An integer within `range`.
    pub fn u64_in(&self, range: RangeInclusive<u64>) -> Result<u64, PolicyError> {
        self.integer_in(range)
    }

    /// An integer within `range`, as a `usize` (counts of things).
    pub fn usize_in(&self, range: RangeInclusive<usize>) -> Result<usize, PolicyError> {
        self.integer_in(range)
    }

    /// An integer within `range`, as a `u32`.
    pub fn u32_in(&self, range: RangeInclusive<u32>) -> Result<u32, PolicyError> {
        self.integer_in(range)
    }

    /// An integer within `range`, converted without loss (out of range otherwise).
    fn integer_in<T>(&self, range: RangeInclusive<T>) -> Result<T, PolicyError>
    where
        T: TryFrom<i128> + PartialOrd + std::fmt::Display,
    {
        let n = self.integer("an integer")?;
        T::try_from(n)
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| self.out_of_range(format!("{}..={}", range.start(), range.end())))
    }

    /// A byte size (a size string such as `"256MiB"`, or an integer number of bytes) within
    /// `range`.
    pub fn byte_size_in(&self, range: RangeInclusive<u64>) -> Result<u64, PolicyError> {
        let bytes = match self.value.get_ref() {
            DeValue::String(s) => {
                Some(
                    parse_byte_size(s).map_err(|source| PolicyError::InvalidSize {
                        at: self.location(),
                        key: self.path.clone(),
                        source,
                    })?,
                )
            }
            DeValue::Integer(_) => u64::try_from(self.integer("a size")?).ok(),
            _ => return Err(self.wrong_type("a size such as \"256MiB\" or a number of bytes")),
        };
        self.within(bytes, &range, format_byte_size)
    }

    /// A duration (a string such as `"15m"`, or an integer number of seconds) within `range`,
    /// in milliseconds.
    pub fn duration_ms_in(&self, range: RangeInclusive<u64>) -> Result<u64, PolicyError> {
        let ms = match self.value.get_ref() {
            DeValue::String(s) => {
                Some(
                    parse_duration_ms(s).map_err(|source| PolicyError::InvalidDuration {
                        at: self.location(),
                        key: self.path.clone(),
                        source,
                    })?,
                )
            }
            DeValue::Integer(_) => u64::try_from(self.integer("a duration")?)
                .ok()
                .and_then(seconds_to_ms),
            _ => {
                return Err(self.wrong_type(
                    "a duration such as \"30s\", \"15m\", \"1h\" or \"2d\", or a number of seconds",
                ));
            }
        };
        self.within(ms, &range, format_duration_ms)
    }

    /// `value` if it is within `range`; out of range otherwise, and when there is no value (a
    /// negative integer, or one past 64 bits), with the bounds written by `show` as operators
    /// write them (`"64KiB..=64GiB"`, `"1s..=30d"`).
    fn within(
        &self,
        value: Option<u64>,
        range: &RangeInclusive<u64>,
        show: fn(u64) -> String,
    ) -> Result<u64, PolicyError> {
        value.filter(|value| range.contains(value)).ok_or_else(|| {
            self.out_of_range(format!("{}..={}", show(*range.start()), show(*range.end())))
        })
    }

    /// The elements of an array, each with its `key[index]` path.
    pub fn array(&self, expected: &'static str) -> Result<Vec<Field<'a>>, PolicyError> {
        match self.value.get_ref() {
            DeValue::Array(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(index, value)| Field {
                    source: self.source,
                    path: format!("{}[{index}]", self.path),
                    value,
                })
                .collect()),
            _ => Err(self.wrong_type(expected)),
        }
    }

    /// This value as a table with free-form keys (e.g. environment variables), in file order.
    pub fn entries(&self, expected: &'static str) -> Result<Vec<(String, Field<'a>)>, PolicyError> {
        match self.value.get_ref() {
            DeValue::Table(table) => {
                let mut entries: Vec<_> = table.iter().collect();
                entries.sort_by_key(|(key, _)| key.span().start);
                Ok(entries
                    .into_iter()
                    .map(|(key, value)| {
                        let name = key.get_ref().as_ref().to_owned();
                        let field = Field {
                            source: self.source,
                            path: format!("{}.{name}", self.path),
                            value,
                        };
                        (name, field)
                    })
                    .collect())
            }
            _ => Err(self.wrong_type(expected)),
        }
    }

    /// This value as a table that accepts `known_keys`.
    pub fn table(
        &self,
        expected: &'static str,
        known_keys: &'static [&'static str],
    ) -> Result<TableReader<'a>, PolicyError> {
        match self.value.get_ref() {
            DeValue::Table(table) => {
                let reader = TableReader {
                    source: self.source,
                    path: self.path.clone(),
                    span: self.value.span(),
                    table,
                };
                reader.reject_unknown_keys(known_keys)?;
                Ok(reader)
            }
            _ => Err(self.wrong_type(expected)),
        }
    }
}

/// The known key closest to a misspelt one, if any is close enough to be a likely typo.
fn closest(name: &str, known_keys: &'static [&'static str]) -> Option<&'static str> {
    known_keys
        .iter()
        .map(|known| (edit_distance(name, known), *known))
        .filter(|(distance, known)| *distance <= (known.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("pol_size", "pool_size"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("memroy", "memory"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        const KEYS: &[&str] = &["socket", "socket_mode", "pool_size"];
        assert_eq!(closest("pol_size", KEYS), Some("pool_size"));
        assert_eq!(closest("sockt", KEYS), Some("socket"));
        assert_eq!(closest("timeout", KEYS), None);
    }
}

/// What the settings tables' tests share: parsing a policy text under a fixed file name, and
/// checking where and why one is refused.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::{Policy, PolicyError};

    /// The policy file every test text pretends to come from.
    pub const FILE: &str = "/etc/airlock/policy.toml";

    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(text, FILE)
    }

    /// Asserts that `text` is refused at `at` (`"2:14"`, or `"2"` for anywhere on line 2) with
    /// a message that names `key` and says `detail`.
    #[track_caller]
    pub fn assert_refused(text: &str, at: &str, key: &str, detail: &str) {
        let message = parse(text).expect_err(text).to_string();
        assert!(
            message.starts_with(&format!("{FILE}:{at}:")),
            "{message:?} should be at {at} for {text:?}"
        );
        assert!(message.contains(key), "{message:?} should name {key}");
        assert!(message.contains(detail), "{message:?} should say {detail}");
    }
}
