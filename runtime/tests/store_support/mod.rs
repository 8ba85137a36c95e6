//! What every test that needs a database server shares: the server's URL from the environment
//! (a missing one skips the test with a printed reason, and fails it when `CI` is set, so a CI
//! run cannot leave a store untested), and the clean-up of a test's Redis keys.

#![allow(dead_code)]

/// `STALEGUARD_TEST_POSTGRES_URL`, or `None` after saying why (under CI: a failure).
pub fn postgres_url(test: &str) -> Option<String> {
    server_url("STALEGUARD_TEST_POSTGRES_URL", "PostgreSQL", test)
}

/// `STALEGUARD_TEST_REDIS_URL`, or `None` after saying why (under CI: a failure).
pub fn redis_url(test: &str) -> Option<String> {
    server_url("STALEGUARD_TEST_REDIS_URL", "Redis", test)
}

fn server_url(variable: &str, store: &str, test: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none_or(|v| v.is_empty()),
                "{test}: CI is set but {variable} is not: the {store} store would go untested"
            );
            eprintln!("skipping the {store} part of `{test}`: {variable} is not set");
            None
        }
    }
}

/// Deletes every key under `prefix` (a test's own).
#[cfg(feature = "redis")]
pub async fn drop_redis_prefix(url: &str, prefix: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(&mut con)
        .await
        .unwrap();
    for key in keys {
        let _: () = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut con)
            .await
            .unwrap();
    }
}
