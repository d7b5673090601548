//! OpenAPI tool sources (`[[openapi]]`): an OpenAPI 3.0/3.1 document (JSON or YAML) whose
//! operations programs call as `tools.<name>.<operation>()`. The daemon reads the document,
//! performs every HTTP call itself against `base_url`, and adds the configured credentials
//! (`auth`) only to requests for that URL's scheme, host and port. Credential values may name
//! a secret (`{ secret = "github-token" }`) so they never appear in the policy.

use std::path::PathBuf;

use crate::document::{Field, TableReader};
use crate::error::PolicyError;
use crate::sources::server::{SettingValue, is_identifier, setting_value};
use crate::tool_pattern::validate_tool_pattern;

/// One `[[openapi]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenApiSource {
    /// The namespace programs use (`tools.<name>`): a JavaScript identifier, unique among
    /// `[[server]]` and `[[openapi]]` names.
    pub name: String,
    /// Absolute path of the OpenAPI document (`.json`, `.yaml` or `.yml`).
    pub spec: PathBuf,
    /// Where calls go (`http://` or `https://`); `None` means the document's first absolute
    /// `servers[].url`.
    pub base_url: Option<String>,
    /// Credentials added to every request for `base_url`'s origin.
    pub auth: Option<OpenApiAuth>,
    /// How long one call may take, connection and whole response included.
    pub call_timeout_ms: u64,
    /// Calls in flight to this API at once, over all executions; more wait.
    pub max_concurrent_calls: usize,
    /// `coerce`: whether trivial mismatches with the tools' schemas are coerced (`safe`, the
    /// default) or refused (`off`).
    pub coerce: crate::sources::CoercePolicy,
    /// Learn the output types of its tools from their results (`learn_types`, default
    /// true); `false` keeps no shape of its results and shows none in the SDK.
    pub learn_types: bool,
    /// Only operations whose tool name matches one of these (`*` globs) are offered; empty
    /// means all.
    pub include: Vec<String>,
    /// Operations whose tool name matches one of these are not offered (wins over `include`).
    pub exclude: Vec<String>,
}

/// How requests are authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenApiAuth {
    /// `Authorization: Bearer <token>`.
    Bearer { token: SettingValue },
    /// `Authorization: Basic base64(<username>:<password>)`.
    Basic {
        username: SettingValue,
        password: SettingValue,
    },
    /// A key in a header or a query parameter.
    ApiKey {
        location: ApiKeyLocation,
        value: SettingValue,
    },
}

/// Where an API key goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiKeyLocation {
    /// This request header.
    Header(String),
    /// This query parameter.
    Query(String),
}

impl OpenApiAuth {
    /// Every secret the credentials need, in policy order.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        let values: Vec<&SettingValue> = match self {
            OpenApiAuth::Bearer { token } => vec![token],
            OpenApiAuth::Basic { username, password } => vec![username, password],
            OpenApiAuth::ApiKey { value, .. } => vec![value],
        };
        values.into_iter().filter_map(SettingValue::secret)
    }
}

impl OpenApiSource {
    pub(crate) const KEYS: &'static [&'static str] = &[
        "name",
        "spec",
        "base_url",
        "auth",
        "call_timeout_ms",
        "max_concurrent_calls",
        "coerce",
        "learn_types",
        "trust",
        "sink",
        "include",
        "exclude",
    ];

    const AUTH_KEYS: &'static [&'static str] = &[
        "type", "token", "username", "password", "header", "query", "value",
    ];

    pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
    pub const MAX_CALL_TIMEOUT_MS: u64 = 3_600_000;
    pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 16;
    pub const MAX_CONCURRENT_CALLS: usize = 1024;

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        let name_field = table.require("name")?;
        let name = name_field.string("a string")?;
        if !is_identifier(name) {
            return Err(name_field.invalid(format!(
                "invalid source name \"{name}\": programs call `tools.{name}.<operation>()`, so use a JavaScript identifier (letters, digits, `_` and `$`, not starting with a digit)"
            )));
        }
        crate::sources::check_not_reserved(&name_field, name)?;
        let spec_field = table.require("spec")?;
        let spec = spec_field.string("a string (the path of an OpenAPI document)")?;
        if !spec.starts_with('/') {
            return Err(spec_field.invalid(format!("\"{spec}\" is not an absolute path")));
        }
        let base_url = match table.get("base_url") {
            Some(field) => Some(read_base_url(&field)?.to_owned()),
            None => None,
        };
        let auth = match table.get("auth") {
            Some(field) => Some(read_auth(&field.table(
                "an inline table such as { type = \"bearer\", token = { secret = \"name\" } }",
                Self::AUTH_KEYS,
            )?)?),
            None => None,
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
        Ok(OpenApiSource {
            name: name.to_owned(),
            spec: PathBuf::from(spec),
            base_url,
            auth,
            call_timeout_ms,
            max_concurrent_calls,
            coerce: crate::sources::CoercePolicy::read(table)?,
            learn_types,
            include: read_patterns(table.get("include"))?,
            exclude: read_patterns(table.get("exclude"))?,
        })
    }

    /// Whether the operation named `tool` (its program-facing name) is offered.
    pub fn offers(&self, tool: &str) -> bool {
        let matches = |patterns: &[String]| {
            patterns
                .iter()
                .any(|p| crate::tool_pattern::tool_matches(p, tool))
        };
        (self.include.is_empty() || matches(&self.include)) && !matches(&self.exclude)
    }

    /// Every secret this source needs, in policy order.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.auth.iter().flat_map(OpenApiAuth::secrets)
    }
}

/// A base URL: `http` or `https`, with a host, without credentials, query or fragment (the
/// operation's path and parameters are appended to it).
fn read_base_url<'a>(field: &Field<'a>) -> Result<&'a str, PolicyError> {
    let url = field.string("a string (an http:// or https:// URL)")?;
    crate::sources::server::check_http_url(field, url, "OpenAPI sources", "auth")?;
    if url.contains(['?', '#']) {
        return Err(field.invalid(
            "a base URL has no query or fragment (operations add their own path and query)",
        ));
    }
    Ok(url)
}

fn read_auth(table: &TableReader<'_>) -> Result<OpenApiAuth, PolicyError> {
    let type_field = table.require("type")?;
    let kind = type_field.string("\"bearer\", \"basic\" or \"api_key\"")?;
    // Keys of another kind are an error rather than ignored: a stray `token` next to
    // `type = "basic"` is a mistake the operator wants to hear about.
    let allowed: &[&str] = match kind {
        "bearer" => &["type", "token"],
        "basic" => &["type", "username", "password"],
        "api_key" => &["type", "header", "query", "value"],
        other => {
            return Err(type_field.invalid(format!(
                "unknown auth type \"{other}\" (expected \"bearer\", \"basic\" or \"api_key\")"
            )));
        }
    };
    for key in OpenApiSource::AUTH_KEYS {
        if let Some(field) = table.get(key).filter(|_| !allowed.contains(key)) {
            return Err(field.invalid(format!(
                "`{key}` does not apply to auth type \"{kind}\" (it takes {})",
                allowed[1..].join(", ")
            )));
        }
    }
    let value = |key: &str| table.require(key).and_then(|f| setting_value(&f));
    Ok(match kind {
        "bearer" => OpenApiAuth::Bearer {
            token: value("token")?,
        },
        "basic" => {
            let username = value("username")?;
            if let SettingValue::Literal(user) = &username
                && user.contains(':')
            {
                return Err(table.require("username")?.invalid(
                    "a basic-auth user name cannot contain `:` (it separates name and password)",
                ));
            }
            OpenApiAuth::Basic {
                username,
                password: value("password")?,
            }
        }
        _ => {
            let location = match (table.get("header"), table.get("query")) {
                (Some(_), Some(query)) => {
                    return Err(query.invalid("an API key goes in `header` or `query`, not both"));
                }
                (Some(field), None) => {
                    let name = field.string("a string (a header name)")?;
                    if !crate::sources::server::is_header_name(name) {
                        return Err(field.invalid(format!("\"{name}\" is not a valid header name")));
                    }
                    ApiKeyLocation::Header(name.to_owned())
                }
                (None, Some(field)) => {
                    let name = field.string("a string (a query parameter name)")?;
                    if name.is_empty() {
                        return Err(field.invalid("the query parameter name is empty"));
                    }
                    ApiKeyLocation::Query(name.to_owned())
                }
                (None, None) => {
                    return Err(type_field.invalid(
                        "an api_key auth needs `header = \"Name\"` or `query = \"name\"`",
                    ));
                }
            };
            OpenApiAuth::ApiKey {
                location,
                value: value("value")?,
            }
        }
    })
}

fn read_patterns(field: Option<Field<'_>>) -> Result<Vec<String>, PolicyError> {
    let Some(field) = field else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for item in field.array("an array of tool-name patterns")? {
        let pattern = item.string("a string (a tool name, `*` matches any run of characters)")?;
        validate_tool_pattern(pattern).map_err(|source| PolicyError::InvalidToolPattern {
            at: item.location(),
            key: item.path().to_owned(),
            source,
        })?;
        out.push(pattern.to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::sources::openapi::{ApiKeyLocation, OpenApiAuth};
    use crate::sources::server::SettingValue;

    use crate::sources::test_support::{assert_refused, parse};

    #[test]
    fn reads_a_source_with_every_key() {
        let p = parse(
            r#"
[[openapi]]
name = "github"
spec = "/etc/airlock/github.json"
base_url = "https://api.github.com"
auth = { type = "bearer", token = { secret = "github-token" } }
call_timeout_ms = 5000
max_concurrent_calls = 4
include = ["repos_*", "issues_*"]
exclude = ["repos_delete"]
"#,
        )
        .unwrap();
        let s = &p.openapi[0];
        assert_eq!(s.name, "github");
        assert_eq!(s.spec, std::path::Path::new("/etc/airlock/github.json"));
        assert_eq!(s.base_url.as_deref(), Some("https://api.github.com"));
        assert_eq!(
            s.auth,
            Some(OpenApiAuth::Bearer {
                token: SettingValue::Secret("github-token".into())
            })
        );
        assert_eq!(s.secrets().collect::<Vec<_>>(), ["github-token"]);
        assert_eq!((s.call_timeout_ms, s.max_concurrent_calls), (5000, 4));
        assert!(s.offers("repos_get"));
        assert!(!s.offers("repos_delete"));
        assert!(!s.offers("users_get"));
    }

    #[test]
    fn reads_every_auth_type_and_defaults() {
        let p = parse(
            r#"
[[openapi]]
name = "a"
spec = "/x.yaml"

[[openapi]]
name = "b"
spec = "/x.yaml"
auth = { type = "basic", username = "bot", password = { secret = "pw" } }

[[openapi]]
name = "c"
spec = "/x.yaml"
auth = { type = "api_key", header = "X-Api-Key", value = { secret = "k" } }

[[openapi]]
name = "d"
spec = "/x.yaml"
auth = { type = "api_key", query = "api_key", value = "literal" }
"#,
        )
        .unwrap();
        let a = &p.openapi[0];
        assert_eq!(a.base_url, None);
        assert_eq!(a.auth, None);
        assert_eq!(a.call_timeout_ms, 60_000);
        assert_eq!(a.max_concurrent_calls, 16);
        assert!(a.offers("anything"));
        assert_eq!(
            p.openapi[1].auth,
            Some(OpenApiAuth::Basic {
                username: SettingValue::Literal("bot".into()),
                password: SettingValue::Secret("pw".into())
            })
        );
        assert_eq!(
            p.openapi[2].auth,
            Some(OpenApiAuth::ApiKey {
                location: ApiKeyLocation::Header("X-Api-Key".into()),
                value: SettingValue::Secret("k".into())
            })
        );
        assert_eq!(
            p.openapi[3].auth,
            Some(OpenApiAuth::ApiKey {
                location: ApiKeyLocation::Query("api_key".into()),
                value: SettingValue::Literal("literal".into())
            })
        );
    }

    #[test]
    fn bad_tables_are_located() {
        let cases = [
            (
                "name = \"my-api\"\nspec = \"/x\"",
                "openapi[0].name",
                "JavaScript identifier",
            ),
            ("name = \"a\"", "openapi[0].spec", "missing required key"),
            (
                "name = \"a\"\nspec = \"x.json\"",
                "openapi[0].spec",
                "not an absolute path",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nbase_url = \"ftp://h/\"",
                "openapi[0].base_url",
                "unsupported scheme",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nbase_url = \"https://u:p@h/\"",
                "openapi[0].base_url",
                "credentials in the URL",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nbase_url = \"https://h/?a=1\"",
                "openapi[0].base_url",
                "no query",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"oauth\" }",
                "openapi[0].auth.type",
                "unknown auth type",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"bearer\" }",
                "openapi[0].auth.token",
                "missing required key",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"bearer\", token = \"t\", password = \"p\" }",
                "openapi[0].auth.password",
                "does not apply",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"api_key\", value = \"v\" }",
                "openapi[0].auth.type",
                "needs `header",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"api_key\", header = \"A B\", value = \"v\" }",
                "openapi[0].auth.header",
                "not a valid header name",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"api_key\", header = \"A\", query = \"b\", value = \"v\" }",
                "openapi[0].auth.query",
                "not both",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"bearer\", token = { secret = \"a/b\" } }",
                "openapi[0].auth.token.secret",
                "invalid secret name",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\nauth = { type = \"bearer\", tokn = \"t\" }",
                "`tokn` in [openapi[0].auth]",
                "did you mean `token`",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\ninclude = [\"a?\"]",
                "openapi[0].include[0]",
                "only `*` is a wildcard",
            ),
            (
                "name = \"a\"\nspec = \"/x\"\ncall_timeout_ms = 0",
                "openapi[0].call_timeout_ms",
                "out of range",
            ),
        ];
        assert_refused("[[openapi]]\n", &cases);
    }

    #[test]
    fn names_are_unique_across_servers_and_openapi_sources() {
        let e = parse(
            "[[server]]\nname = \"gh\"\ncommand = \"x\"\n\n[[openapi]]\nname = \"gh\"\nspec = \"/x\"\n",
        )
        .unwrap_err();
        assert!(e.starts_with("/etc/airlock/policy.toml:6:"), "{e}");
        assert!(e.contains("openapi[0].name"), "{e}");
        assert!(e.contains("duplicate tool source name \"gh\""), "{e}");
        assert!(e.contains("first defined at line 2"), "{e}");
        let e = parse(
            "[[openapi]]\nname = \"a\"\nspec = \"/x\"\n[[openapi]]\nname = \"a\"\nspec = \"/y\"\n",
        )
        .unwrap_err();
        assert!(e.contains("openapi[1].name"), "{e}");
    }
}
