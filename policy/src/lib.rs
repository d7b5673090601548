//! Airlock's operator policy: the TOML file format, its validation into a typed [`Policy`], and
//! errors that name the file, line, column and key of every problem.
//!
//! Modules:
//! - [`policy_file`]: [`Policy`] (load with `policy.d` drop-ins, parse, the embedded default,
//!   admission), [`PolicyError`] (every problem, located) and [`PolicyWarning`];
//! - [`daemon_settings`]: the `[daemon]` table;
//! - [`limit_settings`]: the `[limits]` table;
//! - [`principal`]: `[[principal]]` tables, admission by uid/gid, `allow`/`deny` decisions,
//!   per-principal limits and rate limits;
//! - [`explanation`]: which principal admits a caller and which rule decides a tool call;
//! - [`audit_settings`]: the `[audit]` table, the audit log's directory, size and rotation;
//! - [`tool_pattern`]: the `*` glob used in `allow` and `deny`;
//! - [`tool_server`]: `[[server]]` tables, the MCP servers whose tools programs call;
//! - [`openapi_source`]: `[[openapi]]` tables, OpenAPI documents whose operations become tools;
//! - [`graphql_source`]: `[[graphql]]` tables, GraphQL endpoints whose fields become tools;
//! - [`secret_scanning`]: the `[secret_scanning]` table: redact or fail on secrets in results;
//! - [`byte_size`]: size strings such as `"256MiB"`;
//! - [`file_mode`]: octal permission strings such as `"0660"`;
//! - [`account`]: user and group names resolved through the system's user database;
//! - [`source_location`]: byte offsets turned into `file:line:column`;
//! - `document` (private): typed, located access to toml's spanned document tree.
//!
//! The format is documented for operators in `docs/policy-reference.md`; `policy/default.toml` is
//! the policy built into the daemon and doubles as the annotated example.

pub mod account;
pub mod audit_settings;
pub mod byte_size;
pub mod daemon_settings;
mod document;
pub mod explanation;
pub mod file_mode;
pub mod graphql_source;
pub mod limit_settings;
pub mod openapi_source;
pub mod policy_file;
pub mod principal;
pub mod secret_scanning;
pub mod source_location;
pub mod tool_pattern;
pub mod tool_server;

pub use audit_settings::AuditSettings;
pub use daemon_settings::DaemonSettings;
pub use explanation::{Caller, Explanation};
pub use graphql_source::{GraphQlSource, SchemaFormat};
pub use limit_settings::LimitSettings;
pub use openapi_source::{ApiKeyLocation, OpenApiAuth, OpenApiSource};
pub use policy_file::{EMBEDDED_ORIGIN, Policy, PolicyError, PolicyWarning};
pub use principal::{Principal, RateLimits, ToolDecision, ToolRule};
pub use secret_scanning::{SecretAction, SecretScanning};
pub use source_location::Location;
pub use tool_server::{ServerTransport, SettingValue, StartMode, ToolServer};
