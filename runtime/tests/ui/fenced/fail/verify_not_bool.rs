//! `verify` that is not a `bool`: the type error points at the verify expression.

use std::sync::Mutex;

struct Seats {
    lock: tokio::sync::Mutex<()>,
    holder: Mutex<Option<u64>>,
}

impl Seats {
    #[staleguard::fenced(
        lock = self.lock,
        state = holder, reread = *self.holder.lock().unwrap(),
        verify = holder,
        stale = false,
    )]
    async fn release(&self, reservation: u64) -> bool {
        let _ = reservation;
        *self.holder.lock().unwrap() = None;
        true
    }
}

fn main() {}
