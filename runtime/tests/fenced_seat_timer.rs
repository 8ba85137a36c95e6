//! Story 2, the old timer and the new reservation (ABA): reservation A's "release seat" timer
//! fires after A ended and B reserved the same seat. The seat is "reserved" again, but not by A;
//! the timer carries A's reservation id, re-reads the seat under the lease, exits stale, and B
//! keeps the seat. On SQLite, PostgreSQL (when configured) and the memory store with tokio's
//! paused clock.
//!
//! And the timer that pauses *after* its check (a GC pause, a stalled write) past its lease,
//! while A ends and B reserves: only the fence keeps its late write from freeing B's seat. The
//! mutation test re-runs these stories with the fence check switched off (feature
//! `mutation-testing`) and requires them to fail.

mod fenced_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fenced_support::{AppError, IsHeld, mutant_switch, retry_while_held, sqlite_pool};
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

impl IsHeld for AppError {
    fn is_held(&self) -> bool {
        matches!(self, AppError::Guard(staleguard::Error::Held(_)))
    }
}

/// Makes the timer stop between its check and its write until the test lets it go on.
#[derive(Default)]
struct Pause {
    entered: Notify,
    resume: Notify,
}

/// What every seat service has besides its handlers: the leases' ttl and the timer's pause.
#[derive(Default)]
struct Knobs {
    ttl_ms: AtomicU64,
    pause: Mutex<Option<Arc<Pause>>>,
}

impl Knobs {
    fn new() -> Self {
        Knobs {
            ttl_ms: AtomicU64::new(TTL.as_millis() as u64),
            pause: Mutex::default(),
        }
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::SeqCst))
    }

    async fn in_timer_body(&self) {
        let pause = self.pause.lock().unwrap().take();
        if let Some(pause) = pause {
            pause.entered.notify_one();
            pause.resume.notified().await;
        }
    }
}

trait Seats {
    async fn reserve(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError>;
    async fn end(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError>;
    async fn release_timer_fired(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError>;
    async fn holder(&self, seat: i64) -> Result<Option<i64>, AppError>;
    fn knobs(&self) -> &Knobs;
}

macro_rules! seat_service {
    ($service:ident, $pool:ty, $conn:ty, $store:ty) => {
        struct $service {
            db: $pool,
            leases: $store,
            knobs: Knobs,
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
                                lease = self.leases, resource = format!("seat:{seat}"), ttl = self.knobs.ttl(),
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
                                lease = self.leases, resource = format!("seat:{seat}"), ttl = self.knobs.ttl(),
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
                                lease = self.leases, resource = format!("seat:{seat}"), ttl = self.knobs.ttl(),
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
                self.knobs.in_timer_body().await;
                Self::set(&mut tx, seat, None).await?;
                Ok(Outcome::Done)
            }

            async fn holder(&self, seat: i64) -> Result<Option<i64>, AppError> {
                let mut conn = self.db.acquire().await?;
                Ok(Self::load(&mut conn, seat).await?)
            }

            fn knobs(&self) -> &Knobs {
                &self.knobs
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

/// A's timer fires while A still holds the seat, checks it, and pauses past its lease before
/// writing; meanwhile A ends and B reserves. Whichever order the fence imposes, B must end up
/// with the seat: the late write is either committed before the newer holders enter (they wait
/// for it, then see the seat free) or refused.
async fn paused_timer_outlives_its_lease(seats: &impl Seats) {
    assert_eq!(seats.reserve(SEAT, A).await.unwrap(), Outcome::Done);
    let short = Duration::from_millis(150);
    seats
        .knobs()
        .ttl_ms
        .store(short.as_millis() as u64, Ordering::SeqCst);
    let pause = Arc::new(Pause::default());
    *seats.knobs().pause.lock().unwrap() = Some(pause.clone());
    let timer = seats.release_timer_fired(SEAT, A);
    let meanwhile = async {
        pause.entered.notified().await;
        tokio::time::sleep(short * 3).await; // the timer's lease is over
        let done = Notify::new();
        let work = async {
            let ended = retry_while_held(|| seats.end(SEAT, A)).await;
            let reserved = retry_while_held(|| seats.reserve(SEAT, B)).await;
            done.notify_one();
            (ended, reserved)
        };
        // The timer resumes once A ended and B reserved, or after a second if they wait for it.
        let resume = async {
            let _ = tokio::time::timeout(Duration::from_secs(1), done.notified()).await;
            pause.resume.notify_one();
        };
        tokio::join!(work, resume).0
    };
    let (fired, (ended, reserved)) = tokio::join!(timer, meanwhile);
    seats
        .knobs()
        .ttl_ms
        .store(TTL.as_millis() as u64, Ordering::SeqCst);
    assert!(
        matches!(
            fired,
            Ok(Outcome::Done) | Err(AppError::Guard(staleguard::Error::Fenced(_)))
        ),
        "the paused timer: {fired:?}"
    );
    ended.unwrap();
    assert_eq!(reserved.unwrap(), Outcome::Done, "B could not reserve");
    assert_eq!(
        seats.holder(SEAT).await.unwrap(),
        Some(B),
        "B lost its seat to the paused timer"
    );
}

async fn sqlite_seats() -> SqliteSeats {
    let db = sqlite_pool().await;
    sqlx::raw_sql(SCHEMA).execute(&db).await.unwrap();
    let leases = SqliteLeaseStore::new(db.clone());
    leases.migrate().await.unwrap();
    SqliteSeats {
        db,
        leases,
        knobs: Knobs::new(),
    }
}

#[tokio::test]
async fn sqlite_old_timer_exits_stale_and_b_keeps_the_seat() {
    mutant_switch();
    old_timer_after_new_reservation(&sqlite_seats().await).await;
}

#[tokio::test]
async fn sqlite_paused_timer_does_not_free_b_s_seat() {
    mutant_switch();
    paused_timer_outlives_its_lease(&sqlite_seats().await).await;
}

#[cfg(feature = "postgres")]
async fn pg_seats(pg: &fenced_support::pg::PgDb) -> PgSeats {
    sqlx::raw_sql(SCHEMA).execute(&pg.pool).await.unwrap();
    let leases = staleguard::lease::PgLeaseStore::new(pg.pool.clone());
    leases.migrate().await.unwrap();
    PgSeats {
        db: pg.pool.clone(),
        leases,
        knobs: Knobs::new(),
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_old_timer_exits_stale_and_b_keeps_the_seat() {
    mutant_switch();
    let Some(pg) =
        fenced_support::pg::PgDb::connect("postgres_old_timer_exits_stale_and_b_keeps_the_seat")
            .await
    else {
        return;
    };
    old_timer_after_new_reservation(&pg_seats(&pg).await).await;
    pg.finish().await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_paused_timer_does_not_free_b_s_seat() {
    mutant_switch();
    let Some(pg) =
        fenced_support::pg::PgDb::connect("postgres_paused_timer_does_not_free_b_s_seat").await
    else {
        return;
    };
    paused_timer_outlives_its_lease(&pg_seats(&pg).await).await;
    pg.finish().await;
}

/// The memory flavour: seats in a `FencedCell`, a real ten-minute `tokio::time::sleep` under the
/// paused clock, and the lease's token passed to the write.
struct MemorySeats {
    leases: MemoryLeaseStore,
    seats: FencedCell<HashMap<i64, i64>>,
    knobs: Knobs,
}

impl Seats for MemorySeats {
    #[staleguard::fenced(
        lease = self.leases, resource = format!("seat:{seat}"), ttl = self.knobs.ttl(),
        state = holder, reread = self.seats.get().get(&seat).copied(),
        verify = holder == Some(reservation),
        stale = Ok(Outcome::Stale),
        token = token,
    )]
    async fn release_timer_fired(&self, seat: i64, reservation: i64) -> Result<Outcome, AppError> {
        self.knobs.in_timer_body().await;
        self.seats
            .update(token, |seats| seats.remove(&seat))
            .map_err(staleguard::Error::from)?;
        Ok(Outcome::Done)
    }

    #[staleguard::fenced(
        lease = self.leases, resource = format!("seat:{seat}"), ttl = self.knobs.ttl(),
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
        lease = self.leases, resource = format!("seat:{seat}"), ttl = self.knobs.ttl(),
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

    async fn holder(&self, seat: i64) -> Result<Option<i64>, AppError> {
        Ok(self.seats.get().get(&seat).copied())
    }

    fn knobs(&self) -> &Knobs {
        &self.knobs
    }
}

fn memory_seats() -> MemorySeats {
    MemorySeats {
        leases: MemoryLeaseStore::new(),
        seats: FencedCell::new("seats", HashMap::new()),
        knobs: Knobs::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn memory_paused_timer_does_not_free_b_s_seat() {
    mutant_switch();
    paused_timer_outlives_its_lease(&memory_seats()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_old_timer_fires_after_ten_minutes_and_exits_stale() {
    mutant_switch();
    let seats = Arc::new(memory_seats());
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

/// The mutation check: with the fence check switched off, the paused-timer stories must fail
/// (each re-run in a child process of this test binary, so the switch touches nothing else).
#[cfg(feature = "mutation-testing")]
#[test]
fn without_the_fence_check_the_paused_timer_frees_b_s_seat() {
    let mut stories = vec![
        "memory_paused_timer_does_not_free_b_s_seat",
        "sqlite_paused_timer_does_not_free_b_s_seat",
    ];
    if cfg!(feature = "postgres")
        && fenced_support::postgres_url_for(
            "without_the_fence_check_the_paused_timer_frees_b_s_seat",
        )
    {
        stories.push("postgres_paused_timer_does_not_free_b_s_seat");
    }
    for story in stories {
        fenced_support::assert_fails_without_the_fence(story);
    }
}
