//! libFuzzer on the policy parser (policy/src/fuzz.rs).

#![no_main]

airlock_fuzz_targets::libfuzzer_binary!(airlock_policy::fuzz);
