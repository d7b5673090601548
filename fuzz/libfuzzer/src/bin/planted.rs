//! The harness's own check, never part of Airlock: a bug planted where a random mutator does
//! not reach it and coverage and comparison feedback do. `fuzz/run planted` requires libFuzzer
//! to find it from the seed in `fuzz/libfuzzer/planted/` within 60 s; `fuzz/run random
//! planted` gives the random mutator the same seed and time.
//!
//! The input is a header, an 8-byte magic and a 32-bit little-endian field, and the bug is one
//! value of the field. The seed has the magic and the field 1: one mutation away (4 bytes
//! overwritten), but one value in 2^32 for a mutator that writes random or "interesting"
//! numbers. libFuzzer's `-sanitizer-coverage-trace-compares` instrumentation records the
//! comparison's constant and its mutator writes it in.

#![no_main]

airlock_fuzz_targets::libfuzzer_binary!(planted);

mod planted {
    use airlock_fuzz::{Fuzz, Outcome};

    const MAGIC: [u8; 8] = *b"AIRLOCK\0";
    const PLANTED: u32 = 0x5eed_f00d;

    pub fn fuzz() -> Fuzz {
        Fuzz::new("planted").corpus(concat!(env!("CARGO_MANIFEST_DIR"), "/planted"))
    }

    pub fn target(data: &[u8]) -> Outcome {
        let Some((magic, rest)) = data.split_first_chunk::<8>() else {
            return Outcome::of("short");
        };
        if *magic != MAGIC {
            return Outcome::of("no magic");
        }
        let Some((field, _)) = rest.split_first_chunk::<4>() else {
            return Outcome::of("no field");
        };
        let field = u32::from_le_bytes(*field);
        assert_ne!(field, PLANTED, "the planted bug");
        Outcome::of("header")
    }
}
