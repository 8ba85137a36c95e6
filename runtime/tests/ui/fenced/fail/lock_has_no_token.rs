//! `token` with an in-process `lock`, which has no fencing token.

struct Jobs {
    lock: tokio::sync::Mutex<()>,
}

impl Jobs {
    #[staleguard::fenced(
        lock = self.lock, token = token,
        state = done, reread = false,
        verify = !done,
        stale = (),
    )]
    async fn run(&self) {}
}

fn main() {}
