//! `#[fenced]` on a `&mut self` method with an `Arc<Mutex>` lock.

use std::sync::Arc;

use tokio::sync::Mutex;

struct Account {
    lock: Arc<Mutex<()>>,
    balance: i64,
}

impl Account {
    #[staleguard::fenced(
        lock = self.lock,
        state = balance, reread = self.balance,
        verify = balance >= amount,
        stale = Err("insufficient funds"),
    )]
    async fn withdraw(&mut self, amount: i64) -> Result<i64, &'static str> {
        self.balance = balance - amount;
        Ok(self.balance)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut account = Account { lock: Arc::new(Mutex::new(())), balance: 5 };
    assert_eq!(account.withdraw(3).await, Ok(2));
    assert_eq!(account.withdraw(3).await, Err("insufficient funds"));
}
