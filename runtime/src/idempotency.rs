//! The idempotency state machine and its stores (placeholder until it lands).
