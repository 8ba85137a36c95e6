//! Arguments of `#[fenced(..)]` (placeholder until the fenced macro lands).
