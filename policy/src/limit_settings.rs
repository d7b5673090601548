//! The `[limits]` table: what one execution may use. The supervisor turns these into the limits it
//! sends to each worker; a request may ask for a shorter timeout, or a longer one up to
//! `max_timeout_ms`.

use crate::byte_size::format_byte_size;
use crate::document::TableReader;
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
    /// Size of the submitted program (key `max_code`).
    pub max_code_bytes: u64,
}

/// One limit a principal may only lower: key, its value, `[limits]`' value, how to show it.
type Ceiling = (&'static str, u64, u64, fn(u64) -> String);

impl LimitSettings {
    /// Keys accepted in `[limits]`.
    pub(crate) const KEYS: &'static [&'static str] = &[
        "timeout_ms",
        "max_timeout_ms",
        "memory",
        "stack",
        "max_tool_calls",
        "max_output",
        "max_code",
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
    /// Default `max_code`.
    pub const DEFAULT_MAX_CODE_BYTES: u64 = 16 * MIB;
    /// Smallest `max_code`.
    pub const MIN_CODE_BYTES: u64 = KIB;
    /// Largest `max_code` (must fit in one supervisor⇄worker frame with room to spare).
    pub const MAX_CODE_BYTES: u64 = 16 * MIB;

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
        // `timeout_ms` is a default, not a ceiling: it only has to stay within the principal's
        // own `max_timeout_ms`, which `read_over` checks.
        let checks: [Ceiling; 6] = [
            (
                "max_timeout_ms",
                limits.max_timeout_ms,
                global.max_timeout_ms,
                |n| n.to_string(),
            ),
            (
                "memory",
                limits.memory_bytes,
                global.memory_bytes,
                format_byte_size,
            ),
            (
                "stack",
                limits.stack_bytes,
                global.stack_bytes,
                format_byte_size,
            ),
            (
                "max_tool_calls",
                u64::from(limits.max_tool_calls),
                u64::from(global.max_tool_calls),
                |n| n.to_string(),
            ),
            (
                "max_output",
                limits.max_output_bytes,
                global.max_output_bytes,
                format_byte_size,
            ),
            (
                "max_code",
                limits.max_code_bytes,
                global.max_code_bytes,
                format_byte_size,
            ),
        ];
        for (key, value, ceiling, show) in checks {
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
            max_code_bytes: match table.get("max_code") {
                Some(field) => field.byte_size_in(Self::MIN_CODE_BYTES..=Self::MAX_CODE_BYTES)?,
                None => defaults.max_code_bytes,
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
            max_code_bytes: Self::DEFAULT_MAX_CODE_BYTES,
        }
    }
}
