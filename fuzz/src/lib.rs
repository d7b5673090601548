//! The fuzz targets' shared support: seed corpora, the seed replay of every `cargo test`, the
//! structure-aware helpers, and the random mutator that was the engine before libFuzzer.
//!
//! Each fuzz target is a module beside the code it fuzzes, compiled under
//! `cfg(any(test, fuzzing))`, so it reaches private parsers. Its checks on one input are a
//! function of the bytes; this crate gives it:
//! - its settings, [`Fuzz`]: the seed corpus `tests/fuzz/<target>/` (every file one input),
//!   the dictionary (also written out for libFuzzer, [`Fuzz::libfuzzer_dictionary`]), the
//!   longest input;
//! - the seed replay, [`Fuzz::replay`], in every `cargo test`: every seed, then a few byte
//!   mutations of them with a fixed seed;
//! - structure-aware inputs: [`Unstructured`] reads the same bytes as choices (and
//!   [`json_value`] builds JSON values from them), so mutating bytes mutates structures;
//! - the stack a target is checked on, [`Fuzz::stack`]: the replay's and the libFuzzer
//!   binary's.
//!
//! Timed fuzzing is libFuzzer's, coverage-guided: `fuzz/run` builds `fuzz/libfuzzer/`, whose
//! binaries call each target's `fuzz_input` (docs/testing.md, "Fuzzing"). [`Fuzz::run`] is
//! the random mutator without coverage feedback that came before it, kept as the baseline
//! (`fuzz/run random <target>`): inputs made by stacking byte mutations (flips, interesting
//! numbers, insertions and deletions, splices of two inputs, dictionary tokens, a token
//! repeated thousands of times for nesting) on inputs of a pool that starts as the seeds, and
//! grows by the inputs whose [`Outcome`] (an error's text with its digits masked, a variant's
//! name) was not seen before. It runs `AIRLOCK_FUZZ_SECONDS` (default 10, or 600 with
//! `AIRLOCK_LONG=1`), from `AIRLOCK_FUZZ_SEED` when set; a panic writes the input to
//! `AIRLOCK_FUZZ_CRASH_DIR` (default the temporary directory) and prints it escaped, as does
//! an input slower than `AIRLOCK_FUZZ_SLOW_MS` (default 5,000) or, from a watchdog that then
//! aborts, one running past `AIRLOCK_FUZZ_HANG_MS` (default 60,000).

pub use arbitrary::{self, Unstructured};

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most inputs the pool keeps (seeds included); past it, new outcomes replace old entries.
const MAX_POOL: usize = 4096;

/// How many mutations a normal `cargo test` adds to each seed replay.
const REPLAY_MUTATIONS: usize = 64;

/// What a target says about one input: inputs with an outcome not seen before join the pool.
/// Make it from what distinguishes paths through the code (an error's kind or text, a
/// variant's name), not from the input's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Outcome(u64);

impl Outcome {
    /// The outcome named by `text`, each number read as `0` so positions and sizes do not
    /// count.
    pub fn of(text: &str) -> Outcome {
        // FNV-1a over the first 200 bytes: this runs for every input.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut in_number = false;
        for &b in text.as_bytes().iter().take(200) {
            let digit = b.is_ascii_digit();
            if !(digit && in_number) {
                let b = if digit { b'0' } else { b };
                h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
            in_number = digit;
        }
        Outcome(h)
    }

    /// The outcome named by a value's hash (an enum's `std::mem::discriminant`, a count).
    pub fn hash_of(value: &impl Hash) -> Outcome {
        let mut h = DefaultHasher::new();
        value.hash(&mut h);
        Outcome(h.finish())
    }

    /// Two outcomes as one (e.g. the parse result and what validation said).
    pub fn and(self, other: Outcome) -> Outcome {
        Outcome(self.0.rotate_left(17) ^ other.0)
    }
}

/// One fuzz target's settings.
#[derive(Debug, Clone)]
pub struct Fuzz {
    name: &'static str,
    dictionary: Vec<Vec<u8>>,
    max_len: usize,
    corpus: Option<PathBuf>,
    stack: Option<usize>,
}

/// What a timed run did.
#[derive(Debug, Clone)]
pub struct Report {
    pub inputs: u64,
    pub elapsed: Duration,
    pub pool: usize,
    pub seeds: usize,
    pub seed: u64,
}

impl Report {
    pub fn per_second(&self) -> f64 {
        self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl Fuzz {
    /// The target `name`, whose seeds are in `tests/fuzz/<name>/`.
    pub fn new(name: &'static str) -> Fuzz {
        Fuzz {
            name,
            dictionary: Vec::new(),
            max_len: 64 * 1024,
            corpus: None,
            stack: None,
        }
    }

    /// The target's name (its seed folder's, its libFuzzer binary's).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Seeds from `dir` instead of `tests/fuzz/<name>/` (the harness's own planted-bug target).
    pub fn corpus(mut self, dir: impl Into<PathBuf>) -> Fuzz {
        self.corpus = Some(dir.into());
        self
    }

    /// Tokens the mutator inserts and overwrites with (keywords, punctuation of the format).
    pub fn dictionary(mut self, tokens: &[&str]) -> Fuzz {
        self.dictionary
            .extend(tokens.iter().map(|t| t.as_bytes().to_vec()));
        self
    }

    /// The longest input made (longer ones are cut); default 64 KiB.
    pub fn max_len(mut self, max_len: usize) -> Fuzz {
        self.max_len = max_len.max(1);
        self
    }

    /// Checks each input on a thread with a stack of `bytes` (the replay's thread, and the
    /// libFuzzer binary's driver thread): the stack the code runs on in Airlock, so a
    /// recursion too deep for it is a finding. Without it, the test's thread and the process's
    /// main thread.
    pub fn stack(mut self, bytes: usize) -> Fuzz {
        self.stack = Some(bytes);
        self
    }

    /// The stack set by [`Fuzz::stack`].
    pub fn stack_size(&self) -> Option<usize> {
        self.stack
    }

    /// The seed corpus folder of this target.
    pub fn corpus_dir(&self) -> PathBuf {
        self.corpus.clone().unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fuzz")
                .join(self.name)
        })
    }

    /// The dictionary in libFuzzer's format (`-dict=`): one quoted token a line, bytes other
    /// than printable ASCII as `\xNN`.
    pub fn libfuzzer_dictionary(&self) -> String {
        let mut out = String::new();
        for token in &self.dictionary {
            out.push('"');
            for &b in token {
                match b {
                    b'"' | b'\\' => {
                        out.push('\\');
                        out.push(char::from(b));
                    }
                    b' '..=b'~' => out.push(char::from(b)),
                    _ => out.push_str(&format!("\\x{b:02X}")),
                }
            }
            out.push_str("\"\n");
        }
        out
    }

    /// The seeds, in file name order. A missing or empty folder is a broken checkout: the
    /// seeds are part of the repository.
    pub fn seeds(&self) -> Vec<(String, Vec<u8>)> {
        let dir = self.corpus_dir();
        let mut seeds: Vec<(String, Vec<u8>)> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    std::fs::read(e.path()).ok().map(|bytes| (name, bytes))
                })
                .collect(),
            Err(e) => panic!("cannot read the seed corpus {}: {e}", dir.display()),
        };
        assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
        seeds.sort();
        seeds
    }

    /// Every seed, then a few mutations of each with a fixed seed: cheap enough for every
    /// `cargo test`, and it keeps every crash ever found (its input is a seed) fixed.
    /// On a thread with the target's stack when it has one ([`Fuzz::stack`]).
    pub fn replay(&self, target: fn(&[u8]) -> Outcome) {
        let Some(stack) = self.stack else {
            return self.replay_dyn(&mut { target });
        };
        let fuzz = self.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fuzz-{}", self.name))
            .stack_size(stack)
            .spawn(move || fuzz.replay_dyn(&mut { target }))
            .expect("the replay's thread starts");
        if let Err(panic) = thread.join() {
            std::panic::resume_unwind(panic);
        }
    }

    /// Not generic, so the driver is compiled once, in this crate, with its optimisation
    /// (`profile.dev.package.airlock-fuzz`), whatever the target crate's.
    fn replay_dyn(&self, target: &mut dyn FnMut(&[u8]) -> Outcome) {
        let seeds = self.seeds();
        for (name, bytes) in &seeds {
            let result = catch_unwind(AssertUnwindSafe(|| target(bytes)));
            if result.is_err() {
                panic!("fuzz target {} fails on its seed {name}", self.name);
            }
        }
        let pool: Vec<Vec<u8>> = seeds.into_iter().map(|(_, b)| b).collect();
        let mut rng = Rng::new(0x5eed_0fa1);
        for _ in 0..REPLAY_MUTATIONS * pool.len().min(16) {
            let input = self.mutate(&pool, &mut rng);
            if catch_unwind(AssertUnwindSafe(|| target(&input))).is_err() {
                let path = self.save(&input, "crash");
                panic!(
                    "fuzz target {} fails on a mutated seed, written to {}: {}",
                    self.name,
                    path.display(),
                    escape(&input)
                );
            }
        }
    }

    /// Runs mutated inputs for `AIRLOCK_FUZZ_SECONDS` (default 10; 600 with `AIRLOCK_LONG=1`)
    /// and prints the figures; panics on the first finding.
    pub fn run(&self, mut target: impl FnMut(&[u8]) -> Outcome) -> Report {
        self.run_dyn(&mut target)
    }

    fn run_dyn(&self, target: &mut dyn FnMut(&[u8]) -> Outcome) -> Report {
        let long = std::env::var_os("AIRLOCK_LONG").is_some_and(|v| v == "1");
        let seconds = env_u64("AIRLOCK_FUZZ_SECONDS").unwrap_or(if long { 600 } else { 10 });
        let slow = Duration::from_millis(env_u64("AIRLOCK_FUZZ_SLOW_MS").unwrap_or(5_000));
        let hang = Duration::from_millis(env_u64("AIRLOCK_FUZZ_HANG_MS").unwrap_or(60_000));
        let save_each = std::env::var_os("AIRLOCK_FUZZ_SAVE_EACH").is_some();
        let seed = env_u64("AIRLOCK_FUZZ_SEED").unwrap_or_else(clock_seed);
        eprintln!(
            "fuzz {}: {seconds} s, seed {seed} (AIRLOCK_FUZZ_SEED={seed} repeats this run)",
            self.name
        );

        let seeds = self.seeds();
        let seed_count = seeds.len();
        let mut pool: Vec<Vec<u8>> = seeds.into_iter().map(|(_, b)| b).collect();
        let mut seen: HashSet<Outcome> = HashSet::new();
        let mut rng = Rng::new(seed);
        let watchdog = Watchdog::start(self.clone(), hang);
        let started = Instant::now();
        let deadline = started + Duration::from_secs(seconds);
        let mut inputs: u64 = 0;
        // Seeds first, unchanged, so their outcomes are known.
        let mut queue: Vec<Vec<u8>> = pool.clone();
        loop {
            let input = match queue.pop() {
                Some(input) => input,
                None if Instant::now() >= deadline => break,
                None => self.mutate(&pool, &mut rng),
            };
            if save_each {
                self.write(&input, "current");
            }
            watchdog.begin(&input);
            let begun = Instant::now();
            let result = catch_unwind(AssertUnwindSafe(|| target(&input)));
            let took = begun.elapsed();
            watchdog.end();
            inputs += 1;
            let outcome = match result {
                Ok(outcome) => outcome,
                Err(_) => {
                    let path = self.save(&input, "crash");
                    panic!(
                        "fuzz target {} panicked after {inputs} inputs in {:.1} s (seed {seed}); input written to {}: {}",
                        self.name,
                        started.elapsed().as_secs_f64(),
                        path.display(),
                        escape(&input)
                    );
                }
            };
            if took > slow {
                let path = self.save(&input, "slow");
                panic!(
                    "fuzz target {} took {} ms on one input (limit AIRLOCK_FUZZ_SLOW_MS={}); input written to {}: {}",
                    self.name,
                    took.as_millis(),
                    slow.as_millis(),
                    path.display(),
                    escape(&input)
                );
            }
            if seen.insert(outcome) {
                if pool.len() < MAX_POOL {
                    pool.push(input);
                } else {
                    let at = seed_count + rng.below(MAX_POOL - seed_count);
                    pool[at] = input;
                }
            }
        }
        watchdog.stop();
        let report = Report {
            inputs,
            elapsed: started.elapsed(),
            pool: pool.len(),
            seeds: seed_count,
            seed,
        };
        eprintln!(
            "fuzz {}: {} inputs in {:.1} s ({:.0}/s), {} seeds, {} distinct outcomes, no finding",
            self.name,
            report.inputs,
            report.elapsed.as_secs_f64(),
            report.per_second(),
            report.seeds,
            seen.len()
        );
        report
    }

    /// One new input: one to eight mutations stacked on an input of the pool.
    fn mutate(&self, pool: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
        let mut data = pool.get(rng.below(pool.len())).cloned().unwrap_or_default();
        let rounds = 1 + rng.below(8);
        for _ in 0..rounds {
            self.mutate_once(&mut data, pool, rng);
        }
        data.truncate(self.max_len);
        data
    }

    fn mutate_once(&self, data: &mut Vec<u8>, pool: &[Vec<u8>], rng: &mut Rng) {
        const INTERESTING: &[&[u8]] = &[
            b"0",
            b"-1",
            b"1",
            b"255",
            b"256",
            b"65535",
            b"4294967295",
            b"4294967296",
            b"9223372036854775807",
            b"18446744073709551615",
            b"18446744073709551616",
            b"-9223372036854775809",
            b"1e308",
            b"1e309",
            b"-0",
            b"0.5",
            b"NaN",
            b"\"\"",
            b"null",
            b"true",
        ];
        let len = data.len();
        match rng.below(14) {
            // Flip a bit.
            0 if len > 0 => {
                let at = rng.below(len);
                data[at] ^= 1 << rng.below(8);
            }
            // A random byte, or an interesting one.
            1 if len > 0 => {
                let at = rng.below(len);
                const BYTES: &[u8] = b"\0\x01\x7f\x80\xff \n\"'\\{}[]():,=.#$/*<>`-";
                data[at] = if rng.below(2) == 0 {
                    rng.next() as u8
                } else {
                    BYTES[rng.below(BYTES.len())]
                };
            }
            // Delete a range.
            2 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(64));
                data.drain(at..at + n);
            }
            // Insert random bytes.
            3 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                data.splice(at..at, bytes);
            }
            // Duplicate a range.
            4 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(256));
                let piece = data[at..at + n].to_vec();
                let to = rng.below(len + 1);
                data.splice(to..to, piece);
            }
            // Splice in a piece of another input.
            5 | 6 => {
                let Some(other) = pool.get(rng.below(pool.len().max(1))) else {
                    return;
                };
                if other.is_empty() {
                    return;
                }
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(512));
                let at = rng.below(len + 1);
                let replace = if rng.below(2) == 0 {
                    0
                } else {
                    rng.below(len - at + 1).min(n)
                };
                data.splice(at..at + replace, other[from..from + n].iter().copied());
            }
            // Insert or overwrite with a dictionary token.
            7..=9 if !self.dictionary.is_empty() => {
                let token = &self.dictionary[rng.below(self.dictionary.len())];
                let at = rng.below(len + 1);
                let replace = if rng.below(3) == 0 {
                    rng.below(len - at + 1).min(token.len())
                } else {
                    0
                };
                data.splice(at..at + replace, token.iter().copied());
            }
            // Replace a run of digits with an interesting number.
            10 => {
                let starts: Vec<usize> = (0..len)
                    .filter(|&i| {
                        data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit())
                    })
                    .collect();
                let number = INTERESTING[rng.below(INTERESTING.len())];
                if starts.is_empty() {
                    let at = rng.below(len + 1);
                    data.splice(at..at, number.iter().copied());
                } else {
                    let at = starts[rng.below(starts.len())];
                    let end = (at..len)
                        .find(|&i| !data[i].is_ascii_digit())
                        .unwrap_or(len);
                    data.splice(at..end, number.iter().copied());
                }
            }
            // Overwrite with an interesting integer in binary (postcard varints, lengths).
            11 if len > 0 => {
                let at = rng.below(len);
                let value: u64 = match rng.below(5) {
                    0 => 0,
                    1 => u64::MAX,
                    2 => u64::from(u32::MAX),
                    3 => 1 << rng.below(64),
                    _ => rng.next(),
                };
                let bytes = value.to_le_bytes();
                let n = (1 + rng.below(8)).min(len - at);
                data[at..at + n].copy_from_slice(&bytes[..n]);
            }
            // A token (or a piece of the input) repeated many times: nesting, long runs.
            12 => {
                let piece: Vec<u8> = if !self.dictionary.is_empty() && rng.below(2) == 0 {
                    self.dictionary[rng.below(self.dictionary.len())].clone()
                } else if len > 0 {
                    let at = rng.below(len);
                    data[at..at + 1 + rng.below((len - at).min(4))].to_vec()
                } else {
                    b"[".to_vec()
                };
                let times = [2usize, 16, 100, 1_000, 10_000][rng.below(5)];
                let times = times.min(self.max_len / piece.len().max(1));
                let at = rng.below(len + 1);
                let repeated = piece.repeat(times);
                data.splice(at..at, repeated);
            }
            // Cut the tail.
            _ if len > 0 => {
                data.truncate(rng.below(len));
            }
            _ => data.push(rng.next() as u8),
        }
    }

    /// Writes `input` for a finding and returns where.
    fn save(&self, input: &[u8], kind: &str) -> PathBuf {
        let mut h = DefaultHasher::new();
        input.hash(&mut h);
        self.write(input, &format!("{kind}-{:016x}", h.finish()))
    }

    fn write(&self, input: &[u8], suffix: &str) -> PathBuf {
        let dir = std::env::var_os("AIRLOCK_FUZZ_CRASH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("airlock-fuzz"));
        let path = dir.join(format!("{}-{suffix}", self.name));
        // Reporting a finding must not fail on a full or read-only disk: the input is also
        // printed.
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(&path, input);
        path
    }
}

/// An arbitrary JSON value read from `u`, at most `depth` deep, object keys drawn from `keys`
/// most of the time (the names the target's format means something by) and strings often
/// from `words`.
#[cfg(feature = "json")]
pub fn json_value(
    u: &mut Unstructured<'_>,
    keys: &[&str],
    words: &[&str],
    depth: usize,
) -> serde_json::Value {
    use serde_json::Value;
    let choice = u.int_in_range(0..=9u8).unwrap_or(0);
    match choice {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary().unwrap_or(false)),
        2 => {
            let n: i64 = u.arbitrary().unwrap_or(0);
            Value::from(if u.ratio(1, 2).unwrap_or(true) {
                n % 100
            } else {
                n
            })
        }
        3 => serde_json::Number::from_f64(u.arbitrary().unwrap_or(0.5))
            .map_or(Value::Null, Value::Number),
        4 | 5 => Value::String(json_string(u, words)),
        6 | 7 if depth > 0 => {
            let n = u.int_in_range(0..=4usize).unwrap_or(0);
            Value::Array(
                (0..n)
                    .map(|_| json_value(u, keys, words, depth - 1))
                    .collect(),
            )
        }
        _ if depth > 0 => {
            let n = u.int_in_range(0..=5usize).unwrap_or(0);
            let mut map = serde_json::Map::new();
            for _ in 0..n {
                let key = if !keys.is_empty() && u.ratio(7, 8).unwrap_or(true) {
                    u.choose(keys).map(|k| (*k).to_owned()).unwrap_or_default()
                } else {
                    json_string(u, words)
                };
                map.insert(key, json_value(u, keys, words, depth - 1));
            }
            Value::Object(map)
        }
        _ => Value::String(json_string(u, words)),
    }
}

#[cfg(feature = "json")]
fn json_string(u: &mut Unstructured<'_>, words: &[&str]) -> String {
    if !words.is_empty() && u.ratio(2, 3).unwrap_or(true) {
        u.choose(words).map(|w| (*w).to_owned()).unwrap_or_default()
    } else {
        u.arbitrary::<String>().unwrap_or_default()
    }
}

/// `input` as text a person can read and paste into a Rust byte string.
pub fn escape(input: &[u8]) -> String {
    const SHOWN: usize = 2048;
    let mut out: String = input[..input.len().min(SHOWN)].escape_ascii().to_string();
    if input.len() > SHOWN {
        out.push_str(&format!("… ({} bytes in all)", input.len()));
    }
    out
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1)
}

/// xorshift64*: fast, and a run is repeated exactly from its seed.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Writes the input that runs past the hang limit, then aborts: a test that never returns
/// would hold CI until its own timeout, with nothing to reproduce.
#[derive(Debug)]
struct Watchdog {
    current: Arc<Mutex<Vec<u8>>>,
    /// Inputs begun; the watchdog notices one that stays current too long.
    begun: Arc<AtomicU64>,
    running: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(fuzz: Fuzz, hang: Duration) -> Watchdog {
        let watchdog = Watchdog {
            current: Arc::default(),
            begun: Arc::default(),
            running: Arc::default(),
            stop: Arc::default(),
        };
        let (current, begun, running, stop) = (
            watchdog.current.clone(),
            watchdog.begun.clone(),
            watchdog.running.clone(),
            watchdog.stop.clone(),
        );
        std::thread::spawn(move || {
            let mut last = (u64::MAX, Instant::now());
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let now = begun.load(Ordering::Relaxed);
                if now != last.0 {
                    last = (now, Instant::now());
                } else if running.load(Ordering::Relaxed) && last.1.elapsed() > hang {
                    let input = current.lock().map(|c| c.clone()).unwrap_or_default();
                    let path = fuzz.save(&input, "hang");
                    eprintln!(
                        "fuzz target {} runs past {} ms on one input (AIRLOCK_FUZZ_HANG_MS); input written to {}: {}",
                        fuzz.name,
                        hang.as_millis(),
                        path.display(),
                        escape(&input)
                    );
                    std::process::abort();
                }
            }
        });
        watchdog
    }

    fn begin(&self, input: &[u8]) {
        if let Ok(mut current) = self.current.lock() {
            current.clear();
            current.extend_from_slice(input);
        }
        self.begun.fetch_add(1, Ordering::Relaxed);
        self.running.store(true, Ordering::Relaxed);
    }

    fn end(&self) {
        self.running.store(false, Ordering::Relaxed);
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_within_the_length_limit_and_repeat_from_a_seed() {
        let fuzz = Fuzz::new("none")
            .max_len(100)
            .dictionary(&["{", "[[", "key"]);
        let pool = vec![b"{\"a\": 12}".to_vec(), Vec::new()];
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..10_000 {
            let x = fuzz.mutate(&pool, &mut a);
            assert!(x.len() <= 100);
            assert_eq!(x, fuzz.mutate(&pool, &mut b));
        }
    }

    #[test]
    fn outcomes_ignore_digits() {
        assert_eq!(Outcome::of("line 3: bad"), Outcome::of("line 41: bad"));
        assert_ne!(Outcome::of("line 3: bad"), Outcome::of("line 3: good"));
    }
}
