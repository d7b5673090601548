//! GraphQL sources (`[[graphql]]`): a GraphQL endpoint whose schema (an SDL file or an
//! introspection result) the daemon reads at start-up, so that every query and mutation field
//! becomes a tool under `tools.<name>`. The schema is a local file, never fetched by
//! introspection at run time: the operator decides which API surface programs see.
//! Headers may name a secret (`{ secret = "github-token" }`), resolved from the credential
//! store when a call is made, so the value never appears in the policy.

use std::path::PathBuf;

use crate::document::{Field, TableReader};
use crate::error::PolicyError;
use crate::sources::server::{SettingValue, is_header_name, is_identifier, read_settings};

/// One `[[graphql]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphQlSource {
    /// The namespace programs use (`tools.<name>`): a JavaScript identifier, unique among all
    /// sources.
    pub name: String,
    /// The schema: SDL (`.graphql`, `.gql`) or an introspection result (`.json`).
    pub schema: PathBuf,
    pub schema_format: SchemaFormat,
    /// `http://` or `https://` URL that receives `POST {query, variables}`.
    pub endpoint: String,
    /// Sent with every request, in file order.
    pub headers: Vec<(String, SettingValue)>,
    /// How many levels of object fields a tool's default selection set goes down.
    pub selection_depth: u32,
    /// How long one call may take before it fails with a timeout.
    pub call_timeout_ms: u64,
    /// Calls in flight to this endpoint at once, over all executions; more wait.
    pub max_concurrent_calls: usize,
    /// `coerce`: whether trivial mismatches with the tools' schemas are coerced (`safe`, the
    /// default) or refused (`off`).
    pub coerce: crate::sources::CoercePolicy,
    /// Learn the output types of its tools from their results (`learn_types`, default
    /// true); `false` keeps no shape of its results and shows none in the SDK.
    pub learn_types: bool,
}

/// How the schema file is written, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaFormat {
    /// GraphQL schema definition language.
    Sdl,
    /// The JSON result of the introspection query (`{"data": {"__schema": …}}` or
    /// `{"__schema": …}`).
    Introspection,
}

impl GraphQlSource {
    pub(crate) const KEYS: &'static [&'static str] = &[
        "name",
        "schema",
        "endpoint",
        "headers",
        "selection_depth",
        "call_timeout_ms",
        "max_concurrent_calls",
        "coerce",
        "learn_types",
        "trust",
        "sink",
    ];

    pub const DEFAULT_SELECTION_DEPTH: u32 = 2;
    /// Deeper default selections grow with the product of the types' field counts; past this,
    /// programs should write their own document (`tools.<name>.query`).
    pub const MAX_SELECTION_DEPTH: u32 = 5;
    pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
    pub const MAX_CALL_TIMEOUT_MS: u64 = 3_600_000;
    pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 16;
    pub const MAX_CONCURRENT_CALLS: usize = 1024;

    /// Every secret the source needs, in policy order (may repeat).
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.headers.iter().filter_map(|(_, v)| v.secret())
    }

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        let name_field = table.require("name")?;
        let name = name_field.string("a string")?;
        if !is_identifier(name) {
            return Err(name_field.invalid(format!(
                "invalid source name \"{name}\": programs call `tools.{name}.<tool>()`, so use a JavaScript identifier (letters, digits, `_` and `$`, not starting with a digit)"
            )));
        }
        crate::sources::check_not_reserved(&name_field, name)?;

        let schema_field = table.require("schema")?;
        let schema = schema_field.string("a string (the schema file's absolute path)")?;
        if !schema.starts_with('/') {
            return Err(schema_field.invalid(format!("\"{schema}\" is not an absolute path")));
        }
        let extension = schema
            .rsplit_once('.')
            .map(|(_, ext)| ext.to_ascii_lowercase())
            .unwrap_or_default();
        let schema_format = match extension.as_str() {
            "graphql" | "gql" => SchemaFormat::Sdl,
            "json" => SchemaFormat::Introspection,
            _ => {
                return Err(schema_field.invalid(format!(
                    "cannot tell the format of \"{schema}\": use a .graphql or .gql file (SDL) or a .json file (an introspection result)"
                )));
            }
        };

        let endpoint_field = table.require("endpoint")?;
        let endpoint = endpoint_field.string("a string (an http:// or https:// URL)")?;
        check_url(&endpoint_field, endpoint)?;

        let headers = match table.get("headers") {
            Some(field) => read_settings(field, "a table of HTTP headers", is_header_name)?,
            None => Vec::new(),
        };
        let selection_depth = match table.get("selection_depth") {
            Some(field) => field.u32_in(1..=Self::MAX_SELECTION_DEPTH)?,
            None => Self::DEFAULT_SELECTION_DEPTH,
        };
        let call_timeout_ms = match table.get("call_timeout_ms") {
            Some(field) => field.u64_in(1..=Self::MAX_CALL_TIMEOUT_MS)?,
            None => Self::DEFAULT_CALL_TIMEOUT_MS,
        };
        let max_concurrent_calls = match table.get("max_concurrent_calls") {
            Some(field) => field.usize_in(1..=Self::MAX_CONCURRENT_CALLS)?,
            None => Self::DEFAULT_MAX_CONCURRENT_CALLS,
        };
        let learn_types = match table.get("learn_types") {
            Some(field) => field.boolean()?,
            None => true,
        };
        Ok(GraphQlSource {
            name: name.to_owned(),
            schema: PathBuf::from(schema),
            schema_format,
            endpoint: endpoint.to_owned(),
            headers,
            selection_depth,
            call_timeout_ms,
            max_concurrent_calls,
            coerce: crate::sources::CoercePolicy::read(table)?,
            learn_types,
        })
    }
}

fn check_url(field: &Field<'_>, url: &str) -> Result<(), PolicyError> {
    crate::sources::server::check_http_url(field, url, "GraphQL endpoints", "headers")
}

#[cfg(test)]
mod tests {
    use crate::sources::graphql::SchemaFormat;
    use crate::sources::server::SettingValue;

    use crate::sources::test_support::{assert_refused, parse};

    #[test]
    fn reads_a_graphql_source() {
        let p = parse(
            r#"
[[graphql]]
name = "github"
schema = "/usr/share/github/schema.graphql"
endpoint = "https://api.github.com/graphql"
headers = { Authorization = { secret = "github-token" }, "X-Github-Next-Global-ID" = "1" }
selection_depth = 3
call_timeout_ms = 5000
max_concurrent_calls = 4
"#,
        )
        .unwrap();
        let g = &p.graphql[0];
        assert_eq!(g.name, "github");
        assert_eq!(g.schema_format, SchemaFormat::Sdl);
        assert_eq!(g.endpoint, "https://api.github.com/graphql");
        assert_eq!(g.selection_depth, 3);
        assert_eq!(g.call_timeout_ms, 5000);
        assert_eq!(g.max_concurrent_calls, 4);
        assert_eq!(
            g.headers,
            [
                (
                    "Authorization".into(),
                    SettingValue::Secret("github-token".into())
                ),
                (
                    "X-Github-Next-Global-ID".into(),
                    SettingValue::Literal("1".into())
                )
            ]
        );
        assert_eq!(g.secrets().collect::<Vec<_>>(), ["github-token"]);
    }

    #[test]
    fn defaults_and_introspection_files() {
        let p = parse(
            "[[graphql]]\nname = \"g\"\nschema = \"/s/schema.JSON\"\nendpoint = \"http://127.0.0.1:8080/graphql\"\n",
        )
        .unwrap();
        let g = &p.graphql[0];
        assert_eq!(g.schema_format, SchemaFormat::Introspection);
        assert_eq!(g.selection_depth, 2);
        assert_eq!(g.call_timeout_ms, 60_000);
        assert_eq!(g.max_concurrent_calls, 16);
        assert!(g.headers.is_empty());
    }

    #[test]
    fn bad_tables_are_located() {
        let ok_schema = "schema = \"/s.graphql\"";
        let ok_endpoint = "endpoint = \"https://x/graphql\"";
        let cases = [
            (
                format!("name = \"my-api\"\n{ok_schema}\n{ok_endpoint}"),
                "graphql[0].name",
                "JavaScript identifier",
            ),
            (
                format!("name = \"a\"\nschema = \"s.graphql\"\n{ok_endpoint}"),
                "graphql[0].schema",
                "not an absolute path",
            ),
            (
                format!("name = \"a\"\nschema = \"/s.yaml\"\n{ok_endpoint}"),
                "graphql[0].schema",
                "cannot tell the format",
            ),
            (
                format!("name = \"a\"\n{ok_schema}\nendpoint = \"ftp://x/\""),
                "graphql[0].endpoint",
                "unsupported scheme",
            ),
            (
                format!("name = \"a\"\n{ok_schema}\nendpoint = \"https://u:p@x/\""),
                "graphql[0].endpoint",
                "credentials in the URL",
            ),
            (
                format!("name = \"a\"\n{ok_schema}"),
                "graphql[0].endpoint",
                "missing required key",
            ),
            (
                format!("name = \"a\"\n{ok_schema}\n{ok_endpoint}\nselection_depth = 9"),
                "graphql[0].selection_depth",
                "out of range",
            ),
            (
                format!(
                    "name = \"a\"\n{ok_schema}\n{ok_endpoint}\nheaders = {{ A = {{ secret = \"a/b\" }} }}"
                ),
                "graphql[0].headers.A.secret",
                "invalid secret name",
            ),
            (
                format!(
                    "name = \"a\"\n{ok_schema}\n{ok_endpoint}\nheaders = {{ \"A B\" = \"x\" }}"
                ),
                "graphql[0].headers.A B",
                "not a valid name",
            ),
            (
                format!("name = \"a\"\n{ok_schema}\n{ok_endpoint}\nheader = {{}}"),
                "`header` in graphql[0]",
                "did you mean `headers`",
            ),
        ];
        assert_refused("[[graphql]]\n", &cases);
    }

    #[test]
    fn names_are_unique_across_sources() {
        let e = parse(
            "[[server]]\nname = \"gh\"\ncommand = \"x\"\n\n[[graphql]]\nname = \"gh\"\nschema = \"/s.graphql\"\nendpoint = \"https://x/\"\n",
        )
        .unwrap_err();
        assert!(e.starts_with("/etc/airlock/policy.toml:6:"), "{e}");
        assert!(e.contains("graphql[0].name"), "{e}");
        assert!(e.contains("duplicate tool source name \"gh\""), "{e}");

        let e = parse(
            "[[graphql]]\nname = \"a\"\nschema = \"/s.graphql\"\nendpoint = \"https://x/\"\n[[graphql]]\nname = \"a\"\nschema = \"/t.graphql\"\nendpoint = \"https://y/\"\n",
        )
        .unwrap_err();
        assert!(e.contains("graphql[1].name"), "{e}");
        assert!(e.contains("first defined at line 2"), "{e}");
    }
}
