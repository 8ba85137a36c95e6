//! Parsing one file with `syn` and converting `proc_macro2` spans into compact [`Sp`]s
//! (1-based line, 1-based char column, byte offsets into the text as given).

use crate::ir::Sp;
use proc_macro2::Span;

/// The recursion budget for lowering nested expressions; deeper nesting becomes opaque.
pub const MAX_DEPTH: u32 = 256;

/// Byte offsets of line starts, for turning (line, char column) into byte offsets.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<u32>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut starts = Vec::with_capacity(text.len() / 32 + 1);
        starts.push(0);
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                starts.push(i as u32 + 1);
            }
        }
        LineIndex { text, starts }
    }

    /// Byte offset of a 1-based line and 0-based char column.
    pub fn byte(&self, line: usize, col: usize) -> u32 {
        let Some(&start) = self.starts.get(line.saturating_sub(1)) else {
            return self.text.len() as u32;
        };
        let rest = &self.text[start as usize..];
        let line_text = rest.split('\n').next().unwrap_or("");
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

    pub fn sp(&self, lo: Span, hi: Span) -> Sp {
        let s = lo.start();
        let e = hi.end();
        let (s, e) = if (e.line, e.column) < (s.line, s.column) {
            (s, s)
        } else {
            (s, e)
        };
        Sp {
            lo: self.byte(s.line, s.column),
            hi: self.byte(e.line, e.column),
            line: s.line as u32,
            col: s.column as u32 + 1,
            end_line: e.line as u32,
            end_col: e.column as u32 + 1,
        }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }
}
