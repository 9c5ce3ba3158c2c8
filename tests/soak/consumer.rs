//! Consumers. Stage A: pop a batch of queue A for one of its two groups and
//! do one random thing with each partition's share: complete it (ack the
//! last, ack each, the single route, in two steps), hand it to queue B in
//! one transaction, nack it (failed, retry, dlq) at a random message, let
//! the lease expire, ack without the lease, ack after the lease expired, or
//! force a transaction-index purge and ack after it (the stored message
//! still resolves it). Poison messages are
//! always failed, so they end in the dead-letter table. Stage B: queue B in
//! queue mode, mostly completing, sometimes failing (B discards).
//!
//! A request without an answer counts as not done: the batch is dropped and
//! comes back. A `transaction not found` (after a purge) leaves a catch-up
//! job: one big batch, acked at its end, completes past what was orphaned.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::log::{AckKind, AckRecord, AckedItem, Answer, Delivery, Status, WorkerLog};
use crate::producer::txid as producer_txid;
use crate::world::{
    CatchUp, Op, Reply, Rng, World, CATCH_UP_BATCH, GROUP_B, LEASE_A, LEASE_B, QUEUE_A, QUEUE_B,
};

/// Every error string an ack item may carry (docs/ack-contract.md §12), but
/// `database error: ...`, which says nothing is known.
pub const ACK_ERRORS: [&str; 5] = [
    "invalid or expired lease",
    "transaction not found",
    "partition not found",
    "already completed",
    "superseded by an earlier nack",
];

/// Every message `seq` with `(seq + producer) % POISON == 0` is failed by
/// every consumer, every time: it must end as a dead letter (or be
/// completed past by a catch-up).
const POISON: u64 = 199;

struct Message {
    offset: i64,
    txid: String,
    payload: Value,
}

/// One partition's share of a pop answer.
struct Slice {
    partition: Uuid,
    name: String,
    lease: Uuid,
    messages: Vec<Message>,
    /// When its pop was sent.
    popped: Duration,
}

impl Slice {
    fn last(&self) -> usize {
        self.messages.len() - 1
    }
}

struct Worker {
    world: Arc<World>,
    rng: Rng,
    gw: usize,
    log: WorkerLog,
    queue: &'static str,
    group: &'static str,
    lease_time: Duration,
}

pub async fn consume_a(world: Arc<World>, id: usize, group: &'static str) -> WorkerLog {
    let mut w = Worker::new(world, id, QUEUE_A, group, LEASE_A);
    while w.world.consuming() {
        if w.catch_up().await {
            continue;
        }
        let batch = w.rng.range(1, 20);
        let partitions = if w.rng.percent(20.0) { 2 } else { 1 };
        let path = format!(
            "/api/v1/pop/queue/{QUEUE_A}?batch={batch}&partitions={partitions}&consumerGroup={}&wait=true&timeout=1000",
            w.group
        );
        for slice in w.pop(&path).await {
            w.handle_a(slice).await;
        }
    }
    w.log
}

pub async fn consume_b(world: Arc<World>, id: usize) -> WorkerLog {
    let mut w = Worker::new(world, 100 + id, QUEUE_B, GROUP_B, LEASE_B);
    while w.world.consuming() {
        if w.catch_up().await {
            continue;
        }
        let batch = w.rng.range(1, 20);
        let path = format!("/api/v1/pop/queue/{QUEUE_B}?batch={batch}&wait=true&timeout=1000");
        for slice in w.pop(&path).await {
            w.handle_b(slice).await;
        }
    }
    w.log
}

/// A payload consistent with its transactionId (producers' and fences' in
/// A; in B, a stage-A message handed over by one group).
fn payload_fits(queue: &str, txid: &str, payload: &Value) -> bool {
    if let Some(n) = payload["fence"].as_u64() {
        return txid.starts_with(&format!("fence-{n}-{queue}-"));
    }
    let (Some(producer), Some(seq)) = (payload["producer"].as_u64(), payload["seq"].as_u64())
    else {
        return false;
    };
    let original = producer_txid(producer as usize, seq);
    match queue {
        QUEUE_A => txid == original,
        _ => payload["group"]
            .as_str()
            .is_some_and(|g| txid == b_txid(g, &original)),
    }
}

/// The transactionId in B of an A message handed over by `group`.
pub fn b_txid(group: &str, a_txid: &str) -> String {
    format!("b-{group}-{a_txid}")
}

fn is_poison(payload: &Value) -> bool {
    match (payload["producer"].as_u64(), payload["seq"].as_u64()) {
        (Some(p), Some(s)) => (s + p) % POISON == 0,
        _ => false,
    }
}

impl Worker {
    fn new(
        world: Arc<World>,
        id: usize,
        queue: &'static str,
        group: &'static str,
        lease_time: Duration,
    ) -> Worker {
        Worker {
            rng: Rng::new(world.settings.seed, 2000 + id as u64),
            gw: id % 2,
            log: WorkerLog::default(),
            world,
            queue,
            group,
            lease_time,
        }
    }

    /// One stage-A slice: one random thing to do with it.
    async fn handle_a(&mut self, slice: Slice) {
        let lease = Some(slice.lease);
        let last = slice.last();
        if let Some(k) = slice.messages.iter().position(|m| is_poison(&m.payload)) {
            return self.nack_at(&slice, k, Status::Failed).await;
        }
        let roll = self.rng.below(1000);
        match roll {
            0..=259 => self.complete(AckKind::Batch, &slice, lease, &[last]).await,
            260..=359 => {
                let all: Vec<usize> = (0..=last).collect();
                self.complete(AckKind::Batch, &slice, lease, &all).await
            }
            360..=419 => self.complete(AckKind::Single, &slice, lease, &[last]).await,
            420..=479 => self.complete_in_two_steps(&slice).await,
            480..=639 => self.hand_over(&slice).await,
            640..=719 => {
                let k = self.rng.below(slice.messages.len());
                self.nack_at(&slice, k, Status::Failed).await
            }
            720..=769 => {
                let k = self.rng.below(slice.messages.len());
                self.nack_at(&slice, k, Status::Retry).await
            }
            770..=799 => {
                let k = self.rng.below(slice.messages.len());
                self.nack_at(&slice, k, Status::Dlq).await
            }
            800..=829 => {} // let the lease expire
            830..=919 => self.complete(AckKind::Batch, &slice, None, &[last]).await,
            // Rare: it holds this consumer up for a lease time.
            920 => self.ack_stale(&slice).await,
            921..=940 if self.world.may_purge() => self.ack_after_purge(&slice).await,
            _ => self.complete(AckKind::Batch, &slice, lease, &[last]).await,
        }
    }

    /// One stage-B slice: mostly completed; B discards what fails twice.
    async fn handle_b(&mut self, slice: Slice) {
        let last = slice.last();
        match self.rng.below(100) {
            0..=5 => {
                let k = self.rng.below(slice.messages.len());
                self.nack_at(&slice, k, Status::Failed).await
            }
            6..=7 => {} // let the lease expire
            8..=9 => self.complete(AckKind::Batch, &slice, None, &[last]).await,
            _ => {
                let lease = Some(slice.lease);
                self.complete(AckKind::Batch, &slice, lease, &[last]).await
            }
        }
    }

    /// Pops; records every partition's share as a delivery and checks it.
    async fn pop(&mut self, path: &str) -> Vec<Slice> {
        let sent = self.world.now();
        let reply = self.send(Method::GET, path, None).await;
        let received = self.world.now();
        let body = match reply {
            Reply::Ok(body) => body,
            Reply::Unknown => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Vec::new();
            }
            Reply::Bad(status, body) => {
                self.violation(format!("pop {path} answered {status}: {body}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Vec::new();
            }
        };
        let slices = self.slices(&body, sent);
        if !slices.is_empty() {
            self.world.succeeded(Op::Pop, sent);
        }
        if body["success"] != true
            || body["partitionsClaimed"].as_u64().unwrap_or(0) != slices.len() as u64
        {
            self.violation(format!("pop answer not as documented: {body}"));
        }
        for slice in &slices {
            let first = &slice.messages[0];
            self.log.deliveries.push(Delivery {
                queue: self.queue,
                group: self.group,
                partition: slice.partition,
                lease: slice.lease,
                first: first.offset,
                last: first.offset + slice.messages.len() as i64 - 1,
                first_txid: first.txid.clone(),
                sent,
                received,
            });
            for (i, m) in slice.messages.iter().enumerate() {
                if m.offset != first.offset + i as i64 {
                    let before = slice.messages[i - 1].offset;
                    self.violation(format!(
                        "{} {}: in a batch from offset {}, offset {before} is followed by {}",
                        self.queue, slice.name, first.offset, m.offset
                    ));
                    break;
                }
                if !payload_fits(self.queue, &m.txid, &m.payload) {
                    self.violation(format!(
                        "{} {} offset {}: transactionId {} with payload {}",
                        self.queue, slice.name, m.offset, m.txid, m.payload
                    ));
                }
            }
        }
        slices
    }

    /// Splits a pop answer by partition, keeping the delivered order.
    fn slices(&mut self, body: &Value, popped: Duration) -> Vec<Slice> {
        let lease = body["leaseId"].as_str().and_then(|s| s.parse().ok());
        let mut slices: Vec<Slice> = Vec::new();
        for m in body["messages"].as_array().into_iter().flatten() {
            let partition = m["partitionId"].as_str().and_then(|s| s.parse().ok());
            let (Some(partition), Some(lease), Some(offset), Some(txid)) = (
                partition,
                lease,
                m["offset"].as_i64(),
                m["transactionId"].as_str(),
            ) else {
                self.violation(format!("popped message not as documented: {m}"));
                continue;
            };
            if m["leaseId"] != json!(lease)
                || m["consumerGroup"] != self.group
                || m["queue"] != self.queue
            {
                self.violation(format!(
                    "popped message of another lease, group or queue: {m}"
                ));
            }
            let message = Message {
                offset,
                txid: txid.to_string(),
                payload: m["payload"].clone(),
            };
            match slices.iter_mut().find(|s| s.partition == partition) {
                Some(slice) => slice.messages.push(message),
                None => slices.push(Slice {
                    partition,
                    name: m["partition"].as_str().unwrap_or_default().to_string(),
                    lease,
                    messages: vec![message],
                    popped,
                }),
            }
        }
        slices
    }

    async fn send(&mut self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        self.world
            .request(
                &mut self.log,
                &mut self.rng,
                &mut self.gw,
                method,
                path,
                body,
            )
            .await
    }

    fn violation(&mut self, what: String) {
        let at = self.world.now().as_secs_f64();
        self.log.violations.push(format!("{at:.2}s {what}"));
    }

    /// Completes the messages at `picks` (indexes into the slice).
    async fn complete(
        &mut self,
        kind: AckKind,
        slice: &Slice,
        lease: Option<Uuid>,
        picks: &[usize],
    ) {
        let items: Vec<(usize, Status)> = picks.iter().map(|&i| (i, Status::Completed)).collect();
        self.ack(kind, slice, lease, &items).await;
    }

    /// Some prefix first (the lease is kept), then the rest.
    async fn complete_in_two_steps(&mut self, slice: &Slice) {
        let last = slice.last();
        if last == 0 {
            return self
                .complete(AckKind::Batch, slice, Some(slice.lease), &[0])
                .await;
        }
        let k = self.rng.below(last);
        let first = self
            .ack(
                AckKind::Batch,
                slice,
                Some(slice.lease),
                &[(k, Status::Completed)],
            )
            .await;
        if first.iter().all(Answer::succeeded) {
            self.complete(AckKind::Batch, slice, Some(slice.lease), &[last])
                .await;
        }
    }

    /// A nack at message `k`, some completed items before it (or not) and
    /// some after it (those must come back superseded).
    async fn nack_at(&mut self, slice: &Slice, k: usize, status: Status) {
        let mut items = Vec::new();
        for i in 0..k {
            if self.rng.percent(50.0) {
                items.push((i, Status::Completed));
            }
        }
        items.push((k, status));
        for i in k + 1..slice.messages.len() {
            if self.rng.percent(30.0) {
                items.push((i, Status::Completed));
            }
        }
        self.ack(AckKind::Batch, slice, Some(slice.lease), &items)
            .await;
    }

    /// Waits until the lease has certainly expired, then acks with it.
    async fn ack_stale(&mut self, slice: &Slice) {
        tokio::time::sleep(self.lease_time + Duration::from_millis(300)).await;
        let last = slice.last();
        self.complete(AckKind::Stale, slice, Some(slice.lease), &[last])
            .await;
    }

    /// Forces a purge of the transaction index, then acks: the message is
    /// still stored, so the ack must still resolve (docs/http-api.md
    /// "Acknowledging") and be judged like any other; a refusal for another
    /// reason (the lease expired meanwhile) brings the batch back.
    async fn ack_after_purge(&mut self, slice: &Slice) {
        let purged = self
            .world
            .purge_and_fence(&mut self.log, &mut self.rng, &mut self.gw)
            .await;
        let last = slice.last();
        let answers = self
            .ack(
                AckKind::AfterPurge,
                slice,
                Some(slice.lease),
                &[(last, Status::Completed)],
            )
            .await;
        if purged && answers[0].error() == Some("transaction not found") {
            self.violation(format!(
                "{} {} offset {}: after the purge of the transaction index, an ack of a stored message did not resolve",
                self.queue, slice.name, slice.messages[last].offset
            ));
        }
    }

    /// Acks the last message and pushes the whole batch to queue B, in one
    /// transaction.
    async fn hand_over(&mut self, slice: &Slice) {
        let last = &slice.messages[slice.last()];
        let items: Vec<Value> = slice
            .messages
            .iter()
            .filter(|m| m.payload["fence"].is_null())
            .map(|m| {
                let mut payload = m.payload.clone();
                payload["group"] = json!(self.group);
                json!({"queue": QUEUE_B, "partition": slice.name,
                       "transactionId": b_txid(self.group, &m.txid), "payload": payload})
            })
            .collect();
        let pushed: Vec<String> = items
            .iter()
            .map(|i| i["transactionId"].as_str().unwrap().to_string())
            .collect();
        let mut operations = vec![json!({"type": "ack", "transactionId": last.txid,
            "partitionId": slice.partition, "status": "completed",
            "consumerGroup": self.group, "leaseId": slice.lease})];
        if !items.is_empty() {
            operations.push(json!({"type": "push", "items": items}));
        }
        let body = json!({"operations": operations, "requiredLeases": [slice.lease]});
        let sent = self.world.now();
        let reply = self
            .send(Method::POST, "/api/v1/transaction", Some(&body))
            .await;
        let received = self.world.now();
        let (answer, committed) = match reply {
            Reply::Ok(answer) if answer["success"] == true => {
                let pushes_ok = answer["results"][1].as_array().is_none_or(|r| {
                    r.iter()
                        .all(|i| i["status"] == "queued" || i["status"] == "duplicate")
                });
                if !pushes_ok {
                    self.violation(format!("committed bundle with a failed push: {answer}"));
                }
                let answer = self.item_answer(&answer["results"][0], 0, &last.txid);
                if answer.succeeded() {
                    self.world.succeeded(Op::Ack, sent);
                }
                (answer, true)
            }
            Reply::Ok(answer) => {
                let why = answer["error"].as_str().unwrap_or("?").to_string();
                if !ACK_ERRORS.contains(&why.as_str()) {
                    self.violation(format!("bundle refused: {answer}"));
                }
                (Answer::RolledBack(why), false)
            }
            Reply::Unknown => (Answer::Unknown, false),
            Reply::Bad(status, answer) => {
                self.violation(format!("transaction answered {status}: {answer}"));
                (Answer::Unknown, false)
            }
        };
        self.after_answer(slice, &answer, received);
        self.log.acks.push(AckRecord {
            kind: AckKind::Transaction,
            group: self.group,
            partition: slice.partition,
            lease: Some(slice.lease),
            popped: slice.popped,
            sent,
            received: matches!(answer, Answer::Item { .. } | Answer::RolledBack(_))
                .then_some(received),
            items: vec![AckedItem {
                offset: last.offset,
                txid: last.txid.clone(),
                status: Status::Completed,
                answer,
            }],
            pushed: if committed { pushed } else { Vec::new() },
        });
    }

    /// One ack request for `items` (index into the slice, status); records
    /// it and answers the per-item outcomes.
    async fn ack(
        &mut self,
        kind: AckKind,
        slice: &Slice,
        lease: Option<Uuid>,
        items: &[(usize, Status)],
    ) -> Vec<Answer> {
        let wire: Vec<Value> = items
            .iter()
            .map(|&(i, status)| {
                let mut item = json!({"transactionId": slice.messages[i].txid,
                    "partitionId": slice.partition, "status": status.as_str()});
                if let Some(lease) = lease {
                    item["leaseId"] = json!(lease);
                }
                if status.is_nack() {
                    item["error"] = json!(format!("soak {}", status.as_str()));
                }
                item
            })
            .collect();
        let (path, body) = if kind == AckKind::Single {
            let mut body = wire[0].clone();
            body["consumerGroup"] = json!(self.group);
            ("/api/v1/ack", body)
        } else {
            let body = json!({"consumerGroup": self.group, "acknowledgments": wire});
            ("/api/v1/ack/batch", body)
        };
        let sent = self.world.now();
        let reply = self.send(Method::POST, path, Some(&body)).await;
        let received = self.world.now();
        let answers: Vec<Answer> = match reply {
            Reply::Ok(Value::Array(answers)) if answers.len() == items.len() => answers
                .iter()
                .enumerate()
                .map(|(n, a)| self.item_answer(a, n, &slice.messages[items[n].0].txid))
                .collect(),
            Reply::Unknown => vec![Answer::Unknown; items.len()],
            Reply::Ok(other) | Reply::Bad(_, other) => {
                self.violation(format!("{path} answered {other} to {body}"));
                vec![Answer::Unknown; items.len()]
            }
        };
        if answers.iter().any(Answer::succeeded) {
            self.world.succeeded(Op::Ack, sent);
        }
        for (&(i, status), answer) in items.iter().zip(&answers) {
            self.check_answer(kind, slice, i, status, answer);
            self.after_answer(slice, answer, received);
        }
        self.log.acks.push(AckRecord {
            kind,
            group: self.group,
            partition: slice.partition,
            lease,
            popped: slice.popped,
            sent,
            received: answers
                .iter()
                .any(|a| !matches!(a, Answer::Unknown))
                .then_some(received),
            items: items
                .iter()
                .zip(answers.iter())
                .map(|(&(i, status), answer)| AckedItem {
                    offset: slice.messages[i].offset,
                    txid: slice.messages[i].txid.clone(),
                    status,
                    answer: answer.clone(),
                })
                .collect(),
            pushed: Vec::new(),
        });
        answers
    }

    /// One element of an ack answer, checked for shape.
    fn item_answer(&mut self, a: &Value, index: usize, txid: &str) -> Answer {
        let error = a["error"].as_str().map(str::to_string);
        // This item's group call failed (e.g. its connection died): it may
        // have committed before, so nothing is known, whatever `noop` says.
        if error
            .as_deref()
            .is_some_and(|e| e.starts_with("database error: "))
        {
            return Answer::Unknown;
        }
        let (Some(success), Some(lease_released), Some(dlq), Some(noop)) = (
            a["success"].as_bool(),
            a["leaseReleased"].as_bool(),
            a["dlq"].as_bool(),
            a["noop"].as_bool(),
        ) else {
            self.violation(format!("ack item not as documented: {a}"));
            return Answer::Unknown;
        };
        let known_error = match &error {
            None => success,
            Some(e) => !success && noop && ACK_ERRORS.contains(&e.as_str()),
        };
        if a["index"] != json!(index) || a["transactionId"] != txid || !known_error {
            self.violation(format!("ack item {index} ({txid}) answered {a}"));
        }
        Answer::Item {
            success,
            error,
            lease_released,
            dlq,
            noop,
        }
    }

    /// What docs/ack-contract.md (§7, §10, §11) says about one item, as far
    /// as one client can tell.
    fn check_answer(
        &mut self,
        kind: AckKind,
        slice: &Slice,
        i: usize,
        status: Status,
        answer: &Answer,
    ) {
        let Answer::Item {
            success,
            dlq,
            error,
            ..
        } = answer
        else {
            return;
        };
        let offset = slice.messages[i].offset;
        let at = format!(
            "{} {} offset {offset} ({})",
            self.queue,
            slice.name,
            status.as_str()
        );
        if *dlq && !(*success && matches!(status, Status::Failed | Status::Dlq)) {
            self.violation(format!("{at}: dlq:true on {answer:?}"));
        }
        // Queue A dead-letters: a dlq nack that took effect always does.
        if status == Status::Dlq && *success && !*dlq {
            self.violation(format!("{at}: a dlq nack took effect without dlq:true"));
        }
        if kind == AckKind::Stale && error.as_deref() != Some("invalid or expired lease") {
            self.violation(format!(
                "{at}: an ack with an expired lease answered {answer:?}"
            ));
        }
        if error.as_deref() == Some("partition not found") {
            self.violation(format!("{at}: partition not found"));
        }
    }

    /// `transaction not found` leaves a catch-up job (and is only possible
    /// once a purge has started).
    fn after_answer(&mut self, slice: &Slice, answer: &Answer, received: Duration) {
        if answer.error() != Some("transaction not found") {
            return;
        }
        let purge_started = self.world.purges.lock().unwrap().first().map(|p| p.0);
        if purge_started.is_none_or(|t| t > received) {
            self.violation(format!(
                "{} {}: transaction not found, and no purge ever ran",
                self.queue, slice.name
            ));
        }
        self.world.needs_catch_up(
            slice.partition,
            self.group,
            CatchUp {
                queue: self.queue,
                partition_name: slice.name.clone(),
                not_before: self.world.now() + self.lease_time,
            },
        );
    }

    /// Does one due catch-up job of this group, if any: pop everything of
    /// that partition and ack the last message. Answers whether it did one.
    async fn catch_up(&mut self) -> bool {
        let Some((partition, job)) = self.world.take_catch_up(self.group) else {
            return false;
        };
        let path = format!(
            "/api/v1/pop/queue/{}/partition/{}?batch={CATCH_UP_BATCH}&consumerGroup={}",
            job.queue, job.partition_name, self.group
        );
        // Nothing claimed: leased by someone else, or already caught up.
        // If it is still stuck, the next `transaction not found` says so again.
        for slice in self.pop(&path).await {
            if slice.partition == partition {
                let last = slice.last();
                self.complete(AckKind::Batch, &slice, Some(slice.lease), &[last])
                    .await;
            }
        }
        true
    }
}
