//! Tool-name patterns used in a principal's `allow`, `deny` and `approve` lists.
//!
//! A tool is named `server.tool`. A pattern is matched against the whole name; `*` matches any run
//! of characters, including none and including dots (so `github.*` matches `github.issues.list`,
//! and `*` matches every tool). Every other character matches only itself, case-sensitively.
//! `?`, `[`, `]`, `{` and `}` are rejected rather than silently taken literally, because in other
//! glob dialects they are wildcards too.

/// Why a pattern was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolPatternError {
    /// The pattern is the empty string.
    #[error("empty tool pattern (write a tool name such as \"github.get_issue\", or \"*\")")]
    Empty,
    /// The pattern contains whitespace or a control character.
    #[error("tool pattern \"{pattern}\" contains whitespace or a control character")]
    Whitespace {
        /// The rejected pattern.
        pattern: String,
    },
    /// The pattern uses glob syntax this format does not support.
    #[error("tool pattern \"{pattern}\" uses `{character}`: only `*` is a wildcard")]
    UnsupportedWildcard {
        /// The rejected pattern.
        pattern: String,
        /// The offending character.
        character: char,
    },
}

/// Checks that `pattern` is a usable tool pattern.
pub fn validate_tool_pattern(pattern: &str) -> Result<(), ToolPatternError> {
    if pattern.is_empty() {
        return Err(ToolPatternError::Empty);
    }
    if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ToolPatternError::Whitespace {
            pattern: pattern.to_owned(),
        });
    }
    if let Some(character) = pattern.chars().find(|c| "?[]{}".contains(*c)) {
        return Err(ToolPatternError::UnsupportedWildcard {
            pattern: pattern.to_owned(),
            character,
        });
    }
    Ok(())
}

/// Whether `tool` (`server.tool`) matches `pattern`.
///
/// Linear-time in the common cases and O(pattern × name) at worst (the classic backtracking
/// wildcard match that only remembers the last `*`), so hostile names cannot blow it up.
pub fn tool_matches(pattern: &str, tool: &str) -> bool {
    // Byte-wise matching is exact for UTF-8: literals are whole UTF-8 sequences, which can only
    // line up with `tool` at character boundaries.
    let (pattern, tool) = (pattern.as_bytes(), tool.as_bytes());
    let (mut p, mut t) = (0, 0);
    // (index of the last `*` seen in the pattern, position in `tool` it is currently matched up to)
    let mut last_star: Option<(usize, usize)> = None;
    while t < tool.len() {
        match pattern.get(p) {
            Some(b'*') => {
                last_star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == tool[t] => {
                p += 1;
                t += 1;
            }
            _ => match last_star {
                // Let the last `*` swallow one more character and retry from there.
                Some((star, matched_to)) => {
                    last_star = Some((star, matched_to + 1));
                    p = star + 1;
                    t = matched_to + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Whether `pattern` matches some name that starts with `prefix` and goes on past it (a tool
/// `prefix` + a name that is not empty), decided from the pattern alone.
pub fn may_match_with_prefix(pattern: &str, prefix: &str) -> bool {
    match pattern.find('*') {
        // One name: it starts with the prefix and is longer.
        None => pattern.len() > prefix.len() && pattern.starts_with(prefix),
        // The literal before the first `*` and the prefix agree as far as both go: the `*`
        // takes the rest of the prefix, or the literal goes past it, and what follows can be
        // written out.
        Some(star) => {
            let literal = &pattern[..star];
            literal.starts_with(prefix) || prefix.starts_with(literal)
        }
    }
}

/// Whether `pattern` matches every name that starts with `prefix`: it ends with `*`, which
/// then takes any rest, and matches the prefix itself.
pub fn matches_every_with_prefix(pattern: &str, prefix: &str) -> bool {
    pattern.ends_with('*') && tool_matches(pattern, prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_against_a_namespace() {
        for (pattern, may, every) in [
            ("*", true, true),
            ("github.*", true, true),
            ("git*", true, true),
            ("github.get_*", true, false),
            ("github.get_issue", true, false),
            ("*.delete_*", true, false),
            ("*_issue", true, false),
            ("gitlab.*", false, false),
            ("github", false, false),
            ("github.", false, false),
            ("githubx.*", false, false),
            ("g*b.*", true, true),
        ] {
            assert_eq!(may_match_with_prefix(pattern, "github."), may, "{pattern}");
            assert_eq!(
                matches_every_with_prefix(pattern, "github."),
                every,
                "{pattern}"
            );
        }
    }

    #[test]
    fn exact_names() {
        assert!(tool_matches(
            "time.get_current_time",
            "time.get_current_time"
        ));
        assert!(!tool_matches(
            "time.get_current_time",
            "time.get_current_timezone"
        ));
        assert!(!tool_matches(
            "time.get_current_time",
            "time.get_current_tim"
        ));
        assert!(!tool_matches("Time.x", "time.x"));
    }

    #[test]
    fn star_matches_any_run_including_dots_and_nothing() {
        assert!(tool_matches("*", "github.issues.list"));
        assert!(tool_matches("*", ""));
        assert!(tool_matches("github.*", "github.get_issue"));
        assert!(tool_matches("github.*", "github.issues.list"));
        assert!(tool_matches("github.*", "github."));
        assert!(!tool_matches("github.*", "gitlab.get_issue"));
        assert!(!tool_matches("github.*", "github"));
        assert!(tool_matches("github.delete_*", "github.delete_repo"));
        assert!(tool_matches("*.delete_*", "gitlab.delete_branch"));
        assert!(tool_matches("*_issue", "github.get_issue"));
        assert!(!tool_matches("*_issue", "github.get_issues"));
        assert!(tool_matches("a*b*c", "a.x.b.y.c"));
        assert!(tool_matches("a*b*c", "abbbc"));
        assert!(!tool_matches("a*b*c", "acb"));
        assert!(tool_matches("**", "x"));
    }

    #[test]
    fn non_ascii_names() {
        assert!(tool_matches("wiki.*é", "wiki.café"));
        assert!(!tool_matches("wiki.caf*", "wiki.ca"));
    }

    #[test]
    fn pathological_patterns_stay_fast() {
        let name = "a".repeat(10_000);
        let pattern = format!("{}b", "*a".repeat(50));
        assert!(!tool_matches(&pattern, &name));
    }

    #[test]
    fn validation() {
        assert_eq!(validate_tool_pattern("github.*"), Ok(()));
        assert_eq!(validate_tool_pattern("*"), Ok(()));
        assert_eq!(validate_tool_pattern(""), Err(ToolPatternError::Empty));
        assert!(matches!(
            validate_tool_pattern("github. get"),
            Err(ToolPatternError::Whitespace { .. })
        ));
        assert!(matches!(
            validate_tool_pattern("github.get_?"),
            Err(ToolPatternError::UnsupportedWildcard { character: '?', .. })
        ));
        assert!(matches!(
            validate_tool_pattern("github.[ab]"),
            Err(ToolPatternError::UnsupportedWildcard { .. })
        ));
    }
}
