//! Example service (placeholder until written).

fn main() {}
