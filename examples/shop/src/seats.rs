//! Seat holds that expire: a release timer fires `hold_ttl` after the hold.
//!
//! `hold_seat` is the timeout-without-operation-id hazard: its timer remembers only the seat id.
//! The timer's action (`release_if_held`) even does everything else right: it takes the seat's
//! lock and re-reads the seat under it. But if the first hold ended and another customer now
//! holds the seat, the old timer sees "held" and frees the new customer's hold: the lock orders
//! the two writers, it cannot tell an old round from the current one (ABA).
//! `hold_seat_guarded` records a reservation and the timer carries its id; the action
//! (`release_reservation`) compares it under the lock and in the UPDATE's WHERE clause, so a
//! stale timer exits without writing.
//! `hold_seat_fenced` schedules the same timer, and its action (`release_reservation_fenced`) is
//! written with `#[staleguard::fenced]`: a lease on the seat, the transaction with its fence
//! check, the re-read of the seat's reservation and the comparison with the timer's id are in
//! the attribute; the body runs only for the reservation the timer belongs to.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ShopError;
use crate::state::AppState;

fn internal(err: sqlx::Error) -> StatusCode {
    eprintln!("database error: {err}");
    StatusCode::INTERNAL_SERVER_ERROR
}

#[derive(Deserialize)]
pub struct HoldRequest {
    pub holder: String,
}

/// `POST /seats/{id}/hold` — HAZARD (timeout-without-operation-id).
pub async fn hold_seat(
    State(app): State<AppState>,
    Path(seat_id): Path<i64>,
    Json(req): Json<HoldRequest>,
) -> Result<StatusCode, StatusCode> {
    let held = sqlx::query(
        "UPDATE seats SET status = 'held', holder = ? WHERE id = ? AND status = 'free'",
    )
    .bind(req.holder)
    .bind(seat_id)
    .execute(&app.db)
    .await
    .map_err(internal)?;
    if held.rows_affected() != 1 {
        return Ok(StatusCode::CONFLICT);
    }
    let ttl = app.hold_ttl;
    let timer_app = app.clone();
    tokio::spawn(async move {
        //~^ timeout-without-operation-id
        tokio::time::sleep(ttl).await;
        if let Err(err) = release_if_held(&timer_app, seat_id).await {
            eprintln!("seat {seat_id}: release failed: {err}");
        }
    });
    Ok(StatusCode::CREATED)
}

/// The hazardous timer's action: lock, re-read, release if the seat is held (by anyone).
pub async fn release_if_held(app: &AppState, seat_id: i64) -> Result<bool, sqlx::Error> {
    let seat_lock = app
        .seat_locks
        .lock()
        .await
        .entry(seat_id)
        .or_default()
        .clone();
    let _guard = seat_lock.lock_owned().await;
    let status: Option<String> = sqlx::query_scalar("SELECT status FROM seats WHERE id = ?")
        .bind(seat_id)
        .fetch_optional(&app.db)
        .await?;
    if status.as_deref() != Some("held") {
        return Ok(false);
    }
    sqlx::query(
        "UPDATE seats SET status = 'free', holder = NULL, reservation_id = NULL WHERE id = ?",
    )
    .bind(seat_id)
    .execute(&app.db)
    .await?;
    Ok(true)
}

/// `POST /v2/seats/{id}/hold` — guarded: the hold is a reservation with its own id, and the
/// release timer carries that id.
pub async fn hold_seat_guarded(
    State(app): State<AppState>,
    Path(seat_id): Path<i64>,
    Json(req): Json<HoldRequest>,
) -> Result<(StatusCode, Json<Value>), StatusCode> {
    let mut tx = app.db.begin().await.map_err(internal)?;
    let reservation_id: i64 =
        sqlx::query_scalar("INSERT INTO reservations (seat_id, holder) VALUES (?, ?) RETURNING id")
            .bind(seat_id)
            .bind(&req.holder)
            .fetch_one(&mut *tx)
            .await
            .map_err(internal)?;
    let held = sqlx::query(
        "UPDATE seats SET status = 'held', holder = ?, reservation_id = ? \
         WHERE id = ? AND status = 'free'",
    )
    .bind(&req.holder)
    .bind(reservation_id)
    .bind(seat_id)
    .execute(&mut *tx)
    .await
    .map_err(internal)?;
    if held.rows_affected() != 1 {
        tx.rollback().await.map_err(internal)?;
        return Ok((StatusCode::CONFLICT, Json(json!({ "error": "seat taken" }))));
    }
    tx.commit().await.map_err(internal)?;
    let ttl = app.hold_ttl;
    let timer_app = app.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ttl).await;
        if let Err(err) = release_reservation(&timer_app, seat_id, reservation_id).await {
            eprintln!("seat {seat_id}: release of reservation {reservation_id} failed: {err}");
        }
    });
    Ok((
        StatusCode::CREATED,
        Json(json!({ "seat_id": seat_id, "reservation_id": reservation_id })),
    ))
}

/// The guarded timer's action: lock, re-read, verify the reservation id, conditional release.
pub async fn release_reservation(
    app: &AppState,
    seat_id: i64,
    reservation_id: i64,
) -> Result<bool, sqlx::Error> {
    let seat_lock = app
        .seat_locks
        .lock()
        .await
        .entry(seat_id)
        .or_default()
        .clone();
    let _guard = seat_lock.lock_owned().await;
    let current: Option<Option<i64>> =
        sqlx::query_scalar("SELECT reservation_id FROM seats WHERE id = ?")
            .bind(seat_id)
            .fetch_optional(&app.db)
            .await?;
    if current.flatten() != Some(reservation_id) {
        return Ok(false);
    }
    let released = sqlx::query(
        "UPDATE seats SET status = 'free', holder = NULL, reservation_id = NULL \
         WHERE id = ? AND reservation_id = ?",
    )
    .bind(seat_id)
    .bind(reservation_id)
    .execute(&app.db)
    .await?;
    Ok(released.rows_affected() == 1)
}

/// `POST /seats/{id}/release`: the holder gives the seat back (guarded by holder and status).
pub async fn release_seat(
    State(app): State<AppState>,
    Path(seat_id): Path<i64>,
    Json(req): Json<HoldRequest>,
) -> Result<StatusCode, StatusCode> {
    let released = sqlx::query(
        "UPDATE seats SET status = 'free', holder = NULL, reservation_id = NULL \
         WHERE id = ? AND holder = ? AND status = 'held'",
    )
    .bind(seat_id)
    .bind(req.holder)
    .execute(&app.db)
    .await
    .map_err(internal)?;
    Ok(if released.rows_affected() == 1 {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::CONFLICT
    })
}

/// How long a release may hold the seat's lease.
const SEAT_LEASE: Duration = Duration::from_secs(30);

/// `POST /v3/seats/{id}/hold` — the guarded hold whose timer runs the `#[fenced]` release.
pub async fn hold_seat_fenced(
    State(app): State<AppState>,
    Path(seat_id): Path<i64>,
    Json(req): Json<HoldRequest>,
) -> Result<(StatusCode, Json<Value>), StatusCode> {
    let mut tx = app.db.begin().await.map_err(internal)?;
    let reservation_id: i64 =
        sqlx::query_scalar("INSERT INTO reservations (seat_id, holder) VALUES (?, ?) RETURNING id")
            .bind(seat_id)
            .bind(&req.holder)
            .fetch_one(&mut *tx)
            .await
            .map_err(internal)?;
    let held = sqlx::query(
        "UPDATE seats SET status = 'held', holder = ?, reservation_id = ? \
         WHERE id = ? AND status = 'free'",
    )
    .bind(&req.holder)
    .bind(reservation_id)
    .bind(seat_id)
    .execute(&mut *tx)
    .await
    .map_err(internal)?;
    if held.rows_affected() != 1 {
        tx.rollback().await.map_err(internal)?;
        return Ok((StatusCode::CONFLICT, Json(json!({ "error": "seat taken" }))));
    }
    tx.commit().await.map_err(internal)?;
    let ttl = app.hold_ttl;
    let timer_app = app.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ttl).await;
        if let Err(err) = release_reservation_fenced(&timer_app, seat_id, reservation_id).await {
            eprintln!("seat {seat_id}: release of reservation {reservation_id} failed: {err:?}");
        }
    });
    Ok((
        StatusCode::CREATED,
        Json(json!({ "seat_id": seat_id, "reservation_id": reservation_id })),
    ))
}

/// The timer's action written with `#[staleguard::fenced]`: lease on the seat → transaction →
/// fence check → re-read the seat's reservation → verify it is the timer's → free the seat.
/// Returns `false` (writing nothing) when the seat now belongs to another reservation or is
/// already free: an old timer cannot release the next customer's hold.
#[staleguard::fenced(
    lease = app.leases,
    resource = format!("seat:{seat_id}"),
    ttl = SEAT_LEASE,
    begin = app.db.begin(),
    tx = tx,
    state = current,
    reread = sqlx::query_scalar::<_, Option<i64>>("SELECT reservation_id FROM seats WHERE id = ?")
        .bind(seat_id)
        .fetch_optional(&mut *tx)
        .await?
        .flatten(),
    verify = current == Some(reservation_id),
    stale = Ok(false),
)]
pub async fn release_reservation_fenced(
    app: &AppState,
    seat_id: i64,
    reservation_id: i64,
) -> Result<bool, ShopError> {
    sqlx::query(
        "UPDATE seats SET status = 'free', holder = NULL, reservation_id = NULL WHERE id = ?",
    )
    .bind(seat_id)
    .execute(&mut *tx)
    .await?;
    Ok(true)
}
