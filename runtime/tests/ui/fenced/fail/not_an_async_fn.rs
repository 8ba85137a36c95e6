//! `#[fenced]` on a plain `fn`: the error points at `fn`.

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
    )]
    fn release(&self, reservation: u64) -> bool {
        *self.holder.lock().unwrap() = None;
        true
    }
}

fn main() {}
