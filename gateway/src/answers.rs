//! Pop answers share PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT. Each pop could
//! carry PGCURSOR_MAX_ANSWER_BYTES of payloads, written twice (`data` and
//! `payload`), and a client that stops reading keeps its answer for up to
//! PGCURSOR_SEND_TIMEOUT_MS: nothing but the connections bounded how many
//! were held at once. So a pop takes room before it looks: what its
//! `maxBytes` may fill, or what is left when that is less (its `maxBytes`
//! is then lowered to fit, and it answers fewer messages), waiting, up to
//! PGCURSOR_DB_TIMEOUT_MS, for at least FLOOR_KIB (the whole budget when
//! that is smaller). Once its answer is written it keeps the room the
//! answer takes and gives back the rest; the answer holds it until it is
//! sent or its connection is gone.
//!
//! The room is counted in KiB. An answer may exceed what it took by its
//! messages' envelopes and by its first message, which a pop returns
//! whatever its `maxBytes` (pgcursor.pop).

use std::sync::Arc;
use std::time::Duration;

use actix_web::body::BoxBody;
use actix_web::HttpResponse;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::body::Holding;
use crate::error::ApiError;

/// The least room a pop waits for (or all it wants, when less): below
/// that, pops would answer a few small messages each.
pub const FLOOR_KIB: u32 = 1024;

/// The budget: `kib` KiB of room, handed out by a semaphore.
pub struct AnswerBudget {
    room: Arc<Semaphore>,
    kib: u32,
}

impl AnswerBudget {
    pub fn new(kib: u32) -> AnswerBudget {
        AnswerBudget {
            room: Arc::new(Semaphore::new(kib as usize)),
            kib,
        }
    }

    /// All of it, in KiB.
    pub fn kib(&self) -> u32 {
        self.kib
    }

    /// What is not taken now, in KiB.
    pub fn left_kib(&self) -> usize {
        self.room.available_permits()
    }

    /// Room for an answer of at most `max_bytes` of payloads (each written
    /// twice): all of it, or what is left if that is at least FLOOR_KIB (or
    /// the whole budget, when smaller); else waits up to `timeout` for that
    /// much (a 503 then).
    pub async fn take(&self, max_bytes: usize, timeout: Duration) -> Result<AnswerRoom, ApiError> {
        let want = kib(max_bytes.saturating_mul(2)).min(u64::from(self.kib)) as u32;
        let floor = want.min(FLOOR_KIB);
        let left = u32::try_from(self.left_kib()).unwrap_or(u32::MAX);
        let take = want.min(left).max(floor);
        match tokio::time::timeout(timeout, self.room.clone().acquire_many_owned(take)).await {
            Ok(Ok(permit)) => Ok(AnswerRoom { permit }),
            _ => Err(ApiError::Unavailable(format!(
                "the gateway holds as many pop answers as it may (PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT) and had no room for this one within {} ms; retry later",
                timeout.as_millis()
            ))),
        }
    }
}

/// A pop's room in the budget, and the payload bytes it may answer.
pub struct AnswerRoom {
    permit: OwnedSemaphorePermit,
}

impl AnswerRoom {
    /// The payload bytes an answer fits in this room: the pop's `maxBytes`.
    pub fn max_bytes(&self) -> usize {
        self.permit.num_permits() * 1024 / 2
    }

    /// `answer` holding this room until it is sent, or its connection gone.
    pub fn hold(self, answer: HttpResponse) -> HttpResponse {
        answer
            .map_body(|_, body| Holding::new(BoxBody::new(body), self.permit))
            .map_into_boxed_body()
    }

    /// Keeps the room an answer of `len` bytes takes and gives back the rest.
    pub fn fit(&mut self, len: usize) {
        let keep = usize::try_from(kib(len)).unwrap_or(usize::MAX).max(1);
        if let Some(rest) = self
            .permit
            .num_permits()
            .checked_sub(keep)
            .filter(|n| *n > 0)
        {
            drop(self.permit.split(rest));
        }
    }
}

/// `bytes` in KiB, rounded up.
pub fn kib(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn a_pop_takes_what_its_max_bytes_may_fill_and_keeps_what_its_answer_takes() {
        let budget = AnswerBudget::new(100 * 1024);
        let mut room = budget.take(4 << 20, SECOND).await.unwrap();
        assert_eq!(room.max_bytes(), 4 << 20);
        assert_eq!(budget.left_kib(), 92 * 1024);
        room.fit(10_000);
        assert_eq!(budget.left_kib(), 100 * 1024 - 10);
        drop(room);
        assert_eq!(budget.left_kib(), 100 * 1024);
    }

    #[tokio::test]
    async fn a_pop_takes_what_is_left_and_answers_less() {
        let budget = AnswerBudget::new(3 * 1024);
        let first = budget.take(1 << 20, SECOND).await.unwrap();
        let second = budget.take(16 << 20, SECOND).await.unwrap();
        assert_eq!(first.max_bytes(), 1 << 20);
        assert_eq!(
            second.max_bytes(),
            512 << 10,
            "the 1 MiB left, for payloads written twice"
        );
        assert_eq!(budget.left_kib(), 0);
    }

    #[tokio::test]
    async fn a_pop_waits_for_the_floor_then_gives_up() {
        let budget = AnswerBudget::new(2560);
        let held = budget.take(1 << 20, SECOND).await.unwrap();
        let budget = Arc::new(budget);
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move {
                budget
                    .take(1 << 20, 5 * SECOND)
                    .await
                    .map(|r| r.max_bytes())
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "512 KiB left: below the floor");
        drop(held);
        assert_eq!(
            waiting.await.unwrap().unwrap(),
            512 << 10,
            "the floor, once there was room"
        );

        let _held = budget.take(1 << 20, SECOND).await.unwrap();
        let refused = budget.take(1 << 20, Duration::from_millis(50)).await;
        assert!(
            matches!(refused, Err(ApiError::Unavailable(m)) if m.contains("PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT"))
        );
    }

    #[tokio::test]
    async fn a_budget_smaller_than_the_floor_is_all_a_pop_waits_for() {
        let budget = AnswerBudget::new(100);
        let room = budget.take(16 << 20, SECOND).await.unwrap();
        assert_eq!(room.max_bytes(), 50 << 10, "the whole 100 KiB");
        drop(room);
        let _held = budget.take(20 << 10, SECOND).await.unwrap();
        let refused = budget.take(16 << 20, Duration::from_millis(50)).await;
        assert!(refused.is_err(), "60 KiB left: it waits for all 100");
    }

    #[tokio::test]
    async fn a_small_pop_waits_only_for_what_it_wants() {
        let budget = AnswerBudget::new(1024);
        let _held = budget.take(400 << 10, SECOND).await.unwrap();
        let small = budget.take(100 << 10, SECOND).await.unwrap();
        assert_eq!(small.max_bytes(), 100 << 10);
    }
}
