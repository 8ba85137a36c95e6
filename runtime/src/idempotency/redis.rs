//! The Redis store (feature `redis`): each record is a hash, and every operation is one Lua
//! script, run atomically by the server, doing the same compare-and-set as the SQL stores'
//! statements. Times come from the server's `TIME`. Two sorted sets keep the reconciler's order
//! of UNKNOWN records and the expiries of terminal ones (for the reaper).
//!
//! Durability is Redis's: with the default persistence (RDB snapshots, or AOF with
//! `appendfsync everysec`) a crash of the server can lose the last writes, a claim among them,
//! and then a retry runs the body again under a new record id. Only AOF with
//! `appendfsync always` keeps every acknowledged claim; see `docs/macros.md`.

use super::key::RecordKey;
use super::record::{Attempt, ClaimRequest, Outcome, Record, Resolved, State, Transition};
use super::store::{IdempotencyStore, StoreError};
use redis::aio::ConnectionManager;
use std::sync::{Arc, LazyLock};

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        StoreError::new(e)
    }
}

/// Idempotency records in Redis, under one key prefix.
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    prefix: Arc<str>,
}

/// The store clock and the record fields every script returns, in this order.
const PRELUDE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function ms(x) return string.format('%d', x) end
local function out(h)
  local resp = h.response
  local has = '1'
  if resp == nil or resp == false then resp = ''; has = '0' end
  return {h.handler, h.tenant, h.idem_key, h.record_id, h.fingerprint, h.state, h.owner,
          h.fence, h.lease_expires_at, h.expires_at, has, resp, ms(now)}
end
local function load(key)
  local r = redis.call('HGETALL', key)
  if #r == 0 then return nil end
  local h = {}
  for i = 1, #r, 2 do h[r[i]] = r[i + 1] end
  return h
end
"#;

/// KEYS: record, terminal set. ARGV: handler, tenant, key, record id, fingerprint, owner,
/// lease ms, retention ms, retry failed (`1`/`0`). Reads; writes only to create or take over.
const CLAIM: &str = r#"
local h = load(KEYS[1])
if h == nil then
  h = {handler = ARGV[1], tenant = ARGV[2], idem_key = ARGV[3], record_id = ARGV[4],
       fingerprint = ARGV[5], state = 'PROCESSING', owner = ARGV[6], fence = '1',
       lease_expires_at = ms(now + tonumber(ARGV[7])), expires_at = ms(now + tonumber(ARGV[8]))}
  redis.call('HSET', KEYS[1], 'handler', h.handler, 'tenant', h.tenant, 'idem_key', h.idem_key,
    'record_id', h.record_id, 'fingerprint', h.fingerprint, 'state', h.state, 'owner', h.owner,
    'fence', h.fence, 'lease_expires_at', h.lease_expires_at, 'expires_at', h.expires_at)
  return out(h)
end
local terminal = h.state == 'SUCCESS' or h.state == 'FAILED'
local reset = terminal and tonumber(h.expires_at) <= now
local same = h.fingerprint == ARGV[5]
local take = reset or (same and ((h.state == 'PROCESSING' and tonumber(h.lease_expires_at) <= now)
  or (h.state == 'FAILED' and ARGV[9] == '1')))
if not take then return out(h) end
if reset then
  h.record_id = ARGV[4]
  h.fingerprint = ARGV[5]
  redis.call('ZREM', KEYS[2], KEYS[1])
end
h.state = 'PROCESSING'
h.owner = ARGV[6]
h.fence = ms(tonumber(h.fence) + 1)
h.lease_expires_at = ms(now + tonumber(ARGV[7]))
h.expires_at = ms(now + tonumber(ARGV[8]))
h.response = nil
redis.call('HDEL', KEYS[1], 'response')
redis.call('HSET', KEYS[1], 'record_id', h.record_id, 'fingerprint', h.fingerprint,
  'state', h.state, 'owner', h.owner, 'fence', h.fence,
  'lease_expires_at', h.lease_expires_at, 'expires_at', h.expires_at)
return out(h)
"#;

/// KEYS: record, terminal set, unknown set. ARGV: fence, owner, state (`SUCCESS`, `FAILED`,
/// `UNKNOWN` or `RELEASE`), response, retention ms. Returns 1 when applied.
const FINISH: &str = r#"
local s = redis.call('HMGET', KEYS[1], 'state', 'fence', 'owner')
if s[1] ~= 'PROCESSING' or s[2] ~= ARGV[1] or s[3] ~= ARGV[2] then return 0 end
if ARGV[3] == 'RELEASE' then
  if ARGV[1] == '1' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('HSET', KEYS[1], 'lease_expires_at', ms(now))
  end
  return 1
end
local expires = now + tonumber(ARGV[5])
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'response', ARGV[4], 'expires_at', ms(expires),
  'lease_expires_at', ms(now))
if ARGV[3] == 'UNKNOWN' then
  redis.call('ZADD', KEYS[3], now, KEYS[1])
else
  redis.call('ZADD', KEYS[2], expires, KEYS[1])
end
return 1
"#;

/// KEYS: record. ARGV: fence, owner, lease ms.
const HEARTBEAT: &str = r#"
local s = redis.call('HMGET', KEYS[1], 'state', 'fence', 'owner')
if s[1] ~= 'PROCESSING' or s[2] ~= ARGV[1] or s[3] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'lease_expires_at', ms(now + tonumber(ARGV[3])))
return 1
"#;

/// KEYS: record.
const GET: &str = r#"
local h = load(KEYS[1])
if h == nil then return {} end
return out(h)
"#;

/// KEYS: unknown set. ARGV: limit, reserve ms. Reserves up to `limit` UNKNOWN records whose
/// reservation is over, longest untouched first; returns them one after the other.
const UNKNOWN: &str = r#"
local limit = tonumber(ARGV[1])
local found = {}
local taken = 0
local start = 0
while taken < limit do
  local keys = redis.call('ZRANGE', KEYS[1], start, start + 99)
  if #keys == 0 then break end
  for _, key in ipairs(keys) do
    if taken >= limit then break end
    local h = load(key)
    if h == nil or h.state ~= 'UNKNOWN' then
      redis.call('ZREM', KEYS[1], key)
    elseif tonumber(h.lease_expires_at) <= now then
      h.lease_expires_at = ms(now + tonumber(ARGV[2]))
      redis.call('HSET', key, 'lease_expires_at', h.lease_expires_at)
      for _, v in ipairs(out(h)) do found[#found + 1] = v end
      taken = taken + 1
    end
  end
  start = start + 100
end
return found
"#;

/// KEYS: record, terminal set, unknown set. ARGV: fence, state (`SUCCESS`, `FAILED` or
/// `DEFER`), response, retention ms.
const RESOLVE: &str = r#"
local s = redis.call('HMGET', KEYS[1], 'state', 'fence')
if s[1] ~= 'UNKNOWN' or s[2] ~= ARGV[1] then return 0 end
if ARGV[2] == 'DEFER' then
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  local order = now
  if #last == 2 and tonumber(last[2]) + 1 > order then order = tonumber(last[2]) + 1 end
  redis.call('ZADD', KEYS[3], order, KEYS[1])
  redis.call('HSET', KEYS[1], 'lease_expires_at', ms(now))
  return 1
end
local expires = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'response', ARGV[3], 'expires_at', ms(expires),
  'lease_expires_at', ms(now))
redis.call('ZREM', KEYS[3], KEYS[1])
redis.call('ZADD', KEYS[2], expires, KEYS[1])
return 1
"#;

/// KEYS: terminal set. Deletes SUCCESS and FAILED records past retention; returns how many.
const REAP: &str = r#"
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
local removed = 0
for _, key in ipairs(keys) do
  local s = redis.call('HMGET', key, 'state', 'expires_at')
  if (s[1] == 'SUCCESS' or s[1] == 'FAILED') and tonumber(s[2]) <= now then
    redis.call('DEL', key)
    removed = removed + 1
  end
  redis.call('ZREM', KEYS[1], key)
end
return removed
"#;

fn script(body: &str) -> redis::Script {
    redis::Script::new(&format!("{PRELUDE}{body}"))
}

struct Scripts {
    claim: redis::Script,
    finish: redis::Script,
    heartbeat: redis::Script,
    get: redis::Script,
    unknown: redis::Script,
    resolve: redis::Script,
    reap: redis::Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    claim: script(CLAIM),
    finish: script(FINISH),
    heartbeat: script(HEARTBEAT),
    get: script(GET),
    unknown: script(UNKNOWN),
    resolve: script(RESOLVE),
    reap: script(REAP),
});

/// Fields per record in a script's answer.
const FIELDS: usize = 13;

/// Durations far past any real use are capped so that the scripts' numbers stay exact.
fn capped(ms: i64) -> i64 {
    ms.clamp(0, 100_000_000_000_000)
}

fn decode(fields: &[String]) -> Result<Record, StoreError> {
    let [
        handler,
        tenant,
        key,
        record_id,
        fingerprint,
        state,
        owner,
        fence,
        lease,
        expires,
        has,
        response,
        now,
    ] = fields
    else {
        return Err(StoreError::msg(format!(
            "a Redis record has {} fields, expected {FIELDS}",
            fields.len()
        )));
    };
    let number = |name: &str, text: &str| {
        text.parse::<i64>()
            .map_err(|_| StoreError::msg(format!("a Redis record's {name} is `{text}`")))
    };
    Ok(Record {
        key: RecordKey {
            handler: handler.clone(),
            tenant: tenant.clone(),
            key: key.clone(),
        },
        record_id: record_id.clone(),
        fingerprint: fingerprint.clone(),
        state: State::parse(state)
            .ok_or_else(|| StoreError::msg(format!("unknown record state `{state}`")))?,
        owner: owner.clone(),
        fence: number("fence", fence)?,
        lease_expires_at: number("lease", lease)?,
        expires_at: number("expiry", expires)?,
        response: (has == "1").then(|| response.clone()),
        now: number("clock", now)?,
    })
}

impl RedisStore {
    /// Uses `connection` and keeps every key under `prefix` (`prefix:r:..` for records,
    /// `prefix:unknown` and `prefix:terminal` for the two sorted sets). On a Redis Cluster,
    /// put the prefix in braces (`{staleguard}`) so that all of them share a slot: the scripts
    /// touch a record and a set together.
    pub fn new(connection: ConnectionManager, prefix: &str) -> Result<Self, StoreError> {
        if prefix.is_empty() || prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(StoreError::msg(format!(
                "invalid Redis key prefix `{prefix}`: expected a non-empty prefix without spaces"
            )));
        }
        Ok(RedisStore {
            connection,
            prefix: prefix.into(),
        })
    }

    /// Connects to `url` (`redis://host:port/db`) with a connection manager, which reconnects
    /// after a lost connection (the statement in flight fails; the engine retries it once).
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url)?;
        let connection = client.get_connection_manager().await?;
        RedisStore::new(connection, prefix)
    }

    pub fn connection(&self) -> &ConnectionManager {
        &self.connection
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A record's key: the parts are visible ASCII, so a newline cannot occur in them.
    fn record(&self, key: &RecordKey) -> String {
        format!(
            "{}:r:{}\n{}\n{}",
            self.prefix, key.handler, key.tenant, key.key
        )
    }

    fn terminal(&self) -> String {
        format!("{}:terminal", self.prefix)
    }

    fn unknown_set(&self) -> String {
        format!("{}:unknown", self.prefix)
    }
}

impl IdempotencyStore for RedisStore {
    async fn claim(&self, r: &ClaimRequest<'_>) -> Result<Record, StoreError> {
        let fields: Vec<String> = SCRIPTS
            .claim
            .key(self.record(r.key))
            .key(self.terminal())
            .arg(&r.key.handler)
            .arg(&r.key.tenant)
            .arg(&r.key.key)
            .arg(r.record_id)
            .arg(r.fingerprint)
            .arg(r.owner)
            .arg(capped(r.lease_ms))
            .arg(capped(r.retention_ms))
            .arg(if r.retry_failed { "1" } else { "0" })
            .invoke_async(&mut self.connection.clone())
            .await?;
        decode(&fields)
    }

    async fn finish(
        &self,
        a: &Attempt<'_>,
        outcome: Outcome<'_>,
        retention_ms: i64,
    ) -> Result<Transition, StoreError> {
        let (state, body) = match outcome {
            Outcome::Success(body) => ("SUCCESS", body),
            Outcome::Failed(body) => ("FAILED", body),
            Outcome::Unknown(body) => ("UNKNOWN", body),
            Outcome::Release => ("RELEASE", ""),
        };
        let done: i64 = SCRIPTS
            .finish
            .key(self.record(a.key))
            .key(self.terminal())
            .key(self.unknown_set())
            .arg(a.fence)
            .arg(a.owner)
            .arg(state)
            .arg(body)
            .arg(capped(retention_ms))
            .invoke_async(&mut self.connection.clone())
            .await?;
        Ok(Transition::from_rows(done as u64))
    }

    async fn heartbeat(&self, a: &Attempt<'_>, lease_ms: i64) -> Result<Transition, StoreError> {
        let done: i64 = SCRIPTS
            .heartbeat
            .key(self.record(a.key))
            .arg(a.fence)
            .arg(a.owner)
            .arg(capped(lease_ms))
            .invoke_async(&mut self.connection.clone())
            .await?;
        Ok(Transition::from_rows(done as u64))
    }

    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        let fields: Vec<String> = SCRIPTS
            .get
            .key(self.record(key))
            .invoke_async(&mut self.connection.clone())
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        decode(&fields).map(Some)
    }

    async fn unknown(&self, limit: u32, reserve_ms: i64) -> Result<Vec<Record>, StoreError> {
        let fields: Vec<String> = SCRIPTS
            .unknown
            .key(self.unknown_set())
            .arg(limit)
            .arg(capped(reserve_ms))
            .invoke_async(&mut self.connection.clone())
            .await?;
        fields.chunks(FIELDS).map(decode).collect()
    }

    async fn resolve(
        &self,
        key: &RecordKey,
        fence: i64,
        resolved: Resolved<'_>,
        retention_ms: i64,
    ) -> Result<Transition, StoreError> {
        let (state, body) = match resolved {
            Resolved::Success(body) => ("SUCCESS", body),
            Resolved::Failed(body) => ("FAILED", body),
            Resolved::Deferred => ("DEFER", ""),
        };
        let done: i64 = SCRIPTS
            .resolve
            .key(self.record(key))
            .key(self.terminal())
            .key(self.unknown_set())
            .arg(fence)
            .arg(state)
            .arg(body)
            .arg(capped(retention_ms))
            .invoke_async(&mut self.connection.clone())
            .await?;
        Ok(Transition::from_rows(done as u64))
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        let removed: i64 = SCRIPTS
            .reap
            .key(self.terminal())
            .invoke_async(&mut self.connection.clone())
            .await?;
        Ok(removed.max(0) as u64)
    }
}
