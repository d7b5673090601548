//! Near-name suggestions: the did-you-mean of unknown tools, namespaces and arguments.

use crate::sdk::{SdkTool, ToolSearch};
use crate::tools::ToolDescriptor;

/// `tools.a() or tools.b()`: each name with `prefix` and `suffix`, joined with "or".
pub fn quote_list(names: &[&str], prefix: &str, suffix: &str) -> String {
    names
        .iter()
        .map(|n| format!("{prefix}{n}{suffix}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Up to `n` candidates closest to `wanted` by edit distance, nearest first, skipping ones so
/// far away that suggesting them would only confuse.
pub fn closest<'a>(
    wanted: &str,
    candidates: impl Iterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = candidates
        .map(|c| (edit_distance(&wanted.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (wanted.len().max(c.len()) / 3).max(2))
        .collect();
    scored.sort();
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

/// Up to 3 tools of one namespace that a call of the unknown `wanted` may have meant: the
/// nearest names by edit distance (a typo, `read_graf`), then the best search hits for the
/// name's words (`status` → `git_status`; `add` → `get_sum`, whose description says it adds),
/// so a model that guessed a name from the task still learns the real one. When a spelling is
/// near, only the search's best hit is added to it.
pub fn near_tools(wanted: &str, tools: &[ToolDescriptor], search: &ToolSearch) -> Vec<String> {
    let mut near: Vec<String> = closest(wanted, tools.iter().map(|t| t.name.as_str()), 3)
        .into_iter()
        .map(str::to_owned)
        .collect();
    // A near spelling is usually the answer: then only the search's best hit joins it.
    let from_search = if near.is_empty() { 3 } else { 1 };
    for hit in search.search(wanted, from_search) {
        // Hits are `namespace.tool`; the index holds one namespace.
        let name = hit
            .tool
            .split_once('.')
            .map_or(hit.tool.as_str(), |(_, n)| n);
        if near.len() < 3 && !near.iter().any(|n| n == name) {
            near.push(name.to_owned());
        }
    }
    near
}

/// The longest path [`near_paths`] compares by spelling (SDK paths are a few dozen bytes).
const MAX_SPELLED_PATH: usize = 256;

/// Up to 3 SDK files an unknown path `wanted` may have meant: files with the same name in
/// another folder or with its tail (`add.ts`, `test/add.ts` → `servers/test/add.ts`), then
/// the nearest spellings (`README`, `/README.md`, `servers/test/add` → …). Paths share long
/// folder prefixes, so a spelling is near by the length of the file's name, not the path's:
/// `servers/test/add.ts` does not suggest `servers/test/echo.ts`.
pub fn near_paths<'a>(wanted: &str, paths: impl Iterator<Item = &'a str> + Clone) -> Vec<&'a str> {
    let tail = wanted.trim_start_matches(['.', '/']);
    let mut near: Vec<&str> = Vec::new();
    if !tail.is_empty() {
        for path in paths.clone() {
            if near.len() < 3
                && path.ends_with(tail)
                && path[..path.len() - tail.len()].ends_with('/')
            {
                near.push(path);
            }
        }
    }
    // The path is untrusted (a request's target, a program's argument): spelling costs the
    // product of the lengths per file, so a long one is not spelled against every file.
    if wanted.len() > MAX_SPELLED_PATH {
        return near;
    }
    let name_len = wanted.rsplit('/').next().unwrap_or(wanted).chars().count();
    let bound = (name_len / 3).max(3);
    let lower = wanted.to_lowercase();
    let mut spelled: Vec<(usize, &str)> = paths
        .map(|path| (edit_distance(&lower, &path.to_lowercase()), path))
        .filter(|(d, _)| *d <= bound)
        .collect();
    spelled.sort_unstable();
    let best = spelled.first().map(|(d, _)| *d);
    for (d, path) in spelled {
        if near.len() < 3 && !near.contains(&path) && Some(d) == best {
            near.push(path);
        }
    }
    near
}

/// Up to 3 namespaces an unknown `wanted` may have meant: near spellings (`gthub`), then names
/// it abbreviates, its letters in order (`gh` → `github`).
pub fn near_namespaces<'a>(
    wanted: &str,
    known: impl Iterator<Item = &'a str> + Clone,
) -> Vec<&'a str> {
    let mut near = closest(wanted, known.clone(), 3);
    let wanted = wanted.to_lowercase();
    if wanted.chars().count() >= 2 {
        for candidate in known {
            if near.len() < 3 && !near.contains(&candidate) && abbreviates(&wanted, candidate) {
                near.push(candidate);
            }
        }
    }
    near
}

/// Whether the letters of `short` appear in `long` in order, the first ones first (`gh` in
/// `github`, not in `hg`).
fn abbreviates(short: &str, long: &str) -> bool {
    let long = long.to_lowercase();
    let mut rest = long.chars();
    let mut first = true;
    for c in short.chars() {
        let found = if first {
            rest.next() == Some(c)
        } else {
            rest.any(|l| l == c)
        };
        if !found {
            return false;
        }
        first = false;
    }
    true
}

/// The search index of one namespace's tools, for [`near_tools`].
pub fn namespace_search(namespace: &str, tools: &[ToolDescriptor]) -> ToolSearch {
    let tools: Vec<SdkTool> = tools.iter().map(|t| t.sdk_tool(namespace)).collect();
    ToolSearch::new(&tools)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn far_names_are_not_suggested() {
        assert_eq!(
            closest("serch", ["search", "delete"].into_iter(), 3),
            vec!["search"]
        );
        assert!(closest("x", ["completely_different"].into_iter(), 3).is_empty());
    }

    #[test]
    fn abbreviated_namespaces_are_suggested() {
        let known = ["git", "github", "memory"];
        assert_eq!(
            near_namespaces("gh", known.iter().copied()),
            ["git", "github"]
        );
        assert_eq!(near_namespaces("Memory", known.iter().copied()), ["memory"]);
        assert_eq!(near_namespaces("mem", known.iter().copied()), ["memory"]);
        assert!(near_namespaces("hg", known.iter().copied()).is_empty());
        assert!(near_namespaces("x", known.iter().copied()).is_empty());
    }

    #[test]
    fn near_sdk_paths() {
        let paths = [
            "README.md",
            "servers/test/add.ts",
            "servers/test/index.ts",
            "servers/other/index.ts",
            "tools.d.ts",
        ];
        let long = format!("{}README.md", "a/".repeat(20_000));
        let far = "x".repeat(40_000);
        let near = |wanted| near_paths(wanted, paths.iter().copied());
        assert_eq!(near("add.ts"), ["servers/test/add.ts"]);
        assert_eq!(near("test/add.ts"), ["servers/test/add.ts"]);
        assert_eq!(near("servers/test/add"), ["servers/test/add.ts"]);
        assert_eq!(near("/README.md"), ["README.md"]);
        assert_eq!(near("./README.md"), ["README.md"]);
        assert_eq!(near("readme"), ["README.md"]);
        assert_eq!(
            near("index.ts"),
            ["servers/test/index.ts", "servers/other/index.ts"]
        );
        assert!(near("nothing/like/it.txt").is_empty());
        // Another file of the same folder is not a near spelling.
        assert!(near("servers/test/echo.ts").is_empty());
        assert_eq!(near("servers/test/ad.ts"), ["servers/test/add.ts"]);
        // A long path is not spelled against every file (it would cost its length times
        // theirs, per file).
        let started = std::time::Instant::now();
        assert!(near(&long).is_empty());
        assert!(near(&far).is_empty());
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
        assert!(near("").is_empty());
    }

    fn tool(name: &str, description: &str) -> ToolDescriptor {
        ToolDescriptor {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: serde_json::json!({ "type": "object" }),
            output_schema: None,
            read_only: false,
        }
    }

    /// The two examples: a name missing its prefix, and a verb only the description
    /// has; a typo still comes first.
    #[test]
    fn unknown_tools_are_suggested_by_spelling_and_by_meaning() {
        let git = [
            tool("git_status", "Shows the working tree status"),
            tool("git_log", "Shows the commit logs"),
            tool("git_diff", "Shows changes between commits"),
        ];
        let index = namespace_search("git", &git);
        assert_eq!(near_tools("status", &git, &index)[0], "git_status");
        assert_eq!(near_tools("git_stauts", &git, &index)[0], "git_status");
        let everything = [
            tool("echo", "Echoes back the input"),
            tool("get_sum", "Adds two numbers"),
            tool("get_tiny_image", "Returns a tiny image"),
        ];
        let index = namespace_search("everything", &everything);
        assert_eq!(near_tools("add", &everything, &index), ["get_sum"]);
        assert!(near_tools("zzz", &everything, &index).is_empty());
    }
}
