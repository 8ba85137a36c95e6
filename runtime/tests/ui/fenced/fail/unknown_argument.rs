//! `#[fenced]` with an unknown argument: the error lists the accepted ones.

use std::sync::Mutex;

struct Seats {
    lock: tokio::sync::Mutex<()>,
    holder: Mutex<Option<u64>>,
}

impl Seats {
    #[staleguard::fenced(
        lock = self.lock,
        state = holder, reread = *self.holder.lock().unwrap(),
        verify = holder == Some(reservation),
        stale = false,
        retries = 3,
    )]
    async fn release(&self, reservation: u64) -> bool {
        *self.holder.lock().unwrap() = None;
        true
    }
}

fn main() {}
