//! The housekeeping clock: every `PGCURSOR_HOUSEKEEPING_SECONDS`, one
//! `pgcursor.housekeeping()` call (transaction index purge, message,
//! completed-message and dead-letter retention, maxWaitTimeSeconds
//! eviction, idle partitions; the rules are in sql/80_retention.sql). Several gateways may share a database: the
//! function takes a transaction-scoped advisory lock itself and answers
//! `skipped` when another run holds it (sql/90_housekeeping.sql). Errors
//! are logged, never fatal.

use std::time::Duration;

use deadpool_postgres::Pool;
use serde_json::Value;
use tracing::{debug, info, warn};

/// Starts the clock on the current runtime (`crate::clock::every`); idle
/// partitions go after `idle_days` (0: never).
pub fn spawn(pool: Pool, every: Duration, idle_days: i32) -> tokio::task::JoinHandle<()> {
    crate::clock::every(every, move || {
        let pool = pool.clone();
        async move {
            match run_once(&pool, idle_days).await {
                Ok(Some(counts)) => log_counts(&counts),
                Ok(None) => debug!("housekeeping skipped: another gateway holds the lock"),
                Err(e) => warn!("housekeeping failed: {e}"),
            }
        }
    })
}

/// One run: `Some(counts)` when it ran, `None` when another run (another
/// gateway's, or a psql session's) holds the lock.
pub async fn run_once(pool: &Pool, idle_days: i32) -> Result<Option<Value>, String> {
    let client = pool
        .get()
        .await
        .map_err(|e| crate::db::pool_error_detail(&e))?;
    let counts: Value = client
        .query_one("SELECT pgcursor.housekeeping(NULL, $1)", &[&idle_days])
        .await
        .map_err(|e| crate::db::error_detail(&e))?
        .get(0);
    Ok((counts["skipped"] != true).then_some(counts))
}

/// Logs what a run removed: info when anything went, debug otherwise.
fn log_counts(counts: &Value) {
    let n = |key: &str| counts[key].as_i64().unwrap_or(0);
    let (index, messages, completed, evicted, dead, partitions) = (
        n("transactionIndex"),
        n("messages"),
        n("completedMessages"),
        n("evictedMessages"),
        n("deadLetters"),
        n("partitions"),
    );
    if index + messages + completed + evicted + dead + partitions == 0 {
        debug!("housekeeping: nothing to remove");
        return;
    }
    info!(
        transaction_index = index,
        messages,
        completed_messages = completed,
        evicted_messages = evicted,
        dead_letters = dead,
        partitions,
        "housekeeping removed {index} transaction index rows, {messages} messages past retention, \
         {completed} completed messages, {evicted} messages evicted past maxWaitTimeSeconds, \
         {dead} dead letters, {partitions} idle partitions"
    );
}
