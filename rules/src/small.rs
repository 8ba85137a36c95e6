//! [`Small`]: the IR's sequence type. Most of the IR's lists hold exactly one element (one name
//! bound, one place read, a receiver that is one local): qdrant's lowered data had 190 k
//! one-element vectors, each its own allocation. `Small` keeps zero or one element inline and
//! boxes longer lists; it reads as a slice.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// An immutable-length sequence, inline when it holds at most one element.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub enum Small<T> {
    #[default]
    Empty,
    One(T),
    Many(Box<[T]>),
}

impl<T> Small<T> {
    pub fn as_slice(&self) -> &[T] {
        match self {
            Small::Empty => &[],
            Small::One(x) => std::slice::from_ref(x),
            Small::Many(xs) => xs,
        }
    }
}

impl<T> Deref for Small<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> DerefMut for Small<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Small::Empty => &mut [],
            Small::One(x) => std::slice::from_mut(x),
            Small::Many(xs) => xs,
        }
    }
}

impl<T> From<Vec<T>> for Small<T> {
    fn from(mut v: Vec<T>) -> Self {
        match v.len() {
            0 => Small::Empty,
            1 => v.pop().map(Small::One).unwrap_or_default(),
            _ => Small::Many(v.into_boxed_slice()),
        }
    }
}

impl<T> FromIterator<T> for Small<T> {
    /// No temporary vector for zero or one element.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut it = iter.into_iter();
        let Some(first) = it.next() else {
            return Small::Empty;
        };
        let Some(second) = it.next() else {
            return Small::One(first);
        };
        let mut v = Vec::with_capacity(2 + it.size_hint().0);
        v.push(first);
        v.push(second);
        v.extend(it);
        Small::Many(v.into_boxed_slice())
    }
}

impl<'a, T> IntoIterator for &'a Small<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T: fmt::Debug> fmt::Debug for Small<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::Small;

    #[test]
    fn reads_as_the_vector_it_was_built_from() {
        for n in 0..4 {
            let v: Vec<u32> = (0..n).collect();
            let s = Small::from(v.clone());
            assert_eq!(s.as_slice(), v.as_slice());
            assert_eq!(s.iter().copied().collect::<Vec<_>>(), v);
            let c: Small<u32> = v.iter().copied().collect();
            assert_eq!(&*c, &*s);
        }
        assert!(matches!(Small::from(vec![7]), Small::One(7)));
    }
}
