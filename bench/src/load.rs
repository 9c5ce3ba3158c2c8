//! What every scenario shares: connection pools, the warm-up/measure
//! window, counters, latency histograms, and seeding partitions.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Value};
use tokio_postgres::NoTls;

use crate::cpu::{self, CoresUsed, Probe};
use crate::Result;

/// A deadpool pool like the gateway's (fast recycling).
pub fn pool(url: &str, size: usize) -> Result<Pool> {
    let manager = Manager::from_config(
        url.parse::<tokio_postgres::Config>()?,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .build()?)
}

/// One connection, its driver task spawned.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Shared by the driver and its workers: are we measuring yet, must we stop.
#[derive(Default)]
pub struct Window {
    measuring: AtomicBool,
    stop: AtomicBool,
}

impl Window {
    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// What workers count (always, warm-up included: the driver takes deltas).
#[derive(Default)]
pub struct Counters {
    /// Items the scenario is about: messages acked end to end, ack items.
    pub done: AtomicU64,
    pub pushed: AtomicU64,
    pub errors: AtomicU64,
    pub empty_pops: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> [u64; 4] {
        [
            self.done.load(Ordering::Relaxed),
            self.pushed.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
            self.empty_pops.load(Ordering::Relaxed),
        ]
    }
}

/// What one measured window saw.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub seconds: f64,
    pub done: u64,
    pub per_second: f64,
    pub pushed_per_second: f64,
    pub errors: u64,
    pub empty_pops: u64,
    pub cores: CoresUsed,
}

impl Measured {
    /// Slices of one system measured in turns with others, as one figure.
    pub fn merge(slices: &[Measured]) -> Measured {
        let seconds: f64 = slices.iter().map(|m| m.seconds).sum();
        let sum = |f: fn(&Measured) -> f64| slices.iter().map(f).sum::<f64>();
        let weighted = |f: fn(&CoresUsed) -> f64| {
            slices.iter().map(|m| f(&m.cores) * m.seconds).sum::<f64>() / seconds.max(1e-9)
        };
        let done = slices.iter().map(|m| m.done).sum::<u64>();
        Measured {
            seconds,
            done,
            per_second: done as f64 / seconds.max(1e-9),
            pushed_per_second: sum(|m| m.pushed_per_second * m.seconds) / seconds.max(1e-9),
            errors: slices.iter().map(|m| m.errors).sum(),
            empty_pops: slices.iter().map(|m| m.empty_pops).sum(),
            cores: CoresUsed {
                postgres: weighted(|c| c.postgres),
                gateway: weighted(|c| c.gateway),
                bench: weighted(|c| c.bench),
                machine: weighted(|c| c.machine),
            },
        }
    }
}

/// Lets the workers warm up, measures for `duration`, then tells them to
/// stop. Only the measured window counts.
pub async fn measure(
    window: &Window,
    counters: &Counters,
    probe: &Probe,
    warmup: Duration,
    duration: Duration,
) -> Measured {
    tokio::time::sleep(warmup).await;
    window.measuring.store(true, Ordering::Relaxed);
    let (c0, p0, t0) = (counters.snapshot(), probe.sample(), Instant::now());
    tokio::time::sleep(duration).await;
    let (c1, p1, seconds) = (
        counters.snapshot(),
        probe.sample(),
        t0.elapsed().as_secs_f64(),
    );
    window.measuring.store(false, Ordering::Relaxed);
    window.stop.store(true, Ordering::Relaxed);
    let done = c1[0] - c0[0];
    Measured {
        seconds,
        done,
        per_second: done as f64 / seconds,
        pushed_per_second: (c1[1] - c0[1]) as f64 / seconds,
        errors: c1[2] - c0[2],
        empty_pops: c1[3] - c0[3],
        cores: cpu::cores_between(&p0, &p1),
    }
}

pub fn shared() -> (Arc<Window>, Arc<Counters>) {
    (Arc::default(), Arc::default())
}

/// Microsecond latencies, 1 µs .. 60 s at 3 significant figures.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

pub fn record(h: &mut Histogram<u64>, since: Instant) {
    h.saturating_record(micros(since.elapsed()));
}

/// A duration in µs, within the histograms' bounds.
pub fn micros(d: Duration) -> u64 {
    d.as_micros().clamp(1, 60_000_000) as u64
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    Percentiles {
        count: h.len(),
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        max_us: h.max(),
    }
}

/// A JSON value for an error message, cut to its first 300 characters.
pub fn short(value: &Value) -> String {
    value.to_string().chars().take(300).collect()
}

/// A JSON payload of about `bytes` bytes.
pub fn payload(bytes: usize) -> Value {
    json!({ "data": "x".repeat(bytes.saturating_sub(12)) })
}

/// Pushes `per_partition` messages into each of `partitions` partitions
/// (`p0`, `p1`, ...) of `queue` through `pgcursor.push`, `per_call` per call
/// and the partitions in parallel (as many at once as the pool has
/// connections), with transactionIds `o1`, `o2`, ... equal to their offsets.
/// Returns the partition ids in partition order.
pub async fn seed(
    pool: &Pool,
    queue: &str,
    partitions: usize,
    per_partition: u64,
    per_call: u64,
    payload: &Value,
) -> Result<Vec<String>> {
    let tasks = (0..partitions).map(|p| {
        let pool = pool.clone();
        let (queue, payload) = (queue.to_string(), payload.clone());
        let per_call = per_call.max(1);
        tokio::spawn(async move {
            seed_partition(&pool, &queue, p, per_partition, per_call, &payload).await
        })
    });
    let mut ids = Vec::new();
    for task in futures::future::join_all(tasks).await {
        ids.push(task??);
    }
    Ok(ids)
}

async fn seed_partition(
    pool: &Pool,
    queue: &str,
    p: usize,
    per_partition: u64,
    per_call: u64,
    payload: &Value,
) -> Result<String> {
    let client = pool.get().await?;
    let mut id = String::new();
    let mut next = 1;
    while next <= per_partition {
        let last = (next + per_call - 1).min(per_partition);
        let items: Vec<Value> = (next..=last)
            .map(|o| json!({"queue": queue, "partition": format!("p{p}"), "payload": payload, "transactionId": format!("o{o}")}))
            .collect();
        let row = client
            .query_one(
                "SELECT pgcursor.push($1::jsonb)",
                &[&json!({ "items": items })],
            )
            .await?;
        let answer: Value = row.get(0);
        let tail = &answer[answer.as_array().map_or(0, |a| a.len().saturating_sub(1))];
        if tail["offset"].as_u64() != Some(last) {
            return Err(format!("seeding {queue}/p{p}: expected offset {last}, got {tail}").into());
        }
        id = tail["partitionId"].as_str().unwrap_or_default().to_string();
        next = last + 1;
    }
    Ok(id)
}
