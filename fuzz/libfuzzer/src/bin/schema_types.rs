//! libFuzzer on the JSON Schema to TypeScript generator (supervisor/src/sdk/fuzz.rs).

#![no_main]

airlock_fuzz_targets::libfuzzer_binary!(airlock_supervisor::sdk::fuzz);
