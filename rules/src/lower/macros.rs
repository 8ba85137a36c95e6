//! Macro bodies that hold expressions: `sqlx::query!` & co., `tokio::select!`, `join!`,
//! `format!`-built strings, `assert!` / `ensure!` conditions.

use crate::apis;
use crate::name::Name;
use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, Pat, Token};

/// sqlx's query macros (`sqlx::query!(..)`).
pub fn is_query_macro(name: &str) -> bool {
    apis::QUERY_MACROS.contains(&name)
}

/// Macros whose first literal is a format string.
pub fn is_format_like(name: &str) -> bool {
    apis::FORMAT_MACROS.contains(&name)
}

/// Macros whose arguments are plain expressions worth lowering (their calls are effects).
pub fn is_lowered_macro(name: &str) -> bool {
    apis::EXPRESSION_MACROS.contains(&name)
}

/// The `{..}` groups among a macro's top-level tokens, their contents.
pub fn brace_groups(tokens: &TokenStream) -> Vec<TokenStream> {
    tokens
        .clone()
        .into_iter()
        .filter_map(|tt| match tt {
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => Some(g.stream()),
            _ => None,
        })
        .collect()
}

/// A braced macro body that parses as statements, after a leading `async` or `move` (the
/// `attempt! { async .. }` form of try-block macros); `None` for any other syntax (a DSL, `key:
/// value` pairs, alternatives in groups of their own) and for a body with no expression
/// statement (items alone are declarations, not code that runs here).
pub fn code_body(tokens: &TokenStream) -> Option<Vec<syn::Stmt>> {
    let mut iter = tokens.clone().into_iter().peekable();
    while matches!(iter.peek(), Some(TokenTree::Ident(i)) if i == "async" || i == "move") {
        iter.next();
    }
    // Cheap refusals before a parse: a body whose first token cannot start a statement.
    match iter.peek()? {
        TokenTree::Punct(p) if !matches!(p.as_char(), '&' | '*' | '!' | '-' | '|' | '#') => {
            return None;
        }
        _ => {}
    }
    let rest: TokenStream = iter.collect();
    let stmts = syn::parse::Parser::parse2(syn::Block::parse_within, rest).ok()?;
    stmts
        .iter()
        .any(|s| {
            matches!(
                s,
                syn::Stmt::Expr(..) | syn::Stmt::Local(_) | syn::Stmt::Macro(_)
            )
        })
        .then_some(stmts)
}

/// Is every group in `tokens` nested at most `limit` deep? (Checked without recursion: the
/// program's code a macro wraps is parsed only when that parse cannot run the stack out.)
pub fn shallow(tokens: &TokenStream, limit: usize) -> bool {
    let mut stack = vec![tokens.clone().into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(TokenTree::Group(g)) => {
                if stack.len() >= limit {
                    return false;
                }
                stack.push(g.stream().into_iter());
            }
            Some(_) => {}
            None => {
                stack.pop();
            }
        }
    }
    true
}

/// Does a macro's argument list hold a closure (`|c|`, `||`) or an `async` block: code worth
/// parsing its arguments for?
pub fn has_code_args(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|tt| match tt {
        TokenTree::Punct(p) => p.as_char() == '|',
        TokenTree::Ident(i) => i == "async",
        _ => false,
    })
}

/// A macro's first comma-separated argument when it is a call (a function or method call,
/// possibly `.await`ed or `?`-tried), whatever syntax the rest of the macro uses.
pub fn first_call_arg(tokens: &TokenStream) -> Option<Expr> {
    let first: TokenStream = tokens
        .clone()
        .into_iter()
        .take_while(
            |tt| !matches!(tt, TokenTree::Punct(p) if p.as_char() == ',' || p.as_char() == ';'),
        )
        .collect();
    // A call has a parenthesised group; anything else is not worth parsing.
    if !first
        .clone()
        .into_iter()
        .any(|tt| matches!(tt, TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis))
    {
        return None;
    }
    let e: Expr = syn::parse2(first).ok()?;
    let mut inner = &e;
    loop {
        match inner {
            Expr::Try(t) => inner = &t.expr,
            Expr::Await(a) => inner = &a.base,
            Expr::Call(_) | Expr::MethodCall(_) => return Some(e),
            _ => return None,
        }
    }
}

/// The comma-separated expressions of a macro call (empty when they do not parse).
pub fn parse_args(tokens: &TokenStream) -> Vec<Expr> {
    if tokens.is_empty() {
        return Vec::new();
    }
    let parser = Punctuated::<Expr, Token![,]>::parse_terminated;
    match parser.parse2(tokens.clone()) {
        Ok(p) => p.into_iter().collect(),
        Err(_) => Vec::new(),
    }
}

/// The first string literal among a macro's tokens.
pub fn first_literal(tokens: &TokenStream) -> Option<Name> {
    for tt in tokens.clone() {
        if let TokenTree::Literal(l) = tt {
            return match syn::Lit::new(l) {
                syn::Lit::Str(s) => Some(Name::from(s.value())),
                _ => None,
            };
        }
    }
    None
}

/// The source text of the first literal among a macro's tokens when it is a string literal,
/// quotes and escapes included: enough to find inline format arguments (`{seat_id}`) without
/// decoding the string.
pub fn first_literal_text(tokens: &TokenStream) -> Option<Name> {
    for tt in tokens.clone() {
        if let TokenTree::Literal(l) = tt {
            let text = Name::display(&l);
            let is_str = text.starts_with('"') || text.starts_with("r\"") || text.starts_with("r#");
            return is_str.then_some(text);
        }
    }
    None
}

/// Whether a format macro's arguments hold a row-lock clause for its text (`format!("SELECT ..
/// {}", if lock { "FOR UPDATE" } else { "" })`): the statement may lock the rows it reads.
pub fn has_row_lock_argument(tokens: &TokenStream) -> bool {
    tokens
        .clone()
        .into_iter()
        .skip(1)
        .any(|tt| holds_row_lock(&tt))
}

fn holds_row_lock(tt: &TokenTree) -> bool {
    match tt {
        TokenTree::Literal(l) => match syn::Lit::new(l.clone()) {
            syn::Lit::Str(s) => {
                let v = s.value().trim_start().to_ascii_uppercase();
                [
                    "FOR UPDATE",
                    "FOR NO KEY UPDATE",
                    "FOR SHARE",
                    "FOR KEY SHARE",
                ]
                .iter()
                .any(|c| v.starts_with(c))
            }
            _ => false,
        },
        TokenTree::Group(g) => g.stream().into_iter().any(|t| holds_row_lock(&t)),
        _ => false,
    }
}

/// The literals of `concat!("a", "b")` joined.
pub fn concat_literals(tokens: &TokenStream) -> Name {
    let mut out = String::new();
    for tt in tokens.clone() {
        if let TokenTree::Literal(l) = tt
            && let syn::Lit::Str(s) = syn::Lit::new(l)
        {
            out.push_str(&s.value());
        }
    }
    Name::from(out)
}

/// Lowercase identifiers (and `a.b` paths) in a macro's tokens, for conditions such as
/// `ensure!(order.status == Status::Pending, ..)` when the arguments are not plain expressions.
pub fn token_paths(tokens: &TokenStream, out: &mut Vec<Name>) {
    let mut prev: Option<Name> = None;
    let mut dot = false;
    for tt in tokens.clone() {
        match tt {
            TokenTree::Ident(i) => {
                let s = Name::display(&i);
                let lower = s
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_lowercase() || c == '_');
                if dot && let Some(p) = &prev {
                    let joined = Name::join(&[p.clone(), s.clone()], ".");
                    if out.len() < 64 && !out.contains(&joined) {
                        out.push(joined.clone());
                    }
                    prev = Some(joined);
                } else if lower {
                    if out.len() < 64 && !out.contains(&s) {
                        out.push(s.clone());
                    }
                    prev = Some(s);
                } else {
                    prev = None;
                }
                dot = false;
            }
            TokenTree::Punct(p) if p.as_char() == '.' => dot = prev.is_some(),
            TokenTree::Group(g) => {
                token_paths(&g.stream(), out);
                prev = None;
                dot = false;
            }
            _ => {
                prev = None;
                dot = false;
            }
        }
    }
}

/// The branches of `tokio::select! { pat = fut => body, .. }`: pattern, future, body.
pub fn select_branches(tokens: &TokenStream) -> Vec<(Option<Pat>, Option<Expr>, Option<Expr>)> {
    let toks: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        // Pattern up to a lone `=`, future up to `=>` (an `, if cond` precondition is dropped),
        // body up to the next top-level `,` (or a brace group followed by anything).
        let mut pat = TokenStream::new();
        let mut fut = TokenStream::new();
        let mut body = TokenStream::new();
        let mut stage = 0;
        while i < toks.len() {
            let t = &toks[i];
            let is_fat_arrow = matches!(t, TokenTree::Punct(p) if p.as_char() == '=' && p.spacing() == Spacing::Joint)
                && matches!(toks.get(i + 1), Some(TokenTree::Punct(q)) if q.as_char() == '>');
            let is_eq = matches!(t, TokenTree::Punct(p) if p.as_char() == '=' && p.spacing() == Spacing::Alone);
            let is_comma = matches!(t, TokenTree::Punct(p) if p.as_char() == ',');
            match stage {
                0 if is_eq => stage = 1,
                0 if is_fat_arrow => {
                    i += 1;
                    stage = 3;
                }
                0 => pat.extend([t.clone()]),
                1 if is_fat_arrow => {
                    i += 1;
                    stage = 3;
                }
                1 if is_comma => stage = 2,
                1 => fut.extend([t.clone()]),
                2 if is_fat_arrow => {
                    i += 1;
                    stage = 3;
                }
                2 => {}
                _ if is_comma => {
                    i += 1;
                    break;
                }
                _ => {
                    let brace =
                        matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace);
                    body.extend([t.clone()]);
                    if brace && body.clone().into_iter().count() == 1 {
                        i += 1;
                        if matches!(toks.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
                            i += 1;
                        }
                        break;
                    }
                }
            }
            i += 1;
        }
        if pat.is_empty() && fut.is_empty() && body.is_empty() {
            continue;
        }
        let pat = if fut.is_empty() {
            None
        } else {
            Pat::parse_single.parse2(pat).ok()
        };
        let fut = syn::parse2::<Expr>(fut).ok();
        let body = syn::parse2::<Expr>(body).ok();
        out.push((pat, fut, body));
        if out.len() > 64 {
            break;
        }
    }
    out
}

/// Whether a macro's tokens contain `.await` (an effect worth lowering).
pub fn mentions_await(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|tt| match tt {
        TokenTree::Ident(i) => i == "await",
        TokenTree::Group(g) => mentions_await(&g.stream()),
        _ => false,
    })
}

/// Identifiers captured inline by a format string: `{seat_id}`, `{order_id:?}`.
pub fn inline_args(lit: &str, out: &mut Vec<Name>) {
    let mut rest = lit;
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        if rest.starts_with('{') {
            rest = &rest[1..];
            continue;
        }
        let end = rest.find(['}', ':']).unwrap_or(rest.len());
        let name = &rest[..end];
        if !name.is_empty()
            && name.chars().all(|c| c.is_alphanumeric() || c == '_')
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
            && out.len() < 64
            && !out.iter().any(|x| x == name)
        {
            out.push(Name::new(name));
        }
        rest = &rest[end..];
    }
}

/// Is a macro named for running its code in a transaction (`with_transaction!`,
/// `in_transaction!`, `transaction!`, `with_tx!`)?
pub fn names_transaction(name: &str) -> bool {
    name.contains("transaction") || name == "tx" || name.ends_with("_tx") || name.starts_with("tx_")
}

/// The fields of a BSON document literal (`doc! { "_id": id, "status": "paid" }`), with the
/// fields of an operator's document joined to it by a dot (`"$set": { "status": "shipped" }` is
/// `$set.status`), each with its value when that is a literal (`paid`), a path (`Status::Paid`)
/// or a local (`=id`, see [`crate::ir::LOCAL_VALUE`]). At most 16 fields, 3 documents deep.
pub fn doc_fields(tokens: &TokenStream) -> Vec<(Name, Option<Name>)> {
    let mut out = Vec::new();
    doc_fields_into(tokens, "", &mut out, 0);
    out
}

fn doc_fields_into(
    tokens: &TokenStream,
    prefix: &str,
    out: &mut Vec<(Name, Option<Name>)>,
    depth: u8,
) {
    if depth > 3 {
        return;
    }
    let mut field: Vec<TokenTree> = Vec::new();
    let flush = |field: &mut Vec<TokenTree>, out: &mut Vec<(Name, Option<Name>)>| {
        let taken = std::mem::take(field);
        if out.len() >= 16 {
            return;
        }
        let [key, TokenTree::Punct(colon), value @ ..] = taken.as_slice() else {
            return;
        };
        if colon.as_char() != ':' || colon.spacing() == Spacing::Joint {
            return;
        }
        let key = match key {
            TokenTree::Literal(l) => {
                match syn::parse2::<syn::LitStr>(TokenTree::Literal(l.clone()).into()) {
                    Ok(s) => s.value(),
                    Err(_) => return,
                }
            }
            TokenTree::Ident(i) => i.to_string(),
            _ => return,
        };
        let key = format!("{prefix}{key}");
        match value {
            [TokenTree::Group(g)] if g.delimiter() == Delimiter::Brace => {
                doc_fields_into(&g.stream(), &format!("{key}."), out, depth + 1);
            }
            _ => out.push((Name::from(key), doc_value(value))),
        }
    };
    for tt in tokens.clone() {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ',' => flush(&mut field, out),
            _ => field.push(tt),
        }
    }
    flush(&mut field, out);
}

/// A document field's value as text: a literal, a path's segments joined by `::`, or a local
/// marked as one.
fn doc_value(value: &[TokenTree]) -> Option<Name> {
    match value {
        [TokenTree::Literal(l)] => Some(
            match syn::parse2::<syn::LitStr>(TokenTree::Literal(l.clone()).into()) {
                Ok(s) => Name::from(s.value()),
                Err(_) => Name::from(l.to_string()),
            },
        ),
        [TokenTree::Ident(i)] if i == "null" => Some(Name::new(crate::ir::NULL_VALUE)),
        [TokenTree::Ident(i)] => {
            let id = i.to_string();
            Some(
                if id == "true" || id == "false" || id.starts_with(char::is_uppercase) {
                    Name::from(id)
                } else {
                    Name::from(format!("{}{id}", crate::ir::LOCAL_VALUE))
                },
            )
        }
        [TokenTree::Punct(amp), rest @ ..] if amp.as_char() == '&' => doc_value(rest),
        [TokenTree::Ident(_), ..] => {
            // `Status::Paid`, `Status::Paid.to_string()`: the path before any call.
            let mut parts: Vec<String> = Vec::new();
            let mut it = value.iter().peekable();
            while let Some(TokenTree::Ident(i)) = it.next() {
                parts.push(i.to_string());
                match (it.next(), it.next()) {
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                        if a.as_char() == ':' && b.as_char() == ':' => {}
                    _ => break,
                }
            }
            match parts.last().map(String::as_str) {
                Some("Null") => Some(Name::new(crate::ir::NULL_VALUE)),
                _ => (parts.len() >= 2).then(|| Name::from(parts.join("::"))),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::doc_fields;

    fn fields(src: &str) -> Vec<(String, Option<String>)> {
        let tokens: proc_macro2::TokenStream = src.parse().unwrap();
        doc_fields(&tokens)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.map(|v| v.to_string())))
            .collect()
    }

    #[test]
    fn bson_documents_give_their_fields() {
        let own = |k: &str, v: Option<&str>| (k.to_string(), v.map(str::to_string));
        assert_eq!(
            fields(r#""_id": id, "status": "paid", "kind": Kind::Card, "n": 3"#),
            vec![
                own("_id", Some("=id")),
                own("status", Some("paid")),
                own("kind", Some("Kind::Card")),
                own("n", Some("3")),
            ]
        );
        assert_eq!(
            fields(r#""$set": { "status": "shipped", "at": now() }, "$inc": { "tries": 1 }"#),
            vec![
                own("$set.status", Some("shipped")),
                own("$set.at", None),
                own("$inc.tries", Some("1")),
            ]
        );
        // A field compared by an operator, and a key written as an identifier.
        assert_eq!(
            fields(r#""balance": { "$gte": &amount }, owner: "me""#),
            vec![
                own("balance.$gte", Some("=amount")),
                own("owner", Some("me"))
            ]
        );
        // `null` and `Bson::Null` clear a field.
        assert_eq!(
            fields(r#""reset_token": null, "code": Bson::Null"#),
            vec![
                own("reset_token", Some("is null")),
                own("code", Some("is null"))
            ]
        );
    }
}
