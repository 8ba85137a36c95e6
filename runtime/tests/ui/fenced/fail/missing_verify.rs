//! `#[fenced]` without `verify`: a required argument is missing.

use std::sync::Mutex;

struct Seats {
    lock: tokio::sync::Mutex<()>,
    holder: Mutex<Option<u64>>,
}

impl Seats {
    #[staleguard::fenced(
        lock = self.lock,
        state = holder, reread = *self.holder.lock().unwrap(),
        stale = false,
    )]
    async fn release(&self, reservation: u64) -> bool {
        *self.holder.lock().unwrap() = None;
        true
    }
}

fn main() {}
