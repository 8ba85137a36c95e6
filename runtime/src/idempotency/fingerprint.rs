//! Request fingerprints: a SHA-256 over the named request fields, each serialized to canonical
//! JSON (object keys sorted), so the same payload always hashes the same and a key reused with a
//! different payload is caught.

use super::error::IdempotencyError;
use super::token::hex;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fmt;

/// The hex SHA-256 of a request's fingerprinted fields.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

impl Fingerprint {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", &self.0[..12.min(self.0.len())])
    }
}

/// Builds a [`Fingerprint`] from labelled fields. Labels are part of the hash, so `(a: 1, b: 2)`
/// and `(a: 2, b: 1)` differ.
pub struct Fingerprinter {
    hasher: Sha256,
    error: Option<String>,
}

impl Default for Fingerprinter {
    fn default() -> Self {
        Fingerprinter::new()
    }
}

impl Fingerprinter {
    pub fn new() -> Self {
        Fingerprinter {
            hasher: Sha256::new(),
            error: None,
        }
    }

    /// Adds one field. A value that fails to serialize makes [`finish`](Self::finish) fail.
    pub fn add<T: Serialize + ?Sized>(&mut self, label: &str, value: &T) -> &mut Self {
        match serde_json::to_value(value) {
            Ok(value) => {
                let mut json = String::new();
                write_canonical(&value, &mut json);
                for part in [label.as_bytes(), json.as_bytes()] {
                    self.hasher.update((part.len() as u64).to_le_bytes());
                    self.hasher.update(part);
                }
            }
            Err(e) => {
                self.error
                    .get_or_insert_with(|| format!("fingerprint field `{label}`: {e}"));
            }
        }
        self
    }

    pub fn finish(self) -> Result<Fingerprint, IdempotencyError> {
        match self.error {
            Some(reason) => Err(IdempotencyError::Codec { reason }),
            None => Ok(Fingerprint(hex(&self.hasher.finalize()))),
        }
    }
}

/// Writes `value` as JSON with object keys sorted at every depth. `serde_json::Map` keeps
/// insertion order when any crate in the build enables serde_json's `preserve_order` feature,
/// so the order cannot be left to it.
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn fp(build: impl FnOnce(&mut Fingerprinter)) -> Fingerprint {
        let mut f = Fingerprinter::new();
        build(&mut f);
        f.finish().unwrap()
    }

    #[test]
    fn equal_payloads_hash_equal_whatever_the_map_order() {
        let a: HashMap<&str, i32> = [("x", 1), ("y", 2), ("z", 3)].into_iter().collect();
        let b: HashMap<&str, i32> = [("z", 3), ("x", 1), ("y", 2)].into_iter().collect();
        assert_eq!(
            fp(|f| {
                f.add("m", &a);
            }),
            fp(|f| {
                f.add("m", &b);
            })
        );
    }

    #[test]
    fn labels_and_values_both_count() {
        let base = fp(|f| {
            f.add("amount", &100).add("currency", "EUR");
        });
        assert_ne!(
            base,
            fp(|f| {
                f.add("amount", &101).add("currency", "EUR");
            })
        );
        assert_ne!(
            base,
            fp(|f| {
                f.add("amount", "EUR").add("currency", &100);
            })
        );
        assert_eq!(
            base,
            fp(|f| {
                f.add("amount", &100).add("currency", "EUR");
            })
        );
    }

    #[test]
    fn nested_objects_are_canonical_whatever_the_insertion_order() {
        let a = serde_json::json!({"b": {"y": 1, "x": [{"q": 1, "p": 2}]}, "a": "s"});
        let mut b = serde_json::Map::new();
        b.insert("a".into(), "s".into());
        b.insert(
            "b".into(),
            serde_json::json!({"x": [{"p": 2, "q": 1}], "y": 1}),
        );
        assert_eq!(
            fp(|f| {
                f.add("body", &a);
            }),
            fp(|f| {
                f.add("body", &b);
            })
        );
        let mut out = String::new();
        write_canonical(&serde_json::Value::Object(b), &mut out);
        assert_eq!(out, r#"{"a":"s","b":{"x":[{"p":2,"q":1}],"y":1}}"#);
    }
}
