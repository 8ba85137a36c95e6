//! Story 2, the old timer and the new reservation (ABA): reservation A's "release seat" timer
//! fires after A ended and B reserved the same seat. The seat is "reserved" again, but not by A;
//! the timer carries A's reservation id, re-reads the seat under the lease, exits stale, and B
//! keeps the seat. On SQLite, PostgreSQL (when configured) and the memory store with tokio's
//! paused clock.

mod fenced_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fenced_support::{AppError, sqlite_pool};
use staleguard::fence::FencedCell;
use staleguard::lease::{MemoryLeaseStore, SqliteLeaseStore};
use tokio::sync::Notify;

const TTL: Duration = Duration::from_secs(30);
const SEAT: i64 = 12;
const A: i64 = 1001;
const B: i64 = 1002;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    Stale,
}

trait Seats {
    async fn reserve(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError>;
    async fn end(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError>;
    async fn release_timer_fired(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError>;
    async fn holder(&self, seat: i64) -> Result<Option<i64>, AppError>;
}

macro_rules! seat_service {
    ($service:ident, $pool:ty, $conn:ty, $store:ty) => {
        struct $service {
            db: $pool,
            leases: $store,
        }

        impl $service {
            async fn load(db: &mut $conn, seat: i64) -> Result<Option<i64>, sqlx::Error> {
                sqlx::query_scalar("SELECT reservation FROM seats WHERE seat = $1")
                    .bind(seat)
                    .fetch_one(db)
                    .await
            }

            async fn set(db: &mut $conn, seat: i64, to: Option<i64>) -> Result<(), sqlx::Error> {
                sqlx::query("UPDATE seats SET reservation = $1 WHERE seat = $2")
                    .bind(to)
                    .bind(seat)
                    .execute(db)
                    .await?;
                Ok(())
            }
        }

        impl Seats for $service {
            #[staleguard::fenced(
                                lease = self.leases, resource = format!("seat:{seat}"), ttl = TTL,
                                begin = self.db.begin(), tx = tx,
                                state = holder, reread = Self::load(&mut tx, seat).await?,
                                verify = holder.is_none(),
                                stale = Ok(Outcome::Stale),
                            )]
            async fn reserve(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError> {
                Self::set(&mut tx, seat, Some(reservation)).await?;
                Ok(Outcome::Done)
            }

            #[staleguard::fenced(
                                lease = self.leases, resource = format!("seat:{seat}"), ttl = TTL,
                                begin = self.db.begin(), tx = tx,
                                state = holder, reread = Self::load(&mut tx, seat).await?,
                                verify = holder == Some(reservation),
                                stale = Ok(Outcome::Stale),
                            )]
            async fn end(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError> {
                Self::set(&mut tx, seat, None).await?;
                Ok(Outcome::Done)
            }

            /// The ten-minute timer: it carries the reservation it was scheduled for.
            #[staleguard::fenced(
                                lease = self.leases, resource = format!("seat:{seat}"), ttl = TTL,
                                begin = self.db.begin(), tx = tx,
                                state = holder, reread = Self::load(&mut tx, seat).await?,
                                verify = holder == Some(reservation),
                                stale = Ok(Outcome::Stale),
                            )]
            async fn release_timer_fired(
                &self,
                seat: i64,
                reservation: i64,
            ) -> Result<Outcome, AppError> {
                Self::set(&mut tx, seat, None).await?;
                Ok(Outcome::Done)
            }

            async fn holder(&self, seat: i64) -> Result<Option<i64>, AppError> {
                let mut conn = self.db.acquire().await?;
                Ok(Self::load(&mut conn, seat).await?)
            }
        }
    };
}

seat_service!(
    SqliteSeats,
    sqlx::SqlitePool,
    sqlx::SqliteConnection,
    SqliteLeaseStore
);

#[cfg(feature = "postgres")]
seat_service!(
    PgSeats,
    sqlx::PgPool,
    sqlx::PgConnection,
    staleguard::lease::PgLeaseStore
);

const SCHEMA: &str = "\
CREATE TABLE seats (seat BIGINT PRIMARY KEY, reservation BIGINT);
INSERT INTO seats (seat, reservation) VALUES (12, NULL);";

/// A's timer is scheduled when A reserves and fires (the `Notify`) after A ended and B
/// reserved; then B's own timer fires while B still holds the seat and does release it.
async fn old_timer_after_new_reservation(seats: &impl Seats) {
    assert_eq!(seats.reserve(SEAT, A).await.unwrap(), Outcome::Done);
    let ten_minutes_later = Notify::new();
    let timer_a = async {
        ten_minutes_later.notified().await;
        seats.release_timer_fired(SEAT, A).await.unwrap()
    };
    let meanwhile = async {
        assert_eq!(seats.end(SEAT, A).await.unwrap(), Outcome::Done);
        assert_eq!(seats.reserve(SEAT, B).await.unwrap(), Outcome::Done);
        ten_minutes_later.notify_one();
    };
    let (fired, ()) = tokio::join!(timer_a, meanwhile);
    assert_eq!(fired, Outcome::Stale);
    assert_eq!(
        seats.holder(SEAT).await.unwrap(),
        Some(B),
        "B lost its seat"
    );

    // B's timer, still current, does its job: the stale exit above came from the identity.
    assert_eq!(
        seats.release_timer_fired(SEAT, B).await.unwrap(),
        Outcome::Done
    );
    assert_eq!(seats.holder(SEAT).await.unwrap(), None);
}

#[tokio::test]
async fn sqlite_old_timer_exits_stale_and_b_keeps_the_seat() {
    let db = sqlite_pool().await;
    sqlx::raw_sql(SCHEMA).execute(&db).await.unwrap();
    let leases = SqliteLeaseStore::new(db.clone());
    leases.migrate().await.unwrap();
    old_timer_after_new_reservation(&SqliteSeats { db, leases }).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_old_timer_exits_stale_and_b_keeps_the_seat() {
    let Some(pg) =
        fenced_support::pg::PgDb::connect("postgres_old_timer_exits_stale_and_b_keeps_the_seat")
            .await
    else {
        return;
    };
    sqlx::raw_sql(SCHEMA).execute(&pg.pool).await.unwrap();
    let leases = staleguard::lease::PgLeaseStore::new(pg.pool.clone());
    leases.migrate().await.unwrap();
    old_timer_after_new_reservation(&PgSeats {
        db: pg.pool.clone(),
        leases,
    })
    .await;
    pg.finish().await;
}

/// The memory flavour: seats in a `FencedCell`, a real ten-minute `tokio::time::sleep` under the
/// paused clock, and the lease's token passed to the write.
struct MemorySeats {
    leases: MemoryLeaseStore,
    seats: FencedCell<HashMap<i64, i64>>,
}

impl MemorySeats {
    #[staleguard::fenced(
        lease = self.leases, resource = format!("seat:{seat}"), ttl = TTL,
        state = holder, reread = self.seats.get().get(&seat).copied(),
        verify = holder == Some(reservation),
        stale = Ok(Outcome::Stale),
        token = token,
    )]
    async fn release_timer_fired(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError> {
        self.seats
            .update(token, |seats| seats.remove(&seat))
            .map_err(staleguard::Error::from)?;
        Ok(Outcome::Done)
    }

    #[staleguard::fenced(
        lease = self.leases, resource = format!("seat:{seat}"), ttl = TTL,
        state = holder, reread = self.seats.get().get(&seat).copied(),
        verify = holder.is_none(),
        stale = Ok(Outcome::Stale),
        token = token,
    )]
    async fn reserve(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError> {
        self.seats
            .update(token, |seats| seats.insert(seat, reservation))
            .map_err(staleguard::Error::from)?;
        Ok(Outcome::Done)
    }

    #[staleguard::fenced(
        lease = self.leases, resource = format!("seat:{seat}"), ttl = TTL,
        state = holder, reread = self.seats.get().get(&seat).copied(),
        verify = holder == Some(reservation),
        stale = Ok(Outcome::Stale),
        token = token,
    )]
    async fn end(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError> {
        self.seats
            .update(token, |seats| seats.remove(&seat))
            .map_err(staleguard::Error::from)?;
        Ok(Outcome::Done)
    }
}

#[tokio::test(start_paused = true)]
async fn memory_old_timer_fires_after_ten_minutes_and_exits_stale() {
    let seats = Arc::new(MemorySeats {
        leases: MemoryLeaseStore::new(),
        seats: FencedCell::new("seats", HashMap::new()),
    });
    assert_eq!(seats.reserve(SEAT, A).await.unwrap(), Outcome::Done);
    let timer = tokio::spawn({
        let seats = Arc::clone(&seats);
        async move {
            tokio::time::sleep(Duration::from_secs(600)).await;
            seats.release_timer_fired(SEAT, A).await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(seats.end(SEAT, A).await.unwrap(), Outcome::Done);
    assert_eq!(seats.reserve(SEAT, B).await.unwrap(), Outcome::Done);
    assert_eq!(timer.await.unwrap(), Outcome::Stale);
    assert_eq!(seats.seats.get().get(&SEAT), Some(&B), "B lost its seat");
}
