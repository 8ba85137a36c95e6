//! "Did you mean" suggestions: the closest known name by edit distance.

/// Returns the candidate closest to `input` when it is near enough to be a likely typo.
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (input.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (distance(input, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over `char`s; `-` and `_` count as the same character.
fn distance(a: &str, b: &str) -> usize {
    let norm = |c: char| {
        if c == '_' {
            '-'
        } else {
            c.to_ascii_lowercase()
        }
    };
    let a: Vec<char> = a.chars().map(norm).collect();
    let b: Vec<char> = b.chars().map(norm).collect();
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
    use super::did_you_mean;

    #[test]
    fn suggests_near_misses_only() {
        let rules = ["check-before-lock", "rpc-in-transaction"];
        assert_eq!(
            did_you_mean("chek-before-lock", rules),
            Some("check-before-lock")
        );
        assert_eq!(
            did_you_mean("rpc_in_transaction", rules),
            Some("rpc-in-transaction")
        );
        assert_eq!(did_you_mean("totally-different", rules), None);
    }
}
