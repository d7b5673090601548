//! What the source tables' tests share: parsing a policy text under a fixed file name, and
//! checking a table of texts that must be refused.

use crate::Policy;

/// The policy file every test text pretends to come from.
pub const FILE: &str = "/etc/airlock/policy.toml";

pub fn parse(text: &str) -> Result<Policy, String> {
    Policy::parse(text, FILE).map_err(|e| e.to_string())
}

/// Each `(body, key, reason)`: `head` then `body` is refused with an error that names the file,
/// the key and the reason.
pub fn assert_refused(head: &str, cases: &[(impl AsRef<str>, &str, &str)]) {
    for (body, key, reason) in cases {
        let body = body.as_ref();
        let e = parse(&format!("{head}{body}\n")).unwrap_err();
        assert!(e.contains(key), "{body}: {e}");
        assert!(e.contains(reason), "{body}: {e}");
        assert!(e.starts_with(&format!("{FILE}:")), "{e}");
    }
}
