//! libFuzzer on the frame decoder (proto/src/fuzz.rs).

#![no_main]

airlock_fuzz_targets::libfuzzer_binary!(airlock_proto::fuzz);
