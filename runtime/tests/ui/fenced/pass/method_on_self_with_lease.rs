//! `#[fenced]` on a `&self` method with a lease and its token.

use std::time::Duration;

use staleguard::fence::FencedCell;
use staleguard::lease::MemoryLeaseStore;

struct Jobs {
    leases: MemoryLeaseStore,
    state: FencedCell<u32>,
}

impl Jobs {
    #[staleguard::fenced(
        lease = self.leases, resource = format!("job:{job}"), ttl = Duration::from_secs(5),
        state = round, reread = self.state.get(),
        verify = round == expected_round,
        stale = Ok(false),
        token = token,
    )]
    pub async fn advance(&self, job: u32, expected_round: u32) -> Result<bool, staleguard::Error> {
        self.state.write(token, round + 1)?;
        Ok(true)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let jobs = Jobs { leases: MemoryLeaseStore::new(), state: FencedCell::new("job:1", 0) };
    assert!(jobs.advance(1, 0).await.unwrap());
    assert!(!jobs.advance(1, 0).await.unwrap());
}
