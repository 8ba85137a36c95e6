//! a lease without `begin` and without `token`: its writes would not be fenced.

use std::time::Duration;

use staleguard::lease::MemoryLeaseStore;

struct Jobs {
    leases: MemoryLeaseStore,
}

impl Jobs {
    #[staleguard::fenced(
        lease = self.leases, resource = "job:1", ttl = Duration::from_secs(5),
        state = done, reread = false,
        verify = !done,
        stale = Ok(()),
    )]
    async fn run(&self) -> Result<(), staleguard::Error> {
        Ok(())
    }
}

fn main() {}
