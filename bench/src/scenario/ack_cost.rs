//! (c) Is acking the last message of a batch O(1)? For each batch size a
//! fresh consumer group pops a leased batch from offset 1; once every batch
//! is leased, ONE `ack_group` call per group with one item, the batch's last
//! offset, completes it. Only the acks are timed, in alternating batch sizes,
//! so neither drift nor the caches a 1000-message pop just swept through
//! weigh on one size more than on another. Two figures per call: the
//! client's round trip, and the server's own time for the call
//! (`clock_timestamp()` read before and after it in one target list).

use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};
use tokio_postgres::Client;

use crate::load::{self, Percentiles};
use crate::Result;

#[derive(Debug, Clone, Serialize)]
pub struct AckCost {
    pub batch: u64,
    pub round_trip: Percentiles,
    pub server: Percentiles,
}

const QUEUE: &str = "bench-ack-cost";

/// `client` must reach a database where `seed` put `max(batches)` messages
/// into partition `p0` of QUEUE.
pub async fn run(client: &Client, batches: &[u64], iterations: usize) -> Result<Vec<AckCost>> {
    let ack = client
        .prepare(
            "SELECT clock_timestamp() AS t0, pgcursor.ack_group($1::jsonb) AS answer, \
                    clock_timestamp() AS t1",
        )
        .await?;
    let pop = client.prepare("SELECT pgcursor.pop($1::jsonb)").await?;
    // Lease every batch first (leases last the queue's leaseTime, 300 s).
    let mut acks = Vec::new();
    for i in 0..iterations {
        for (b, &batch) in batches.iter().enumerate() {
            let group = format!("cost-{batch}-{i}");
            let popped: Value = client
                .query_one(
                    &pop,
                    &[&json!({"queue": QUEUE, "batch": batch, "consumerGroup": group})],
                )
                .await?
                .get(0);
            let last = &popped["messages"][batch as usize - 1];
            if last["offset"].as_u64() != Some(batch) {
                return Err(
                    format!("ack cost: a pop of {batch} did not end at offset {batch}").into(),
                );
            }
            let request = json!({
                "partitionId": popped["partitionId"], "leaseId": popped["leaseId"],
                "consumerGroup": group,
                "items": [{"index": 0, "transactionId": last["transactionId"],
                           "status": "completed", "error": null}],
            });
            acks.push((b, request));
        }
    }
    let mut round_trip: Vec<_> = batches.iter().map(|_| load::histogram()).collect();
    let mut server: Vec<_> = batches.iter().map(|_| load::histogram()).collect();
    for (b, request) in acks {
        let started = Instant::now();
        let row = client.query_one(&ack, &[&request]).await?;
        load::record(&mut round_trip[b], started);
        let answer: Value = row.get("answer");
        if answer[0]["success"] != true || answer[0]["leaseReleased"] != true {
            return Err(format!("ack cost: unexpected answer {answer}").into());
        }
        let (t0, t1): (std::time::SystemTime, std::time::SystemTime) =
            (row.get("t0"), row.get("t1"));
        let us = t1.duration_since(t0).unwrap_or_default().as_micros() as u64;
        server[b].saturating_record(us.max(1));
    }
    Ok(batches
        .iter()
        .enumerate()
        .map(|(b, &batch)| AckCost {
            batch,
            round_trip: load::percentiles(&round_trip[b]),
            server: load::percentiles(&server[b]),
        })
        .collect())
}

pub fn queue() -> &'static str {
    QUEUE
}
