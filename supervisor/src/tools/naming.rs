//! Near-name suggestions: the did-you-mean of unknown tools, namespaces and arguments.

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
}
