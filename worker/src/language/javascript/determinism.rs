//! The program's clock and randomness, from the supervisor's [`Determinism`] and never from
//! the system, so that a run is a pure function of its code, its clock and seed, and its
//! ordered tool results (which is what makes a run replayable).
//!
//! - **Clock.** `Date.now()`, `new Date()` and `Date()` read [`Sources::now_ms`]. It starts
//!   at `Determinism::clock_ms` and moves only when a tool result answers the program (to the
//!   result's `clock_ms`, never backwards), so computation alone never sees time pass.
//!   `performance.now()` is the same clock, counted from the start.
//! - **`Math.random()`**: 53 bits of ChaCha20 keyed by the seed, stream 1.
//! - **`crypto.getRandomValues()` / `crypto.randomUUID()`**: ChaCha20 keyed by the seed,
//!   stream 2 (independent of stream 1, so how often one is used never shifts the other).
//!
//! The prelude (`prelude.js`) replaces QuickJS's own `Date`, `Math.random` and `performance`
//! (which read the system clock, or a generator seeded from it) with functions over the
//! natives here, and adds `crypto`. The engine is created before the program's `Start`
//! arrives (pre-started pool), so the natives read per-run [`Sources`] that the bridge
//! replaces when a run begins, rather than values fixed when the prelude ran.

use super::bridge::Bridge;
use airlock_proto::Determinism;
use chacha20::ChaCha20Rng;
use chacha20::rand_core::{Rng, SeedableRng};
use rquickjs::{ArrayBuffer, Ctx, Exception, Function, Object};
use std::rc::Rc;

/// The ChaCha20 stream (nonce) of `Math.random()`.
const MATH_STREAM: u64 = 1;
/// The ChaCha20 stream of `crypto.getRandomValues()` and `crypto.randomUUID()`.
const CRYPTO_STREAM: u64 = 2;

/// The largest time a `Date` can hold (ECMAScript's time range, ±8.64e15 ms); a later clock
/// is held there so `new Date()` is always a valid date.
pub(super) const MAX_CLOCK_MS: u64 = 8_640_000_000_000_000;

/// Web Crypto's limit on one `getRandomValues` call, in bytes.
pub(super) const MAX_RANDOM_BYTES: usize = 65_536;

/// `2^-53`: scales 53 random bits to a double in `[0, 1)`.
const TWO_POW_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;

/// The clock and the two random streams of one run.
pub(super) struct Sources {
    /// The clock when the run began.
    origin_ms: u64,
    now_ms: u64,
    math: ChaCha20Rng,
    crypto: ChaCha20Rng,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The generators' state is the seed: not for logs.
        f.debug_struct("Sources")
            .field("origin_ms", &self.origin_ms)
            .field("now_ms", &self.now_ms)
            .finish_non_exhaustive()
    }
}

impl Default for Sources {
    /// Before a run begins (only the engine's own warm-up runs then): the epoch and an
    /// all-zero seed. [`Bridge::begin`] replaces it with the run's.
    fn default() -> Self {
        Sources::new(&Determinism {
            clock_ms: 0,
            seed: [0; 32],
        })
    }
}

impl Sources {
    pub fn new(determinism: &Determinism) -> Sources {
        let stream = |id| {
            let mut rng = ChaCha20Rng::from_seed(determinism.seed);
            rng.set_stream(id);
            rng
        };
        let start = determinism.clock_ms.min(MAX_CLOCK_MS);
        Sources {
            origin_ms: start,
            now_ms: start,
            math: stream(MATH_STREAM),
            crypto: stream(CRYPTO_STREAM),
        }
    }

    /// The program's clock, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The clock when the run began (`performance.timeOrigin`).
    pub fn origin_ms(&self) -> u64 {
        self.origin_ms
    }

    /// A tool result answered the program: its clock moves to `clock_ms`, unless that is
    /// earlier than the clock already is (a program never sees time go backwards).
    pub fn advance(&mut self, clock_ms: u64) {
        self.now_ms = self.now_ms.max(clock_ms.min(MAX_CLOCK_MS));
    }

    /// `Math.random()`: a double in `[0, 1)` from the top 53 bits of the next 64.
    pub fn math_random(&mut self) -> f64 {
        let bits = self.math.next_u64() >> 11;
        // Two exact conversions (each half fits in 32 bits) instead of a lossy cast; the sum
        // is exact too, since `bits` < 2^53.
        let high = u32::try_from(bits >> 32).unwrap_or(0);
        let low = u32::try_from(bits & 0xffff_ffff).unwrap_or(0);
        (f64::from(high) * 4_294_967_296.0 + f64::from(low)) * TWO_POW_MINUS_53
    }

    /// `len` bytes of the crypto stream.
    pub fn random_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut bytes = vec![0; len];
        self.crypto.fill_bytes(&mut bytes);
        bytes
    }

    /// `crypto.randomUUID()`: 16 bytes of the crypto stream as an RFC 4122 version 4 UUID.
    pub fn random_uuid(&mut self) -> String {
        let mut b = [0u8; 16];
        self.crypto.fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40; // version 4
        b[8] = (b[8] & 0x3f) | 0x80; // variant 10xx (RFC 4122)
        let mut text = String::with_capacity(36);
        for (i, byte) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                text.push('-');
            }
            text.push_str(&format!("{byte:02x}"));
        }
        text
    }
}

/// Adds the clock and randomness natives to the object handed to the prelude:
///
/// | native        | JavaScript that uses it                      |
/// |---------------|----------------------------------------------|
/// | `clockNow`    | `Date.now()`, `new Date()`, `Date()`, `performance.now()` |
/// | `clockOrigin` | `performance.timeOrigin`, `performance.now()` |
/// | `mathRandom`  | `Math.random()`                              |
/// | `randomBytes` | `crypto.getRandomValues()` (an `ArrayBuffer` the prelude copies in) |
/// | `randomUUID`  | `crypto.randomUUID()`                        |
pub(super) fn add_natives<'js>(
    ctx: &Ctx<'js>,
    natives: &Object<'js>,
    bridge: &Rc<Bridge>,
) -> rquickjs::Result<()> {
    let b = Rc::clone(bridge);
    let clock_now = Function::new(ctx.clone(), move || b.with_sources(|s| s.now_ms()))?
        .with_name("clockNow")?;
    natives.set("clockNow", clock_now)?;

    let b = Rc::clone(bridge);
    let clock_origin = Function::new(ctx.clone(), move || b.with_sources(|s| s.origin_ms()))?
        .with_name("clockOrigin")?;
    natives.set("clockOrigin", clock_origin)?;

    let b = Rc::clone(bridge);
    let math_random = Function::new(ctx.clone(), move || b.with_sources(Sources::math_random))?
        .with_name("mathRandom")?;
    natives.set("mathRandom", math_random)?;

    let b = Rc::clone(bridge);
    let random_bytes = Function::new(ctx.clone(), move |ctx: Ctx<'js>, len: i32| {
        // The prelude has checked the array already; this only keeps the native safe on its
        // own (it is never reachable from the program).
        let len = match usize::try_from(len) {
            Ok(len) if len <= MAX_RANDOM_BYTES => len,
            _ => {
                return Err(Exception::throw_range(
                    &ctx,
                    "randomBytes: the length must be an integer from 0 to 65536",
                ));
            }
        };
        let bytes = b.with_sources(|s| s.random_bytes(len));
        ArrayBuffer::new(ctx, bytes)
    })?
    .with_name("randomBytes")?;
    natives.set("randomBytes", random_bytes)?;

    let b = Rc::clone(bridge);
    let random_uuid = Function::new(ctx.clone(), move || b.with_sources(Sources::random_uuid))?
        .with_name("randomUUID")?;
    natives.set("randomUUID", random_uuid)?;

    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(clock_ms: u64, seed: u8) -> Sources {
        Sources::new(&Determinism {
            clock_ms,
            seed: [seed; 32],
        })
    }

    #[test]
    fn the_clock_only_moves_forward_and_stays_in_dates_range() {
        let mut s = sources(1_000, 0);
        assert_eq!((s.now_ms(), s.origin_ms()), (1_000, 1_000));
        s.advance(5_000);
        s.advance(2_000);
        assert_eq!((s.now_ms(), s.origin_ms()), (5_000, 1_000));
        s.advance(u64::MAX);
        assert_eq!(s.now_ms(), MAX_CLOCK_MS);
        assert_eq!(sources(u64::MAX, 0).now_ms(), MAX_CLOCK_MS);
    }

    #[test]
    fn the_streams_are_chacha20_keyed_by_the_seed_and_apart() {
        let (mut a, mut b, mut other) = (sources(0, 1), sources(5, 1), sources(0, 2));
        let draws = |s: &mut Sources| {
            (
                [s.math_random(), s.math_random()],
                s.random_bytes(32),
                s.random_uuid(),
            )
        };
        let first = draws(&mut a);
        assert_eq!(first, draws(&mut b));
        let other = draws(&mut other);
        assert_ne!(first.0, other.0);
        assert_ne!(first.1, other.1);
        assert_ne!(first.2, other.2);
        // Stream 1 and stream 2 of one seed are different keystreams.
        let mut math = ChaCha20Rng::from_seed([1; 32]);
        math.set_stream(MATH_STREAM);
        let mut crypto = ChaCha20Rng::from_seed([1; 32]);
        crypto.set_stream(CRYPTO_STREAM);
        let (mut m, mut c) = ([0u8; 64], [0u8; 64]);
        math.fill_bytes(&mut m);
        crypto.fill_bytes(&mut c);
        assert_ne!(m, c);
        // Math.random is the top 53 bits of stream 1's first word.
        let top = u64::from_le_bytes(m[..8].try_into().unwrap()) >> 11;
        let high = f64::from(u32::try_from(top >> 32).unwrap());
        let low = f64::from(u32::try_from(top & 0xffff_ffff).unwrap());
        assert_eq!(
            sources(0, 1).math_random(),
            (high * 2f64.powi(32) + low) / 2f64.powi(53)
        );
    }

    #[test]
    fn math_random_is_in_the_unit_interval() {
        let mut s = sources(0, 3);
        for _ in 0..100_000 {
            let r = s.math_random();
            assert!((0.0..1.0).contains(&r), "{r}");
        }
    }

    #[test]
    fn uuids_are_rfc_4122_version_4() {
        let mut s = sources(0, 4);
        for _ in 0..1_000 {
            let id = s.random_uuid();
            let bytes = id.as_bytes();
            assert_eq!(id.len(), 36, "{id}");
            for (i, &c) in bytes.iter().enumerate() {
                if matches!(i, 8 | 13 | 18 | 23) {
                    assert_eq!(c, b'-', "{id}");
                } else {
                    assert!(c.is_ascii_digit() || (b'a'..=b'f').contains(&c), "{id}");
                }
            }
            assert_eq!(bytes[14], b'4', "{id}");
            assert!(matches!(bytes[19], b'8' | b'9' | b'a' | b'b'), "{id}");
        }
    }
}
