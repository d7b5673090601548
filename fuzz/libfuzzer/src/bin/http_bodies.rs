//! libFuzzer on the agent API's request bodies (supervisor/src/api/http/fuzz.rs).

#![no_main]

airlock_fuzz_targets::libfuzzer_binary!(airlock_supervisor::api::http::fuzz);
