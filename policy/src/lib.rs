//! Airlock's operator policy: the TOML file format, its validation into a typed [`Policy`], and
//! errors that name the file, line, column and key of every problem.
//!
//! Modules:
//! - [`policy_file`]: [`Policy`] (load with `policy.d` drop-ins, parse, the embedded default,
//!   admission);
//! - [`error`]: [`PolicyError`] (every problem, located), the error every module reports
//!   through, and [`PolicyWarning`];
//! - [`daemon_settings`]: the `[daemon]` table;
//! - [`limit_settings`]: the `[limits]` table;
//! - [`principal`]: `[[principal]]` tables, admission by uid/gid, `allow`/`deny` decisions,
//!   `approve` patterns, per-principal limits and rate limits;
//! - [`approval_settings`]: the `[approvals]` table, who may decide calls that wait for
//!   approval and how long they wait;
//! - [`explanation`]: which principal admits a caller and which rule decides a tool call;
//! - [`audit_settings`]: the `[audit]` table, the audit log's directory, size and rotation;
//! - [`tool_pattern`]: the `*` glob used in `allow`, `deny` and `approve`;
//! - [`sources`]: the tool sources: `[[server]]` tables ([`sources::server`], the MCP servers
//!   whose tools programs call), `[[openapi]]` ([`sources::openapi`], documents whose
//!   operations become tools) and `[[graphql]]` ([`sources::graphql`], endpoints whose fields
//!   become tools);
//! - [`secret_scanning`]: the `[secret_scanning]` table: redact or fail on secrets in results;
//! - [`byte_size`]: size strings such as `"256MiB"`;
//! - [`duration`]: duration strings such as `"15m"`;
//! - [`file_mode`]: octal permission strings such as `"0660"`;
//! - [`account`]: user and group names resolved through the system's user database;
//! - [`source_location`]: byte offsets turned into `file:line:column`;
//! - `document` (private): typed, located access to toml's spanned document tree.
//!
//! The format is documented for operators in `docs/policy-reference.md`; `policy/default.toml` is
//! the policy built into the daemon and doubles as the annotated example.

// Sizes and counts here come from untrusted hands (frames, requests, answers, files): a cast
// that could truncate or wrap must say why it cannot, or not be a cast (tests are exempt).
#![cfg_attr(
    not(test),
    warn(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_sign_loss
    )
)]

pub mod account;
pub mod approval_settings;
pub mod audit_settings;
pub mod byte_size;
pub mod daemon_settings;
mod document;
pub mod duration;
pub mod error;
pub mod explanation;
pub mod file_mode;
pub mod information_flow;
pub mod journal_settings;
pub mod limit_settings;
pub mod policy_file;
pub mod principal;
pub mod secret_scanning;
pub mod source_location;
pub mod sources;
pub mod tool_pattern;

#[cfg(any(test, fuzzing))]
pub mod fuzz;

pub use approval_settings::ApprovalSettings;
pub use audit_settings::AuditSettings;
pub use daemon_settings::{DaemonSettings, WorkerStart};
pub use error::{PolicyError, PolicyWarning};
pub use explanation::{Caller, Explanation};
pub use information_flow::{FlowAction, FlowRule, FlowTarget, InformationFlow};
pub use journal_settings::JournalSettings;
pub use limit_settings::LimitSettings;
pub use policy_file::{EMBEDDED_ORIGIN, Policy};
pub use principal::{Principal, RateLimits, ToolDecision, ToolRule};
pub use secret_scanning::{SecretAction, SecretScanning};
pub use source_location::Location;
pub use sources::CoercePolicy;
pub use sources::graphql::{GraphQlSource, SchemaFormat};
pub use sources::network::{HostPattern, NetworkRule};
pub use sources::openapi::{ApiKeyLocation, OpenApiAuth, OpenApiSource};
pub use sources::server::{
    BASE_PATH, ConfineMode, Confinement, ServerNetwork, ServerTransport, SettingValue, StartMode,
    ToolServer,
};
