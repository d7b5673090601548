//! The libFuzzer build of Airlock's fuzz targets (docs/testing.md, "Fuzzing").
//!
//! Each binary in `src/bin/` is one target: libFuzzer calls the `target` function of the
//! target's module beside the code it fuzzes, compiled under `cfg(fuzzing)` (the same checks
//! `cargo test` replays the seeds through). [`main`] starts libFuzzer on the target's stack
//! and [`init`] runs before it fuzzes. The `planted` binary is the harness's own check, never
//! part of Airlock: `fuzz/run planted` requires libFuzzer to find its planted bug.

pub mod javascript;

use airlock_fuzz::{Fuzz, Outcome};
use std::ffi::{c_char, c_int};

unsafe extern "C" {
    /// libFuzzer's driver (FuzzerDriver.cpp): reads the flags, then fuzzes `callback`.
    fn LLVMFuzzerRunDriver(
        argc: *mut c_int,
        argv: *mut *mut *mut c_char,
        callback: unsafe extern "C" fn(*const u8, usize) -> c_int,
    ) -> c_int;
    /// One input through the target: libfuzzer-sys defines it, around what `fuzz_target!`
    /// defines.
    fn LLVMFuzzerTestOneInput(data: *const u8, size: usize) -> c_int;
}

/// The process's arguments, handed to the driver's thread.
struct Args {
    argc: c_int,
    argv: *mut *mut c_char,
}

// SAFETY: `argv` is the process's argument vector, which lives as long as the process and which
// only the driver's thread reads once `main` has handed it over.
unsafe impl Send for Args {}

/// The `main` of every binary (each defines the C `main` as a call of this, so the linker leaves
/// out libFuzzer's own, FuzzerMain.cpp, which runs the driver on the process's main thread):
/// libFuzzer's driver, on a thread with the target's stack when it has one ([`Fuzz::stack`]),
/// so every input is checked on the stack the code has in Airlock, with no hand-over between
/// threads per input.
pub fn main(fuzz: &Fuzz, argc: c_int, argv: *mut *mut c_char) -> c_int {
    let args = Args { argc, argv };
    let Some(stack) = fuzz.stack_size() else {
        return drive(args);
    };
    std::thread::Builder::new()
        .name(format!("libfuzzer-{}", fuzz.name()))
        .stack_size(stack)
        .spawn(move || drive(args))
        .expect("the fuzzer's thread starts")
        .join()
        // A panic has aborted the process already (libfuzzer-sys's hook).
        .unwrap_or(1)
}

fn drive(mut args: Args) -> c_int {
    // SAFETY: `argc` and `argv` are the process's arguments, as libFuzzer's own `main` passes
    // them; `LLVMFuzzerTestOneInput` is the C callback libFuzzer's `main` passes.
    unsafe { LLVMFuzzerRunDriver(&mut args.argc, &mut args.argv, LLVMFuzzerTestOneInput) }
}

/// The `init:` of every binary's `fuzz_target!`, run before libFuzzer reads its flags:
/// - with `AIRLOCK_FUZZ_DICT=<file>`, writes the target's dictionary (its tokens in
///   `airlock-fuzz`'s settings) there in libFuzzer's format and exits, so `fuzz/run` passes
///   the tokens the tests use as `-dict=` without a copy of them;
/// - with `AIRLOCK_FUZZ_RANDOM=1`, runs `airlock-fuzz`'s random mutator (the engine before
///   libFuzzer: no coverage feedback) on the same target instead, for `AIRLOCK_FUZZ_SECONDS`,
///   and exits 0 without a finding or 1 with one: the baseline the planted bug is measured
///   against.
pub fn init(fuzz: &Fuzz, target: fn(&[u8]) -> Outcome) {
    if let Some(path) = std::env::var_os("AIRLOCK_FUZZ_DICT") {
        if let Err(e) = std::fs::write(&path, fuzz.libfuzzer_dictionary()) {
            eprintln!("cannot write {}: {e}", path.to_string_lossy());
            std::process::exit(2);
        }
        std::process::exit(0);
    }
    if std::env::var_os("AIRLOCK_FUZZ_RANDOM").is_some_and(|v| v == "1") {
        // The random driver catches a target's panic itself and reports the input: the
        // default hook, not libfuzzer-sys's, which aborts.
        drop(std::panic::take_hook());
        let found = std::panic::catch_unwind(|| fuzz.run(target)).is_err();
        std::process::exit(i32::from(found));
    }
}

/// A binary's two entry points for the target module `$target` (its `fuzz()` settings and its
/// `target(&[u8]) -> Outcome` checks): the C `main` and libfuzzer-sys's `fuzz_target!`.
#[macro_export]
macro_rules! libfuzzer_binary {
    ($target:path) => {
        use $target as target;

        #[unsafe(no_mangle)]
        extern "C" fn main(
            argc: ::std::ffi::c_int,
            argv: *mut *mut ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            $crate::main(&target::fuzz(), argc, argv)
        }

        ::libfuzzer_sys::fuzz_target!(
            init: $crate::init(&target::fuzz(), target::target),
            |data: &[u8]| {
                target::target(data);
            }
        );
    };
}
