//! The clock and the seeds a program runs with ([`Determinism`]): the supervisor's to give, so
//! that an execution is a pure function of its code, these and its ordered tool results, and
//! a replayed execution can be given the same ones again.

use airlock_proto::Determinism;
use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock in milliseconds since the Unix epoch (0 before it, which no host is).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A clock starting now and a seed from the kernel's random source.
pub fn fresh() -> Determinism {
    Determinism {
        clock_ms: now_ms(),
        seed: random_seed(),
    }
}

/// 32 bytes from `getrandom(2)`, which blocks only before the kernel's pool is first
/// initialised (early boot), never after.
pub fn random_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    let mut filled = 0;
    while filled < seed.len() {
        let rest = &mut seed[filled..];
        // SAFETY: getrandom writes at most `rest.len()` bytes into `rest`, which we own.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(n) {
            Ok(n) => filled += n,
            // EINTR: try again. No other error is possible with these arguments on Linux ≥ 3.17.
            Err(_) => continue,
        }
    }
    seed
}

#[cfg(test)]
mod tests {
    #[test]
    fn seeds_differ_and_the_clock_is_now() {
        let (a, b) = (super::fresh(), super::fresh());
        assert_ne!(a.seed, b.seed);
        assert!(b.clock_ms >= a.clock_ms && a.clock_ms > 1_700_000_000_000);
    }
}
