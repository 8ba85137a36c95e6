//! The module tree's edges a file declares: `mod name;` items (in inline modules too, test
//! modules included, with their `#[path]` attributes) and item-level `include!("file")`, for
//! the driver to find the files a target compiles. Function bodies are not searched.

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
        _ => {}
    }
}

/// The value of a `#[path = ".."]` attribute.
fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
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

    #[test]
    fn declarations_with_paths_inline_modules_and_includes() {
        let (mods, includes) = decls(
            "mod a;\n#[path = \"x/y.rs\"]\npub mod b;\n#[cfg(test)]\nmod tests;\nmod outer {\n    #[path = \"deep\"]\n    mod inner {\n        mod c;\n    }\n}\ninclude!(\"gen.rs\");\nfn f() { mod hidden; }\n",
        );
        let shown: Vec<Shown> = mods
            .iter()
            .map(|m| (m.inline.clone(), m.name.as_str(), m.path.as_deref()))
            .collect();
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
    fn raw_identifiers_name_their_files_without_the_prefix() {
        let (mods, _) = decls(
            "pub mod r#impl;
mod r#type {
    mod r#match;
}
",
        );
        let shown: Vec<Shown> = mods
            .iter()
            .map(|m| (m.inline.clone(), m.name.as_str(), m.path.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                (vec![], "impl", None),
                (vec![("type".to_string(), None)], "match", None),
            ]
        );
    }
}
