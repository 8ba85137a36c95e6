//! Project knowledge at a call: the configured names (`Gateway::charge`, `charge`,
//! `payments::charge`) a call matches, and the effect each kind of knowledge gives.

use super::{Class, Classifier};
use crate::effects::{Effect, EffectKind};
use crate::ir::Call;

impl Classifier<'_> {
    pub(super) fn knowledge_eff(&self, call: &Call, recv: &Class) -> Option<Effect> {
        for (kind, names) in self.knowledge.lists() {
            if names.iter().any(|name| self.matches_name(call, recv, name)) {
                let mut e = Effect::new(kind.effect, kind.what);
                e.configured = true;
                e.token = kind.token;
                e.delete = kind.delete;
                if kind.effect == EffectKind::Schedule {
                    self.fill_payload(call, &mut e);
                }
                return Some(e);
            }
        }
        None
    }

    /// `charge`, `PaymentGateway::charge`, `payments::charge`.
    pub(super) fn matches_name(&self, call: &Call, recv: &Class, name: &str) -> bool {
        let (qual, method) = match name.rsplit_once("::") {
            Some((q, m)) => (Some(q.rsplit(':').next().unwrap_or(q)), m),
            None => (None, name),
        };
        if !call.func.is_empty() && call.func_last() == method {
            return match qual {
                None => true,
                Some(q) => call.func.iter().rev().nth(1).is_some_and(|s| s == q),
            };
        }
        for s in call.steps.iter().skip(usize::from(!call.func.is_empty())) {
            if s.name == method {
                return match (qual, recv) {
                    (None, _) => true,
                    (Some(q), Class::User(t) | Class::Trait(t) | Class::Unknown(t)) => {
                        t == q
                            || t.is_empty()
                            || self.body.self_ty.as_deref() == Some(q) && *call.recv == ["self"]
                    }
                    (Some(_), _) => false,
                };
            }
        }
        false
    }
}
