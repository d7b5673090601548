//! The wire contract between the Airlock supervisor (`airlockd`) and its sandboxed workers.
//!
//! Everything that crosses the socket pair on the worker's fd 3 is defined here and nowhere
//! else, so that the two sides cannot drift apart:
//!
//! - [`message`]: the two message enums ([`WorkerMessage`] worker → supervisor,
//!   [`SupervisorMessage`] supervisor → worker), execution limits and structured errors.
//! - [`frame`]: length-prefixed postcard framing with a hard maximum frame size; a decoder
//!   that never panics, never allocates more than the frame it was given, and rejects
//!   oversized, truncated, trailing-byte and unknown-tag input.
//!
//! The crate deliberately has no async runtime and no policy types: the worker links it
//! inside its sandbox, and the supervisor turns policy into the [`Limits`] it sends.

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

pub mod frame;
pub mod message;

#[cfg(any(test, fuzzing))]
pub mod fuzz;

pub use frame::{FrameDecoder, FrameError, MAX_FRAME_LEN, decode, decode_packet, encode};
pub use message::{
    ConsoleLevel, Determinism, ErrorKind, ExecError, ForkReply, ForkRequest, Language, Limits,
    LiteralKind, LiteralObject, LiteralProperty, LiteralScalar, LockdownReport,
    MAX_LITERAL_SCALAR_BYTES, Outcome, SourcePosition, StartExecution, SupervisorMessage,
    ToolFailure, ToolReference, ToolReferences, WorkerMessage, WorkerStats,
};

/// Version of this wire contract. The worker announces it in [`WorkerMessage::Ready`]; the
/// supervisor refuses a worker whose version differs, because a worker binary left over from
/// another build would otherwise misread every message.
pub const PROTOCOL_VERSION: u32 = 11;

/// The file descriptor on which a worker finds its end of the socket pair.
pub const IPC_FD: i32 = 3;

/// Largest tool-call arguments, as JSON text. The worker refuses bigger arguments with a
/// clear error; the supervisor treats a `ToolCall` over it as a broken protocol (only a
/// compromised worker sends one), so no execution can make it hold more than this per call.
pub const MAX_TOOL_ARGS_BYTES: usize = 16 * 1024 * 1024;
