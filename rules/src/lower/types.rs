//! Types as written, flattened into [`TypeRef`]s for receiver classification.

use super::Seq;
use crate::ir::TypeRef;
use crate::name::Name;
use syn::{GenericArgument, PathArguments, Type, TypeParamBound};

/// Flattens a type into the paths it mentions, in pre-order.
pub fn type_ref(ty: &Type) -> TypeRef {
    let mut out = Vec::new();
    walk(ty, &mut out, 0);
    out
}

/// Traits that say nothing of what a value does (`Send`, `Clone`, `Debug`, `Fn`): not the
/// bound a generic parameter is known by.
const MARKER_TRAITS: &[&str] = &[
    "Send",
    "Sync",
    "Clone",
    "Copy",
    "Debug",
    "Display",
    "Sized",
    "Default",
    "PartialEq",
    "Eq",
    "PartialOrd",
    "Ord",
    "Hash",
    "Serialize",
    "Deserialize",
    "DeserializeOwned",
    "Unpin",
    "Fn",
    "FnMut",
    "FnOnce",
    "Future",
    "Into",
    "From",
    "AsRef",
    "AsMut",
    "ToString",
    "Iterator",
    "IntoIterator",
    "Error",
    "Any",
    "Borrow",
    "ToOwned",
    "TryFrom",
    "TryInto",
];

/// Database executor traits (`E: PgExecutor<'e>`, `A: Acquire`, `C: ConnectionTrait`): the
/// caller hands in a pool, a connection or an open transaction, so the parameter stays what
/// the call sites make of it rather than one of those.
const EXECUTOR_TRAITS: &[&str] = &[
    "Executor",
    "PgExecutor",
    "MySqlExecutor",
    "SqliteExecutor",
    "Acquire",
    "Connection",
    "AsyncConnection",
    "ConnectionTrait",
    "GenericClient",
];

/// The trait each generic parameter is known by: `impl Repo` for `<R: Repo>` or `where R:
/// Send + Repo` (the first bound that is not a marker trait), as `(param, "impl Repo")`.
pub fn generic_bounds(g: &syn::Generics) -> Vec<(Name, Name)> {
    let mut out: Vec<(Name, Name)> = Vec::new();
    let mut add = |param: Name, bounds: &mut dyn Iterator<Item = &TypeParamBound>| {
        if out.iter().any(|(p, _)| *p == param) {
            return;
        }
        for b in bounds {
            if let TypeParamBound::Trait(t) = b
                && let Some(last) = t.path.segments.last_item()
                && !MARKER_TRAITS.iter().any(|m| last.ident == m)
            {
                if EXECUTOR_TRAITS.iter().any(|m| last.ident == m) {
                    return;
                }
                out.push((
                    param,
                    Name::display(&format_args!("impl {}", path_string(&t.path))),
                ));
                return;
            }
        }
    };
    for p in g.params.each() {
        if let syn::GenericParam::Type(t) = p {
            add(Name::display(&t.ident), &mut t.bounds.each());
        }
    }
    if let Some(w) = &g.where_clause {
        for pred in w.predicates.each() {
            if let syn::WherePredicate::Type(pt) = pred
                && let Type::Path(tp) = &pt.bounded_ty
                && tp.qself.is_none()
                && let Some(ident) = tp.path.get_ident()
            {
                add(Name::display(ident), &mut pt.bounds.each());
            }
        }
    }
    out
}

/// Writes each generic parameter of `ty` as the trait it is bound by (`Arc<R>` with `R: Repo`
/// becomes `Arc<impl Repo>`), so its methods resolve to the trait's implementations.
pub fn bind_generics(ty: &mut TypeRef, bounds: &[(Name, Name)]) {
    if bounds.is_empty() {
        return;
    }
    for seg in ty.iter_mut() {
        if let Some((_, b)) = bounds.iter().find(|(p, _)| p == seg) {
            *seg = b.clone();
        }
    }
}

/// The name of an impl's self type (`Service` for `impl<T> Service<T>`).
pub fn type_name(ty: &Type) -> Option<Name> {
    match ty {
        Type::Path(p) => p.path.segments.last_item().map(|s| Name::display(&s.ident)),
        Type::Reference(r) => type_name(&r.elem),
        Type::Paren(p) => type_name(&p.elem),
        Type::Group(g) => type_name(&g.elem),
        _ => None,
    }
}

fn path_string(path: &syn::Path) -> Name {
    Name::display(&PathText(path))
}

/// A path's segments joined with `::`, written straight into a [`Name`].
struct PathText<'a>(&'a syn::Path);

impl std::fmt::Display for PathText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, seg) in self.0.segments.each().enumerate() {
            if i > 0 {
                f.write_str("::")?;
            }
            std::fmt::Display::fmt(&seg.ident, f)?;
        }
        Ok(())
    }
}

fn walk(ty: &Type, out: &mut Vec<Name>, depth: u32) {
    if depth > 32 || out.len() > 24 {
        return;
    }
    match ty {
        Type::Path(p) => {
            if let Some(q) = &p.qself {
                walk(&q.ty, out, depth + 1);
            }
            out.push(path_string(&p.path));
            for seg in p.path.segments.each() {
                if let PathArguments::AngleBracketed(a) = &seg.arguments {
                    for arg in a.args.each() {
                        if let GenericArgument::Type(t) = arg {
                            walk(t, out, depth + 1);
                        }
                    }
                }
            }
        }
        Type::Reference(r) => walk(&r.elem, out, depth + 1),
        Type::Ptr(r) => walk(&r.elem, out, depth + 1),
        Type::Paren(p) => walk(&p.elem, out, depth + 1),
        Type::Group(g) => walk(&g.elem, out, depth + 1),
        Type::Slice(s) => walk(&s.elem, out, depth + 1),
        Type::Array(s) => walk(&s.elem, out, depth + 1),
        Type::Tuple(t) => t.elems.each().for_each(|e| walk(e, out, depth + 1)),
        Type::TraitObject(t) => bounds(t.bounds.each(), "dyn ", out, depth),
        Type::ImplTrait(t) => bounds(t.bounds.each(), "impl ", out, depth),
        _ => {}
    }
}

fn bounds<'a>(
    it: impl Iterator<Item = &'a TypeParamBound>,
    prefix: &str,
    out: &mut Vec<Name>,
    depth: u32,
) {
    for b in it {
        if let TypeParamBound::Trait(t) = b {
            out.push(Name::display(&format_args!(
                "{prefix}{}",
                path_string(&t.path)
            )));
            for seg in t.path.segments.each() {
                if let PathArguments::AngleBracketed(a) = &seg.arguments {
                    for arg in a.args.each() {
                        if let GenericArgument::Type(t) = arg {
                            walk(t, out, depth + 1);
                        }
                    }
                }
            }
        }
    }
}

/// A type that holds plain data only: a primitive, a string, a time, a path or an id, or a
/// standard container or smart pointer of such (`Option<String>`, `Vec<u8>`, `Box<str>`).
pub(super) fn plain_data(ty: &syn::Type) -> bool {
    const PLAIN: &[&str] = &[
        "bool",
        "char",
        "str",
        "String",
        "u8",
        "u16",
        "u32",
        "u64",
        "u128",
        "usize",
        "i8",
        "i16",
        "i32",
        "i64",
        "i128",
        "isize",
        "f32",
        "f64",
        "PathBuf",
        "Path",
        "Duration",
        "Instant",
        "SystemTime",
        "Uuid",
        "Bytes",
    ];
    const WRAPPERS: &[&str] = &["Option", "Vec", "Box", "Arc", "Rc", "Cow", "VecDeque"];
    match ty {
        syn::Type::Reference(r) => plain_data(&r.elem),
        syn::Type::Slice(s) => plain_data(&s.elem),
        syn::Type::Array(a) => plain_data(&a.elem),
        syn::Type::Tuple(t) => t.elems.iter().all(plain_data),
        syn::Type::Path(p) => {
            let Some(last) = p.path.segments.last() else {
                return false;
            };
            let name = last.ident.to_string();
            if PLAIN.contains(&name.as_str()) {
                return true;
            }
            WRAPPERS.contains(&name.as_str())
                && matches!(&last.arguments, syn::PathArguments::AngleBracketed(a)
                if a.args.iter().all(|g| match g {
                    syn::GenericArgument::Type(t) => plain_data(t),
                    syn::GenericArgument::Lifetime(_) => true,
                    _ => false,
                }))
        }
        _ => false,
    }
}
