//! Lexical scanning of Rust source text that does not parse (or whose comments syn drops):
//! comments, string and char literals skipped as rustc's lexer skips them, and the delimiter
//! problems rustc names ("this file contains an unclosed delimiter", at the opening one).

/// A comment found in the text: its byte range, its kind, and where its text is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Comment {
    pub start: usize,
    /// After the comment (after `*/` for a block comment).
    pub end: usize,
    /// `//!` or `/*!`: an inner doc comment.
    pub inner_doc: bool,
    /// `///` or `/**`: an outer doc comment (an attribute of the next item, so a code line).
    pub outer_doc: bool,
    /// The comment's text: after its opening (`//`, `///`, `/*`, ..), before a closing `*/`.
    pub body: usize,
    pub body_end: usize,
}

/// Every comment of the text, in order, outside string and char literals: line comments and
/// (nested) block comments.
pub(crate) fn comments(text: &str) -> Vec<Comment> {
    let mut out = Vec::new();
    walk(text, |t| {
        if let Token::Comment(c) = t {
            out.push(c);
        }
    });
    out
}

/// What [`walk`] meets.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Token {
    Comment(Comment),
    /// A delimiter outside comments and literals, at its byte offset.
    Delim(u8, usize),
    /// A literal or block comment that runs to the end of the text, from its start.
    Unterminated(&'static str, usize),
}

/// Walks the text as rustc's lexer does, reporting comments, delimiters and what is left
/// unterminated.
fn walk(text: &str, mut visit: impl FnMut(Token)) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                let third = b.get(i + 2).copied();
                let inner_doc = third == Some(b'!');
                // `////` is a plain comment, as in rustc.
                let outer_doc = third == Some(b'/') && b.get(i + 3) != Some(&b'/');
                let body = if inner_doc || outer_doc { i + 3 } else { i + 2 };
                visit(Token::Comment(Comment {
                    start: i,
                    end,
                    inner_doc,
                    outer_doc,
                    body,
                    body_end: end,
                }));
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                let mut j = i;
                let mut closed = false;
                while j < b.len() {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            closed = true;
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                let third = b.get(i + 2).copied();
                let inner_doc = third == Some(b'!');
                // `/**/` and `/***` are plain comments.
                let outer_doc = third == Some(b'*') && !matches!(b.get(i + 3), Some(b'*' | b'/'));
                let body_end = if closed { j - 2 } else { j };
                let body = if inner_doc || outer_doc { i + 3 } else { i + 2 };
                if !closed {
                    visit(Token::Unterminated("block comment", i));
                }
                visit(Token::Comment(Comment {
                    start: i,
                    end: j,
                    inner_doc,
                    outer_doc,
                    body: body.min(body_end),
                    body_end,
                }));
                i = j;
            }
            b'"' => {
                let end = skip_string(b, i + 1, 0);
                if end >= b.len() && !text.ends_with('"') {
                    visit(Token::Unterminated("double quote string", i));
                }
                i = end;
            }
            b'r' | b'b' | b'c' if is_raw_string_start(b, i) => {
                let mut j = i;
                while b[j] != b'r' {
                    j += 1;
                }
                j += 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                let end = skip_string(b, j + 1, hashes);
                if end >= b.len() && !text[i..].ends_with(&format!("\"{}", "#".repeat(hashes))) {
                    visit(Token::Unterminated("raw string", i));
                }
                i = end;
            }
            c @ (b'(' | b')' | b'[' | b']' | b'{' | b'}') => {
                visit(Token::Delim(c, i));
                i += 1;
            }
            b'\'' => i = skip_char_or_lifetime(text, i),
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                // A whole identifier: `br"` at the end of `abr"` is no raw string.
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
}

/// Whether a raw string (`r"`, `r#"`, `br"`, `cr#"`) starts at `i` (at an identifier start).
fn is_raw_string_start(b: &[u8], i: usize) -> bool {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return false;
    }
    let j = if b[i] == b'r' {
        i + 1
    } else if b.get(i + 1) == Some(&b'r') {
        i + 2
    } else {
        return false;
    };
    let mut k = j;
    while b.get(k) == Some(&b'#') {
        k += 1;
    }
    b.get(k) == Some(&b'"')
}

/// The index after a string whose contents start at `i`, closed by `"` and `hashes` `#`s
/// (escapes only in non-raw strings).
fn skip_string(b: &[u8], mut i: usize, hashes: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' if hashes == 0 => i += 2,
            b'"' if b.len() > i + hashes && b[i + 1..=i + hashes].iter().all(|c| *c == b'#') => {
                return i + 1 + hashes;
            }
            _ => i += 1,
        }
    }
    b.len()
}

/// The index after a char literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime's quote (`'a`).
fn skip_char_or_lifetime(text: &str, i: usize) -> usize {
    let b = text.as_bytes();
    if b.get(i + 1) == Some(&b'\\') {
        let close = text[i + 2..]
            .find(['\'', '\n'])
            .map_or(b.len(), |n| i + 2 + n);
        return close + 1;
    }
    match text[i + 1..].chars().next() {
        Some(c) if b.get(i + 1 + c.len_utf8()) == Some(&b'\'') => i + 2 + c.len_utf8(),
        _ => i + 1,
    }
}

/// A delimiter problem, as rustc reports it: the message, the primary byte offset and its
/// label, and other offsets with labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub message: String,
    pub at: usize,
    pub label: &'static str,
    pub others: Vec<(usize, &'static str)>,
}

/// The first delimiter problem of the text, if any: an unexpected or mismatched closing
/// delimiter, an unclosed one (reported at the innermost opening delimiter left open), or a
/// literal or block comment that never ends.
pub(crate) fn delimiter_problem(text: &str) -> Option<Problem> {
    let mut open: Vec<(u8, usize)> = Vec::new();
    let mut problem: Option<Problem> = None;
    walk(text, |t| {
        if problem.is_some() {
            return;
        }
        match t {
            Token::Delim(c @ (b'(' | b'[' | b'{'), at) => open.push((c, at)),
            Token::Delim(c, at) => {
                let want = match c {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                match open.pop() {
                    Some((o, _)) if o == want => {}
                    Some((_, o_at)) => {
                        problem = Some(Problem {
                            message: format!("mismatched closing delimiter: `{}`", c as char),
                            at,
                            label: "mismatched closing delimiter",
                            others: vec![(o_at, "unclosed delimiter")],
                        })
                    }
                    None => {
                        problem = Some(Problem {
                            message: format!("unexpected closing delimiter: `{}`", c as char),
                            at,
                            label: "unexpected closing delimiter",
                            others: Vec::new(),
                        })
                    }
                }
            }
            Token::Unterminated(what, at) => {
                problem = Some(Problem {
                    message: format!("unterminated {what}"),
                    at,
                    label: "starts here and never ends",
                    others: Vec::new(),
                })
            }
            Token::Comment(_) => {}
        }
    });
    if problem.is_some() {
        return problem;
    }
    let (_, at) = *open.last()?;
    Some(Problem {
        message: "this file contains an unclosed delimiter".to_string(),
        at,
        label: "unclosed delimiter",
        others: open[..open.len() - 1]
            .iter()
            .map(|(_, at)| (*at, "unclosed delimiter"))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::delimiter_problem;

    fn at(text: &str) -> Option<(String, usize)> {
        delimiter_problem(text).map(|p| (p.message, p.at))
    }

    #[test]
    fn delimiter_problems_as_rustc_names_them() {
        let unclosed = "fn f() {\n    if x {\n        y();\n";
        assert_eq!(
            at(unclosed),
            Some((
                "this file contains an unclosed delimiter".to_string(),
                unclosed.find("x {").unwrap() + 2
            ))
        );
        let mismatched = "fn f() {\n    g(1, 2]);\n}\n";
        assert_eq!(
            at(mismatched),
            Some((
                "mismatched closing delimiter: `]`".to_string(),
                mismatched.find(']').unwrap()
            ))
        );
        assert_eq!(
            at("fn f() {}\n}\n"),
            Some(("unexpected closing delimiter: `}`".to_string(), 10))
        );
        // Delimiters in strings, chars, raw strings and comments do not count.
        assert_eq!(
            at("fn f<'a>() { let s = \"{\"; let c = '('; let r = r#\"]\"#; /* { */ // (\n}\n"),
            None
        );
        assert_eq!(
            at("fn f() { let s = \"open; }\n"),
            Some(("unterminated double quote string".to_string(), 17))
        );
    }
}
