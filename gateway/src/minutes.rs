//! Per-minute figures only the gateway sees (docs/sql-api.md
//! "record_gateway_minutes": requests, messages pushes stored, pops, empty
//! pops, acked items, failed acks, transactions, message age at pop, time
//! long-polls waited, requests the database failed), counted in memory per (minute,
//! queue or partition) and flushed every `PGCURSOR_STATS_FLUSH_SECONDS` through
//! one `pgcursor.record_gateway_minutes` call, which adds them to what other
//! gateways wrote for the same minute (sql/67_gateway_minutes.sql). The status,
//! analytics and metrics answers read them.
//!
//! Counting is one short mutex hold per request; nothing touches the
//! database on the request path. A failed flush keeps its figures for the
//! next one.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadpool_postgres::Pool;
use serde_json::{json, Map, Value};
use tracing::warn;
use uuid::Uuid;

use crate::error::ApiError;
use crate::routes::call::call_json;

/// What figures count for: a queue (None: none can be named, as for an
/// empty namespace/task pop), or a partition, whose queue the SQL looks up
/// (an ack names only its partition).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Queue(Option<String>),
    Partition(Uuid),
}

/// One (minute, target)'s figures; the JSON keys are record_gateway_minutes'.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub push_requests: u64,
    pub pop_requests: u64,
    pub pop_messages: u64,
    pub pop_empty: u64,
    pub ack_requests: u64,
    pub ack_messages: u64,
    pub ack_failed: u64,
    pub transactions: u64,
    /// Message age at pop, summed over pop_messages and its largest, in ms.
    pub age_sum_ms: u64,
    pub age_max_ms: u64,
    pub push_messages: u64,
    /// Time long-polls spent waiting in the minute, in ms.
    pub parked_ms: u64,
    pub db_errors: u64,
}

impl Figures {
    fn fields(&self) -> [(&'static str, u64); 13] {
        [
            ("pushRequests", self.push_requests),
            ("popRequests", self.pop_requests),
            ("popMessages", self.pop_messages),
            ("popEmpty", self.pop_empty),
            ("ackRequests", self.ack_requests),
            ("ackMessages", self.ack_messages),
            ("ackFailed", self.ack_failed),
            ("transactions", self.transactions),
            ("ageSumMs", self.age_sum_ms),
            ("ageMaxMs", self.age_max_ms),
            ("pushMessages", self.push_messages),
            ("parkedMs", self.parked_ms),
            ("dbErrors", self.db_errors),
        ]
    }

    /// The figures record_process_minutes takes: the per-queue ones but
    /// empty pops and parked time (a process's waits go per queue).
    pub fn process_fields(&self) -> impl Iterator<Item = (&'static str, u64)> {
        self.fields()
            .into_iter()
            .filter(|(key, _)| !matches!(*key, "popEmpty" | "parkedMs"))
    }

    pub fn absorb(&mut self, other: &Figures) {
        self.push_requests += other.push_requests;
        self.pop_requests += other.pop_requests;
        self.pop_messages += other.pop_messages;
        self.pop_empty += other.pop_empty;
        self.ack_requests += other.ack_requests;
        self.ack_messages += other.ack_messages;
        self.ack_failed += other.ack_failed;
        self.transactions += other.transactions;
        self.age_sum_ms += other.age_sum_ms;
        self.age_max_ms = self.age_max_ms.max(other.age_max_ms);
        self.push_messages += other.push_messages;
        self.parked_ms += other.parked_ms;
        self.db_errors += other.db_errors;
    }
}

/// The figures not flushed yet, by (minute as unix seconds, target).
pub type Pending = HashMap<(u64, Target), Figures>;

/// Figures older than this are dropped rather than kept for a flush: the
/// database keeps no more (record_gateway_minutes' default `keep`).
pub const KEEP: Duration = Duration::from_secs(24 * 3600);

fn pending() -> &'static Mutex<Pending> {
    static PENDING: OnceLock<Mutex<Pending>> = OnceLock::new();
    PENDING.get_or_init(Mutex::default)
}

pub fn now_secs() -> u64 {
    unix_ms(SystemTime::now()) / 1000
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}

/// Counts into this minute's figures of `target`.
pub fn record(target: Target, count: impl FnOnce(&mut Figures)) {
    let minute = now_secs() / 60 * 60;
    let mut pending = pending().lock().unwrap_or_else(|e| e.into_inner());
    count(pending.entry((minute, target)).or_default());
}

/// Adds a long-poll's wait from `since` to now to `target`'s parked time,
/// each minute it spanned getting its own share.
pub fn record_parked(target: Target, since: SystemTime) {
    let spans = minute_spans(unix_ms(since), unix_ms(SystemTime::now()));
    let mut pending = pending().lock().unwrap_or_else(|e| e.into_inner());
    for (minute, ms) in spans {
        pending
            .entry((minute, target.clone()))
            .or_default()
            .parked_ms += ms;
    }
}

/// [from, to) in unix ms, cut at minute boundaries: (minute in unix
/// seconds, ms of the span inside it).
fn minute_spans(from: u64, to: u64) -> Vec<(u64, u64)> {
    let mut spans = Vec::new();
    let mut at = from;
    while at < to {
        let minute_start = at / 60_000 * 60_000;
        let end = to.min(minute_start + 60_000);
        spans.push((minute_start / 1000, end - at));
        at = end;
    }
    spans
}

/// A request the database failed (counted without a queue: the scrape's
/// queen_cluster_db_errors_total, the status and analytics dbErrors), and
/// this process's own counter.
pub fn record_db_error() {
    crate::metrics::counters().db_errors.increment(1);
    record(Target::Queue(None), |f| f.db_errors += 1);
}

/// Counts `count` for each target.
pub fn record_each(targets: impl IntoIterator<Item = Target>, count: impl Fn(&mut Figures)) {
    for target in targets {
        record(target, &count);
    }
}

/// The distinct queues of a push's items (`items[].queue`), as targets.
pub fn item_queues(items: Option<&Value>) -> BTreeSet<String> {
    items
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item["queue"].as_str().map(str::to_string))
        .collect()
}

fn take() -> Pending {
    std::mem::take(&mut *pending().lock().unwrap_or_else(|e| e.into_inner()))
}

/// Puts back figures a flush could not write, but none older than KEEP.
fn restore(figures: Pending) {
    let oldest = now_secs().saturating_sub(KEEP.as_secs());
    let mut pending = pending().lock().unwrap_or_else(|e| e.into_inner());
    for (key, f) in figures
        .into_iter()
        .filter(|((minute, _), _)| *minute >= oldest)
    {
        pending.entry(key).or_default().absorb(&f);
    }
}

/// record_gateway_minutes' argument: one row per (minute, target).
fn rows(figures: &Pending) -> Value {
    let rows = figures
        .iter()
        .map(|((minute, target), f)| {
            let mut row = Map::new();
            row.insert("minute".into(), json!(minute));
            match target {
                Target::Queue(Some(queue)) => row.insert("queue".into(), json!(queue)),
                Target::Queue(None) => None,
                Target::Partition(id) => row.insert("partitionId".into(), json!(id)),
            };
            for (key, n) in f.fields().into_iter().filter(|(_, n)| *n > 0) {
                row.insert(key.into(), json!(n));
            }
            Value::Object(row)
        })
        .collect();
    Value::Array(rows)
}

/// Writes what was counted since the last flush, per queue and for this
/// process (crate::process), in one statement. On failure the figures are
/// kept for the next flush, unless the database refused them as malformed
/// (they would be refused again).
pub async fn flush(pool: &Pool) -> Result<(), String> {
    let figures = take();
    let (process_rows, process_taken) = crate::process::take_rows(&figures);
    if figures.is_empty() && process_rows.as_array().is_some_and(Vec::is_empty) {
        return Ok(());
    }
    let sql = "SELECT pgcursor.record_gateway_minutes($1::jsonb), \
               pgcursor.record_process_minutes($2::jsonb, $3::jsonb)";
    let identity = crate::process::identity();
    match call_json(pool, sql, &[&rows(&figures), &identity, &process_rows]).await {
        Ok(_) => Ok(()),
        Err(ApiError::BadRequest(why)) => Err(format!("figures refused, dropped: {why}")),
        Err(other) => {
            restore(figures);
            crate::process::restore(process_taken);
            Err(other.to_string())
        }
    }
}

/// Flushes every `every`, the first one `every` after startup.
pub fn spawn(pool: Pool, every: Duration) -> tokio::task::JoinHandle<()> {
    crate::clock::every(every, move || {
        let pool = pool.clone();
        async move {
            if let Err(why) = flush(&pool).await {
                warn!("flushing the gateway's per-minute figures failed: {why}");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_carry_the_target_and_only_figures_above_zero() {
        let id = Uuid::now_v7();
        let figures: Pending = [
            (
                (120, Target::Queue(Some("orders".into()))),
                Figures {
                    pop_requests: 2,
                    age_max_ms: 7,
                    ..Figures::default()
                },
            ),
            (
                (60, Target::Queue(None)),
                Figures {
                    pop_empty: 1,
                    ..Figures::default()
                },
            ),
            (
                (60, Target::Partition(id)),
                Figures {
                    ack_failed: 3,
                    ..Figures::default()
                },
            ),
        ]
        .into_iter()
        .collect();
        let mut got = rows(&figures).as_array().unwrap().clone();
        let mut want = vec![
            json!({"minute": 120, "queue": "orders", "popRequests": 2, "ageMaxMs": 7}),
            json!({"minute": 60, "partitionId": id, "ackFailed": 3}),
            json!({"minute": 60, "popEmpty": 1}),
        ];
        // A map's order is no promise: compare as sets.
        got.sort_by_key(|r| r.to_string());
        want.sort_by_key(|r| r.to_string());
        assert_eq!(got, want);
    }

    #[test]
    fn a_wait_is_shared_among_the_minutes_it_spans() {
        assert_eq!(minute_spans(60_500, 60_900), [(60, 400)]);
        assert_eq!(
            minute_spans(59_000, 121_000),
            [(0, 1_000), (60, 60_000), (120, 1_000)]
        );
        assert!(minute_spans(5_000, 5_000).is_empty());
        assert!(minute_spans(6_000, 5_000).is_empty());
    }

    #[test]
    fn absorbing_adds_counts_and_keeps_the_larger_maximum() {
        let mut a = Figures {
            pop_messages: 2,
            age_sum_ms: 10,
            age_max_ms: 8,
            ..Figures::default()
        };
        a.absorb(&Figures {
            pop_messages: 1,
            age_sum_ms: 5,
            age_max_ms: 5,
            ..Figures::default()
        });
        assert_eq!((a.pop_messages, a.age_sum_ms, a.age_max_ms), (3, 15, 8));
    }

    #[test]
    fn push_items_name_their_distinct_queues() {
        let items = json!([{"queue": "b"}, {"queue": "a"}, {"queue": "b"}, {"queue": 5}, "x"]);
        assert_eq!(
            item_queues(Some(&items)).into_iter().collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(item_queues(None).is_empty());
    }
}
