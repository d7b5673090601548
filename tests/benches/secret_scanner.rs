//! The secret scanner benchmark: throughput of `SecretScanner` on 1 MB of realistic JSON with
//! the embedded shape rules and 20 known secrets, as text, as a `serde_json::Value` and as a
//! stream of chunks; then 1 MB of each adversarial near miss the unit tests use, and the worst
//! of them. Target: ≥ 200 MB/s on the realistic JSON (release build).
//!
//! The realistic JSON is GitHub's own example responses (`components.examples` of the REST
//! API's OpenAPI document in `@octokit/openapi`: issues, repositories, users, with URLs,
//! hashes, base64 contents), concatenated into a 1 MB array. Without the npm peers installed
//! it is a generated list of issue-like objects instead, and says so.
//!
//! Run: `cargo bench -p airlock-tests --bench secret_scanner` (`AIRLOCK_BENCH_QUICK=1` for a
//! shorter run).

// Benchmark code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::secrets::scanner::SecretScanner;
use airlock_supervisor::secrets::store::SecretValue;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const MB: usize = 1 << 20;

/// A deterministic pseudo-random generator (xorshift), so every run scans the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn token(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        (0..len)
            .map(|_| ALPHABET[(self.next() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }
}

/// 20 secrets of the kinds a policy holds: API tokens, passwords, a webhook URL.
fn known_secrets() -> Vec<(String, SecretValue)> {
    let mut rng = Rng(0x5eed_cafe);
    (0..20)
        .map(|i| {
            let value = match i % 4 {
                0 => format!("ghp_{}", rng.token(36)),
                1 => rng.token(24),
                2 => format!("{}-{}!", rng.token(12), rng.token(8)),
                _ => format!("https://hooks.example.net/{}", rng.token(32)),
            };
            (format!("secret-{i}"), SecretValue::new(value))
        })
        .collect()
}

/// About 1 MB of JSON text and its parsed value.
fn realistic_json() -> (String, Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/@octokit/openapi/generated/api.github.com.json");
    let mut items = Vec::new();
    let mut size = 0;
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let doc: Value = serde_json::from_str(&text).unwrap();
            let examples = doc["components"]["examples"].as_object().unwrap();
            'fill: loop {
                for example in examples.values() {
                    let value = example.get("value").cloned().unwrap_or(Value::Null);
                    size += serde_json::to_string_pretty(&value).unwrap().len();
                    items.push(value);
                    if size >= MB {
                        break 'fill;
                    }
                }
            }
            println!(
                "input: GitHub REST example responses ({} values)",
                items.len()
            );
        }
        Err(_) => {
            println!("input: generated issue list (@octokit/openapi is not installed)");
            let mut rng = Rng(42);
            while size < MB {
                let n = items.len();
                let item = json!({
                    "id": n, "number": n,
                    "url": format!("https://api.github.com/repos/octo/hello/issues/{n}"),
                    "title": format!("Issue {}", rng.token(20)),
                    "body": format!("Steps to reproduce: {}", rng.token(300)),
                    "user": { "login": rng.token(8), "node_id": rng.token(20) },
                    "labels": [{ "name": "bug", "color": "d73a4a" }],
                    "sha": rng.token(40),
                });
                size += serde_json::to_string_pretty(&item).unwrap().len();
                items.push(item);
            }
        }
    }
    let value = Value::Array(items);
    let text = serde_json::to_string_pretty(&value).unwrap();
    (text, value)
}

/// Runs `f` until `budget` has passed (at least 3 times); bytes per second of the best run.
fn throughput(bytes: usize, budget: Duration, mut f: impl FnMut() -> Duration) -> f64 {
    let started = Instant::now();
    let mut best = Duration::MAX;
    let mut runs = 0;
    while runs < 3 || started.elapsed() < budget {
        best = best.min(f());
        runs += 1;
    }
    bytes as f64 / best.as_secs_f64() / 1e6
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    let secrets = known_secrets();
    let scanner =
        SecretScanner::new(secrets.iter().map(|(n, v)| (n.as_str(), v))).expect("scanner");
    let shapes_only = SecretScanner::new([]).expect("scanner");
    let (text, value) = realistic_json();
    let mb = text.len() as f64 / MB as f64;
    println!(
        "{:.2} MB of JSON, {} shape rules, {} known secrets (overlap {} bytes)",
        mb,
        scanner.rules().rules().len(),
        scanner.known_secret_count(),
        scanner.overlap()
    );
    let (_, findings) = scanner.scan_text(&text);
    println!("findings in it: {}", findings.len());

    let time = |s: &SecretScanner| {
        let started = Instant::now();
        std::hint::black_box(s.scan_text(std::hint::black_box(&text)));
        started.elapsed()
    };
    let text_mbs = throughput(text.len(), budget, || time(&scanner));
    let shapes_mbs = throughput(text.len(), budget, || time(&shapes_only));
    let json_mbs = throughput(text.len(), budget, || {
        let mut copy = value.clone();
        let started = Instant::now();
        std::hint::black_box(scanner.scan_json(&mut copy));
        started.elapsed()
    });
    let stream = |chunk: usize| {
        throughput(text.len(), budget, || {
            let started = Instant::now();
            let mut stream = scanner.stream();
            let mut at = 0;
            while at < text.len() {
                let mut end = (at + chunk).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                std::hint::black_box(stream.push(&text[at..end]));
                at = end;
            }
            std::hint::black_box(stream.finish());
            started.elapsed()
        })
    };
    let stream_64k = stream(64 * 1024);
    let stream_4k = stream(4 * 1024);
    println!("scan_text, shape rules + 20 known secrets: {text_mbs:>8.0} MB/s (target ≥ 200)");
    println!("scan_text, shape rules only:               {shapes_mbs:>8.0} MB/s");
    println!("scan_json (same document as a Value):       {json_mbs:>8.0} MB/s of its text");
    println!("stream, 64 KB chunks:                       {stream_64k:>8.0} MB/s");
    println!("stream, 4 KB chunks:                        {stream_4k:>8.0} MB/s");

    // 1 MB of each near miss.
    let api_key = secrets[1].1.expose();
    let near_misses: Vec<(&str, String)> = vec![
        ("github", "ghp_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rE ".into()),
        (
            "aws",
            "AKIAUJZDEGXDNCF32EP aws_secret_access_key=abc ".into(),
        ),
        ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.".into()),
        ("jwt-unending", format!("eyJ{}", "a".repeat(40))),
        ("pem", "-----BEGIN RSA PRIVATE KEY-----\\n".into()),
        ("url", "https://user:pass/".into()),
        ("authorization", "Authorization: Bearer abc ".into()),
        ("openai", "sk-proj-aaaa sk-ant-api03-bb sk-".into()),
        ("slack", "xoxb-1-2-3-4-5-6-".into()),
        ("word-run", "a".repeat(64)),
        ("known-secret tiles", api_key[..15].to_owned()),
        (
            "known-secret tile seeds",
            format!("{}-{} ", &api_key[..8], &api_key[8..16]),
        ),
    ];
    let mut worst = (f64::MAX, "");
    for (name, unit) in &near_misses {
        let input = unit.repeat(MB / unit.len());
        let mbs = throughput(input.len(), budget / 4, || {
            let started = Instant::now();
            std::hint::black_box(scanner.scan_text(&input));
            started.elapsed()
        });
        println!("near miss {name:<24} {mbs:>8.0} MB/s");
        if mbs < worst.0 {
            worst = (mbs, name);
        }
    }
    println!("worst case: {} at {:.0} MB/s", worst.1, worst.0);
}
