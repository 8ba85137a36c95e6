//! `#[fenced]` on functions returning `impl Trait` and `Result<impl Trait, _>`.

use std::fmt::Display;
use std::time::Duration;

use staleguard::lease::MemoryLeaseStore;
use tokio::sync::Mutex;

struct Greeter {
    lock: Mutex<()>,
    leases: MemoryLeaseStore,
    name: std::sync::Mutex<String>,
}

impl Greeter {
    #[staleguard::fenced(
        lock = self.lock,
        state = name, reread = self.name.lock().unwrap().clone(),
        verify = !name.is_empty(),
        stale = String::from("nobody"),
    )]
    async fn greeting(&self) -> impl Display {
        format!("hello {name}")
    }

    #[staleguard::fenced(
        lease = self.leases, resource = "greeter", ttl = Duration::from_secs(5),
        state = name, reread = self.name.lock().unwrap().clone(),
        verify = !name.is_empty(),
        stale = Ok(String::from("nobody")),
        token = token,
    )]
    async fn signed(&self) -> Result<impl Display + use<>, staleguard::Error> {
        Ok(format!("hello {name} (token {token})"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let greeter = Greeter {
        lock: Mutex::new(()),
        leases: MemoryLeaseStore::new(),
        name: std::sync::Mutex::new(String::from("ada")),
    };
    assert_eq!(greeter.greeting().await.to_string(), "hello ada");
    assert_eq!(greeter.signed().await.unwrap().to_string(), "hello ada (token 1)");
}
