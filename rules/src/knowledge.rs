//! Project knowledge: the project's own functions that the analyzer should treat as a given
//! effect, declared once here. The configuration's `[knowledge]` keys, the fixtures' `//@
//! knowledge.<field>` directives, merging per package and classification all read this table.

use crate::effects::EffectKind;

/// One kind of project knowledge: a list of function names (`charge`, `Gateway::charge`,
/// `payments::charge`) that have one effect.
#[derive(Debug, Clone, Copy)]
pub struct KnowledgeKey {
    /// The configuration key (`remote-calls`).
    pub key: &'static str,
    /// The [`Knowledge`] field (`remote_calls`).
    pub field: &'static str,
    /// What a listed function does, for documentation (`makes a remote call`).
    pub means: &'static str,
    pub(crate) effect: EffectKind,
    /// The effect concerns a one-time token or idempotency key.
    pub(crate) token: bool,
    /// The effect deletes (consumes) what it concerns.
    pub(crate) delete: bool,
    /// The description a configured effect gets in diagnostics.
    pub(crate) what: &'static str,
}

macro_rules! knowledge {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident = $key:literal, $effect:ident, $means:literal, token: $token:literal, delete: $delete:literal;
    )*) => {
        /// Project knowledge supplied by configuration: names of the project's own functions or
        /// methods (`charge`, `PaymentGateway::charge`) that the analyzer should treat as a given
        /// effect. [`Knowledge::KEYS`] lists every kind, with its configuration key.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Knowledge {
            $( $(#[doc = $doc])* pub $field: Vec<String>, )*
        }

        impl Knowledge {
            /// Every kind of knowledge, in the order the configuration documents them.
            pub const KEYS: &'static [KnowledgeKey] = &[$(
                KnowledgeKey {
                    key: $key,
                    field: stringify!($field),
                    means: $means,
                    effect: EffectKind::$effect,
                    token: $token,
                    delete: $delete,
                    what: concat!($means, " (configured)"),
                },
            )*];

            /// The list of a kind, by configuration key (`remote-calls`).
            pub fn list_mut(&mut self, key: &str) -> Option<&mut Vec<String>> {
                $( if key == $key { return Some(&mut self.$field); } )*
                None
            }

            /// Every kind with its list, in [`Knowledge::KEYS`] order.
            pub fn lists(&self) -> impl Iterator<Item = (&'static KnowledgeKey, &[String])> {
                Self::KEYS.iter().zip([$( self.$field.as_slice() ),*])
            }
        }
    };
}

knowledge! {
    /// Functions that take a lock (their result is the guard).
    locks = "locks", Lock, "takes a lock", token: false, delete: false;
    /// Functions that begin a database transaction.
    transactions = "transactions", TxBegin, "begins a transaction", token: false, delete: false;
    /// Functions that call another service (HTTP, gRPC, a broker, a provider SDK).
    remote_calls = "remote-calls", Remote, "makes a remote call", token: false, delete: false;
    /// Functions that read persisted state.
    state_reads = "state-reads", Read, "reads state", token: false, delete: false;
    /// Functions that write persisted state.
    state_writes = "state-writes", Write, "writes state", token: false, delete: false;
    /// Functions that check an idempotency key or one-time token.
    token_checks = "token-checks", Read, "checks a token", token: true, delete: false;
    /// Functions that delete (consume) an idempotency key or one-time token.
    token_deletes = "token-deletes", Write, "deletes a token", token: true, delete: true;
    /// Functions that schedule a delayed task or job (their arguments are its payload).
    schedulers = "schedulers", Schedule, "schedules a delayed task", token: false, delete: false;
}

impl Knowledge {
    /// Adds every name of `other` not already listed.
    pub fn merge(&mut self, other: &Knowledge) {
        for (kind, names) in other.lists() {
            let into = self.list_mut(kind.key).expect("a key of the table");
            for name in names {
                if !into.contains(name) {
                    into.push(name.clone());
                }
            }
        }
    }

    /// Whether a listed name ends in `ident` (`Gateway::charge` for `charge`).
    pub(crate) fn lists_ident(&self, ident: &str) -> bool {
        self.lists()
            .any(|(_, names)| names.iter().any(|x| x.rsplit(':').next() == Some(ident)))
    }
}

#[cfg(test)]
mod tests {
    use super::Knowledge;

    #[test]
    fn every_key_reaches_its_own_list() {
        let mut k = Knowledge::default();
        for (i, key) in Knowledge::KEYS.iter().enumerate() {
            k.list_mut(key.key).expect("by key").push(format!("f{i}"));
            let by_field = Knowledge::KEYS.iter().find(|k| k.field == key.field);
            assert_eq!(by_field.map(|k| k.key), Some(key.key));
        }
        for (i, (key, names)) in k.lists().enumerate() {
            assert_eq!(names, [format!("f{i}")], "{}", key.key);
        }
        assert!(k.list_mut("remote_calls").is_none(), "fields are not keys");
        let mut merged = Knowledge::default();
        merged.merge(&k);
        merged.merge(&k);
        assert_eq!(merged, k, "merging twice adds nothing twice");
    }
}
