//! Request identity: the caller's key (validated), and the full record key that scopes it by
//! handler name and tenant.

use super::error::IdempotencyError;
use std::borrow::Cow;
use std::fmt;

/// The longest key accepted, in bytes (the Idempotency-Key draft recommends UUIDs; 255 leaves
/// room for composite keys).
pub const MAX_KEY_LEN: usize = 255;

/// A validated idempotency key: 1 to [`MAX_KEY_LEN`] visible ASCII characters (`!` to `~`), so
/// it is safe in a header, a log line and a SQL text column.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Validates `text` as a key.
    pub fn new(text: impl Into<String>) -> Result<Self, IdempotencyError> {
        let text = text.into();
        validate(&text, "key")?;
        Ok(IdempotencyKey(text))
    }

    /// Reads and validates a key from anything that can carry one ([`KeySource`]); `None` is a
    /// missing key.
    pub fn from_source<K: KeySource + ?Sized>(source: &K) -> Result<Self, IdempotencyError> {
        match source.key_text() {
            Some(text) => IdempotencyKey::new(text.into_owned()),
            None => Err(IdempotencyError::MissingKey),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey({:?})", self.0)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn validate(text: &str, what: &'static str) -> Result<(), IdempotencyError> {
    if text.is_empty() {
        return Err(IdempotencyError::InvalidKey {
            reason: format!("the {what} is empty"),
        });
    }
    if text.len() > MAX_KEY_LEN {
        return Err(IdempotencyError::InvalidKey {
            reason: format!(
                "the {what} is {} bytes long, at most {MAX_KEY_LEN} are accepted",
                text.len()
            ),
        });
    }
    if let Some(bad) = text.chars().find(|c| !matches!(c, '!'..='~')) {
        return Err(IdempotencyError::InvalidKey {
            reason: format!(
                "the {what} contains {bad:?}; only visible ASCII characters are accepted"
            ),
        });
    }
    Ok(())
}

/// Something an idempotency key (or tenant) can be read from. `None` means "no key": a missing
/// key is an error (HTTP 400), never a request without idempotency.
pub trait KeySource {
    fn key_text(&self) -> Option<Cow<'_, str>>;
}

impl KeySource for str {
    fn key_text(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self))
    }
}

impl KeySource for String {
    fn key_text(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self))
    }
}

impl KeySource for IdempotencyKey {
    fn key_text(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.0))
    }
}

impl<T: KeySource + ?Sized> KeySource for &T {
    fn key_text(&self) -> Option<Cow<'_, str>> {
        (**self).key_text()
    }
}

impl<T: KeySource> KeySource for Option<T> {
    fn key_text(&self) -> Option<Cow<'_, str>> {
        self.as_ref().and_then(KeySource::key_text)
    }
}

macro_rules! integer_keys {
    ($($t:ty)*) => {$(
        impl KeySource for $t {
            fn key_text(&self) -> Option<Cow<'_, str>> {
                Some(Cow::Owned(self.to_string()))
            }
        }
    )*};
}
integer_keys!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize);

/// The full identity of a record: the handler's name (so two handlers never share a key space),
/// the tenant (empty when the handler has none) and the caller's key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordKey {
    pub handler: String,
    pub tenant: String,
    pub key: String,
}

impl RecordKey {
    pub fn new(handler: impl Into<String>, tenant: Option<&str>, key: &IdempotencyKey) -> Self {
        RecordKey {
            handler: handler.into(),
            tenant: tenant.unwrap_or_default().to_owned(),
            key: key.0.clone(),
        }
    }
}

impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tenant.is_empty() {
            write!(f, "{}/{}", self.handler, self.key)
        } else {
            write!(f, "{}/{}/{}", self.handler, self.tenant, self.key)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_uuid_like_keys() {
        assert!(IdempotencyKey::new("8e03978e-40d5-43e8-bc93-6894a57f9324").is_ok());
    }

    #[test]
    fn rejects_empty_long_and_non_ascii_keys() {
        assert!(matches!(
            IdempotencyKey::new(""),
            Err(IdempotencyError::InvalidKey { .. })
        ));
        assert!(IdempotencyKey::new("a".repeat(MAX_KEY_LEN)).is_ok());
        assert!(IdempotencyKey::new("a".repeat(MAX_KEY_LEN + 1)).is_err());
        assert!(IdempotencyKey::new("has space").is_err());
        assert!(IdempotencyKey::new("caf\u{e9}").is_err());
    }

    #[test]
    fn none_is_a_missing_key() {
        let none: Option<String> = None;
        assert!(matches!(
            IdempotencyKey::from_source(&none),
            Err(IdempotencyError::MissingKey)
        ));
        assert_eq!(IdempotencyKey::from_source(&42u64).unwrap().as_str(), "42");
    }
}
