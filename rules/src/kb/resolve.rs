//! Call resolution: the crate bodies a call may run, from its function path (through `use`
//! aliases, `Self`, modules) or its receiver's class (inherent and trait methods, trait objects
//! and generic bounds). A fn of another arity than the call's is not it; several
//! implementations of one generic trait for one type are told apart by the argument's type;
//! a name that resolves to several crate fns of unknown receiver is not guessed.

use super::types::{last, named_type};
use super::{Class, Classifier};
use crate::apis::{COMMON_METHODS, RESULT_ADAPTER_STEPS};
use crate::facts::BodyId;
use crate::ir::Call;
use crate::name::Name;

impl Classifier<'_> {
    /// The crate bodies a call may run.
    pub(super) fn resolve(&self, call: &Call, recv: &Class) -> Vec<BodyId> {
        if !call.func.is_empty() && !call.steps.is_empty() {
            let name = call.func_last();
            if name.ends_with('!') {
                return Vec::new();
            }
            let mut out = self.resolve_func(&call.func);
            let args = call.steps[0].argc;
            out.retain(|&b| self.passes(b, args, true));
            self.by_argument_types(&call.steps[0], true, &mut out);
            self.later_steps(call, &mut out);
            return out;
        }
        let mut out = self.resolve_first_step(call, recv);
        if let Some(first) = call.steps.first() {
            out.retain(|&b| self.passes(b, first.argc, false));
            self.by_argument_types(first, false, &mut out);
        }
        if out.is_empty() {
            out = self.active_model_method(call);
        }
        self.later_steps(call, &mut out);
        out
    }

    /// Several implementations of one generic trait for one type (`impl Processor<GetOrder>
    /// for Db` and `impl Processor<CancelOrder> for Db`, each with its `process`, taking
    /// different argument types): exactly one runs, the one whose parameter takes the
    /// argument's type. The argument's type is known when it is a struct literal
    /// (`db.process(GetOrder { id })`, an enum's variant by its enum) or a local of a crate
    /// struct's type; when it is not, or several still take it, the call is not guessed: it
    /// runs none of them (merging them would give a read the deletes of its siblings). Impls
    /// that take the same types (one per `cfg` feature, same-named types in two modules) are
    /// alternatives, all kept; so are all of them when this body's arguments were not kept
    /// (an inert body: only the count is).
    fn by_argument_types(&self, step: &crate::ir::Step, by_path: bool, out: &mut Vec<BodyId>) {
        if out.len() < 2 || step.args.len() != step.argc as usize {
            return;
        }
        // One type: the same name in the same package (two adapter packages may each have a
        // `SqlRepository` implementing the trait: those are two types, both of which may run).
        let first = self.facts.body(out[0]);
        let package = self.facts.package_of(out[0].file);
        let one_type_many_impls = first.self_ty.is_some()
            && out.iter().all(|&b| {
                let body = self.facts.body(b);
                body.trait_name.is_some()
                    && body.self_ty == first.self_ty
                    && self.facts.package_of(b.file) == package
            });
        if !one_type_many_impls {
            return;
        }
        // Each candidate's parameter types, one per input, when its patterns bind one name
        // each (`(a, b): (A, B)` or `Get { id }: Get` bind another number: not known).
        let shapes: Vec<Option<Vec<Name>>> = out
            .iter()
            .map(|&b| {
                let body = self.facts.body(b);
                let params: Vec<Name> = body
                    .params
                    .iter()
                    .filter(|(n, _)| n != "self")
                    .map(|(_, t)| Name::new(named_type(t.first().map_or("", |t| t.as_str()))))
                    .collect();
                (params.len() == body.arity as usize).then_some(params)
            })
            .collect();
        // The same types everywhere: alternatives, not one generic trait's instances.
        let known: Vec<&Vec<Name>> = shapes.iter().flatten().collect();
        if known.len() == shapes.len() && known.windows(2).all(|w| w[0] == w[1]) {
            return;
        }
        let arg_types: Vec<Vec<Name>> = step
            .args
            .iter()
            .map(|a| match a.lit().filter(|l| l.whole) {
                Some(l) => std::iter::once(&l.ty)
                    .chain(l.module.as_ref())
                    .map(|t| Name::new(last(t)))
                    .collect(),
                None => match a.paths.as_slice() {
                    [p] => match self.env.get(p.as_str()) {
                        Some(Class::User(t)) => vec![Name::new(last(t))],
                        _ => Vec::new(),
                    },
                    _ => Vec::new(),
                },
            })
            .collect();
        if arg_types.iter().any(|t| !t.is_empty()) {
            // The receiver of a path call is its first argument.
            let takes = |i: usize, params: &Vec<Name>| {
                let skip = usize::from(by_path && self.takes_self(out[i]));
                arg_types
                    .iter()
                    .skip(skip)
                    .zip(params)
                    .all(|(arg, ty)| arg.is_empty() || arg.contains(ty))
            };
            let exact: Vec<BodyId> = shapes
                .iter()
                .enumerate()
                .filter(|(i, s)| s.as_ref().is_some_and(|p| takes(*i, p)))
                .map(|(i, _)| out[i])
                .collect();
            *out = if exact.is_empty() {
                // None of the known shapes takes it: one whose shape is not known may.
                shapes
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.is_none())
                    .map(|(i, _)| out[i])
                    .collect()
            } else {
                exact
            };
        }
        if out.len() > 1 {
            out.clear();
        }
    }

    /// Can a call passing `args` arguments run crate fn `b`? Rust has no default or variadic
    /// arguments, so a fn of another arity is some other fn of that name (sqlx's
    /// `query.bind(v)` is not the crate's `bind(&self, state, req)` handler). A path call
    /// (`by_path`) passes the receiver of a method as its first argument (`Type::m(&x, a)`).
    fn passes(&self, b: BodyId, args: u8, by_path: bool) -> bool {
        let body = self.facts.body(b);
        let receiver = usize::from(by_path && self.takes_self(b));
        body.arity == u8::MAX || args == u8::MAX || body.arity as usize + receiver == args as usize
    }

    /// `row.into_active_model().reset_password(db, pw)`: sea-orm turns the row into the
    /// entity's `ActiveModel`, and the next step is the crate's own method on it when the crate
    /// defines exactly one of that name on an `ActiveModel` (one per entity: two are ambiguous).
    fn active_model_method(&self, call: &Call) -> Vec<BodyId> {
        match call.steps.as_slice() {
            [first, second, ..] if first.name == "into_active_model" && first.args.is_empty() => {
                let m = self.facts.methods("ActiveModel", &second.name);
                match m {
                    [one] if self.passes(*one, second.argc, false) => vec![*one],
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// The later steps of a chain whose earlier steps all run crate fns (`data.handler().
    /// delete_token(t)`, `Repo::new(db).find(id)`): the value each step works on came from the
    /// crate, so a method defined once in the crate (and not a common library name) is taken
    /// for that one. The walk stops at the first step that resolves to nothing.
    fn later_steps(&self, call: &Call, out: &mut Vec<BodyId>) {
        if out.is_empty() {
            return;
        }
        // The bodies the previous step runs.
        let mut prev = out.clone();
        for step in call.steps.iter().skip(1) {
            // A result adapter hands the value through (`.map_err(..)` between two steps).
            if RESULT_ADAPTER_STEPS.contains(&step.name.as_str()) {
                continue;
            }
            // The previous step's declared type names the method's owner: `CrateOwner::
            // from_invite(&inv).insert(conn)` runs `CrateOwner::insert`, however common the
            // name; `repo.user_email().count(..)`, where every `user_email` returns a `Box<dyn
            // UserEmailRepository>`, runs that trait's implementations of `count`.
            let typed = match self.returned_class(&prev, false) {
                Some(Class::User(ty)) => match self.facts.methods(&ty, &step.name) {
                    [one] => Some(vec![*one]),
                    _ => None,
                },
                Some(class @ Class::Trait(_)) => {
                    Some(self.class_methods(&step.name, &class)).filter(|m| !m.is_empty())
                }
                _ => None,
            };
            let found = match typed {
                Some(m) => m,
                None => match self.facts.methods_named.get(step.name.as_str()) {
                    Some(c)
                        if c.len() == 1
                            && !COMMON_METHODS.contains(&step.name.as_str())
                            && self.takes_self(c[0]) =>
                    {
                        c.clone()
                    }
                    _ => break,
                },
            };
            let found: Vec<BodyId> = found
                .into_iter()
                .filter(|&b| self.passes(b, step.argc, false))
                .collect();
            if found.is_empty() {
                break;
            }
            for &b in &found {
                if !out.contains(&b) {
                    out.push(b);
                }
            }
            prev = found;
        }
    }

    /// The crate bodies the first step of a method chain may run, from the receiver's class.
    fn resolve_first_step(&self, call: &Call, recv: &Class) -> Vec<BodyId> {
        let Some(step) = call.steps.first() else {
            return Vec::new();
        };
        // A library's type the crate extends with a trait of its own (`impl ContextExt for
        // async_graphql::Context<'_> { fn state(&self) -> &BoxState }`): that impl runs.
        if let Class::Unknown(ty) = recv {
            let m = self.facts.methods(ty, &step.name);
            if !m.is_empty() {
                return m.to_vec();
            }
        }
        // A field of `self` declared with a crate type that a library class was given by its
        // name (`db: DbConn`, the crate's own wrapper of a pool): the type's own methods run.
        if !matches!(recv, Class::User(_) | Class::Trait(_))
            && let Some(ty) = self.self_place_type(&call.recv)
        {
            let own = ty
                .iter()
                .map(|t| t.rsplit("::").next().unwrap_or(t))
                .find(|t| self.facts.structs.contains_key(*t));
            if let Some(m) = own.map(|t| self.facts.methods(t, &step.name))
                && !m.is_empty()
            {
                return m.to_vec();
            }
        }
        match recv {
            Class::User(_) | Class::Trait(_) => self.class_methods(&step.name, recv),
            // A method defined once in the crate (an extension trait on a library type, or a
            // receiver of unknown type).
            _ => match self.facts.methods_named.get(step.name.as_str()) {
                Some(c)
                    if c.len() == 1
                        && !COMMON_METHODS.contains(&step.name.as_str())
                        && self.takes_self(c[0])
                        && !self.crate_method_on_library_value(call, c[0]) =>
                {
                    c.clone()
                }
                _ => Vec::new(),
            },
        }
    }

    /// The crate bodies method `name` may run on a value of a crate struct or trait: the type's
    /// own methods (of a trait, only production implementations when there are others), else
    /// the default methods of the traits it implements and a trait's implementations.
    fn class_methods(&self, name: &str, recv: &Class) -> Vec<BodyId> {
        let (Class::User(t) | Class::Trait(t)) = recv else {
            return Vec::new();
        };
        let m = self.facts.methods(t, name);
        if !m.is_empty() {
            // A trait's implementations: test doubles implement it too, production
            // runs the others.
            let production: Vec<BodyId> = m
                .iter()
                .copied()
                .filter(|&b| {
                    matches!(recv, Class::User(_))
                        || !self
                            .facts
                            .body(b)
                            .self_ty
                            .as_deref()
                            .is_some_and(super::names::is_test_double)
                })
                .collect();
            return if production.is_empty() {
                m.to_vec()
            } else {
                production
            };
        }
        // A trait implemented by the type (default methods).
        let mut out = Vec::new();
        if self.facts.methods_named.contains_key(name) {
            for tr in self
                .facts
                .traits_of
                .get(t)
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                out.extend_from_slice(self.facts.methods(tr, name));
            }
        }
        if matches!(recv, Class::Trait(_))
            && let Some(tys) = self.facts.trait_impls.get(t)
        {
            // Test doubles implement the trait too; production runs the others.
            for ty in tys.iter().filter(|ty| !super::names::is_test_double(ty)) {
                out.extend_from_slice(self.facts.methods(ty, name));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Is the chain's receiver a library's value (see [`Classifier::library_locals`]) and `b` a
    /// method of a crate struct, inherent or of a trait? Such a method cannot run on it: only
    /// one implemented for a type that is not the crate's (an extension trait's) can.
    fn crate_method_on_library_value(&self, call: &Call, b: BodyId) -> bool {
        call.recv
            .first()
            .is_some_and(|r| self.library_locals.contains(r))
            && self
                .facts
                .body(b)
                .self_ty
                .as_deref()
                .is_some_and(|t| self.facts.structs.contains_key(t))
    }

    /// Does crate fn `b` take `self`? Only such a fn runs for a method call (`x.take()`); an
    /// associated fn of the same name (`Invitation::take(mail, conn)`) is called by its path.
    fn takes_self(&self, b: BodyId) -> bool {
        self.facts
            .body(b)
            .params
            .first()
            .is_some_and(|(n, _)| n == "self")
    }

    pub(super) fn resolve_func(&self, func: &[Name]) -> Vec<BodyId> {
        let Some(name) = func.last() else {
            return Vec::new();
        };
        if func.len() >= 2 {
            let q = &func[func.len() - 2];
            let q = if q == "Self" {
                self.body.self_ty.clone().unwrap_or_default()
            } else {
                q.clone()
            };
            let typed = self.facts.methods(&q, name);
            if !typed.is_empty() {
                return typed.to_vec();
            }
        }
        if func.len() == 1 {
            self.facts.bare_fn(self.file, name)
        } else if q_is_module(func) && self.facts.is_crate_path(self.file, func) {
            // Through the file's `use` aliases (`use infra::table::configs as config_table;`).
            let full = self.facts.resolve_parts(self.file, func);
            let parts: Vec<Name> = full.as_str().split("::").map(Name::new).collect();
            self.facts.free_fns_in(self.file, &parts)
        } else {
            Vec::new()
        }
    }
}

fn q_is_module(func: &[Name]) -> bool {
    func.len() >= 2
        && func[func.len() - 2]
            .chars()
            .next()
            .is_some_and(|c| c.is_lowercase())
}
