//! A periodic task on the current runtime: the housekeeping clock and the
//! flush of the per-minute figures both run this way. And a gate for
//! warnings that would otherwise repeat with every request.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{interval_at, Instant, MissedTickBehavior};

/// Runs `job` every `every`, the first time one interval after startup (not
/// at once, so restarts do not stampede). A slow run delays the next one
/// instead of bunching them up.
pub fn every<F, Fut>(every: Duration, mut job: F) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut ticks = interval_at(Instant::now() + every, every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            job().await;
        }
    })
}

/// True at most once a minute per `last` (the second it was last true, 0 at
/// first), across threads: for a warning about a state that lasts.
pub fn once_a_minute(last: &AtomicU64) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let before = last.load(Ordering::Relaxed);
    now >= before + 60
        && last
            .compare_exchange(before, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_a_minute_is_true_once_then_not_until_a_minute_has_passed() {
        let last = AtomicU64::new(0);
        assert!(once_a_minute(&last));
        assert!(!once_a_minute(&last));
        last.fetch_sub(61, Ordering::Relaxed);
        assert!(once_a_minute(&last));
    }
}
