//! A periodic task on the current runtime: the housekeeping clock and the
//! flush of the per-minute figures both run this way.

use std::future::Future;
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
