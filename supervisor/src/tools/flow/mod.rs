//! Information flow inside one execution: text from untrusted results (the policy's
//! `trust = "untrusted"` sources, and tools a `[[flow]]` rule's `from` names) may not steer a
//! consequential call (a `sink`, or a tool a rule's `to` names) unchecked.
//!
//! The supervisor decides alone: it records what it delivered to the program itself, and
//! checks a sink call's arguments at its arrival, before the call is made. Nothing the worker
//! says about where a value came from counts (the program is untrusted too).
//!
//! What is matched ([`window`]): every string and number (as its JSON text) of an untrusted
//! result, and an untrusted call's error message when the tool wrote it (`upstream_error`),
//! cut into runs of [`MIN_MATCH_CHARS`] characters (not the result's object keys: those are
//! mostly the tool's own field names); a string, object key or number of a sink's arguments
//! that contains one of those runs, exactly as written (case and all), is a flow from that
//! result. So is a whole value equal to one of at least that length. What is not: anything
//! shorter, and anything the program computes from the text
//! that changes its characters (case changes, base64, reversing, splitting it up with other
//! characters between): this stops a program that passes attacker text along, not one that
//! means to hide it.
//!
//! Order and replay: results are recorded as they are delivered to the program, and a call is
//! checked at arrival, in call order, so a call is checked against exactly the untrusted
//! results the program could have read before making it. A call answered from a session's
//! journal is not checked again (it was decided when it was made).
//!
//! Bounds ([`ledger`]): at most [`ledger::MAX_WINDOWS`] distinct runs are kept per execution
//! (25 bytes a slot, about 13 MiB at the bound); past that, further untrusted results are not recorded, and every later
//! checked call is decided as if each of those results had flowed into every argument: a
//! `deny` rule denies (fail closed), `approve` asks, `log` records it, and the trace says so.
//! The walk of a value stops at [`window::MAX_DEPTH`] levels (deeper parts are not recorded, and a
//! sink argument deeper than that is treated as a flow from every untrusted result).
//!
//! This module reads the policy and the values it is given; it calls no tool.

mod ledger;
mod window;

pub use ledger::FlowLedger;

pub use airlock_policy::information_flow::MIN_MATCH_CHARS;
