//! Shape rules: credentials recognised by what they look like (`ghp_…`, `AKIA…`, a PEM block),
//! read from `rules.toml` (embedded with `include_str!`, one table per rule, each with a reason
//! and a true- and false-positive example) and compiled once.
//!
//! Matching is linear in the text: one pass over the rules' literal keywords decides which
//! rules can match at all, and only those run their `regex` (a finite-automaton engine without
//! backtracking). A candidate is then held against the rule's minimum Shannon entropy and the
//! allowlist of placeholders before it counts.
//!
//! The keyword pass is a leftmost-first Aho-Corasick search over case-sensitive literals, which
//! the crate runs with its SIMD "Teddy" prefilter (several GB/s); it only says where some
//! keyword may start, and each such place is checked against every keyword that begins with
//! that byte. A rule whose regex is case-insensitive (`(?i` anywhere in it) has its keywords
//! matched ASCII case-insensitively: the search holds every case variant of their first three
//! bytes, and the check compares the rest ignoring case. (An automaton built
//! `ascii_case_insensitive` cannot use the prefilter and ran at a fifth of the speed.)

use super::ScannerError;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use serde::Deserialize;
use std::sync::{Arc, OnceLock};

/// The rule file shipped in the binary.
pub const EMBEDDED_RULES: &str = include_str!("rules.toml");

/// The most rules a file may hold (the prefilter's bit set).
pub const MAX_RULES: usize = 128;

/// Where a rule file came from, for error messages.
const EMBEDDED_NAME: &str = "supervisor/src/secrets/scanner/rules.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    allowlist: Vec<AllowEntryToml>,
    #[serde(default)]
    rule: Vec<RuleToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleToml {
    id: String,
    reason: String,
    regex: String,
    keywords: Vec<String>,
    min_entropy: Option<f64>,
    #[serde(default = "default_true")]
    allowlist: bool,
    true_positive: String,
    false_positive: String,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowEntryToml {
    id: String,
    reason: String,
    contains: Option<String>,
    #[serde(default)]
    case_sensitive: bool,
    pattern: Option<String>,
    repeated_run: Option<usize>,
    sequential_run: Option<usize>,
}

/// One compiled shape rule.
#[derive(Debug)]
pub struct ShapeRule {
    /// The name in `[REDACTED:<id>]` and in findings.
    pub id: String,
    /// Why the rule exists, one line.
    pub reason: String,
    /// A made-up credential the rule must match.
    pub true_positive: String,
    /// A near miss no rule may match.
    pub false_positive: String,
    regex: Regex,
    /// Index of the `secret` group, if the regex has one: only it is replaced.
    secret_group: Option<usize>,
    min_entropy: Option<f64>,
    allowlist: bool,
}

/// A placeholder test: text it holds for is not a credential.
#[derive(Debug)]
struct AllowEntry {
    id: String,
    test: AllowTest,
}

#[derive(Debug)]
enum AllowTest {
    /// Lower-cased literal, compared with the lower-cased candidate.
    ContainsIgnoreCase(String),
    Contains(String),
    Pattern(Regex),
    RepeatedRun(usize),
    SequentialRun(usize),
}

impl AllowTest {
    /// Whether the test holds for `candidate`, whose ASCII lower-case form is `lower`.
    fn holds(&self, candidate: &str, lower: &str) -> bool {
        match self {
            AllowTest::ContainsIgnoreCase(needle) => lower.contains(needle.as_str()),
            AllowTest::Contains(needle) => candidate.contains(needle.as_str()),
            AllowTest::Pattern(regex) => regex.is_match(candidate),
            AllowTest::RepeatedRun(n) => longest_run(candidate, |a, b| a == b) >= *n,
            AllowTest::SequentialRun(n) => {
                longest_run(candidate, |a, b| b as u32 == a as u32 + 1) >= *n
            }
        }
    }
}

/// The longest run of characters in which each consecutive pair satisfies `linked`.
fn longest_run(text: &str, linked: impl Fn(char, char) -> bool) -> usize {
    let (mut best, mut run, mut previous) = (0, 0, None);
    for c in text.chars() {
        run = match previous {
            Some(p) if linked(p, c) => run + 1,
            _ => 1,
        };
        best = best.max(run);
        previous = Some(c);
    }
    best
}

/// Shannon entropy of the text's bytes, in bits per byte (per character for the ASCII text
/// credentials are made of).
///
/// Computed as `log2(t) − Σ n·log2(n) / t` over the byte counts `n` of a text of `t` bytes,
/// with `n·log2(n)` from a table for the counts candidates have: every shape match is
/// measured, and a near miss repeated a million times is a million matches.
pub fn shannon_entropy(text: &str) -> f64 {
    const TABLE: usize = 256;
    static N_LOG2_N: OnceLock<[f64; TABLE]> = OnceLock::new();
    let table = N_LOG2_N.get_or_init(|| {
        let mut t = [0.0; TABLE];
        for (n, slot) in t.iter_mut().enumerate().skip(2) {
            *slot = n as f64 * (n as f64).log2();
        }
        t
    });
    if text.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in text.as_bytes() {
        counts[usize::from(b)] += 1;
    }
    let total = text.len() as f64;
    let sum: f64 = counts
        .iter()
        .filter(|&&n| n > 1)
        .map(|&n| match table.get(n as usize) {
            Some(v) => *v,
            None => f64::from(n) * f64::from(n).log2(),
        })
        .sum();
    (total.log2() - sum / total).max(0.0)
}

/// A match of a shape rule, in byte offsets of the scanned text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShapeMatch {
    pub rule: usize,
    pub start: usize,
    pub end: usize,
}

/// One keyword of one or more rules.
#[derive(Debug)]
struct Keyword {
    /// As written, or ASCII lower-case if `ignore_case`.
    text: Vec<u8>,
    ignore_case: bool,
    /// The rules it lets run (bit `i` for rule `i`).
    rules: u128,
}

/// How many leading bytes of a case-insensitive keyword the search holds in every case.
const FOLDED_PREFIX: usize = 3;

/// The compiled rule set: rules, allowlist and the keyword prefilter.
#[derive(Debug)]
pub struct ShapeRules {
    rules: Vec<ShapeRule>,
    allowlist: Vec<AllowEntry>,
    keywords: Vec<Keyword>,
    /// Where a keyword may start: the case-sensitive keywords and the case variants of the
    /// case-insensitive keywords' first bytes.
    starts: AhoCorasick,
    /// Per byte value: the keywords that can start with it.
    by_first_byte: Vec<Vec<u16>>,
}

impl ShapeRules {
    /// The rules shipped in the binary, compiled on first use and shared afterwards.
    pub fn embedded() -> Result<Arc<ShapeRules>, ScannerError> {
        static EMBEDDED: OnceLock<Arc<ShapeRules>> = OnceLock::new();
        if let Some(rules) = EMBEDDED.get() {
            return Ok(rules.clone());
        }
        let rules = Arc::new(ShapeRules::parse(EMBEDDED_RULES, EMBEDDED_NAME)?);
        Ok(EMBEDDED.get_or_init(|| rules).clone())
    }

    /// Rules from a rule file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<ShapeRules, ScannerError> {
        let parsed: RuleFile = toml::from_str(text).map_err(|e| ScannerError::RuleFile {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        let invalid = |id: &str, message: String| ScannerError::InvalidRule {
            file: file.to_owned(),
            id: id.to_owned(),
            message,
        };
        let mut allowlist = Vec::new();
        for entry in parsed.allowlist {
            let tests = [
                entry.contains.is_some(),
                entry.pattern.is_some(),
                entry.repeated_run.is_some(),
                entry.sequential_run.is_some(),
            ];
            if tests.iter().filter(|t| **t).count() != 1 || entry.reason.trim().is_empty() {
                return Err(invalid(
                    &entry.id,
                    "an allowlist entry needs a reason and exactly one of contains, pattern, repeated_run, sequential_run".into(),
                ));
            }
            let test = if let Some(needle) = entry.contains {
                if entry.case_sensitive {
                    AllowTest::Contains(needle)
                } else {
                    AllowTest::ContainsIgnoreCase(needle.to_ascii_lowercase())
                }
            } else if let Some(pattern) = entry.pattern {
                AllowTest::Pattern(
                    Regex::new(&pattern).map_err(|e| invalid(&entry.id, e.to_string()))?,
                )
            } else if let Some(n) = entry.repeated_run {
                AllowTest::RepeatedRun(n.max(2))
            } else {
                AllowTest::SequentialRun(entry.sequential_run.unwrap_or(2).max(2))
            };
            allowlist.push(AllowEntry { id: entry.id, test });
        }

        let mut rules = Vec::new();
        let mut keywords: Vec<Keyword> = Vec::new();
        for rule in parsed.rule {
            if rules.iter().any(|r: &ShapeRule| r.id == rule.id) {
                return Err(invalid(&rule.id, "the id is used twice".into()));
            }
            if !is_rule_id(&rule.id) {
                return Err(invalid(
                    &rule.id,
                    "an id is lower-case ASCII letters, digits and `-`".into(),
                ));
            }
            if rule.reason.trim().is_empty() {
                return Err(invalid(&rule.id, "the reason is empty".into()));
            }
            if rule.keywords.is_empty() || rule.keywords.iter().any(String::is_empty) {
                return Err(invalid(
                    &rule.id,
                    "a rule needs at least one non-empty keyword (the prefilter runs only rules whose keyword occurs)".into(),
                ));
            }
            let regex = Regex::new(&rule.regex).map_err(|e| invalid(&rule.id, e.to_string()))?;
            let secret_group = regex
                .capture_names()
                .position(|name| name == Some("secret"));
            let index = rules.len();
            if index == MAX_RULES {
                return Err(invalid(
                    &rule.id,
                    format!("a rule file holds at most {MAX_RULES} rules"),
                ));
            }
            let ignore_case = rule.regex.contains("(?i");
            for keyword in &rule.keywords {
                let text = if ignore_case {
                    keyword.to_ascii_lowercase().into_bytes()
                } else {
                    keyword.clone().into_bytes()
                };
                match keywords
                    .iter_mut()
                    .find(|k| k.text == text && k.ignore_case == ignore_case)
                {
                    Some(k) => k.rules |= 1 << index,
                    None => keywords.push(Keyword {
                        text,
                        ignore_case,
                        rules: 1 << index,
                    }),
                }
            }
            rules.push(ShapeRule {
                id: rule.id,
                reason: rule.reason,
                true_positive: rule.true_positive,
                false_positive: rule.false_positive,
                regex,
                secret_group,
                min_entropy: rule.min_entropy,
                allowlist: rule.allowlist,
            });
        }
        let mut starts: Vec<Vec<u8>> = Vec::new();
        let mut by_first_byte: Vec<Vec<u16>> = vec![Vec::new(); 256];
        for (index, keyword) in keywords.iter().enumerate() {
            let variants = if keyword.ignore_case {
                case_variants(&keyword.text[..keyword.text.len().min(FOLDED_PREFIX)])
            } else {
                vec![keyword.text.clone()]
            };
            for variant in variants {
                let first = &mut by_first_byte[usize::from(variant[0])];
                // The embedded rule file has a few dozen keywords; `u16` keeps the table small.
                let index = u16::try_from(index).unwrap_or(u16::MAX);
                if !first.contains(&index) {
                    first.push(index);
                }
                if !starts.contains(&variant) {
                    starts.push(variant);
                }
            }
        }
        let starts = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&starts)
            .map_err(|e| ScannerError::Automaton(e.to_string()))?;
        Ok(ShapeRules {
            rules,
            allowlist,
            keywords,
            starts,
            by_first_byte,
        })
    }

    /// The rules, in file order (which is also their precedence when two overlap).
    pub fn rules(&self) -> &[ShapeRule] {
        &self.rules
    }

    /// Calls `hit(position, rules)` for every place in `text` where a keyword starts, with the
    /// rules that keyword lets run. The search reports where some keyword may start, without
    /// overlaps; every byte of each reported match is then checked against the keywords that
    /// begin with it, so a keyword that starts inside another, or at the same place, is seen
    /// too. `hit` returns whether to go on.
    pub(crate) fn keyword_hits(&self, text: &[u8], mut hit: impl FnMut(usize, u128) -> bool) {
        for m in self.starts.find_iter(text) {
            for start in m.range() {
                let here = &text[start..];
                for &index in &self.by_first_byte[usize::from(here[0])] {
                    let keyword = &self.keywords[usize::from(index)];
                    let Some(candidate) = here.get(..keyword.text.len()) else {
                        continue;
                    };
                    let found = if keyword.ignore_case {
                        candidate.eq_ignore_ascii_case(&keyword.text)
                    } else {
                        *candidate == *keyword.text
                    };
                    if found && !hit(start, keyword.rules) {
                        return;
                    }
                }
            }
        }
    }

    /// Which rules have a keyword in `text`, as a bit set (stops looking once every rule is
    /// in). A bit set rather than a vector: JSON is scanned one string at a time.
    fn candidates(&self, text: &str) -> u128 {
        let all = if self.rules.len() == MAX_RULES {
            u128::MAX
        } else {
            (1u128 << self.rules.len()) - 1
        };
        let mut wanted = 0u128;
        self.keyword_hits(text.as_bytes(), |_, rules| {
            wanted |= rules;
            wanted != all
        });
        wanted
    }

    /// Every accepted match in `text` that starts at or after `from`. Text before `from` is
    /// context only (a word boundary looks at the character before `from`).
    pub(crate) fn find(&self, text: &str, from: usize, out: &mut Vec<ShapeMatch>) {
        let Some(tail) = text.get(from..) else {
            return;
        };
        let wanted = self.candidates(tail);
        self.find_candidates(text, from, wanted, out);
    }

    /// [`ShapeRules::find`] for the rules in `wanted` only (the caller found their keywords).
    pub(crate) fn find_candidates(
        &self,
        text: &str,
        from: usize,
        wanted: u128,
        out: &mut Vec<ShapeMatch>,
    ) {
        if wanted == 0 {
            return;
        }
        for (index, rule) in self.rules.iter().enumerate() {
            if wanted & (1 << index) == 0 {
                continue;
            }
            let mut at = from;
            while at <= text.len() {
                // Captures cost more than a plain search (and allocate): only rules with a
                // `secret` group need them, and only once a plain search found a match (most
                // keyword hits, such as every URL for `url-password`, lead to none).
                let Some(found) = rule.regex.find_at(text, at) else {
                    break;
                };
                let (whole, span) = match rule.secret_group {
                    None => (found.range(), Some(found.range())),
                    Some(group) => match rule.regex.captures_at(text, found.start()) {
                        Some(caps) => match caps.get(0) {
                            Some(m) => (m.range(), caps.get(group).map(|g| g.range())),
                            None => break,
                        },
                        None => break,
                    },
                };
                // An empty match cannot hold a secret; step over one character so the loop
                // always advances.
                if whole.is_empty() {
                    at = next_char_boundary(text, whole.end);
                    continue;
                }
                at = whole.end;
                if let Some(span) = span
                    && self.accepts(rule, &text[span.clone()])
                {
                    out.push(ShapeMatch {
                        rule: index,
                        start: span.start,
                        end: span.end,
                    });
                }
            }
        }
    }

    /// Whether a rule's candidate counts: entropy high enough and no placeholder entry holds.
    fn accepts(&self, rule: &ShapeRule, candidate: &str) -> bool {
        if candidate.is_empty() {
            return false;
        }
        if let Some(min) = rule.min_entropy
            && shannon_entropy(candidate) < min
        {
            return false;
        }
        !(rule.allowlist && self.allowed(candidate).is_some())
    }

    /// The id of the first allowlist entry that holds for `candidate`.
    pub fn allowed(&self, candidate: &str) -> Option<&str> {
        let lower = candidate.to_ascii_lowercase();
        self.allowlist
            .iter()
            .find(|entry| entry.test.holds(candidate, &lower))
            .map(|entry| entry.id.as_str())
    }

    /// The ids of the rules with an accepted match in `text` (for tests and `airlock` tooling).
    pub fn matching_rules(&self, text: &str) -> Vec<&str> {
        let mut found = Vec::new();
        self.find(text, 0, &mut found);
        let mut ids: Vec<&str> = found
            .iter()
            .map(|m| self.rules[m.rule].id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Every ASCII case variant of `prefix` (letters in both cases, other bytes as they are).
fn case_variants(prefix: &[u8]) -> Vec<Vec<u8>> {
    let mut variants = vec![Vec::with_capacity(prefix.len())];
    for &byte in prefix {
        let cases = [byte.to_ascii_lowercase(), byte.to_ascii_uppercase()];
        let cases = if cases[0] == cases[1] {
            &cases[..1]
        } else {
            &cases[..]
        };
        variants = variants
            .into_iter()
            .flat_map(|v| {
                cases.iter().map(move |&c| {
                    let mut next = v.clone();
                    next.push(c);
                    next
                })
            })
            .collect();
    }
    variants
}

fn is_rule_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn next_char_boundary(text: &str, at: usize) -> usize {
    let mut next = at + 1;
    while next < text.len() && !text.is_char_boundary(next) {
        next += 1;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Arc<ShapeRules> {
        ShapeRules::embedded().expect("the embedded rules compile")
    }

    #[test]
    fn every_rule_matches_its_true_positive_and_no_rule_its_false_positive() {
        let rules = rules();
        let mut failures = Vec::new();
        for rule in rules.rules() {
            let hits = rules.matching_rules(&rule.true_positive);
            if !hits.contains(&rule.id.as_str()) {
                failures.push(format!(
                    "{}: true positive not matched (matched {hits:?})",
                    rule.id
                ));
            }
            let hits = rules.matching_rules(&rule.false_positive);
            if !hits.is_empty() {
                failures.push(format!("{}: false positive matched by {hits:?}", rule.id));
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn the_required_kinds_of_credential_have_rules() {
        let rules = rules();
        for id in [
            "aws-access-key-id",
            "aws-secret-access-key",
            "github-token",
            "github-fine-grained-token",
            "gitlab-token",
            "slack-token",
            "slack-webhook",
            "stripe-key",
            "openai-key",
            "anthropic-key",
            "google-api-key",
            "private-key",
            "jwt",
            "npm-token",
            "pypi-token",
            "huggingface-token",
            "sendgrid-key",
            "url-password",
            "authorization-header",
        ] {
            assert!(rules.rules().iter().any(|r| r.id == id), "no rule {id}");
        }
    }

    #[test]
    fn every_classic_github_prefix_is_caught() {
        let rules = rules();
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
            let token = format!("{prefix}hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");
            assert_eq!(rules.matching_rules(&token), ["github-token"], "{token}");
        }
        // Same shape, a prefix GitHub does not issue.
        assert!(
            rules
                .matching_rules("ghx_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES")
                .is_empty()
        );
    }

    #[test]
    fn placeholders_are_not_credentials() {
        let rules = rules();
        for text in [
            "Authorization: Bearer ${GITHUB_TOKEN}",
            "Authorization: Bearer {{ secrets.token }}",
            "Authorization: Bearer <token>",
            "Authorization: token $GITHUB_TOKEN",
            "https://user:password@example.com/",
            "https://user:{{password}}@host.internal/",
            "ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
            "sk_live_EXAMPLEEXAMPLEEXAMPLE1234",
            "AKIAAAAAAAAAAAAAAAAA",
        ] {
            assert!(
                rules.matching_rules(text).is_empty(),
                "{text}: {:?}",
                rules.matching_rules(text)
            );
        }
    }

    #[test]
    fn anthropic_keys_are_not_hidden_by_the_openai_keyword() {
        // `sk-` and `sk-ant-` start at the same byte; the prefilter must report both.
        let rules = rules();
        let tp = &rules
            .rules()
            .iter()
            .find(|r| r.id == "anthropic-key")
            .expect("rule")
            .true_positive;
        assert!(rules.matching_rules(tp).contains(&"anthropic-key"));
    }

    #[test]
    fn a_private_key_cut_off_before_its_end_line_is_still_a_match() {
        let rules = rules();
        let rule = rules
            .rules()
            .iter()
            .find(|r| r.id == "private-key")
            .expect("rule");
        let cut = &rule.true_positive[..rule.true_positive.find("-----END").expect("END")];
        assert_eq!(rules.matching_rules(cut), ["private-key"]);
        // JSON-escaped newlines, as the key appears inside a JSON string.
        let escaped = rule.true_positive.replace('\n', "\\n");
        assert_eq!(rules.matching_rules(&escaped), ["private-key"]);
    }

    #[test]
    fn keywords_that_overlap_or_share_a_start_all_let_their_rules_run() {
        let file = |rules: &[(&str, &str, &str)]| {
            rules
                .iter()
                .map(|(id, regex, keyword)| {
                    format!(
                        "[[rule]]\nid = \"{id}\"\nreason = \"r\"\nregex = '{regex}'\nkeywords = [\"{keyword}\"]\ntrue_positive = \"x\"\nfalse_positive = \"y\"\n"
                    )
                })
                .collect::<String>()
        };
        let rules = ShapeRules::parse(
            &file(&[
                ("one", "abc", "abc"),
                ("two", "bcd", "bcd"),
                ("three", "abcde", "abcde"),
                ("four", "(?i)xyz-[0-9]+", "XYZ-"),
            ]),
            "test.toml",
        )
        .unwrap();
        assert_eq!(rules.matching_rules("abcde"), ["one", "three", "two"]);
        assert_eq!(rules.matching_rules("..abcd"), ["one", "two"]);
        // A case-insensitive rule's keyword is found in any case, a case-sensitive one's not.
        assert_eq!(rules.matching_rules("xYz-42"), ["four"]);
        assert!(rules.matching_rules("ABCD").is_empty());
    }

    #[test]
    fn case_insensitive_rules_match_in_any_case() {
        let rules = rules();
        for text in [
            "AUTHORIZATION: Bearer hGAkWvj7FAc9QeWJKY40uvSwMFLZ",
            "aUtHoRiZaTiOn: token hGAkWvj7FAc9QeWJKY40uvSwMFLZ",
        ] {
            assert!(
                rules.matching_rules(text).contains(&"authorization-header"),
                "{text}: {:?}",
                rules.matching_rules(text)
            );
        }
        assert_eq!(case_variants(b"a-b").len(), 4);
    }

    #[test]
    fn the_tabled_entropy_is_the_textbook_formula() {
        fn direct(text: &str) -> f64 {
            let mut counts = [0u32; 256];
            text.bytes().for_each(|b| counts[usize::from(b)] += 1);
            let total = text.len() as f64;
            counts
                .iter()
                .filter(|&&n| n > 0)
                .map(|&n| {
                    let p = f64::from(n) / total;
                    -p * p.log2()
                })
                .sum()
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in [1, 2, 7, 40, 255, 256, 300, 5000] {
            for alphabet in [2u64, 16, 62, 95] {
                let text: String = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        char::from(b' ' + (seed % alphabet) as u8)
                    })
                    .collect();
                let (tabled, textbook) = (shannon_entropy(&text), direct(&text));
                assert!(
                    (tabled - textbook).abs() < 1e-9,
                    "{len} {alphabet}: {tabled} {textbook}"
                );
            }
        }
    }

    #[test]
    fn entropy_and_runs() {
        assert_eq!(shannon_entropy(""), 0.0);
        assert_eq!(shannon_entropy("aaaa"), 0.0);
        assert!((shannon_entropy("abcd") - 2.0).abs() < 1e-9);
        assert_eq!(longest_run("xaaab", |a, b| a == b), 3);
        assert_eq!(longest_run("q12345z", |a, b| b as u32 == a as u32 + 1), 5);
    }

    #[test]
    fn rule_file_errors_name_the_file_and_the_rule() {
        let bad = r#"
[[rule]]
id = "broken"
reason = "x"
regex = "("
keywords = ["x"]
true_positive = "x"
false_positive = "y"
"#;
        let e = ShapeRules::parse(bad, "custom.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("custom.toml") && e.contains("`broken`"), "{e}");
        let no_keyword = bad
            .replace(r#"regex = "(""#, r#"regex = "x""#)
            .replace(r#"["x"]"#, "[]");
        let e = ShapeRules::parse(&no_keyword, "custom.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("keyword"), "{e}");
    }
}
