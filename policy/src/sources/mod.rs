//! The tables that name tool sources: `[[server]]` (MCP servers, `server`), `[[openapi]]`
//! (OpenAPI documents, `openapi`) and `[[graphql]]` (GraphQL endpoints, `graphql`), and the
//! settings they share (literal or `{ secret = "…" }` values, names, call limits), and the
//! namespaces no source may take because the daemon fills them itself.
//!
//! Only the format and its validation live here: nothing reads a document, a secret or the
//! network (the supervisor does, from what these tables say).

pub mod graphql;
pub mod network;
pub mod openapi;
pub mod server;
#[cfg(test)]
mod test_support;

use crate::document::{Field, TableReader};
use crate::error::PolicyError;

/// `coerce = "safe" | "off"`: whether the daemon fixes a call's trivial mismatches with the
/// tool's schemas (a numeric string for a number, a scalar for an array, …) instead of
/// refusing them. Every source kind takes it; the default is `safe`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CoercePolicy {
    /// Arguments (and results with a declared output schema) that miss their schema in one of
    /// the unambiguous, lossless ways are coerced, and each coercion is traced.
    #[default]
    Safe,
    /// No coercion: a mismatch is refused (arguments) or fails the call (results).
    Off,
}

impl CoercePolicy {
    /// The `coerce` key of a source table (absent: `safe`).
    pub(crate) fn read(table: &TableReader<'_>) -> Result<CoercePolicy, PolicyError> {
        let Some(field) = table.get("coerce") else {
            return Ok(CoercePolicy::Safe);
        };
        match field.string("\"safe\" or \"off\"")? {
            "safe" => Ok(CoercePolicy::Safe),
            "off" => Ok(CoercePolicy::Off),
            other => Err(field.invalid(format!(
                "unknown coerce mode \"{other}\" (expected \"safe\" or \"off\")"
            ))),
        }
    }

    pub fn is_safe(self) -> bool {
        self == CoercePolicy::Safe
    }
}

/// The namespace of the tools a request declares itself (`client_tools`): the client runs them
/// and sends their results back, so a source by this name would be shadowed or shadow them.
pub const CLIENT_NAMESPACE: &str = "client";

/// The namespace of the daemon's built-in tools.
pub const AIRLOCK_NAMESPACE: &str = "airlock";

/// Namespaces no `[[server]]`, `[[openapi]]` or `[[graphql]]` source may take, and why: the
/// daemon fills them itself, so a policy's tools there would be ambiguous in programs, in
/// `allow` patterns and in the audit trail.
pub const RESERVED_NAMESPACES: &[(&str, &str)] = &[
    (
        CLIENT_NAMESPACE,
        "`client` is reserved for the tools a request declares itself (client_tools)",
    ),
    (
        AIRLOCK_NAMESPACE,
        "`airlock` is reserved for the daemon's built-in tools",
    ),
];

/// Why `name` cannot name a source, if it is a reserved namespace.
pub fn reserved_namespace(name: &str) -> Option<&'static str> {
    RESERVED_NAMESPACES
        .iter()
        .find(|(reserved, _)| *reserved == name)
        .map(|(_, why)| *why)
}

/// Refuses a source `name` (written at `field`) that is a reserved namespace.
pub(crate) fn check_not_reserved(field: &Field<'_>, name: &str) -> Result<(), PolicyError> {
    match reserved_namespace(name) {
        Some(why) => Err(field.invalid(format!(
            "the source name \"{name}\" is not available: {why}; pick another name (programs then call `tools.<name>.<tool>()` and `allow` patterns say `<name>.*`)"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{assert_refused, parse};
    use super::*;

    #[test]
    fn reserved_namespaces_are_refused_for_every_kind_of_source() {
        let server = "[[server]]\ncommand = \"x\"\n";
        let openapi = "[[openapi]]\nspec = \"/x.json\"\n";
        let graphql = "[[graphql]]\nschema = \"/s.graphql\"\nendpoint = \"https://x/graphql\"\n";
        for (head, key) in [
            (server, "server[0].name"),
            (openapi, "openapi[0].name"),
            (graphql, "graphql[0].name"),
        ] {
            assert_refused(
                head,
                &[
                    (
                        "name = \"client\"",
                        key,
                        "`client` is reserved for the tools a request declares itself (client_tools); pick another name",
                    ),
                    (
                        "name = \"airlock\"",
                        key,
                        "`airlock` is reserved for the daemon's built-in tools; pick another name",
                    ),
                ],
            );
        }
        // Located at the name.
        let e = parse("[[server]]\ncommand = \"x\"\nname = \"client\"\n").unwrap_err();
        assert!(
            e.starts_with(&format!("{}:3:8: server[0].name: ", test_support::FILE)),
            "{e}"
        );
    }

    #[test]
    fn coerce_is_safe_by_default_off_on_request_and_nothing_else() {
        let heads = [
            (
                "[[server]]\nname = \"s\"\ncommand = \"x\"\n",
                "server[0].coerce",
            ),
            (
                "[[openapi]]\nname = \"o\"\nspec = \"/x.json\"\n",
                "openapi[0].coerce",
            ),
            (
                "[[graphql]]\nname = \"g\"\nschema = \"/s.graphql\"\nendpoint = \"https://x/graphql\"\n",
                "graphql[0].coerce",
            ),
        ];
        for (head, key) in heads {
            let coerce = |p: &crate::Policy| {
                p.servers
                    .iter()
                    .map(|s| s.coerce)
                    .chain(p.openapi.iter().map(|s| s.coerce))
                    .chain(p.graphql.iter().map(|s| s.coerce))
                    .next()
                    .unwrap()
            };
            assert_eq!(coerce(&parse(head).unwrap()), CoercePolicy::Safe);
            let off = parse(&format!("{head}coerce = \"off\"\n")).unwrap();
            assert_eq!(coerce(&off), CoercePolicy::Off);
            let safe = parse(&format!("{head}coerce = \"safe\"\n")).unwrap();
            assert_eq!(coerce(&safe), CoercePolicy::Safe);
            assert_refused(
                head,
                &[
                    (
                        "coerce = \"always\"",
                        key,
                        "unknown coerce mode \"always\" (expected \"safe\" or \"off\")",
                    ),
                    ("coerce = true", key, "\"safe\" or \"off\""),
                ],
            );
        }
    }

    #[test]
    fn only_the_exact_names_are_reserved() {
        parse(
            "[[server]]\nname = \"Client\"\ncommand = \"x\"\n\n[[server]]\nname = \"airlock_docs\"\ncommand = \"x\"\n\n[[server]]\nname = \"clients\"\ncommand = \"x\"\n",
        )
        .unwrap();
        assert!(reserved_namespace("client").is_some());
        assert!(reserved_namespace("airlock").is_some());
        assert_eq!(reserved_namespace("github"), None);
    }
}
