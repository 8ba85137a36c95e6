//! The module tree's edges a file declares: `mod name;` items (in inline modules too, test
//! modules included, with their `#[path]` attributes; also those handed to an item-level macro
//! such as `cfg_if!`) and item-level `include!("file")`, for the driver to find the files a
//! target compiles. Function bodies are not searched.

use syn::ext::IdentExt;
use syn::{Attribute, Expr, Item, Lit, Meta};

use crate::ModDecl;
use crate::ir::FileIr;

/// Records the declarations `item` holds (inside `inline` modules of the file).
pub(super) fn collect(item: &Item, inline: &mut Vec<(String, Option<String>)>, out: &mut FileIr) {
    match item {
        Item::Mod(m) => {
            // `mod r#impl;` is the file `impl.rs`.
            let name = m.ident.unraw().to_string();
            let path = path_attr(&m.attrs);
            match &m.content {
                None => out.modules.push(ModDecl {
                    inline: inline.clone(),
                    name,
                    path,
                }),
                // Bounded as lowering bounds item nesting.
                Some((_, items)) if inline.len() < 64 => {
                    inline.push((name, path));
                    for it in items {
                        collect(it, inline, out);
                    }
                    inline.pop();
                }
                Some(_) => {}
            }
        }
        Item::Macro(m) if m.mac.path.is_ident("include") && inline.is_empty() => {
            if let Ok(Lit::Str(s)) = m.mac.parse_body::<Lit>() {
                out.includes.push(s.value());
            }
        }
        // `cfg_if! { if #[cfg(unix)] { mod unix; } else { mod other; } }`, `cfg_select!`: the
        // `mod name;` items a macro is handed are the files one of its arms compiles. (Not a
        // `macro_rules!` definition: its body is expanded only where it is invoked.)
        Item::Macro(m) if m.ident.is_none() => {
            macro_mods(m.mac.tokens.clone(), inline, out, 0);
        }
        _ => {}
    }
}

/// The `mod name;` declarations in a macro's tokens, at any depth of its groups, with the
/// `#[path = ".."]` written just before them.
fn macro_mods(
    tokens: proc_macro2::TokenStream,
    inline: &[(String, Option<String>)],
    out: &mut FileIr,
    depth: u32,
) {
    use proc_macro2::TokenTree;
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, t) in trees.iter().enumerate() {
        match t {
            TokenTree::Group(g) if depth < 16 => macro_mods(g.stream(), inline, out, depth + 1),
            TokenTree::Ident(kw) if kw == "mod" => {
                let (Some(TokenTree::Ident(name)), Some(TokenTree::Punct(end))) =
                    (trees.get(i + 1), trees.get(i + 2))
                else {
                    continue;
                };
                if end.as_char() != ';' {
                    continue;
                }
                out.modules.push(ModDecl {
                    inline: inline.to_vec(),
                    name: name.unraw().to_string(),
                    path: path_before(&trees[..i]),
                });
            }
            _ => {}
        }
    }
}

/// The `#[path = ".."]` attribute among the tokens right before a `mod` (after a `pub` or
/// `pub(crate)`, and other attributes).
fn path_before(before: &[proc_macro2::TokenTree]) -> Option<String> {
    use proc_macro2::{Delimiter, TokenTree};
    let mut i = before.len();
    while i > 0 {
        match &before[i - 1] {
            TokenTree::Ident(v) if v == "pub" => i -= 1,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis => i -= 1,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket && i >= 2 => {
                if let Some(path) = syn::parse2::<Meta>(g.stream())
                    .ok()
                    .and_then(|m| path_value(&m))
                {
                    return Some(path);
                }
                // `#` then `[..]`: another attribute.
                i -= 2;
            }
            _ => break,
        }
    }
    None
}

/// The value of a `#[path = ".."]` attribute.
fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| path_value(&a.meta))
}

/// The file an attribute's `path = ".."` names.
fn path_value(meta: &Meta) -> Option<String> {
    match meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::ModDecl;

    fn decls(text: &str) -> (Vec<ModDecl>, Vec<String>) {
        let lines = crate::parse::LineIndex::new(text);
        let ir = super::super::parse_and_lower(text, &lines, &crate::Knowledge::default())
            .expect("parses");
        (ir.modules, ir.includes)
    }

    /// A declaration as (inline modules, name, path).
    type Shown<'a> = (Vec<(String, Option<String>)>, &'a str, Option<&'a str>);

    fn shown(mods: &[ModDecl]) -> Vec<Shown<'_>> {
        mods.iter()
            .map(|m| (m.inline.clone(), m.name.as_str(), m.path.as_deref()))
            .collect()
    }

    #[test]
    fn declarations_with_paths_inline_modules_and_includes() {
        let (mods, includes) = decls(
            "mod a;\n#[path = \"x/y.rs\"]\npub mod b;\n#[cfg(test)]\nmod tests;\nmod outer {\n    #[path = \"deep\"]\n    mod inner {\n        mod c;\n    }\n}\ninclude!(\"gen.rs\");\nfn f() { mod hidden; }\n",
        );
        let shown = shown(&mods);
        assert_eq!(
            shown,
            [
                (vec![], "a", None),
                (vec![], "b", Some("x/y.rs")),
                (vec![], "tests", None),
                (
                    vec![
                        ("outer".to_string(), None),
                        ("inner".to_string(), Some("deep".to_string()))
                    ],
                    "c",
                    None
                ),
            ]
        );
        assert_eq!(includes, ["gen.rs"]);
    }

    #[test]
    fn modules_handed_to_a_cfg_macro_are_declared() {
        let (mods, _) = decls(
            "cfg_if::cfg_if! {\n    if #[cfg(unix)] {\n        pub(crate) mod unix;\n    } else {\n        #[path = \"other/any.rs\"]\n        mod fallback;\n    }\n}\ncfg_select! { feature = \"full\" => { pub mod settings; } _ => {} }\nmacro_rules! declare { ($n:ident) => { mod $n; mod fixed; }; }\n",
        );
        let shown = shown(&mods);
        assert_eq!(
            shown,
            [
                (vec![], "unix", None),
                (vec![], "fallback", Some("other/any.rs")),
                (vec![], "settings", None),
            ]
        );
    }

    #[test]
    fn raw_identifiers_name_their_files_without_the_prefix() {
        let (mods, _) = decls(
            "pub mod r#impl;
mod r#type {
    mod r#match;
}
",
        );
        let shown = shown(&mods);
        assert_eq!(
            shown,
            [
                (vec![], "impl", None),
                (vec![("type".to_string(), None)], "match", None),
            ]
        );
    }
}
