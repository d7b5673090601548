//! The SDK benchmark, on the GitHub REST document (`@octokit/openapi`, 13 MB, 1,223
//! operations):
//!
//! 1. Generation: read and parse the document, build every tool's descriptor (input and
//!    output schemas), and generate the whole SDK (every file plus the search index), as the
//!    daemon does for a principal's first `GET /v1/sdk`. Target: under 2 s. Timed per stage,
//!    several runs; the minimum and the median are printed.
//! 2. Search: representative queries over that index, each run many times. Target: a search
//!    under 5 ms; p50 and p99 are printed per query and over all of them.
//!
//! Run in release: `cargo bench -p airlock-tests --bench sdk` (`AIRLOCK_BENCH_QUICK=1` for a
//! shorter run). Without the npm package (`npm ci --prefix tests/mcp-peers`) it says it was
//! not measured.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]
// A benchmark reports on stdout.
#![allow(clippy::print_stdout)]

use airlock_policy::OpenApiSource as OpenApiConfig;
use airlock_supervisor::sdk::{Sdk, SdkTool};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::openapi::OpenApiSource;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// (min, median) of the runs, in ms.
fn min_median(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[0], percentile(&xs, 0.5))
}

const QUERIES: [&str; 8] = [
    "create issue",
    "list pull requests for a repository",
    "get repository",
    "delete a branch protection rule",
    "workflow runs",
    "add labels to an issue",
    "search code",
    "repos_get",
];

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let spec = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/@octokit/openapi/generated/api.github.com.json");
    if !spec.exists() {
        println!(
            "sdk benchmark: not measured, {} is missing (npm ci --prefix tests/mcp-peers)",
            spec.display()
        );
        return;
    }
    let config = OpenApiConfig {
        name: "github".into(),
        spec,
        base_url: None,
        auth: None,
        call_timeout_ms: 10_000,
        max_concurrent_calls: 4,
        coerce: Default::default(),
        learn_types: true,
        include: Vec::new(),
        exclude: Vec::new(),
    };
    let runs = if quick { 2 } else { 5 };
    let (mut load, mut generate, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        let source = OpenApiSource::load(config.clone(), Arc::new(SecretStore::empty())).unwrap();
        let loaded = started.elapsed();
        let tools: Vec<SdkTool> = source
            .descriptors()
            .iter()
            .map(|t| t.sdk_tool("github"))
            .collect();
        let sdk = Sdk::new(&tools);
        let done = started.elapsed();
        load.push(ms(loaded));
        generate.push(ms(done - loaded));
        total.push(ms(done));
        last = Some((sdk, tools.len()));
    }
    let (sdk, tools) = last.unwrap();
    let bytes: usize = sdk.files.files.values().map(String::len).sum();
    println!(
        "GitHub REST SDK: {tools} tools, {} files, {:.1} MB of TypeScript; {runs} runs",
        sdk.files.files.len(),
        bytes as f64 / 1e6
    );
    for (label, xs) in [
        ("  read + parse + descriptors", load),
        ("  SDK files + search index  ", generate),
        ("  total (target < 2000 ms)  ", total),
    ] {
        let (min, median) = min_median(xs);
        println!("{label}: min {min:8.1} ms, median {median:8.1} ms");
    }

    let iterations = if quick { 200 } else { 2_000 };
    let mut all = Vec::new();
    println!("search over {tools} tools, {iterations} runs per query (target < 5 ms):");
    for query in QUERIES {
        let mut times = Vec::with_capacity(iterations);
        let mut top = String::new();
        for _ in 0..iterations {
            let started = Instant::now();
            let hits = sdk.search.search(query, 10);
            times.push(started.elapsed().as_secs_f64() * 1e6);
            if top.is_empty() {
                top = hits.first().map(|h| h.tool.clone()).unwrap_or_default();
            }
        }
        times.sort_by(f64::total_cmp);
        println!(
            "  {query:<40} p50 {:7.1} µs  p99 {:7.1} µs  (first: {top})",
            percentile(&times, 0.5),
            percentile(&times, 0.99)
        );
        all.extend(times);
    }
    all.sort_by(f64::total_cmp);
    println!(
        "  all queries: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all[all.len() - 1]
    );
}
