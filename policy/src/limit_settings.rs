//! The `[limits]` table: what one execution may use. The supervisor turns these into the limits it
//! sends to each worker; a request may ask for a shorter timeout, or a longer one up to
//! `max_timeout_ms`.
//!
//! Two limits are about executions that wait (for the results of tools the client runs itself,
//! for an approval, or kept detached for a client to collect) rather than run: how many of a
//! principal's executions may wait at once and for how long. A waiting execution holds no worker,
//! but the daemon keeps what it needs to go on (its code, its calls so far, what it waits for),
//! so both bound what clients that never come back leave behind.

use crate::byte_size::format_byte_size;
use crate::document::TableReader;
use crate::duration::{DAY_MS, SECOND_MS, format_duration_ms};
use crate::error::PolicyError;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Per-execution limits (`[limits]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSettings {
    /// Wall-clock time an execution gets when the request does not say.
    pub timeout_ms: u64,
    /// The longest timeout a request may ask for.
    pub max_timeout_ms: u64,
    /// Memory available to one execution (key `memory`).
    pub memory_bytes: u64,
    /// Stack size of the engine thread (key `stack`).
    pub stack_bytes: u64,
    /// Tool calls one execution may make.
    pub max_tool_calls: u32,
    /// Console output and progress messages, in bytes (key `max_output`); the result is
    /// limited separately, to 16 MiB of JSON, by the worker.
    pub max_output_bytes: u64,
    /// What the agent gets of one execution (result, stdout, stderr, error), in `cl100k_base`
    /// tokens (key `max_output_tokens`); more is cut with a note. A request may ask for less.
    pub max_output_tokens: u64,
    /// Size of the submitted program (key `max_code`).
    pub max_code_bytes: u64,
    /// Executions of one principal that may wait at once (for client tool results or an
    /// approval, or kept detached); one more that would wait is refused instead. `0`: none may
    /// wait. Counted per principal: `[limits]`' value applies to each principal on its own.
    pub max_waiting_executions: u32,
    /// How long an execution may wait for client tool results (or be kept detached) before it
    /// expires and what the daemon kept of it is dropped (key `waiting_ttl`).
    pub waiting_ttl_ms: u64,
    /// Executions of one principal that run at once (each holds a worker); more wait in the
    /// principal's queue. The daemon's `max_concurrent_executions` is shared fairly besides.
    pub max_running_executions: u32,
    /// Executions of one principal that may wait for a slot at once; one more is refused with
    /// `429` and `Retry-After`. `0`: an execution that cannot start at once is refused. Each
    /// queued execution's program is held in memory, so this bounds that memory too.
    pub max_queued_executions: u32,
    /// Connections one principal may hold open at once; one more is answered `429` and closed
    /// before anything of it is read.
    pub max_connections: u32,
}

/// One limit a principal may only lower: its key, how to read it from limits, how to show it.
type Ceiling = (&'static str, fn(&LimitSettings) -> u64, fn(u64) -> String);

/// Every limit but `timeout_ms`, which is a default, not a ceiling: it only has to stay within
/// the principal's own `max_timeout_ms`, which `read_over` checks.
const CEILINGS: [Ceiling; 12] = [
    ("max_timeout_ms", |l| l.max_timeout_ms, count),
    ("memory", |l| l.memory_bytes, format_byte_size),
    ("stack", |l| l.stack_bytes, format_byte_size),
    ("max_tool_calls", |l| u64::from(l.max_tool_calls), count),
    ("max_output", |l| l.max_output_bytes, format_byte_size),
    ("max_output_tokens", |l| l.max_output_tokens, count),
    ("max_code", |l| l.max_code_bytes, format_byte_size),
    (
        "max_waiting_executions",
        |l| u64::from(l.max_waiting_executions),
        count,
    ),
    ("waiting_ttl", |l| l.waiting_ttl_ms, format_duration_ms),
    (
        "max_running_executions",
        |l| u64::from(l.max_running_executions),
        count,
    ),
    (
        "max_queued_executions",
        |l| u64::from(l.max_queued_executions),
        count,
    ),
    ("max_connections", |l| u64::from(l.max_connections), count),
];

/// A count or a number of milliseconds, as written in the policy.
fn count(n: u64) -> String {
    n.to_string()
}

impl LimitSettings {
    /// Keys accepted in `[limits]`.
    pub(crate) const KEYS: &'static [&'static str] = &[
        "timeout_ms",
        "max_timeout_ms",
        "memory",
        "stack",
        "max_tool_calls",
        "max_output",
        "max_output_tokens",
        "max_code",
        "max_waiting_executions",
        "waiting_ttl",
        "max_running_executions",
        "max_queued_executions",
        "max_connections",
    ];
    /// Default `timeout_ms` (30 s); lowered to `max_timeout_ms` if that is smaller.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
    /// Default `max_timeout_ms` (5 min).
    pub const DEFAULT_MAX_TIMEOUT_MS: u64 = 300_000;
    /// Largest `max_timeout_ms` (24 h).
    pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
    /// Default `memory`.
    pub const DEFAULT_MEMORY_BYTES: u64 = 256 * MIB;
    /// Smallest `memory`: below this the engine cannot start.
    pub const MIN_MEMORY_BYTES: u64 = 8 * MIB;
    /// Largest `memory`.
    pub const MAX_MEMORY_BYTES: u64 = 64 * GIB;
    /// Default `stack`.
    pub const DEFAULT_STACK_BYTES: u64 = MIB;
    /// Smallest `stack`.
    pub const MIN_STACK_BYTES: u64 = 256 * KIB;
    /// Largest `stack`.
    pub const MAX_STACK_BYTES: u64 = 8 * MIB;
    /// Default `max_tool_calls`.
    pub const DEFAULT_MAX_TOOL_CALLS: u32 = 1000;
    /// Largest `max_tool_calls`.
    pub const MAX_TOOL_CALLS: u32 = 1_000_000;
    /// Default `max_output`.
    pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = MIB;
    /// Smallest `max_output`.
    pub const MIN_OUTPUT_BYTES: u64 = KIB;
    /// Largest `max_output` (must fit in one supervisor⇄worker frame with room to spare).
    pub const MAX_OUTPUT_BYTES: u64 = 16 * MIB;
    /// Default `max_output_tokens`: about a page of a model's context.
    pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 10_000;
    /// Smallest `max_output_tokens`: room for the note that says what was cut.
    pub const MIN_OUTPUT_TOKENS: u64 = 100;
    /// Largest `max_output_tokens` (more than 16 MiB of output and result could never reach).
    pub const MAX_OUTPUT_TOKENS: u64 = 1 << 25;
    /// Default `max_code`.
    pub const DEFAULT_MAX_CODE_BYTES: u64 = 16 * MIB;
    /// Smallest `max_code`.
    pub const MIN_CODE_BYTES: u64 = KIB;
    /// Largest `max_code` (must fit in one supervisor⇄worker frame with room to spare).
    pub const MAX_CODE_BYTES: u64 = 16 * MIB;
    /// Default `max_waiting_executions`.
    pub const DEFAULT_MAX_WAITING_EXECUTIONS: u32 = 16;
    /// Largest `max_waiting_executions`: the daemon keeps each waiting execution's code and
    /// calls until it is answered or expires.
    pub const MAX_WAITING_EXECUTIONS: u32 = 1024;
    /// Default `waiting_ttl` (24 h): a client gets a working day to come back.
    pub const DEFAULT_WAITING_TTL_MS: u64 = DAY_MS;
    /// Smallest `waiting_ttl` (1 s).
    pub const MIN_WAITING_TTL_MS: u64 = SECOND_MS;
    /// Largest `waiting_ttl` (30 days): a waiting worker is not an archive.
    pub const MAX_WAITING_TTL_MS: u64 = 30 * DAY_MS;
    /// Default `max_running_executions`: a quarter of the daemon's default slots, so four busy
    /// principals still leave room.
    pub const DEFAULT_MAX_RUNNING_EXECUTIONS: u32 = 16;
    /// Largest `max_running_executions` (the daemon's largest `max_concurrent_executions`).
    pub const MAX_RUNNING_EXECUTIONS: u32 = 4096;
    /// Default `max_queued_executions`.
    pub const DEFAULT_MAX_QUEUED_EXECUTIONS: u32 = 32;
    /// Largest `max_queued_executions`: each holds its program (up to `max_code`) in memory.
    pub const MAX_QUEUED_EXECUTIONS: u32 = 4096;
    /// Default `max_connections`.
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 64;
    /// Largest `max_connections` (the daemon's largest `max_connections`).
    pub const MAX_CONNECTIONS: u32 = 65_536;

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        Self::read_over(table, &LimitSettings::default())
    }

    /// Reads a principal's `limits` table: keys left out keep `global`'s value, and a key set
    /// above `global`'s value is refused. Pool workers are started with ceilings derived from
    /// `[limits]`, so a principal can only be given less than the policy's limits, never more.
    pub(crate) fn read_narrowing(
        table: &TableReader<'_>,
        global: &LimitSettings,
    ) -> Result<Self, PolicyError> {
        let limits = Self::read_over(table, global)?;
        for (key, read, show) in CEILINGS {
            let (value, ceiling) = (read(&limits), read(global));
            if value > ceiling
                && let Some(field) = table.get(key)
            {
                return Err(field.invalid(format!(
                    "{} is more than the policy's limits.{key} ({}): a principal's limits can only lower [limits]; raise limits.{key} too",
                    show(value),
                    show(ceiling)
                )));
            }
        }
        Ok(limits)
    }

    /// Reads a limits table whose absent keys take `defaults`' values.
    fn read_over(table: &TableReader<'_>, defaults: &LimitSettings) -> Result<Self, PolicyError> {
        let max_timeout_ms = match table.get("max_timeout_ms") {
            Some(field) => field.u64_in(1..=Self::MAX_TIMEOUT_MS)?,
            None => defaults.max_timeout_ms,
        };
        let timeout_ms = match table.get("timeout_ms") {
            Some(field) => {
                let timeout = field.u64_in(1..=Self::MAX_TIMEOUT_MS)?;
                if timeout > max_timeout_ms {
                    return Err(field.invalid(format!(
                        "{timeout} is more than limits.max_timeout_ms ({max_timeout_ms}); raise max_timeout_ms or lower timeout_ms"
                    )));
                }
                timeout
            }
            None => defaults.timeout_ms.min(max_timeout_ms),
        };
        Ok(LimitSettings {
            timeout_ms,
            max_timeout_ms,
            memory_bytes: match table.get("memory") {
                Some(field) => {
                    field.byte_size_in(Self::MIN_MEMORY_BYTES..=Self::MAX_MEMORY_BYTES)?
                }
                None => defaults.memory_bytes,
            },
            stack_bytes: match table.get("stack") {
                Some(field) => field.byte_size_in(Self::MIN_STACK_BYTES..=Self::MAX_STACK_BYTES)?,
                None => defaults.stack_bytes,
            },
            max_tool_calls: match table.get("max_tool_calls") {
                Some(field) => {
                    let calls = field.u64_in(0..=u64::from(Self::MAX_TOOL_CALLS))?;
                    u32::try_from(calls)
                        .map_err(|_| field.out_of_range(format!("0..={}", Self::MAX_TOOL_CALLS)))?
                }
                None => defaults.max_tool_calls,
            },
            max_output_bytes: match table.get("max_output") {
                Some(field) => {
                    field.byte_size_in(Self::MIN_OUTPUT_BYTES..=Self::MAX_OUTPUT_BYTES)?
                }
                None => defaults.max_output_bytes,
            },
            max_output_tokens: match table.get("max_output_tokens") {
                Some(field) => field.u64_in(Self::MIN_OUTPUT_TOKENS..=Self::MAX_OUTPUT_TOKENS)?,
                None => defaults.max_output_tokens,
            },
            max_code_bytes: match table.get("max_code") {
                Some(field) => field.byte_size_in(Self::MIN_CODE_BYTES..=Self::MAX_CODE_BYTES)?,
                None => defaults.max_code_bytes,
            },
            max_waiting_executions: match table.get("max_waiting_executions") {
                Some(field) => field.u32_in(0..=Self::MAX_WAITING_EXECUTIONS)?,
                None => defaults.max_waiting_executions,
            },
            waiting_ttl_ms: match table.get("waiting_ttl") {
                Some(field) => {
                    field.duration_ms_in(Self::MIN_WAITING_TTL_MS..=Self::MAX_WAITING_TTL_MS)?
                }
                None => defaults.waiting_ttl_ms,
            },
            max_running_executions: match table.get("max_running_executions") {
                Some(field) => field.u32_in(1..=Self::MAX_RUNNING_EXECUTIONS)?,
                None => defaults.max_running_executions,
            },
            max_queued_executions: match table.get("max_queued_executions") {
                Some(field) => field.u32_in(0..=Self::MAX_QUEUED_EXECUTIONS)?,
                None => defaults.max_queued_executions,
            },
            max_connections: match table.get("max_connections") {
                Some(field) => field.u32_in(1..=Self::MAX_CONNECTIONS)?,
                None => defaults.max_connections,
            },
        })
    }
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
            max_timeout_ms: Self::DEFAULT_MAX_TIMEOUT_MS,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            stack_bytes: Self::DEFAULT_STACK_BYTES,
            max_tool_calls: Self::DEFAULT_MAX_TOOL_CALLS,
            max_output_bytes: Self::DEFAULT_MAX_OUTPUT_BYTES,
            max_output_tokens: Self::DEFAULT_MAX_OUTPUT_TOKENS,
            max_code_bytes: Self::DEFAULT_MAX_CODE_BYTES,
            max_waiting_executions: Self::DEFAULT_MAX_WAITING_EXECUTIONS,
            waiting_ttl_ms: Self::DEFAULT_WAITING_TTL_MS,
            max_running_executions: Self::DEFAULT_MAX_RUNNING_EXECUTIONS,
            max_queued_executions: Self::DEFAULT_MAX_QUEUED_EXECUTIONS,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::test_support::{assert_refused, parse};
    use crate::duration::HOUR_MS;

    fn limits(text: &str) -> Result<LimitSettings, PolicyError> {
        parse(text).map(|policy| policy.limits)
    }

    /// The limits of the one principal `p` that `text` (a `[limits]` table or nothing) and
    /// `principal_limits` (the keys of its own `limits` table) give it.
    fn principal_limits(text: &str, principal_limits: &str) -> Result<LimitSettings, String> {
        parse(&format!(
            "{text}\n[[principal]]\nname = \"p\"\nusers = [0]\n[principal.limits]\n{principal_limits}\n"
        ))
        .map(|mut policy| policy.principals.remove(0).limits)
        .map_err(|e| e.to_string())
    }

    #[test]
    fn waiting_limits_default_to_16_executions_for_a_day() {
        let defaults = LimitSettings::default();
        assert_eq!(defaults.max_waiting_executions, 16);
        assert_eq!(defaults.waiting_ttl_ms, 24 * 3_600_000);
        assert_eq!(limits("").unwrap(), defaults);
        assert_eq!(limits("[limits]\n").unwrap(), defaults);
    }

    #[test]
    fn waiting_limits_are_read() {
        let read = limits("[limits]\nmax_waiting_executions = 0\nwaiting_ttl = \"2d\"\n").unwrap();
        assert_eq!(read.max_waiting_executions, 0, "0: none may wait");
        assert_eq!(read.waiting_ttl_ms, 2 * DAY_MS);
        let cases: &[(&str, u64)] = &[
            ("\"30s\"", 30_000),
            ("\"15m\"", 900_000),
            ("\"1h\"", HOUR_MS),
            ("\"30d\"", 30 * DAY_MS),
            ("1", SECOND_MS),
            ("90", 90 * SECOND_MS),
        ];
        for &(written, ms) in cases {
            let read = limits(&format!("[limits]\nwaiting_ttl = {written}\n")).unwrap();
            assert_eq!(read.waiting_ttl_ms, ms, "{written}");
        }
        let most = limits("[limits]\nmax_waiting_executions = 1024\n").unwrap();
        assert_eq!(most.max_waiting_executions, 1024);
    }

    #[test]
    fn waiting_limits_out_of_bounds_are_located_and_name_the_key() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "max_waiting_executions = 1025",
                "limits.max_waiting_executions",
                "0..=1024",
            ),
            (
                "max_waiting_executions = -1",
                "limits.max_waiting_executions",
                "0..=1024",
            ),
            (
                "max_waiting_executions = \"16\"",
                "limits.max_waiting_executions",
                "expected an integer",
            ),
            ("waiting_ttl = \"31d\"", "limits.waiting_ttl", "1s..=30d"),
            ("waiting_ttl = \"0s\"", "limits.waiting_ttl", "1s..=30d"),
            ("waiting_ttl = 0", "limits.waiting_ttl", "1s..=30d"),
            ("waiting_ttl = -5", "limits.waiting_ttl", "1s..=30d"),
            (
                "waiting_ttl = \"1H\"",
                "limits.waiting_ttl",
                "did you mean `h`",
            ),
            ("waiting_ttl = \"24\"", "limits.waiting_ttl", "add a unit"),
            (
                "waiting_ttl = true",
                "limits.waiting_ttl",
                "a duration such as",
            ),
            (
                "waiting_ttl = 9223372036854775807",
                "limits.waiting_ttl",
                "out of range",
            ),
        ];
        for &(line, key, detail) in cases {
            assert_refused(&format!("[limits]\n{line}\n"), "2", key, detail);
        }
    }

    #[test]
    fn a_principal_may_only_lower_the_waiting_limits() {
        let global = "[limits]\nmax_waiting_executions = 8\nwaiting_ttl = \"12h\"\n";
        let inherited = principal_limits(global, "").unwrap();
        assert_eq!(inherited.max_waiting_executions, 8);
        assert_eq!(inherited.waiting_ttl_ms, 12 * HOUR_MS);

        let lowered =
            principal_limits(global, "max_waiting_executions = 0\nwaiting_ttl = \"15m\"").unwrap();
        assert_eq!(lowered.max_waiting_executions, 0);
        assert_eq!(lowered.waiting_ttl_ms, 15 * 60 * SECOND_MS);
        let equal = principal_limits(global, "waiting_ttl = 43200").unwrap();
        assert_eq!(equal.waiting_ttl_ms, 12 * HOUR_MS);

        let message = principal_limits(global, "max_waiting_executions = 9").unwrap_err();
        assert!(
            message.contains("principal[0].limits.max_waiting_executions: 9 is more than the policy's limits.max_waiting_executions (8)"),
            "{message}"
        );
        assert!(
            message.contains("raise limits.max_waiting_executions too"),
            "{message}"
        );
        let message = principal_limits(global, "waiting_ttl = \"1d\"").unwrap_err();
        assert!(
            message.contains("principal[0].limits.waiting_ttl: 1d is more than the policy's limits.waiting_ttl (12h)"),
            "{message}"
        );
        // Without [limits] the defaults are the ceilings.
        let message = principal_limits("", "waiting_ttl = \"2d\"").unwrap_err();
        assert!(message.contains("(1d)"), "{message}");
        principal_limits("", "max_waiting_executions = 16").unwrap();
        assert!(principal_limits("", "max_waiting_executions = 17").is_err());
    }

    #[test]
    fn principal_share_limits_have_defaults_and_are_read() {
        let defaults = LimitSettings::default();
        assert_eq!(defaults.max_running_executions, 16);
        assert_eq!(defaults.max_queued_executions, 32);
        assert_eq!(defaults.max_connections, 64);
        let read = limits(
            "[limits]\nmax_running_executions = 2\nmax_queued_executions = 0\nmax_connections = 5\n",
        )
        .unwrap();
        assert_eq!(read.max_running_executions, 2);
        assert_eq!(read.max_queued_executions, 0, "0: nothing waits for a slot");
        assert_eq!(read.max_connections, 5);
        let lowered = principal_limits(
            "[limits]\nmax_connections = 8\n",
            "max_connections = 2\nmax_running_executions = 1",
        )
        .unwrap();
        assert_eq!(lowered.max_connections, 2);
        assert_eq!(lowered.max_running_executions, 1);
        let message =
            principal_limits("[limits]\nmax_connections = 8\n", "max_connections = 9").unwrap_err();
        assert!(
            message.contains("principal[0].limits.max_connections: 9 is more than the policy's limits.max_connections (8)"),
            "{message}"
        );
    }

    #[test]
    fn the_output_token_budget_defaults_to_10000_and_a_principal_may_only_lower_it() {
        assert_eq!(limits("").unwrap().max_output_tokens, 10_000);
        let read = limits("[limits]\nmax_output_tokens = 2000\n").unwrap();
        assert_eq!(read.max_output_tokens, 2000);
        assert_refused(
            "[limits]\nmax_output_tokens = 99\n",
            "2",
            "limits.max_output_tokens",
            "100..=33554432",
        );
        let lowered = principal_limits(
            "[limits]\nmax_output_tokens = 2000\n",
            "max_output_tokens = 500",
        )
        .unwrap();
        assert_eq!(lowered.max_output_tokens, 500);
        let message = principal_limits(
            "[limits]\nmax_output_tokens = 2000\n",
            "max_output_tokens = 2001",
        )
        .unwrap_err();
        assert!(
            message.contains("principal[0].limits.max_output_tokens: 2001 is more than the policy's limits.max_output_tokens (2000)"),
            "{message}"
        );
    }

    #[test]
    fn principal_share_limits_out_of_bounds_name_the_key() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "max_running_executions = 0",
                "limits.max_running_executions",
                "1..=4096",
            ),
            (
                "max_running_executions = 4097",
                "limits.max_running_executions",
                "1..=4096",
            ),
            (
                "max_queued_executions = -1",
                "limits.max_queued_executions",
                "0..=4096",
            ),
            (
                "max_queued_executions = \"8\"",
                "limits.max_queued_executions",
                "expected an integer",
            ),
            ("max_connections = 0", "limits.max_connections", "1..=65536"),
        ];
        for &(line, key, detail) in cases {
            assert_refused(&format!("[limits]\n{line}\n"), "2", key, detail);
        }
    }
}
