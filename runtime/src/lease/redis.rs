//! `RedisLeaseStore` (feature `redis`): a lease is a hash, its fencing token comes from `INCR`
//! on a per-resource counter that release never resets, and each operation is one Lua script
//! clocked by the server's `TIME`. [`RedisLeaseStore::fenced_set`] writes a Redis value only
//! with a token no older than the newest one *granted*, so a holder whose lease expired is
//! fenced as soon as a newer one acquires.

use redis::aio::ConnectionManager;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use super::{FencingToken, Lease, LeaseError, LeaseStore, ttl_ms};
use crate::fence::{FenceError, Fenced, Held, Lost, StoreError};

const NOW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"#;

/// KEYS: lease, counter. ARGV: owner, ttl ms. Returns {token, expiry} or nil when held.
const ACQUIRE: &str = r#"
local s = redis.call('HMGET', KEYS[1], 'owner', 'expires_at_ms')
if s[2] and tonumber(s[2]) > now and s[1] ~= ARGV[1] then return false end
local token = redis.call('INCR', KEYS[2])
local expires = string.format('%d', now + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'expires_at_ms', expires)
return {token, expires}
"#;

/// KEYS: lease. ARGV: token, ttl ms. Returns the new expiry or nil when lost.
const RENEW: &str = r#"
local s = redis.call('HMGET', KEYS[1], 'token', 'expires_at_ms')
if s[1] ~= ARGV[1] or not s[2] or tonumber(s[2]) <= now then return false end
local expires = string.format('%d', now + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'expires_at_ms', expires)
return expires
"#;

/// KEYS: lease. ARGV: token. Returns 1 when released.
const RELEASE: &str = r#"
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'expires_at_ms', '0')
return 1
"#;

/// KEYS: counter, target. ARGV: token, value. Sets the target when the token is the newest
/// granted; returns 1, or the newest token (negated) when fenced.
const FENCED_SET: &str = r#"
local newest = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < newest then return -newest end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"#;

struct Scripts {
    acquire: redis::Script,
    renew: redis::Script,
    release: redis::Script,
    fenced_set: redis::Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: redis::Script::new(&format!("{NOW}{ACQUIRE}")),
    renew: redis::Script::new(&format!("{NOW}{RENEW}")),
    release: redis::Script::new(RELEASE),
    fenced_set: redis::Script::new(FENCED_SET),
});

/// Leases in Redis (feature `redis`). Clones share the connection.
///
/// Keys: `prefix:lease:<resource>` (a hash: owner, token, expiry) and `prefix:token:<resource>`
/// (the `INCR` counter). Durability is Redis's: without AOF and `appendfsync always`, a crash
/// of the server can forget a grant and its counter, and a token can then be granted twice.
#[derive(Clone)]
pub struct RedisLeaseStore {
    connection: ConnectionManager,
    prefix: Arc<str>,
}

impl RedisLeaseStore {
    /// Uses `connection`, every key under `prefix`.
    pub fn new(connection: ConnectionManager, prefix: &str) -> Self {
        RedisLeaseStore {
            connection,
            prefix: prefix.into(),
        }
    }

    /// Connects to `url` with a reconnecting connection manager.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url)?;
        Ok(RedisLeaseStore::new(
            client.get_connection_manager().await?,
            prefix,
        ))
    }

    fn lease_key(&self, resource: &str) -> String {
        format!("{}:lease:{resource}", self.prefix)
    }

    fn counter_key(&self, resource: &str) -> String {
        format!("{}:token:{resource}", self.prefix)
    }

    /// Sets the Redis string `key` to `value` if `token` is not older than the newest token
    /// granted for `resource` (checked and written in one script); otherwise
    /// [`FenceError::Fenced`] and nothing is written.
    pub async fn fenced_set(
        &self,
        resource: &str,
        token: FencingToken,
        key: &str,
        value: &str,
    ) -> Result<(), FenceError> {
        let answer: i64 = SCRIPTS
            .fenced_set
            .key(self.counter_key(resource))
            .key(key)
            .arg(token.get())
            .arg(value)
            .invoke_async(&mut self.connection.clone())
            .await?;
        if answer == 1 {
            return Ok(());
        }
        Err(FenceError::Fenced(Fenced {
            resource: resource.to_string(),
            token,
            current: Some(FencingToken::new(answer.unsigned_abs())),
        }))
    }
}

fn lost(lease: &Lease) -> LeaseError {
    LeaseError::Lost(Lost {
        resource: lease.resource().to_string(),
        token: lease.token(),
    })
}

impl LeaseStore for RedisLeaseStore {
    async fn acquire(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease, LeaseError> {
        let granted: Option<(u64, i64)> = SCRIPTS
            .acquire
            .key(self.lease_key(resource))
            .key(self.counter_key(resource))
            .arg(owner)
            .arg(ttl_ms(ttl).min(100_000_000_000_000))
            .invoke_async(&mut self.connection.clone())
            .await?;
        match granted {
            Some((token, expires)) => Ok(Lease::new(
                resource,
                owner,
                FencingToken::new(token),
                expires,
            )),
            None => Err(LeaseError::Held(Held {
                resource: resource.to_string(),
            })),
        }
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        let expires: Option<i64> = SCRIPTS
            .renew
            .key(self.lease_key(lease.resource()))
            .arg(lease.token().get())
            .arg(ttl_ms(ttl).min(100_000_000_000_000))
            .invoke_async(&mut self.connection.clone())
            .await?;
        match expires {
            Some(expires) => Ok(Lease::new(
                lease.resource(),
                lease.owner(),
                lease.token(),
                expires,
            )),
            None => Err(lost(lease)),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        let done: i64 = SCRIPTS
            .release
            .key(self.lease_key(lease.resource()))
            .arg(lease.token().get())
            .invoke_async(&mut self.connection.clone())
            .await?;
        if done == 1 { Ok(()) } else { Err(lost(lease)) }
    }
}
