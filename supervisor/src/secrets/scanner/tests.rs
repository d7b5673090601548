//! Tests of the scanner as a whole: text, JSON, streams, log lines, linear time and false
//! positives on real benign documents. Rule-by-rule examples are in `shape_rule`, encodings
//! and fragments of known secrets in `known_secret`.

use super::*;
use base64::Engine as _;
use std::time::{Duration, Instant};

const GITHUB: &str = "ghp_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES";
const DB_PASSWORD: &str = "d7UACNWiP3sFd67J-Wq2";
const API_KEY: &str = "k3y_7Qe2Lr9xVb4Nk1Hs8Dw3Zp6Yc5Mf0Ja";

fn scanner(known: &[(&str, &str)]) -> SecretScanner {
    let values: Vec<SecretValue> = known
        .iter()
        .map(|(_, v)| SecretValue::new((*v).to_owned()))
        .collect();
    SecretScanner::new(known.iter().map(|(n, _)| *n).zip(values.iter())).expect("scanner")
}

fn default_scanner() -> SecretScanner {
    scanner(&[("db-password", DB_PASSWORD), ("api-key", API_KEY)])
}

#[test]
fn a_shape_match_becomes_a_marker_and_a_finding_without_the_value() {
    let s = default_scanner();
    let text = format!("token: {GITHUB}, done");
    let (clean, findings) = s.scan_text(&text);
    assert_eq!(clean, "token: [REDACTED:github-token], done");
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].rule, "github-token");
    assert_eq!(
        (findings[0].location.start, findings[0].location.end),
        (7, 7 + GITHUB.len())
    );
    let json = serde_json::to_string(&findings).unwrap();
    assert_eq!(
        json,
        r#"[{"rule":"github-token","location":{"start":7,"end":47}}]"#
    );
    // Nothing found: the text is borrowed, not copied.
    assert!(matches!(s.scan_text("nothing here").0, Cow::Borrowed(_)));
}

#[test]
fn known_secrets_carry_their_name_for_the_audit_log_only() {
    let s = default_scanner();
    let text = format!("password={DB_PASSWORD}&x=1");
    let (clean, findings) = s.scan_text(&text);
    assert_eq!(clean, "password=[REDACTED:known-secret]&x=1");
    let trace = serde_json::to_string(&findings).unwrap();
    assert!(
        !trace.contains("db-password") && !trace.contains(DB_PASSWORD),
        "{trace}"
    );
    let audit = serde_json::to_string(&findings[0].audit_record()).unwrap();
    assert_eq!(
        audit,
        r#"{"rule":"known-secret","location":{"start":9,"end":29},"secret":"db-password","form":"raw"}"#
    );
    assert!(!audit.contains(DB_PASSWORD));
}

#[test]
fn a_known_secret_wins_over_a_shape_rule_on_the_same_text() {
    // A GitHub token the supervisor itself holds is reported as a known secret: its name in
    // the audit log says which credential leaked.
    let s = scanner(&[("github-token", GITHUB)]);
    let text = format!("x {GITHUB} y");
    let (clean, findings) = s.scan_text(&text);
    assert_eq!(clean, "x [REDACTED:known-secret] y");
    assert_eq!(findings.len(), 1);
    assert_eq!(
        findings[0].known_secret.as_ref().map(|k| k.name.as_str()),
        Some("github-token")
    );
}

#[test]
fn encoded_known_secrets_are_redacted_in_text() {
    let s = default_scanner();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("app:{API_KEY}"));
    let text = format!("Authorization: Basic {basic}\n");
    let (clean, findings) = s.scan_text(&text);
    assert!(!clean.contains(&basic[8..basic.len() - 4]), "{clean}");
    assert!(
        findings.iter().any(|f| f.rule == KNOWN_SECRET_RULE),
        "{findings:?}"
    );
}

#[test]
fn json_strings_and_keys_are_redacted_in_place_with_pointers() {
    let s = default_scanner();
    let mut value = serde_json::json!({
        "items": [
            {"name": "ok", "token": GITHUB},
            {"a/b": format!("pw is {DB_PASSWORD}")},
        ],
        GITHUB: 1,
        "count": 3,
    });
    let findings = s.scan_json(&mut value);
    let text = value.to_string();
    assert!(
        !text.contains(GITHUB) && !text.contains(DB_PASSWORD),
        "{text}"
    );
    assert_eq!(value["items"][0]["token"], "[REDACTED:github-token]");
    assert_eq!(value["items"][1]["a/b"], "pw is [REDACTED:known-secret]");
    assert_eq!(value["[REDACTED:github-token]"], 1);
    let places: Vec<(Option<&str>, bool, usize)> = findings
        .iter()
        .map(|f| {
            (
                f.location.pointer.as_deref(),
                f.location.in_key,
                f.location.start,
            )
        })
        .collect();
    assert!(places.contains(&(Some(""), true, 0)), "{places:?}");
    assert!(
        places.contains(&(Some("/items/0/token"), false, 0)),
        "{places:?}"
    );
    assert!(
        places.contains(&(Some("/items/1/a~1b"), false, 6)),
        "{places:?}"
    );
}

/// `scan_json` looks only where its first pass found a lead; it must redact exactly what
/// scanning every string and key on its own does (no secret here is split across values).
#[test]
fn json_scanning_with_leads_redacts_what_scanning_each_string_does() {
    let s = default_scanner();
    let rules = ShapeRules::embedded().unwrap();
    let base64 = base64::engine::general_purpose::STANDARD.encode(format!("u:{API_KEY}"));
    let mut payloads: Vec<String> = rules
        .rules()
        .iter()
        .flat_map(|r| [r.true_positive.clone(), r.false_positive.clone()])
        .collect();
    payloads.extend([
        format!("pw={DB_PASSWORD}"),
        format!("Basic {base64}"),
        API_KEY[4..24].to_owned(),
        "plain text, nothing here".to_owned(),
        String::new(),
        "ключ ✓".to_owned(),
    ]);
    // Every payload as an array item, an object value, an object key, nested, between
    // numbers so that no two strings are neighbours.
    let mut items = Vec::new();
    for (i, payload) in payloads.iter().enumerate() {
        items.push(serde_json::json!({
            "n": i,
            "value": payload,
            payload.clone(): i,
            "deep": [i, [payload], i],
        }));
        items.push(serde_json::json!(payload));
        items.push(serde_json::json!(i));
    }
    let mut value = Value::Array(items);
    let mut expected = value.clone();
    fn each_string(value: &mut Value, s: &SecretScanner) {
        match value {
            Value::String(text) => *text = s.scan_text(text).0.into_owned(),
            Value::Array(items) => items.iter_mut().for_each(|v| each_string(v, s)),
            Value::Object(map) => {
                let entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                for (key, mut item) in entries {
                    each_string(&mut item, s);
                    let key = s.scan_text(&key).0.into_owned();
                    let mut unique = key.clone();
                    let mut n = 2;
                    while map.contains_key(&unique) {
                        unique = format!("{key} ({n})");
                        n += 1;
                    }
                    map.insert(unique, item);
                }
            }
            _ => {}
        }
    }
    each_string(&mut expected, &s);
    let findings = s.scan_json(&mut value);
    assert_eq!(value, expected);
    assert!(
        findings.len() > 4 * rules.rules().len(),
        "{}",
        findings.len()
    );
}

#[test]
fn keys_that_redact_alike_keep_their_values() {
    let s = default_scanner();
    let other = "ghp_Zq8Lk2Vn5Rt7Yw1Ux4Ps9Mb3Hc6Jd0Gf2Eak";
    let mut value = serde_json::json!({ GITHUB: 1, other: 2 });
    s.scan_json(&mut value);
    let map = value.as_object().unwrap();
    assert_eq!(map.len(), 2, "{value}");
    let mut values: Vec<i64> = map.values().filter_map(Value::as_i64).collect();
    values.sort_unstable();
    assert_eq!(values, [1, 2]);
    assert!(map.contains_key("[REDACTED:github-token] (2)"), "{value}");
}

#[test]
fn a_known_secret_split_across_adjacent_json_strings_is_caught() {
    let s = default_scanner();
    for split in 1..API_KEY.len() {
        let (a, b) = API_KEY.split_at(split);
        // Array neighbours, and object values that are neighbours in key order.
        for mut value in [
            serde_json::json!(["intro", a, b, "outro"]),
            serde_json::json!({"k1": a, "k2": b, "n": 1}),
            // Nested, after containers and runs of their own (the first pass's buffers).
            serde_json::json!({"outer": [0, ["x", "y"], {"k1": a, "k2": b, "n": 1}], "z": "w"}),
            serde_json::json!([[1], "x", {"k": "v"}, "intro", a, b, {"z": [1]}]),
        ] {
            let findings = s.scan_json(&mut value);
            let text = value.to_string();
            assert!(!text.contains(a) || a.len() < 3, "{split}: {text}");
            assert!(!text.contains(b) || b.len() < 3, "{split}: {text}");
            assert!(
                findings
                    .iter()
                    .filter(|f| f.rule == KNOWN_SECRET_RULE)
                    .count()
                    >= 2,
                "{split}: {findings:?}"
            );
        }
        // Three pieces.
        let (b, c) = b.split_at(b.len() / 2);
        let mut value = serde_json::json!([a, b, c]);
        s.scan_json(&mut value);
        assert!(
            value.as_array().unwrap().iter().all(|v| v
                .as_str()
                .unwrap()
                .contains("[REDACTED:known-secret]")
                || v.as_str().unwrap().is_empty()),
            "{split}: {value}"
        );
    }
}

/// Texts whose every split point the stream scanner must survive.
fn stream_cases() -> Vec<String> {
    let rules = ShapeRules::embedded().unwrap();
    let pem = rules
        .rules()
        .iter()
        .find(|r| r.id == "private-key")
        .unwrap()
        .true_positive
        .clone();
    let jwt = rules
        .rules()
        .iter()
        .find(|r| r.id == "jwt")
        .unwrap()
        .true_positive
        .clone();
    vec![
        format!("log: token={GITHUB} end"),
        format!("{{\"password\": \"{DB_PASSWORD}\"}}"),
        format!(
            "b64 {}.",
            base64::engine::general_purpose::STANDARD.encode(API_KEY)
        ),
        format!("key:\n{pem}\nafter"),
        format!("Authorization: Bearer {jwt}\r\n"),
        format!("x{API_KEY}y"),
    ]
}

#[test]
fn a_stream_split_at_every_point_redacts_like_the_whole_text() {
    let s = default_scanner();
    for text in stream_cases() {
        let (whole, whole_findings) = s.scan_text(&text);
        assert!(!whole_findings.is_empty(), "nothing to find in {text}");
        let boundaries: Vec<usize> = (0..=text.len())
            .filter(|&i| text.is_char_boundary(i))
            .collect();
        for &split in &boundaries {
            let mut stream = s.stream();
            let mut out = stream.push(&text[..split]);
            let second = stream.push(&text[split..]);
            let end = stream.finish();
            out.text.push_str(&second.text);
            out.text.push_str(&end.text);
            out.findings.extend(second.findings);
            out.findings.extend(end.findings);
            assert_eq!(out.text, whole, "split at {split}");
            assert_eq!(out.findings, whole_findings, "split at {split}");
        }
    }
}

#[test]
fn a_stream_of_small_chunks_behind_a_long_prefix_redacts_like_the_whole_text() {
    // The overlap only matters once more than `overlap()` bytes are pending: put the secrets
    // after a long prefix and feed odd-sized chunks.
    let s = default_scanner();
    let filler = "lorem ipsum dolor sit amet, ".repeat(400);
    let text: String = stream_cases()
        .iter()
        .map(|case| format!("{filler}{case}"))
        .collect();
    let (whole, whole_findings) = s.scan_text(&text);
    for chunk in [1, 7, 64, 1000, 4095, 4097, 9000] {
        let mut stream = s.stream();
        let mut out = StreamOutput::default();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + chunk).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let part = stream.push(&text[at..end]);
            out.text.push_str(&part.text);
            out.findings.extend(part.findings);
            at = end;
        }
        let part = stream.finish();
        out.text.push_str(&part.text);
        out.findings.extend(part.findings);
        assert!(out.text == whole, "chunks of {chunk}: outputs differ");
        assert_eq!(out.findings, whole_findings, "chunks of {chunk}");
    }
}

#[test]
fn the_log_writer_redacts_every_line_before_the_inner_writer() {
    use std::sync::Mutex;
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    let buffer = Buffer::default();
    let shared = SharedScanner::new(default_scanner());
    for json in [false, true] {
        let writer = RedactingMakeWriter::new(buffer.clone(), shared.clone());
        let builder = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false);
        let dispatch: tracing::Dispatch = if json {
            builder.json().finish().into()
        } else {
            builder.finish().into()
        };
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::warn!(server = "db", "connecting with password {DB_PASSWORD}");
            tracing::error!(error = %format!("401 for {GITHUB}"), "call failed");
            tracing::info!(header = ?format!("Bearer {API_KEY}"), "multi\nline");
        });
    }
    // A reload brings a new secret; the same writer uses it.
    let later = "r0tated-Secret-Value-93kd8Lw2";
    shared.replace(scanner(&[("db-password", later)]));
    let writer = RedactingMakeWriter::new(buffer.clone(), shared.clone());
    let dispatch: tracing::Dispatch = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .finish()
        .into();
    tracing::dispatcher::with_default(&dispatch, || tracing::info!("now {later}"));

    let log = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    for secret in [DB_PASSWORD, GITHUB, API_KEY, later] {
        assert!(!log.contains(secret), "{secret} in:\n{log}");
    }
    assert_eq!(log.matches("[REDACTED:known-secret]").count(), 5, "{log}");
    assert_eq!(log.matches("[REDACTED:github-token]").count(), 2, "{log}");
    assert!(log.contains("connecting with password"), "{log}");
}

#[test]
fn the_raw_writer_holds_a_partial_line_until_the_newline_or_the_end() {
    use std::io::Write;
    let s = default_scanner();
    let mut out = Vec::new();
    {
        let mut w = RedactingWriter::new(&mut out, s);
        let (a, b) = DB_PASSWORD.split_at(7);
        w.write_all(format!("one {a}").as_bytes()).unwrap();
        w.flush().unwrap();
        w.write_all(format!("{b} two\nthree {GITHUB}").as_bytes())
            .unwrap();
    }
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "one [REDACTED:known-secret] two\nthree [REDACTED:github-token]"
    );
}

// ---- linear time -----------------------------------------------------------------------------

/// Near misses for each rule and for the known secrets' tiles: text that makes the prefilter
/// fire and the regexes (or tile extensions) work, but matches nothing (or is rejected).
fn near_misses() -> Vec<(&'static str, String)> {
    vec![
        (
            "github",
            "ghp_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rE ".to_owned(),
        ),
        (
            "aws",
            "AKIAUJZDEGXDNCF32EP aws_secret_access_key=abc ".to_owned(),
        ),
        ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.".to_owned()),
        (
            "jwt-unending",
            "eyJaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_owned(),
        ),
        ("pem", "-----BEGIN RSA PRIVATE KEY-----\\n".to_owned()),
        ("url", "https://user:pass/".to_owned()),
        (
            "url-long-userinfo",
            "https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:bbbbbbbbbbbbbbbbb".to_owned(),
        ),
        ("authorization", "Authorization: Bearer abc ".to_owned()),
        ("openai", "sk-proj-aaaa sk-ant-api03-bb sk-".to_owned()),
        ("slack", "xoxb-1-2-3-4-5-6-".to_owned()),
        ("word-run", "a".repeat(64)),
        ("tiles", API_KEY[..15].to_owned()),
        (
            "tile-seeds",
            format!("{}-{} ", &API_KEY[..8], &API_KEY[8..16]),
        ),
    ]
}

/// Best of two wall-clock times of scanning `text`.
fn scan_time(s: &SecretScanner, text: &str) -> Duration {
    (0..2)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(s.scan_text(text));
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

#[test]
fn adversarial_near_misses_scan_in_linear_time() {
    // Quadratic behaviour would make 4× the input cost 16× the time; linear costs ~4×. The
    // allowance of 50 ms absorbs the noise of short timings on a shared machine (and the
    // regex crate's one-off switch of engine when its lazy DFA cache fills).
    let s = default_scanner();
    let mut report = Vec::new();
    for (name, unit) in near_misses() {
        let small = unit.repeat((1 << 20) / unit.len());
        let large = unit.repeat((4 << 20) / unit.len());
        let (t_small, t_large) = (scan_time(&s, &small), scan_time(&s, &large));
        let ratio = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-6);
        report.push(format!(
            "{name}: 1 MB {t_small:?}, 4 MB {t_large:?}, ratio {ratio:.1}"
        ));
        assert!(
            t_large < t_small * 8 + Duration::from_millis(50),
            "{name}: not linear\n{}",
            report.join("\n")
        );
    }
    eprintln!("{}", report.join("\n"));
}

// ---- false positives on real, benign documents ---------------------------------------------

/// A document from the npm peers the tests install, or `None` (and a note) without them.
fn npm_document(path: &str) -> Option<String> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp-peers/node_modules")
        .join(path);
    match std::fs::read_to_string(&full) {
        Ok(text) => Some(text),
        Err(e) => {
            assert!(
                std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
                "{}: {e}: run `npm ci --prefix tests/mcp-peers` (.ci/run does)",
                full.display()
            );
            eprintln!("SKIPPED part of the corpus: {} is missing", full.display());
            None
        }
    }
}

#[test]
fn benign_documents_have_few_false_positives() {
    // Known secrets too, so their forms and tiles take part.
    let s = default_scanner();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut corpus: Vec<(String, String)> = Vec::new();
    for doc in [
        "@octokit/openapi/generated/api.github.com.json",
        "@typescript/typescript-linux-x64/lib/lib.dom.d.ts",
    ] {
        if let Some(text) = npm_document(doc) {
            corpus.push((doc.to_owned(), text));
        }
    }
    let lock = std::fs::read_to_string(root.join("tests/mcp-peers/package-lock.json")).unwrap();
    corpus.push(("tests/mcp-peers/package-lock.json".into(), lock));
    let lockfile = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    corpus.push(("Cargo.lock".into(), lockfile));
    // The project's own Rust sources, except this scanner's (its tests hold made-up secrets).
    let mut sources = String::new();
    for dir in [
        "supervisor/src",
        "worker/src",
        "policy/src",
        "proto/src",
        "tests/tests",
    ] {
        collect_rust(&root.join(dir), &mut sources);
    }
    corpus.push(("the project's Rust sources".into(), sources));

    let mut total_bytes = 0;
    let mut report = Vec::new();
    let mut findings_total = 0;
    for (name, text) in &corpus {
        let (_, findings) = s.scan_text(text);
        total_bytes += text.len();
        findings_total += findings.len();
        let mut by_rule: std::collections::BTreeMap<&str, usize> = Default::default();
        for f in &findings {
            *by_rule.entry(f.rule.as_str()).or_default() += 1;
        }
        report.push(format!("{name} ({} KB): {by_rule:?}", text.len() / 1024));
        for f in findings.iter().take(5) {
            let (a, b) = (
                f.location.start.saturating_sub(30),
                (f.location.end + 30).min(text.len()),
            );
            let (a, b) = (floor(text, a), floor(text, b));
            report.push(format!("    {}: …{}…", f.rule, &text[a..b]));
        }
    }
    eprintln!(
        "{} MB scanned:\n{}",
        total_bytes / (1 << 20),
        report.join("\n")
    );
    // Measured: see docs/testing.md; the bound leaves room for new documents, not new noise.
    assert!(
        findings_total <= 5,
        "{findings_total} false positives:\n{}",
        report.join("\n")
    );
}

fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn collect_rust(dir: &std::path::Path, out: &mut String) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.ends_with("secrets/scanner") || path.ends_with("secrets/scanner.rs") {
            continue;
        }
        if path.is_dir() {
            collect_rust(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
}
