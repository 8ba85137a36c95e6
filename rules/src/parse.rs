//! Parsing one file with `syn` and converting `proc_macro2` spans into compact [`Sp`]s
//! (1-based line, 1-based char column); [`Lines`] turns those back into byte offsets for the few
//! spans a diagnostic shows.

use crate::ir::Sp;
use proc_macro2::Span;

/// The recursion budget for lowering nested expressions; deeper nesting becomes opaque.
pub const MAX_DEPTH: u32 = 256;

/// How far into a line holding non-ASCII text [`LineIndex::stands_alone`] looks.
const WIDE_COLUMNS: usize = 256;

/// Byte offsets of line starts, for turning (line, char column) into byte offsets.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<u32>,
    /// 0-based numbers of the lines holding non-ASCII bytes.
    wide: Vec<u32>,
}

impl<'a> LineIndex<'a> {
    /// One pass over the text, eight bytes at a time: most words hold neither a newline nor a
    /// non-ASCII byte and are skipped whole.
    pub fn new(text: &'a str) -> Self {
        const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
        const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
        const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
        let bytes = text.as_bytes();
        let mut starts = Vec::with_capacity(bytes.len() / 32 + 1);
        starts.push(0);
        let mut wide: Vec<u32> = Vec::new();
        let mut note = |i: usize, b: u8, starts: &mut Vec<u32>| {
            if b == b'\n' {
                starts.push(i as u32 + 1);
            } else if b >= 0x80 {
                let line = starts.len() as u32 - 1;
                if wide.last() != Some(&line) {
                    wide.push(line);
                }
            }
        };
        let mut i = 0;
        while i + 8 <= bytes.len() {
            let mut word = [0; 8];
            word.copy_from_slice(&bytes[i..i + 8]);
            let x = u64::from_ne_bytes(word);
            let nl = x ^ NEWLINES;
            // A zero byte in `nl` (a newline in `x`) or a high bit in `x` (non-ASCII).
            if ((nl.wrapping_sub(ONES) & !nl) | x) & HIGH != 0 {
                for (j, &b) in word.iter().enumerate() {
                    note(i + j, b, &mut starts);
                }
            }
            i += 8;
        }
        for (j, &b) in bytes[i..].iter().enumerate() {
            note(i + j, b, &mut starts);
        }
        LineIndex { text, starts, wide }
    }

    /// Whether the text of `sp` stands alone on its lines: only blanks before it on its first
    /// line, only blanks or a line comment after it on its last. Only the blanks next to it are
    /// read (and at most [`WIDE_COLUMNS`] columns into a line that is not ASCII), so a long line
    /// costs no more than a short one.
    pub fn stands_alone(&self, sp: Sp) -> bool {
        let (Some(start), Some(end)) = (
            self.byte_at(sp.line, sp.col),
            self.byte_at(sp.end_line, sp.end_col),
        ) else {
            return false;
        };
        let bytes = self.text.as_bytes();
        let blanks = bytes[..start]
            .iter()
            .rev()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        if start > blanks && bytes[start - blanks - 1] != b'\n' {
            return false;
        }
        let rest = self.text[end..].trim_start_matches([' ', '\t', '\r']);
        rest.is_empty() || rest.starts_with('\n') || rest.starts_with("//")
    }

    /// The byte offset of a 1-based line and 1-based char column, when it is cheap to find:
    /// on an ASCII line, or within [`WIDE_COLUMNS`] columns of a line that is not.
    fn byte_at(&self, line: u32, col: u32) -> Option<usize> {
        let idx = line.checked_sub(1)?;
        let start = *self.starts.get(idx as usize)? as usize;
        let col = col.checked_sub(1)? as usize;
        let at = if self.wide.binary_search(&idx).is_err() {
            start + col
        } else if col <= WIDE_COLUMNS {
            let text = self.text.get(start..)?;
            start + text.char_indices().nth(col).map_or(text.len(), |(i, _)| i)
        } else {
            return None;
        };
        (at <= self.text.len() && self.text.is_char_boundary(at)).then_some(at)
    }

    /// Byte offset of a 1-based line and 0-based char column.
    pub fn byte(&self, line: usize, col: usize) -> u32 {
        byte_of(self.text, &self.starts, line, col)
    }

    /// The span from the start of `lo` to the end of `hi` (an empty span at `lo` when `hi`
    /// ends before it).
    pub fn sp(&self, lo: Span, hi: Span) -> Sp {
        let s = lo.start();
        let e = hi.end();
        let (s, e) = if (e.line, e.column) < (s.line, s.column) {
            (s, s)
        } else {
            (s, e)
        };
        Sp {
            line: s.line as u32,
            col: s.column as u32 + 1,
            end_line: e.line as u32,
            end_col: e.column as u32 + 1,
        }
    }

    /// The owned table kept with the lowered file: line starts, plus the text of the lines
    /// that are not ASCII (where a char column is not a byte column).
    pub fn into_lines(self) -> Lines {
        let wide: Vec<(u32, Box<str>)> = self
            .wide
            .iter()
            .map(|&i| (i, Box::from(line_text(self.text, self.starts[i as usize]))))
            .collect();
        Lines {
            len: self.text.len() as u32,
            starts: Starts::new(self.starts),
            wide: wide.into_boxed_slice(),
        }
    }
}

/// A lowered file's line table: enough to turn an [`Sp`]'s (line, char column) pairs into byte
/// offsets after the text is gone.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    len: u32,
    starts: Starts,
    /// 0-based line number and text of every line holding non-ASCII characters.
    wide: Box<[(u32, Box<str>)]>,
}

impl Lines {
    /// Byte offset of a 1-based line and 1-based char column (as in [`Sp`]).
    pub fn byte(&self, line: u32, col: u32) -> u32 {
        let idx = line.saturating_sub(1);
        let Some(start) = self.starts.get(idx as usize) else {
            return self.len;
        };
        let col = col.saturating_sub(1) as usize;
        let next = self
            .starts
            .get(idx as usize + 1)
            .map(|n| n - 1)
            .unwrap_or(self.len);
        match self.wide.binary_search_by_key(&idx, |(l, _)| *l) {
            Ok(i) => {
                let text = &self.wide[i].1;
                let off = text
                    .char_indices()
                    .nth(col)
                    .map(|(b, _)| b)
                    .unwrap_or(text.len());
                start + off as u32
            }
            Err(_) => (start + col as u32).min(next.max(start)),
        }
    }
}

/// Line starts kept compactly: the start of every 64th line and each line's length in 16 bits
/// (half the size of a start per line); files with a line of 64 KiB or more keep every start.
#[derive(Debug, Clone)]
enum Starts {
    /// A start every [`EVERY`] lines, and each line's length in a byte; a line of 255 bytes or
    /// more has [`LONG`] there and its length in `long`, by line (most lines are short, so the
    /// table costs a byte a line).
    Compact {
        every: Box<[u32]>,
        lens: Box<[u8]>,
        long: Box<[(u32, u32)]>,
    },
    Full(Box<[u32]>),
}

const EVERY: usize = 64;
const LONG: u8 = u8::MAX;

impl Default for Starts {
    fn default() -> Self {
        Starts::Full(Box::default())
    }
}

impl Starts {
    fn new(starts: Vec<u32>) -> Starts {
        let mut lens = Vec::with_capacity(starts.len().saturating_sub(1));
        let mut long = Vec::new();
        for (i, w) in starts.windows(2).enumerate() {
            let len = w[1] - w[0];
            match u8::try_from(len) {
                Ok(l) if l != LONG => lens.push(l),
                _ => {
                    lens.push(LONG);
                    long.push((i as u32, len));
                }
            }
        }
        // Mostly long lines (generated code): the plain table is smaller.
        if long.len() * 8 > lens.len() {
            return Starts::Full(starts.into_boxed_slice());
        }
        Starts::Compact {
            every: starts.iter().step_by(EVERY).copied().collect(),
            lens: lens.into_boxed_slice(),
            long: long.into_boxed_slice(),
        }
    }

    /// The start of 0-based line `idx`.
    fn get(&self, idx: usize) -> Option<u32> {
        match self {
            Starts::Full(s) => s.get(idx).copied(),
            Starts::Compact { every, lens, long } => {
                if idx > lens.len() {
                    return None;
                }
                let base = *every.get(idx / EVERY)?;
                let from = idx / EVERY * EVERY;
                let len = |(i, &l): (usize, &u8)| {
                    if l == LONG {
                        long.binary_search_by_key(&(i as u32), |&(at, _)| at)
                            .map_or(0, |k| long[k].1)
                    } else {
                        u32::from(l)
                    }
                };
                Some(
                    base + lens[from..idx]
                        .iter()
                        .enumerate()
                        .map(|(k, l)| len((from + k, l)))
                        .sum::<u32>(),
                )
            }
        }
    }
}

fn line_text(text: &str, start: u32) -> &str {
    let rest = &text[start as usize..];
    rest.split('\n').next().unwrap_or("")
}

fn byte_of(text: &str, starts: &[u32], line: usize, col: usize) -> u32 {
    let Some(&start) = starts.get(line.saturating_sub(1)) else {
        return text.len() as u32;
    };
    let line_text = line_text(text, start);
    if line_text.is_ascii() {
        return start + col.min(line_text.len()) as u32;
    }
    let off = line_text
        .char_indices()
        .nth(col)
        .map(|(i, _)| i)
        .unwrap_or(line_text.len());
    start + off as u32
}

#[cfg(test)]
mod tests {
    use super::{LineIndex, Sp};

    #[test]
    fn lines_give_the_same_bytes_as_the_text() {
        let text = "fn a() {}\n    let é = \"ü\"; x\r\n\nlast";
        let index = LineIndex::new(text);
        let expected: Vec<u32> = (1..=4)
            .flat_map(|line| (0..14).map(move |col| (line, col)))
            .map(|(line, col)| index.byte(line, col))
            .collect();
        let lines = index.into_lines();
        let got: Vec<u32> = (1..=4)
            .flat_map(|line| (0..14).map(move |col| (line, col)))
            .map(|(line, col)| lines.byte(line as u32, col as u32 + 1))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(
            lines.byte(2, 10),
            20,
            "the char after `é` starts two bytes after it"
        );
        assert_eq!(lines.byte(9, 1), text.len() as u32);
    }

    #[test]
    fn word_at_a_time_scan_finds_every_newline_and_wide_line() {
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&"x".repeat(i % 17));
            if i % 7 == 0 {
                text.push_str("ß — ü");
            }
            text.push('\n');
        }
        text.push_str("tail é");
        let index = LineIndex::new(&text);
        let starts: Vec<u32> = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i as u32 + 1))
            .collect();
        let wide: Vec<u32> = text
            .split('\n')
            .enumerate()
            .filter(|(_, l)| !l.is_ascii())
            .map(|(i, _)| i as u32)
            .collect();
        assert_eq!(index.starts, starts);
        assert_eq!(index.wide, wide);
        let kept = super::Starts::new(starts.clone());
        assert!(matches!(kept, super::Starts::Compact { .. }));
        for (i, &s) in starts.iter().enumerate() {
            assert_eq!(kept.get(i), Some(s));
        }
        assert_eq!(kept.get(starts.len()), None);
        // A few long lines among short ones stay compact, and their starts are exact.
        let mut mixed = vec![0u32];
        for i in 0..200u32 {
            let len = match i % 50 {
                7 => 70_000,
                8 => 255,
                9 => 254,
                _ => 10 + i % 7,
            };
            mixed.push(mixed.last().unwrap() + len);
        }
        let kept = super::Starts::new(mixed.clone());
        assert!(matches!(kept, super::Starts::Compact { .. }));
        for (i, &s) in mixed.iter().enumerate() {
            assert_eq!(kept.get(i), Some(s), "line {i}");
        }
        assert_eq!(kept.get(mixed.len()), None);
        let long = super::Starts::new(vec![0, 10, 70_010, 70_020]);
        assert!(matches!(long, super::Starts::Full(_)));
        assert_eq!(long.get(2), Some(70_010));
    }

    #[test]
    fn a_statement_stands_alone_with_only_blanks_and_a_comment_around_it() {
        let text = "fn f() {\n    a();\n    b(); // why\r\n    x; c();\n    d(); e\n  é; g();\n\tz();}\n    ü(); // é\n";
        let index = LineIndex::new(text);
        let sp = |line, col, end_col| Sp {
            line,
            col,
            end_line: line,
            end_col,
        };
        // `a();`, `b(); // why`, `ü(); // é` (a line that is not ASCII).
        assert!(index.stands_alone(sp(2, 5, 9)));
        assert!(index.stands_alone(sp(3, 5, 9)));
        assert!(index.stands_alone(sp(8, 5, 9)));
        // `c();` after `x;`, `d();` before `e`, `g();` after `é;`, `z();` before `}`.
        assert!(!index.stands_alone(sp(4, 8, 12)));
        assert!(!index.stands_alone(sp(5, 5, 9)));
        assert!(!index.stands_alone(sp(6, 6, 10)));
        assert!(!index.stands_alone(sp(7, 2, 6)));
        // `{` ends the first line, but `fn f()` is before it.
        assert!(!index.stands_alone(sp(1, 8, 9)));
    }
}
