//! `begin` on a function that does not return a `Result`: commit needs `Ok`/`Err`.

struct Jobs {
    lock: tokio::sync::Mutex<()>,
    db: sqlx::SqlitePool,
}

impl Jobs {
    #[staleguard::fenced(
        lock = self.lock,
        begin = self.db.begin(), tx = tx,
        state = done, reread = false,
        verify = !done,
        stale = false,
    )]
    async fn run(&self) -> bool {
        true
    }
}

fn main() {}
