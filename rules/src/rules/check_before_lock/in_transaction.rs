//! The shape inside one transaction: a plain `SELECT` (no `FOR UPDATE`), a branch on its
//! result, then an `UPDATE` of the same row that neither locks the row nor guards itself. Under
//! `READ COMMITTED` two transactions both see the old state and both act.

use super::{Reported, Verdict, Write, deciding_check};
use crate::diagnostic::{Applicability, Edit, Suggestion};
use crate::effects::EffectKind;
use crate::ir::EventKind;
use crate::name::Name;
use crate::query::{self, TX_PARAM};
use crate::rules::RuleCx;

/// Judges a write inside a transaction against the reads made in it.
pub(super) fn judge(cx: &RuleCx<'_>, write: &Write<'_>, reported: &mut Reported) -> Verdict {
    let (w, effect) = (write.at, write.effect);
    let st = cx.state(w);
    let Some(tx) = st.txs.last() else {
        return Verdict::Clean;
    };
    // A row this body inserted (the write is keyed by what its own insert returned, or by the
    // value it inserted the row with): until the transaction commits no other one can see
    // the row, let alone change it.
    // An upsert whose conflict branch writes what the read gave (`INSERT .. ON CONFLICT (id) DO
    // UPDATE SET count = $2`, `$2` the count read plus one) writes the row back like an `UPDATE`.
    let upsert = super::upsert_writing_back(effect);
    if effect.table.is_none()
        || effect.insert && !upsert
        || crate::state_writes::own_new_row(cx, w, effect)
    {
        return Verdict::Clean;
    }
    // A document written back in a MongoDB transaction: a concurrent change of it since the
    // transaction's snapshot makes this write a conflict, not a lost update.
    if effect.document() {
        return Verdict::Clean;
    }
    let wtable = effect.table.as_deref();
    let from = tx.first_event();
    let locked = (from..w).any(|r| {
        cx.effs(r).any(|e| {
            (e.kind == EffectKind::Read && e.locking || e.kind == EffectKind::Lock)
                && query::same_state(e.table.as_deref(), wtable)
        })
    });
    if locked || !st.locks.is_empty() || cx.serializable(from, w) {
        return Verdict::Clean;
    }
    let first = if tx.event == TX_PARAM {
        0
    } else {
        tx.event + 1
    };
    for r in (first..w).rev() {
        if cx.detached(r) {
            continue;
        }
        let Some(read) = cx.read_of(r, wtable) else {
            continue;
        };
        // A token row is state like any other: a use count read without a row lock and
        // written back is a lost update (deleting the token is the token rule's business).
        if read.locking || read.table.is_none() || !query::same_state(read.table.as_deref(), wtable)
        {
            continue;
        }
        if !cx.state(r).locks.is_empty() || upsert && !super::without_lock::writes_from(cx, w, r) {
            continue;
        }
        if query::tests_of(cx.body, r)
            .into_iter()
            .any(|c| c > r && c < w && sets_compared_value(cx, c, r, w))
        {
            continue;
        }
        if deciding_check(cx, r, w).is_none() {
            continue;
        }
        // As with no transaction at all: a test that only asks whether the row is there (`if let
        // Some(row)`, `if ids.is_empty()`) decides nothing a concurrent writer could make stale.
        // Under `READ COMMITTED` the race is a value tested and acted on.
        let Some(c) = super::value_check(cx, r, w) else {
            continue;
        };
        if !reported.first(r) {
            return Verdict::Reported;
        }
        let mut d = cx.diag(
            &super::RULE,
            w,
            "row read inside the transaction without `FOR UPDATE` is updated from a stale check"
                .to_string(),
        );
        d.primary_label = Some("written here without a row lock or a guard".into());
        d.labels
            .push(cx.label(r, "state read here without `FOR UPDATE`"));
        d.labels.push(cx.label(c, "checked here"));
        if tx.event == TX_PARAM {
            d.labels.push(cx.tx_param_label());
        } else {
            d.labels.push(cx.label(tx.event, "transaction begun here"));
        }
        d.help = Some(
            "read the row with `SELECT .. FOR UPDATE`, or make the write conditional (`WHERE status = ..`) and check the rows affected; `#[staleguard::fenced(..)]` generates this shape"
                .to_string(),
        );
        d.suggestions.extend(for_update(cx, r));
        return Verdict::Stale(Box::new(d));
    }
    Verdict::Clean
}

/// `if row.yanked != wanted { model.yanked = Set(wanted); model.update(..) }`: the test only
/// skips a write that would change nothing, and the write sets the very value it was compared
/// with (not one computed from the read). Racing writers both store the wanted value; the test
/// adds no stale decision.
pub(super) fn sets_compared_value(cx: &RuleCx<'_>, c: u32, r: u32, w: u32) -> bool {
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        return false;
    };
    let deps = &t.deps;
    let derived = query::derived(cx.body, r);
    let wanted: Vec<&Name> = deps
        .iter()
        .filter(|d| !derived.contains(query::first(d)))
        .collect();
    if wanted.is_empty() || query::depends_on(cx.body, w, r) {
        return false;
    }
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let in_args = |v: &Name| call.all_args().any(|a| a.paths.iter().any(|p| p == v));
    let root = call.recv.first().map(Name::as_str);
    let assigned = |v: &Name| {
        cx.body.events[c as usize..w as usize].iter().any(|e| {
            matches!(&e.kind, EventKind::Assign(a)
                if Some(query::first(&a.target)) == root
                    && a.deps.iter().all(|d| !derived.contains(query::first(d)) || query::first(d) == query::first(&a.target))
                    && a.deps.contains(v))
        })
    };
    wanted.iter().all(|v| in_args(v) || assigned(v))
}

/// The fix: `FOR UPDATE` appended to the read's SQL literal, so the row is locked until the
/// transaction ends. Machine-applicable, but for SQLite (which has no `FOR UPDATE`; a parameter
/// typed for it says so) a person decides.
fn for_update(cx: &RuleCx<'_>, r: u32) -> Option<Suggestion> {
    let EventKind::Call(call) = &cx.body.events[r as usize].kind else {
        return None;
    };
    let at = call
        .steps
        .iter()
        .flat_map(|s| s.args.iter())
        .find_map(|a| {
            a.extra
                .as_ref()
                .filter(|x| x.sql.is_some())
                .and_then(|x| x.fix.as_ref()?.sql_end)
        })?;
    let sqlite = cx
        .body
        .params
        .iter()
        .flat_map(|(_, ty)| ty.iter())
        .any(|t| t.to_ascii_lowercase().contains("sqlite"));
    Some(Suggestion {
        message: "lock the row when reading it: `SELECT .. FOR UPDATE`".to_string(),
        applicability: if sqlite {
            Applicability::MaybeIncorrect
        } else {
            Applicability::MachineApplicable
        },
        edits: vec![Edit {
            span: cx.span(at),
            replacement: " FOR UPDATE".to_string(),
        }],
    })
}
