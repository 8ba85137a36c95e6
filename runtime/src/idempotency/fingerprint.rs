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
        match serde_json::to_value(value).and_then(|v| serde_json::to_string(&v)) {
            Ok(json) => {
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
}
