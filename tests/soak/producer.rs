//! A producer: pushes numbered messages (payload: producer id and sequence
//! number; transactionId `p<producer>-s<seq>`) to random partitions of
//! queue A, a batch per request. A push without an answer is sent again,
//! identical, until it is answered: `duplicate` then says the first one
//! landed. Pauses while consumers are too far behind (flow control), so the
//! run drains in bounded time.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::log::{PushOutcome, Pushed, WorkerLog};
use crate::world::{Op, Reply, Rng, World, QUEUE_A};

/// How long one batch is retried before it is left in doubt.
const PATIENCE: Duration = Duration::from_secs(60);
const MAX_BATCH: u64 = 50;

pub fn txid(producer: usize, seq: u64) -> String {
    format!("p{producer}-s{seq}")
}

pub async fn produce(world: Arc<World>, id: usize) -> WorkerLog {
    let mut rng = Rng::new(world.settings.seed, 1000 + id as u64);
    let mut gw = id % 2;
    let mut log = WorkerLog::default();
    let mut seq = 0u64;
    while world.producing() {
        if world.backlogged() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let n = rng.range(1, MAX_BATCH);
        let batch: Vec<(u64, String)> = (seq..seq + n)
            .map(|s| {
                let p = rng.below(world.settings.partitions);
                (s, world.settings.partition_name(p))
            })
            .collect();
        seq += n;
        push_batch(&world, &mut log, &mut rng, &mut gw, id, &batch).await;
    }
    log
}

async fn push_batch(
    world: &World,
    log: &mut WorkerLog,
    rng: &mut Rng,
    gw: &mut usize,
    id: usize,
    batch: &[(u64, String)],
) {
    let items: Vec<Value> = batch
        .iter()
        .map(|(seq, partition)| {
            json!({"queue": QUEUE_A, "partition": partition, "transactionId": txid(id, *seq),
                   "payload": {"producer": id, "seq": seq}})
        })
        .collect();
    let body = json!({ "items": items });
    let first_sent = world.now();
    let mut attempts = 0;
    let answer = loop {
        attempts += 1;
        let sent = world.now();
        let reply = world
            .request(log, rng, gw, Method::POST, "/api/v1/push", Some(&body))
            .await;
        match reply {
            Reply::Ok(answer) => {
                world.succeeded(Op::Push, sent);
                break Some(answer);
            }
            Reply::Bad(status, answer) => {
                log.violations
                    .push(format!("push answered {status}: {answer}"));
                break None;
            }
            Reply::Unknown if world.now() < first_sent + PATIENCE => {
                tokio::time::sleep(Duration::from_millis(rng.range(20, 200))).await;
            }
            Reply::Unknown => break None,
        }
    };
    let answered = answer.as_ref().map(|_| world.now());
    for (i, (seq, partition)) in batch.iter().enumerate() {
        let outcome = match &answer {
            Some(answer) => check_item(log, &answer[i], i, &txid(id, *seq), partition, attempts),
            None => PushOutcome::InDoubt,
        };
        log.pushed.push(Pushed {
            producer: id,
            seq: *seq,
            outcome,
            first_sent,
            answered,
        });
    }
}

/// One item of a push answer, checked against what was sent.
fn check_item(
    log: &mut WorkerLog,
    item: &Value,
    index: usize,
    txid: &str,
    partition: &str,
    attempts: u32,
) -> PushOutcome {
    let status = item["status"].as_str().unwrap_or_default();
    let place = (
        item["partitionId"]
            .as_str()
            .and_then(|s| s.parse::<Uuid>().ok()),
        item["offset"].as_i64(),
    );
    let fits = item["index"] == json!(index)
        && item["transactionId"] == txid
        && item["partition"] == partition
        && item["queue"] == QUEUE_A
        && item["error"].is_null()
        && (status == "queued" || (status == "duplicate" && attempts > 1));
    match place {
        (Some(partition), Some(offset)) if fits && offset > 0 => {
            PushOutcome::Stored { partition, offset }
        }
        _ => {
            log.violations.push(format!(
                "push of {txid} (attempt {attempts}) answered {item}"
            ));
            PushOutcome::InDoubt
        }
    }
}
