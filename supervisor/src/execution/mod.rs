//! Executions: from a validated request to its response. The run loop (`run`) takes a
//! worker, sends the program, judges its literal tool calls (`contract`), hands every tool
//! call to the call pipeline ([`crate::tools::call`]), and the response (`response`) turns
//! whatever happened into what the agent reads, with errors that say what to do next
//! (`error`). The service (`service`) is what front doors submit programs to: admission,
//! limits, slots (`slots`: shared fairly between principals, each with a bounded queue),
//! metrics and the audit trail, detached executions and what is kept of them;
//! `waiting` is the part of the service for executions that wait for someone outside the
//! daemon (client-owned tools, approvals) and go on by re-running from the record;
//! `determinism` gives each run its clock and seeds; the registry (`registry`) knows the
//! running executions by id, and a detached one's events.
//!
//! What lives here may not speak HTTP (that is [`crate::api`]) nor any tool protocol (that is
//! [`crate::tools`]); it sees workers only through [`crate::workers`].

pub mod contract;
pub mod determinism;
pub mod error;
pub mod registry;
mod response;
mod result_preview;
mod run;
pub mod service;
pub mod slots;
pub mod waiting;

pub use registry::{CancelError, EventLog, LiveExecutions, StopSignals};
pub use run::{ExecutionEnv, ExecutionJob, KILL_GRACE, run_execution};
pub use service::{ExecutionService, Started, Submission, SubmitError, Tracked};
pub use waiting::{Approver, DecideError, Decided};
