//! A small order / payment / seat-reservation service that shows the stale-message hazards
//! staleguard finds, each next to its hand-written guarded version and, for three of them, the
//! same fix written with `#[staleguard::fenced]` / `#[staleguard::idempotent]`.
//!
//! Each hazardous handler carries a marker comment under the line staleguard reports (the
//! format is described in README.md); CI lints this crate with the built binary and checks
//! that every marked finding is reported.

pub mod checkout;
pub mod error;
pub mod gateway;
pub mod orders;
pub mod payouts;
pub mod psp_stub;
pub mod refunds;
pub mod routes;
pub mod seats;
pub mod shipping;
pub mod state;
pub mod vouchers;

pub use error::ShopError;
pub use routes::router;
pub use state::AppState;
