//! Executions: from a validated request to its response, one way through. The service
//! (`service`) is what front doors submit programs to: admission, limits, the principal's
//! rate, ids, metrics and the audit trail, detached executions and what is kept of them. It
//! builds one plan (`plan`) of the execution from the request, which the later stages borrow:
//! `launch` takes its place (`slots`: shared fairly between principals, each with a bounded
//! queue), begins its session, enters it in the registry (`registry`: the running executions
//! by id, and a detached one's events) and runs it in the door's task while a client waits
//! (`attached`) or in one of its own. The run loop (`run`) takes its worker and gives it the
//! program (`worker`, the one place a worker is started), judges its literal tool calls
//! (`contract`), hands every tool call to the call pipeline ([`crate::tools::call`]) and
//! answers the session store's (`store_calls`) itself, and keeps
//! what the program says (`output`) and the calls it made or holds (`trace`); the response
//! (`response`) is made from those parts, with errors that say what to do next (`error`),
//! and cut to the output budget in tokens (`budget`).
//! `waiting` is the part of the service for executions that wait for someone outside the
//! daemon (client-owned tools, approvals) and go on by re-running from the record. Each
//! run's clock and seeds come from [`crate::determinism`], below everything that uses them.
//!
//! What lives here may not speak HTTP (that is [`crate::api`]) nor any tool protocol (that is
//! [`crate::tools`]); it sees workers only through [`crate::workers`].

mod attached;
pub mod budget;
pub mod contract;
pub mod error;
mod launch;
mod output;
mod plan;
pub mod registry;
mod response;
mod result_preview;
mod run;
pub mod service;
pub mod slots;
mod store_calls;
mod trace;
pub mod waiting;
mod worker;

pub use attached::Started;
pub use service::{ExecutionService, Submission, SubmitError, Tracked};
pub use waiting::{Approver, DecideError};
