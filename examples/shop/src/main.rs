//! Runs the example shop: `cargo run -p staleguard-example-shop` (listens on `SHOP_ADDR`,
//! default 127.0.0.1:3000; `SHOP_DATABASE_URL` defaults to an in-memory SQLite database).

use staleguard_example_shop::{AppState, router};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::var("SHOP_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let db_url =
        std::env::var("SHOP_DATABASE_URL").unwrap_or_else(|_| "sqlite::memory:".to_owned());
    let psp_url = std::env::var("SHOP_PSP_URL").unwrap_or_else(|_| format!("http://{addr}/psp"));
    let state = AppState::connect(&db_url, &psp_url).await?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("shop listening on http://{addr}");
    axum::serve(listener, router(state)).await?;
    Ok(())
}
