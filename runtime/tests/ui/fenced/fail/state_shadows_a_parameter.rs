//! `state` named like a parameter: the body would see the message's copy instead of the re-read state.

use std::sync::Mutex;

struct Seats {
    lock: tokio::sync::Mutex<()>,
    holder: Mutex<Option<u64>>,
}

impl Seats {
    #[staleguard::fenced(
        lock = self.lock,
        state = holder, reread = *self.holder.lock().unwrap(),
        verify = holder.is_some(),
        stale = false,
    )]
    async fn release(&self, holder: Option<u64>) -> bool {
        *self.holder.lock().unwrap() = None;
        true
    }
}

fn main() {}
