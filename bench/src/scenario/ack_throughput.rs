//! (a) Ack throughput: `POST /api/v1/ack/batch` against calling
//! `pgcursor.ack_group` directly over a deadpool pool of the same size.
//!
//! What is measured: ack items per second. Every request is 100 (`batch`)
//! lease-less `completed` items of ONE partition naming the next `batch`
//! offsets above that partition's cursor, so every call really moves a
//! cursor by `batch`. Each worker owns its own partitions (no two workers
//! ever wait on one cursor row). When a worker has acked every seeded
//! message of a partition it starts over with a fresh consumer group (whose
//! cursor starts at 0), so the seed stays small and the run is time-bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Value};

use crate::cpu::Probe;
use crate::load::{self, Counters, Measured, Percentiles, Window};
use crate::Result;

/// How the acks reach `ack_group`.
#[derive(Clone)]
pub enum Via {
    /// `SELECT pgcursor.ack_group($1::jsonb)` on a pooled connection.
    Sql(Pool),
    /// `POST {base}/api/v1/ack/batch`.
    Http(reqwest::Client, String),
}

#[derive(Debug, Clone, Serialize)]
pub struct AckRun {
    pub via: &'static str,
    pub measured: Measured,
    pub latency: Percentiles,
}

pub struct Setup {
    /// Partition ids of the seeded queue, in partition order.
    pub partitions: Arc<Vec<String>>,
    /// Messages per partition, offsets 1..=per_partition, transactionIds `o<offset>`.
    pub per_partition: u64,
    pub batch: u64,
    pub workers: usize,
}

/// Measures every way in turns, `rounds` times, `duration / rounds` each
/// (after its own warm-up), so drift on a shared machine hits all alike.
pub async fn compare(
    vias: &[(Via, Probe)],
    setup: &Setup,
    warmup: Duration,
    duration: Duration,
    rounds: u32,
) -> Result<Vec<AckRun>> {
    let mut slices: Vec<(Vec<Measured>, Histogram<u64>)> = vias
        .iter()
        .map(|_| (Vec::new(), load::histogram()))
        .collect();
    for round in 0..rounds {
        for (i, (via, probe)) in vias.iter().enumerate() {
            let (measured, latency) =
                slice(via, round, setup, probe, warmup, duration / rounds).await?;
            slices[i].0.push(measured);
            slices[i].1.add(latency)?;
        }
    }
    Ok(vias
        .iter()
        .zip(slices)
        .map(|((via, _), (measured, latency))| AckRun {
            via: via.label(),
            measured: Measured::merge(&measured),
            latency: load::percentiles(&latency),
        })
        .collect())
}

impl Via {
    fn label(&self) -> &'static str {
        match self {
            Via::Sql(_) => "sql",
            Via::Http(..) => "http",
        }
    }
}

/// One measured slice; consumer groups are new in every slice.
async fn slice(
    via: &Via,
    round: u32,
    setup: &Setup,
    probe: &Probe,
    warmup: Duration,
    duration: Duration,
) -> Result<(Measured, Histogram<u64>)> {
    let (window, counters) = load::shared();
    let workers: Vec<_> = (0..setup.workers)
        .map(|w| {
            let owned: Vec<String> = setup
                .partitions
                .iter()
                .skip(w)
                .step_by(setup.workers)
                .cloned()
                .collect();
            let worker = Worker {
                via: via.clone(),
                owned,
                per_partition: setup.per_partition,
                batch: setup.batch,
                group_prefix: format!("ack-{}-r{round}-w{w}", via.label()),
                window: window.clone(),
                counters: counters.clone(),
            };
            tokio::spawn(worker.run())
        })
        .collect();
    let measured = load::measure(&window, &counters, probe, warmup, duration).await;
    let mut latency = load::histogram();
    for worker in workers {
        latency.add(worker.await??)?;
    }
    Ok((measured, latency))
}

struct Worker {
    via: Via,
    owned: Vec<String>,
    per_partition: u64,
    batch: u64,
    group_prefix: String,
    window: Arc<Window>,
    counters: Arc<Counters>,
}

impl Worker {
    async fn run(self) -> Result<Histogram<u64>> {
        let mut latency = load::histogram();
        // Per owned partition: (consumer group generation, offsets acked).
        let mut state = vec![(0u64, 0u64); self.owned.len()];
        let mut i = 0;
        while !self.window.stopped() {
            let (generation, acked) = &mut state[i];
            if *acked + self.batch > self.per_partition {
                *generation += 1;
                *acked = 0;
            }
            let group = format!("{}-g{generation}", self.group_prefix);
            let offsets = *acked + 1..=*acked + self.batch;
            let started = Instant::now();
            let answer = self.ack(&self.owned[i], &group, offsets).await?;
            if self.window.measuring() {
                load::record(&mut latency, started);
            }
            if all_moved(&answer, self.batch) {
                Counters::add(&self.counters.done, self.batch);
            } else {
                Counters::add(&self.counters.errors, 1);
                eprintln!("bench: unexpected ack answer: {}", load::short(&answer));
            }
            *acked += self.batch;
            i = (i + 1) % self.owned.len();
        }
        Ok(latency)
    }

    async fn ack(
        &self,
        partition: &str,
        group: &str,
        offsets: std::ops::RangeInclusive<u64>,
    ) -> Result<Value> {
        match &self.via {
            Via::Sql(pool) => {
                // The argument the gateway builds for one group (routes/ack.rs).
                let items: Vec<Value> = offsets
                    .enumerate()
                    .map(|(index, o)| json!({"index": index, "transactionId": format!("o{o}"), "status": "completed", "error": null}))
                    .collect();
                let request = json!({"partitionId": partition, "leaseId": null,
                                     "consumerGroup": group, "items": items});
                let client = pool.get().await?;
                let statement = client
                    .prepare_cached("SELECT pgcursor.ack_group($1::jsonb)")
                    .await?;
                Ok(client.query_one(&statement, &[&request]).await?.get(0))
            }
            Via::Http(http, base) => {
                let items: Vec<Value> = offsets
                    .map(|o| json!({"transactionId": format!("o{o}"), "partitionId": partition, "status": "completed"}))
                    .collect();
                let body = json!({"consumerGroup": group, "acknowledgments": items});
                let response = http
                    .post(format!("{base}/api/v1/ack/batch"))
                    .json(&body)
                    .send()
                    .await?;
                Ok(response.json().await?)
            }
        }
    }
}

/// Every item succeeded and moved the cursor (none was a no-op).
fn all_moved(answer: &Value, batch: u64) -> bool {
    answer.as_array().is_some_and(|items| {
        items.len() as u64 == batch
            && items
                .iter()
                .all(|i| i["success"] == true && i["noop"] == false)
    })
}
