//! The house rules any reader can check: the supervisor's modules import each other only
//! downwards, in the order ARCHITECTURE.md gives, with no circle; and no file or function of
//! the supervisor or the worker (outside tests) is bigger than a reader can hold.
//!
//! The sources are read as text: `crate::<module>` paths (in `use` lines, grouped or not, and
//! in code) name the modules a file imports; a function's length is counted from its `fn` line
//! to the brace that closes it. Test code (`#[cfg(test)]` modules, `tests.rs`, `*_tests.rs`)
//! is not held to either rule.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The largest file, in lines before its tests.
const MAX_FILE_LINES: usize = 900;
/// The longest function, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 150;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Every `.rs` file under `dir` that is not a test file, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.file_stem().unwrap().to_string_lossy();
                if name != "tests" && !name.ends_with("_tests") {
                    found.push(path);
                }
            }
        }
    }
    found.sort();
    found
}

/// The lines of `path` before its test module.
fn lines_before_tests(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let end = lines
        .iter()
        .enumerate()
        .position(|(i, line)| {
            line.trim_start().starts_with("#[cfg(test)]")
                && lines.get(i + 1).is_some_and(|next| {
                    // `mod tests`, also with a visibility (a test module others' tests use).
                    let next = next.trim_start();
                    let next = ["pub(crate) ", "pub(super) ", "pub "]
                        .iter()
                        .find_map(|v| next.strip_prefix(v))
                        .unwrap_or(next);
                    next.starts_with("mod ")
                })
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// `line` without its string and character literals and its `//` comment, so that braces
/// and paths in them do not count.
fn code_of(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push_str("\"\"");
            }
            // A character literal ('{', '\'', '\n'); a lifetime ('a) is left alone.
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    let skip = rest
                        .chars()
                        .skip(1)
                        .position(|c| c == '\'')
                        .map_or(0, |p| p + 2);
                    for _ in 0..skip {
                        chars.next();
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                } else {
                    out.push(c);
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// The top-level modules of the supervisor named in `crate::` paths of `line`.
fn imported_modules(line: &str, into: &mut BTreeSet<String>) {
    let code = code_of(line);
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        // `airlock_supervisor::` is another crate's view; only a path that starts here counts.
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::X, b, c::{d, e}}`: the first segment of each top-level entry.
            let mut depth = 0usize;
            let mut entry = String::new();
            let mut first = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        first = true;
                        entry.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && first {
                    if c.is_alphanumeric() || c == '_' {
                        entry.push(c);
                    } else if !entry.is_empty() {
                        into.insert(std::mem::take(&mut entry));
                        first = false;
                    }
                }
            }
            if first && !entry.is_empty() {
                into.insert(entry);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                into.insert(name);
            }
        }
    }
}

/// The module a file of `supervisor/src` belongs to (`tools` for `tools/call.rs`,
/// `agent_api` for `agent_api.rs`); `None` for the crate root and the binaries.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next()?.as_os_str().to_string_lossy();
    if relative.components().count() == 1 {
        let stem = first.trim_end_matches(".rs");
        return (stem != "lib").then(|| stem.to_owned());
    }
    (first != "bin").then(|| first.into_owned())
}

/// The supervisor's modules from the top of ARCHITECTURE.md's table to its bottom: each
/// folder row names one; the `leaves` row names several, all on the bottom layer.
fn layers() -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).unwrap();
    let house = text
        .split("## The supervisor's house")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"The supervisor's house\"");
    let house = house.split("\n## ").next().unwrap();
    let mut layers = BTreeMap::new();
    let mut rank = 0;
    for row in house.lines().filter(|l| l.starts_with("| ")) {
        let first = row.split('|').nth(1).unwrap().trim();
        if first == "folder" || first.starts_with("---") {
            continue;
        }
        if first == "leaves" {
            let cell = row.split('|').nth(2).unwrap();
            for name in cell.split('`').skip(1).step_by(2) {
                if let Some(stem) = name.strip_suffix(".rs") {
                    layers.insert(stem.to_owned(), rank);
                }
            }
        } else {
            let name = first.trim_matches('`').trim_end_matches('/');
            layers.insert(name.to_owned(), rank);
        }
        rank += 1;
    }
    assert!(
        layers.len() > 5,
        "no layers read from ARCHITECTURE.md: {layers:?}"
    );
    layers
}

/// Every import from one supervisor module into another: (from, to) → the first file that
/// makes it.
fn imports() -> BTreeMap<(String, String), PathBuf> {
    let src = workspace().join("supervisor/src");
    let mut edges = BTreeMap::new();
    for file in sources(&src) {
        let Some(from) = module_of(&src, &file) else {
            continue;
        };
        let mut named = BTreeSet::new();
        for line in lines_before_tests(&file) {
            imported_modules(&line, &mut named);
        }
        for to in named {
            if to != from {
                edges
                    .entry((from.clone(), to))
                    .or_insert_with(|| file.strip_prefix(&src).unwrap().to_owned());
            }
        }
    }
    edges
}

#[test]
fn the_supervisors_modules_import_only_downwards() {
    let layers = layers();
    let edges = imports();
    let mut problems = Vec::new();
    let modules: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    for module in modules {
        if !layers.contains_key(module.as_str()) {
            problems.push(format!(
                "`{module}` is not in ARCHITECTURE.md's table of the supervisor's house: add it"
            ));
        }
    }
    for ((from, to), file) in &edges {
        let (Some(a), Some(b)) = (layers.get(from), layers.get(to)) else {
            continue;
        };
        let leaves = *a == *b;
        if a > b || (a == b && !leaves) {
            problems.push(format!(
                "{} imports `{to}`, which ARCHITECTURE.md puts above `{from}`",
                file.display()
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn there_is_no_import_circle_among_the_supervisors_modules() {
    let edges = imports();
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from).or_default().push(to);
    }
    // Depth-first, keeping the path: a module met again on it closes a circle.
    fn visit<'a>(
        at: &'a str,
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        circles: &mut Vec<String>,
    ) {
        if let Some(start) = path.iter().position(|m| *m == at) {
            let mut circle = path[start..].to_vec();
            circle.push(at);
            circles.push(circle.join(" → "));
            return;
        }
        if !done.insert(at) {
            return;
        }
        path.push(at);
        for next in graph.get(at).into_iter().flatten() {
            visit(next, graph, path, done, circles);
        }
        path.pop();
    }
    let mut circles = Vec::new();
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        visit(start, &graph, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

/// The `fn` a line opens, if it opens one.
fn function_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(word) = words.peek() {
        let qualifier = word.starts_with("pub")
            || matches!(
                *word,
                "const" | "async" | "unsafe" | "extern" | "\"C\"" | "default"
            );
        if !qualifier {
            break;
        }
        words.next();
    }
    if words.next()? != "fn" {
        return None;
    }
    let name: String = words
        .next()?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Each function of `lines` longer than `MAX_FN_LINES`: its name, first line and length.
fn long_functions(lines: &[String]) -> Vec<(String, usize, usize)> {
    let mut long = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = function_name(line) else {
            continue;
        };
        let mut depth = 0i64;
        let mut opened = false;
        for (offset, line) in lines[start..].iter().enumerate() {
            let code = code_of(line);
            if !opened && code.contains(';') && !code.contains('{') {
                break; // a declaration without a body (a trait's)
            }
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                if offset + 1 > MAX_FN_LINES {
                    long.push((name.clone(), start + 1, offset + 1));
                }
                break;
            }
        }
    }
    long
}

#[test]
fn no_file_or_function_is_bigger_than_a_reader_can_hold() {
    let root = workspace();
    let mut problems = Vec::new();
    for dir in ["supervisor/src", "worker/src"] {
        for file in sources(&root.join(dir)) {
            let lines = lines_before_tests(&file);
            let shown = file.strip_prefix(&root).unwrap().display().to_string();
            if lines.len() > MAX_FILE_LINES {
                problems.push(format!(
                    "{shown}: {} lines before its tests (at most {MAX_FILE_LINES})",
                    lines.len()
                ));
            }
            for (name, at, length) in long_functions(&lines) {
                problems.push(format!(
                    "{shown}:{at}: fn {name} is {length} lines (at most {MAX_FN_LINES})"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_readers_of_the_sources_read_what_they_mean() {
    let mut named = BTreeSet::new();
    imported_modules(
        "use crate::{agent_api::X, tools::{call, registry}, metrics};",
        &mut named,
    );
    imported_modules(
        "let x = crate::journal::now(); // crate::daemon",
        &mut named,
    );
    imported_modules(
        "airlock_supervisor::crate_like::x; \"crate::sdk\"",
        &mut named,
    );
    assert_eq!(
        named.into_iter().collect::<Vec<_>>(),
        ["agent_api", "journal", "metrics", "tools"]
    );
    let lines: Vec<String> = std::iter::once("pub(crate) async fn long() {".to_owned())
        .chain((0..MAX_FN_LINES).map(|_| "    let c = '{';".to_owned()))
        .chain(std::iter::once("}".to_owned()))
        .collect();
    assert_eq!(
        long_functions(&lines),
        [("long".to_owned(), 1, MAX_FN_LINES + 2)]
    );
    assert!(long_functions(&lines[..3]).is_empty());
}
