//! libFuzzer on the worker's TypeScript stripper (worker/src/language/javascript/fuzz.rs).

#![no_main]

airlock_fuzz_targets::libfuzzer_binary!(airlock_fuzz_targets::javascript::fuzz);
