//! [`Name`]: the IR's string. Identifiers, dotted places, type paths and short literals are
//! almost all under 23 bytes, so a `Name` keeps up to 22 bytes inline (no allocation) and boxes
//! only longer text. It is as big as a `String` (24 bytes) and reads as a `&str`.
//!
//! Why it exists: a `String` per identifier made the lowered data of a large workspace a million
//! small allocations (qdrant: 1.0 M live allocations, 51 MB), which cost both memory and the
//! time to allocate, copy and free them.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Bytes stored without allocating.
const INLINE: usize = 22;

/// An immutable string, inline up to 22 bytes.
#[derive(Clone)]
pub struct Name(Repr);

#[derive(Clone)]
enum Repr {
    /// Invariant: `buf[..len]` is valid UTF-8 (it is always copied from a `&str`).
    Inline {
        len: u8,
        buf: [u8; INLINE],
    },
    Heap(Box<str>),
}

impl Name {
    pub const EMPTY: Name = Name(Repr::Inline {
        len: 0,
        buf: [0; INLINE],
    });

    pub fn new(s: &str) -> Name {
        if s.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..s.len()].copy_from_slice(s.as_bytes());
            Name(Repr::Inline {
                len: s.len() as u8,
                buf,
            })
        } else {
            Name(Repr::Heap(s.into()))
        }
    }

    /// Formats `value` (an identifier, a number) straight into a `Name`, allocating only when
    /// the text is longer than the inline capacity.
    pub fn display(value: &dyn fmt::Display) -> Name {
        let mut w = Writer {
            buf: [0; INLINE],
            len: 0,
            spill: None,
        };
        // Writing to a `Writer` never fails.
        let _ = fmt::write(&mut w, format_args!("{value}"));
        w.finish()
    }

    /// `self` followed by `suffix`.
    pub fn with_suffix(&self, suffix: &str) -> Name {
        let mut w = Writer {
            buf: [0; INLINE],
            len: 0,
            spill: None,
        };
        // Writing to a `Writer` never fails.
        let _ = fmt::Write::write_str(&mut w, self);
        let _ = fmt::Write::write_str(&mut w, suffix);
        w.finish()
    }

    /// `parts` joined with `sep`, inline when the result fits.
    pub fn join(parts: &[Name], sep: &str) -> Name {
        let total = parts.iter().map(|p| p.len()).sum::<usize>()
            + sep.len() * parts.len().saturating_sub(1);
        if total > INLINE {
            return Name(Repr::Heap(parts.join(sep).into_boxed_str()));
        }
        let mut buf = [0; INLINE];
        let mut len = 0;
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                buf[len..len + sep.len()].copy_from_slice(sep.as_bytes());
                len += sep.len();
            }
            buf[len..len + p.len()].copy_from_slice(p.as_bytes());
            len += p.len();
        }
        Name(Repr::Inline {
            len: len as u8,
            buf,
        })
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            // SAFETY: the inline bytes were copied from a `&str` up to `len` (see `Repr`), and
            // `Writer` only appends whole `&str`s, so `buf[..len]` is valid UTF-8.
            Repr::Inline { len, buf } => unsafe {
                std::str::from_utf8_unchecked(&buf[..*len as usize])
            },
            Repr::Heap(s) => s,
        }
    }
}

/// A `fmt::Write` target that stays inline until the text outgrows it.
struct Writer {
    buf: [u8; INLINE],
    len: usize,
    spill: Option<String>,
}

impl Writer {
    fn finish(self) -> Name {
        match self.spill {
            Some(s) => Name(Repr::Heap(s.into_boxed_str())),
            None => Name(Repr::Inline {
                len: self.len as u8,
                buf: self.buf,
            }),
        }
    }
}

impl fmt::Write for Writer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if let Some(spill) = &mut self.spill {
            spill.push_str(s);
        } else if self.len + s.len() <= INLINE {
            self.buf[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
            self.len += s.len();
        } else {
            let mut spill = String::with_capacity(self.len + s.len());
            // The inline part is whole `&str`s, hence UTF-8.
            spill.push_str(std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default());
            spill.push_str(s);
            self.spill = Some(spill);
        }
        Ok(())
    }
}

impl Default for Name {
    fn default() -> Self {
        Name::EMPTY
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name::new(s)
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Self {
        Name::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        if s.len() <= INLINE {
            Name::new(&s)
        } else {
            Name(Repr::Heap(s.into_boxed_str()))
        }
    }
}

impl From<&Name> for Name {
    fn from(s: &Name) -> Self {
        s.clone()
    }
}

impl From<Name> for String {
    fn from(n: Name) -> Self {
        n.as_str().to_string()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Name {
    /// Hashes like `str`, so maps keyed by `Name` can be queried with a `&str`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::Name;
    use std::collections::HashMap;

    #[test]
    fn inline_and_heap_read_back() {
        for s in [
            "",
            "a",
            "self.db",
            "exactly_twenty_two_b22",
            "twenty_three_bytes_long",
            "é∂",
        ] {
            let n = Name::new(s);
            assert_eq!(n.as_str(), s);
            assert_eq!(Name::from(s.to_string()), s);
            assert_eq!(Name::display(&s), s);
        }
        assert_eq!(std::mem::size_of::<Name>(), 24);
    }

    #[test]
    fn display_spills_past_the_inline_capacity_at_a_char_boundary() {
        let long = "ünïcödé_identifier_that_is_long";
        assert_eq!(Name::display(&long), long);
        assert_eq!(
            Name::display(&format_args!("{}{}", "a".repeat(20), "ßß")),
            format!("{}ßß", "a".repeat(20))
        );
    }

    #[test]
    fn maps_keyed_by_name_answer_str_queries() {
        let mut m = HashMap::new();
        m.insert(Name::new("PgPool"), 1);
        m.insert(Name::new("a_type_name_longer_than_inline"), 2);
        assert_eq!(m.get("PgPool"), Some(&1));
        assert_eq!(m.get("a_type_name_longer_than_inline"), Some(&2));
        assert!(Name::new("b") > Name::new("a"));
        assert_eq!(Name::new("x").with_suffix("!"), "x!");
        let parts = [Name::new("self"), Name::new("db")];
        assert_eq!(Name::join(&parts, "."), "self.db");
        let long = [
            Name::new("self"),
            Name::new("inner"),
            Name::new("collection_name"),
        ];
        assert_eq!(Name::join(&long, "."), "self.inner.collection_name");
        assert_eq!(Name::join(&[], "."), "");
    }
}
