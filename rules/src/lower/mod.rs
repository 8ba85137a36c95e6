//! Lowering: a parsed `syn::File` into a [`FileIr`] (item facts plus one effect trace per fn).
//!
//! Lowering never fails: any syntax it does not model is skipped (its nested calls are still
//! visited where cheap), and nesting deeper than [`crate::parse::MAX_DEPTH`] is left opaque.

use crate::name::Name;
mod body;
mod chain;
mod conds;
mod exprs;
mod items;
mod macros;
mod modules;
mod places;
mod prefilter;
mod sea_query;
mod spans;
mod types;

use crate::ir::FileIr;
use crate::parse::LineIndex;
use syn::{Attribute, Item, Pat};

/// Allocation-free walks of a `syn::punctuated::Punctuated`. Its own `iter`, `first` and `last`
/// (and `for x in &list`) box a trait object on every call, and lowering walks a path or an
/// argument list at nearly every expression: those boxes were the largest share of its
/// temporary allocations. These go through `pairs`, which allocates nothing.
pub(crate) trait Seq<T> {
    fn each<'a>(&'a self) -> impl DoubleEndedIterator<Item = &'a T> + ExactSizeIterator
    where
        T: 'a;
    fn first_item(&self) -> Option<&T> {
        self.each().next()
    }
    fn last_item(&self) -> Option<&T> {
        self.each().next_back()
    }
}

impl<T, P> Seq<T> for syn::punctuated::Punctuated<T, P> {
    fn each<'a>(&'a self) -> impl DoubleEndedIterator<Item = &'a T> + ExactSizeIterator
    where
        T: 'a,
    {
        self.pairs().map(syn::punctuated::Pair::into_value)
    }
}

/// The segments of a path as names (`sqlx::query` is `sqlx`, `query`).
pub(crate) fn segments(p: &syn::Path) -> impl Iterator<Item = Name> + '_ {
    p.segments.each().map(|s| Name::display(&s.ident))
}

/// A path's last segment (`query` of `sqlx::query`), or empty.
pub(crate) fn last_segment(p: &syn::Path) -> Name {
    p.segments
        .last_item()
        .map(|s| Name::display(&s.ident))
        .unwrap_or_default()
}

/// Parses `text` as a file and lowers it item by item: each item is lowered and dropped right
/// after it is parsed, so no more than one item's tree is ever alive beside the file's token
/// buffer (the CLI's `-j 2` peak on the five bench repos fell from 79-86 MB to 69-71 MB).
/// Accepts exactly what `syn::parse_file` accepts (byte order mark, shebang line) and fails with
/// the same error; a failure discards what was lowered.
pub fn parse_and_lower(
    text: &str,
    lines: &LineIndex<'_>,
    knowledge: &crate::Knowledge,
) -> syn::Result<FileIr> {
    use syn::parse::Parser;
    let content = strip_file_prefix(text);
    let parser = |input: syn::parse::ParseStream<'_>| {
        let mut out = FileIr::default();
        let mut cx = items::ItemLowerer {
            lines,
            knowledge,
            out: &mut out,
            depth: 0,
        };
        input.call(Attribute::parse_inner)?;
        while !input.is_empty() {
            let item: Item = input.parse()?;
            cx.item(&item, None);
            modules::collect(&item, &mut Vec::new(), cx.out);
        }
        // Imports sorted by alias (stably: a later import of the same name stays later), so the
        // crate facts can search them without building a table.
        out.facts.uses.sort_by(|a, b| a.0.cmp(&b.0));
        out.shrink();
        Ok(out)
    };
    parser.parse_str(content)
}

/// What `syn::parse_file` strips before parsing: a byte order mark, then a shebang line (`#!`
/// not followed, after whitespace and non-doc comments, by `[`, which would open an inner
/// attribute).
/// The shebang's newline is kept so line numbers stay true.
fn strip_file_prefix(text: &str) -> &str {
    let content = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = content.strip_prefix("#!") else {
        return content;
    };
    if skip_trivia(rest).starts_with('[') {
        return content;
    }
    match content.find('\n') {
        Some(i) => &content[i..],
        None => "",
    }
}

/// `text` after leading whitespace and non-doc comments, as syn decides whether `#!` opens a
/// shebang: doc comments (`///`, `//!`, `/**`, `/*!`) are tokens and stop the skip, and so does an
/// unterminated block comment; left-to-right and right-to-left marks count as whitespace.
fn skip_trivia(mut text: &str) -> &str {
    'skip: while let Some(&byte) = text.as_bytes().first() {
        if byte == b'/' {
            let doc_line = text.starts_with("///") && !text.starts_with("////");
            let doc_block = text.starts_with("/**") && !text.starts_with("/***");
            if text.starts_with("//") && !doc_line && !text.starts_with("//!") {
                match text.find('\n') {
                    Some(i) => {
                        text = &text[i + 1..];
                        continue;
                    }
                    None => return "",
                }
            } else if text.starts_with("/**/") {
                text = &text[4..];
                continue;
            } else if text.starts_with("/*") && !doc_block && !text.starts_with("/*!") {
                let bytes = text.as_bytes();
                let (mut depth, mut i) = (0usize, 0);
                while i + 1 < bytes.len() {
                    match (bytes[i], bytes[i + 1]) {
                        (b'/', b'*') => {
                            depth += 1;
                            i += 1;
                        }
                        (b'*', b'/') => {
                            depth -= 1;
                            if depth == 0 {
                                text = &text[i + 2..];
                                continue 'skip;
                            }
                            i += 1;
                        }
                        _ => {}
                    }
                    i += 1;
                }
                return text;
            }
        }
        let Some(ch) = text.chars().next() else {
            break;
        };
        if ch.is_whitespace() || ch == '\u{200e}' || ch == '\u{200f}' {
            text = &text[ch.len_utf8()..];
            continue;
        }
        return text;
    }
    text
}

/// Names bound by a pattern.
pub(crate) fn pat_names(pat: &Pat, out: &mut Vec<Name>) {
    match pat {
        Pat::Ident(p) => {
            out.push(Name::display(&p.ident));
            if let Some((_, sub)) = &p.subpat {
                pat_names(sub, out);
            }
        }
        Pat::Reference(r) => pat_names(&r.pat, out),
        Pat::Type(t) => pat_names(&t.pat, out),
        Pat::Tuple(t) => t.elems.each().for_each(|p| pat_names(p, out)),
        Pat::TupleStruct(t) => t.elems.each().for_each(|p| pat_names(p, out)),
        Pat::Struct(s) => s.fields.each().for_each(|f| pat_names(&f.pat, out)),
        Pat::Slice(s) => s.elems.each().for_each(|p| pat_names(p, out)),
        Pat::Or(o) => {
            if let Some(p) = o.cases.first_item() {
                pat_names(p, out)
            }
        }
        Pat::Paren(p) => pat_names(&p.pat, out),
        Pat::Guard(g) => pat_names(&g.pat, out),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(text: &str) -> syn::Result<FileIr> {
        let lines = LineIndex::new(text);
        parse_and_lower(text, &lines, &crate::Knowledge::default())
    }

    #[test]
    fn file_prefixes_are_stripped_as_syn_does() {
        assert_eq!(strip_file_prefix("\u{feff}fn a() {}"), "fn a() {}");
        assert_eq!(
            strip_file_prefix("#!/usr/bin/env run\nfn a() {}"),
            "\nfn a() {}"
        );
        assert_eq!(strip_file_prefix("#!/bin/x"), "");
        // `#!` opening an inner attribute, even after comments, is not a shebang.
        assert_eq!(strip_file_prefix("#![allow(x)]"), "#![allow(x)]");
        let commented = "#! /* a /* nested */ one */ // and a line\n [allow(x)] fn a() {}";
        assert_eq!(strip_file_prefix(commented), commented);
        for text in [
            "\u{feff}#!/bin/x\nfn a() { b(); }",
            "#![allow(x)]\nfn a() { b(); }",
            commented,
        ] {
            let ir = lowered(text).expect("parses");
            assert_eq!(ir.bodies.len(), 1, "{text:?}");
            assert!(syn::parse_file(text).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn a_file_parses_exactly_when_syn_parse_file_accepts_it() {
        for text in [
            "#! /// a doc comment is a token\n[allow(x)] fn a() {}",
            "#! //! so is an inner one\n[allow(x)] fn a() {}",
            "#! /**/ [allow(x)] fn a() {}",
            "#! /** doc */ [allow(x)] fn a() {}",
            "#! /* unterminated [allow(x)] fn a() {}",
            "#!\u{200e}[allow(x)] fn a() {}",
            "#!\u{a0}[allow(x)] fn a() {}",
            "#!/bin/x\nfn a() {}",
            "fn a() {}\nfn b( {}",
            "fn a() {} }",
            "#![x] fn a() {} #![y]",
            "struct S",
            "",
            "// only a comment",
        ] {
            let ours = lowered(text)
                .map(|ir| ir.bodies.len())
                .map_err(|e| e.to_string());
            let syns = syn::parse_file(text)
                .map(|f| f.items.iter().filter(|i| matches!(i, Item::Fn(_))).count())
                .map_err(|e| e.to_string());
            assert_eq!(ours, syns, "{text:?}");
        }
    }
}
