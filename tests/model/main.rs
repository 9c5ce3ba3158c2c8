//! Model-based property test of `pgcursor.ack_group(jsonb)`.
//!
//! Random sequences of pops, lease expiries, seeks and ack calls run against a real
//! PostgreSQL (`DATABASE_URL`) and against the pure reference model in
//! `model.rs`; after every ack the per-item results must be identical, and
//! after every step the cursor row and the dead letters must be identical.
//!
//! Every case uses its own queue (a fresh name), so cases are independent and
//! can share a database with other tests. On a mismatch the case shrinks to a
//! short operation sequence and the failure message prints that sequence
//! resolved to concrete offsets, statuses and lease ids, step by step.
//!
//! `PROPTEST_CASES` overrides the default of 500 cases.

mod model;

use std::fmt::Write as _;
use std::sync::OnceLock;

use model::{normalise, AckItem, ItemResult, Model};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, Statement};
use uuid::Uuid;

// ---------------------------------------------------------------- operations

/// One step of a case. Offsets are chosen relative to the state when the step
/// runs, so a shrunk sequence still means something.
#[derive(Clone, Debug)]
enum Op {
    /// pop with this batch size (1..=6)
    Pop(u8),
    /// the group's lease expires (lease_expires_at := now() - 1s)
    Expire,
    /// one ack_group call on the case's partition
    Ack(LeaseSel, Vec<It>),
    /// one ack_group call naming a partition that does not exist
    AckUnknownPartition(Vec<It>),
    /// pgcursor.seek_consumer_group on the case's queue
    Seek(SeekTo),
}

/// Where a seek goes. The case's messages are created one second apart.
#[derive(Clone, Copy, Debug)]
enum SeekTo {
    /// `to_end`: the head
    End,
    /// to the createdAt of message ((k - 1) mod (head + 1)) + 1, or half a
    /// second before it (`true`); "message head + 1" is an hour after the
    /// newest. Either way that message is the next one delivered.
    Message(u8, bool),
}

/// The leaseId of an ack call.
#[derive(Clone, Copy, Debug)]
enum LeaseSel {
    /// the id of the most recent pop that handed out a lease (live, expired
    /// or released by now); a never-issued id if there was none yet
    Current,
    /// `"leaseId": null`
    Null,
    /// no `leaseId` key
    Absent,
    /// a random id
    Wrong,
}

/// One ack item: which message, which status, which error.
#[derive(Clone, Debug)]
struct It(Target, St, Er);

#[derive(Clone, Copy, Debug)]
enum Target {
    /// the current batch's start + k (cursor + 1 + k without a lease), capped at head
    Batch(u8),
    /// offset ((k - 1) mod head) + 1: anywhere, below, inside or above the batch
    Abs(u8),
    /// a transactionId that was never pushed
    Unknown,
    /// a transactionId pushed to another partition of the same queue
    OtherPartition,
}

/// The status as sent (before normalisation).
#[derive(Clone, Copy, Debug)]
enum St {
    C,
    F,
    R,
    D,
    /// no `status` key
    Absent,
    /// `"status": null`
    Null,
    /// one of `BOGUS`: normalised to failed
    Bogus(u8),
}

/// The error as sent.
#[derive(Clone, Copy, Debug)]
enum Er {
    Absent,
    Null,
    Empty,
    Text(u8),
}

fn bogus() -> [Value; 8] {
    [
        json!("success"),
        json!("Completed"),
        json!("FAILED"),
        json!(""),
        json!(" dlq"),
        json!(3),
        json!({"status": "completed"}),
        json!(true),
    ]
}

impl St {
    fn json(self) -> Option<Value> {
        match self {
            St::C => Some(json!("completed")),
            St::F => Some(json!("failed")),
            St::R => Some(json!("retry")),
            St::D => Some(json!("dlq")),
            St::Absent => None,
            St::Null => Some(Value::Null),
            St::Bogus(i) => Some(bogus()[i as usize % bogus().len()].clone()),
        }
    }
}

impl Er {
    fn json(self) -> Option<Value> {
        match self {
            Er::Absent => None,
            Er::Null => Some(Value::Null),
            Er::Empty => Some(json!("")),
            Er::Text(i) => Some(json!(format!("boom-{i}"))),
        }
    }
}

/// Per-case queue parameters.
#[derive(Clone, Debug)]
struct Params {
    messages: u8,
    retry_limit: u8,
    dead_letter_queue: Option<bool>,
    dlq_after_max_retries: Option<bool>,
    /// consumer group `__QUEUE_MODE__` by leaving `consumerGroup` out
    queue_mode: bool,
}

fn flag() -> impl Strategy<Value = Option<bool>> {
    prop_oneof![Just(None), Just(Some(true)), Just(Some(false))]
}

fn params() -> impl Strategy<Value = Params> {
    (
        5u8..=15,
        0u8..=3,
        flag(),
        flag(),
        prop::bool::weighted(0.25),
    )
        .prop_map(
            |(messages, retry_limit, dead_letter_queue, dlq_after_max_retries, queue_mode)| {
                Params {
                    messages,
                    retry_limit,
                    dead_letter_queue,
                    dlq_after_max_retries,
                    queue_mode,
                }
            },
        )
}

fn item() -> impl Strategy<Value = It> {
    let target = prop_oneof![
        8 => (0u8..7).prop_map(Target::Batch),
        4 => (1u8..=15).prop_map(Target::Abs),
        1 => Just(Target::Unknown),
        1 => Just(Target::OtherPartition),
    ];
    let status = prop_oneof![
        8 => Just(St::C),
        4 => Just(St::F),
        3 => Just(St::R),
        2 => Just(St::D),
        1 => Just(St::Absent),
        1 => Just(St::Null),
        2 => (0u8..8).prop_map(St::Bogus),
    ];
    let error = prop_oneof![
        4 => Just(Er::Absent),
        2 => Just(Er::Null),
        1 => Just(Er::Empty),
        3 => (0u8..3).prop_map(Er::Text),
    ];
    (target, status, error).prop_map(|(t, s, e)| It(t, s, e))
}

fn op() -> impl Strategy<Value = Op> {
    let lease = prop_oneof![
        4 => Just(LeaseSel::Current),
        2 => Just(LeaseSel::Null),
        1 => Just(LeaseSel::Absent),
        1 => Just(LeaseSel::Wrong),
    ];
    prop_oneof![
        6 => (1u8..=6).prop_map(Op::Pop),
        2 => Just(Op::Expire),
        14 => (lease, vec(item(), 1..=5)).prop_map(|(l, items)| Op::Ack(l, items)),
        1 => vec(item(), 1..=3).prop_map(Op::AckUnknownPartition),
        2 => prop_oneof![
            1 => Just(SeekTo::End),
            3 => (1u8..=16, any::<bool>()).prop_map(|(k, half)| SeekTo::Message(k, half)),
        ]
        .prop_map(Op::Seek),
    ]
}

// ---------------------------------------------------------------- database

struct Env {
    rt: Runtime,
    client: Client,
    st: Stmts,
}

struct Stmts {
    configure: Statement,
    push: Statement,
    pop: Statement,
    ack: Statement,
    expire: Statement,
    cursor_row: Statement,
    dead_letters: Statement,
    drop_queue: Statement,
    space_out: Statement,
    seek: Statement,
    ack_steps: Statement,
}

/// One runtime and one connection for the whole property. Without
/// `DATABASE_URL` the property fails: it must never pass having run nothing.
fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let url = std::env::var("DATABASE_URL")
            .expect("DATABASE_URL is not set: run the model property via `make test`");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let (client, st) = rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(&url, NoTls)
                .await
                .unwrap_or_else(|e| panic!("connect to DATABASE_URL: {e}"));
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    eprintln!("model: connection error: {e}");
                }
            });
            let j = |sql: &'static str| {
                let client = &client;
                async move {
                    client
                        .prepare_typed(sql, &[Type::JSONB])
                        .await
                        .unwrap_or_else(|e| panic!("prepare {sql}: {e}"))
                }
            };
            let configure = j("SELECT pgcursor.configure($1)").await;
            let push = j("SELECT pgcursor.push($1)").await;
            let pop = j("SELECT pgcursor.pop($1)").await;
            let ack = j("SELECT pgcursor.ack_group($1)").await;
            let p = |sql: &'static str| {
                let client = &client;
                async move {
                    client
                        .prepare(sql)
                        .await
                        .unwrap_or_else(|e| panic!("prepare {sql}: {e}"))
                }
            };
            let expire = p(
                "UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 second' \
                 WHERE partition_id = $1 AND consumer_group = $2 AND lease_id IS NOT NULL",
            )
            .await;
            let cursor_row = p(
                "SELECT cursor, lease_id, lease_expires_at > now(), batch_start, batch_end, \
                        retry_count::bigint, dead_lettered_total, discarded_total \
                 FROM pgcursor.cursors WHERE partition_id = $1 AND consumer_group = $2",
            )
            .await;
            let dead_letters = p(
                "SELECT msg_offset, transaction_id, payload, error FROM pgcursor.dead_letters \
                 WHERE partition_id = $1 AND consumer_group = $2 ORDER BY msg_offset, failed_at",
            )
            .await;
            let drop_queue = p("SELECT pgcursor.delete_queue($1)").await;
            // Message i of n created n - i + 1 seconds ago: a time names one message.
            let space_out = p(
                "UPDATE pgcursor.messages m SET created_at = now() - (h.head - m.msg_offset + 1) * interval '1 second' \
                 FROM pgcursor.partition_heads h WHERE h.partition_id = m.partition_id AND h.partition_id = $1",
            )
            .await;
            // $3: the message to deliver next (none: an hour after the newest),
            // $4: milliseconds before its createdAt; $5: to the end instead.
            let seek = p(
                "SELECT pgcursor.seek_consumer_group($1, $2, coalesce( \
                     (SELECT m.created_at - $4::int * interval '1 millisecond' FROM pgcursor.messages m \
                       WHERE m.partition_id = $6 AND m.msg_offset = $3::bigint), now() + interval '1 hour'), $5)",
            )
            .await;
            // ack_group's own steps on the current row, read-only: what
            // resolve_ack_items, tally_ack_items and decide_ack make of the request.
            let ack_steps = p(
                "WITH i AS (SELECT pgcursor_internal.resolve_ack_items($1::uuid, pgcursor_internal.transaction_index_horizon( \
                                                                 q.transaction_index_from, q.transaction_index_retention_seconds), \
                                                                 $2::jsonb -> 'items', \
                                                                 coalesce((SELECT c.cursor FROM pgcursor.cursors c \
                                                                            WHERE c.partition_id = p.id \
                                                                              AND c.consumer_group = $3::text), 0), \
                                                                 coalesce((SELECT pgcursor_internal.delivered_to(c) FROM pgcursor.cursors c \
                                                                            WHERE c.partition_id = p.id \
                                                                              AND c.consumer_group = $3::text), 0)) AS items \
                              FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue WHERE p.id = $1::uuid) \
                 SELECT (SELECT array_agg(x.msg_offset ORDER BY x.ord) FROM unnest(i.items) x), \
                        d.nack_at, d.nack_status, d.prefix, d.new_cursor, d.new_retry_count::bigint, \
                        d.lease_released, d.terminal, d.dead_lettered, d.reason \
                 FROM i, pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue \
                      JOIN pgcursor.cursors c ON c.partition_id = p.id AND c.consumer_group = $3::text, \
                      LATERAL pgcursor_internal.decide_ack( \
                          q, c, i.items, pgcursor_internal.tally_ack_items(i.items, c.cursor)) d \
                 WHERE p.id = $1::uuid",
            )
            .await;
            let st = Stmts {
                configure,
                push,
                pop,
                ack,
                expire,
                cursor_row,
                dead_letters,
                drop_queue,
                space_out,
                seek,
                ack_steps,
            };
            (client, st)
        });
        Env { rt, client, st }
    })
}

impl Env {
    async fn call(&self, stmt: &Statement, arg: &Value) -> Result<Value, String> {
        let row = self
            .client
            .query_one(stmt, &[arg])
            .await
            .map_err(|e| format!("database error calling with {arg}: {e:?}"))?;
        row.try_get::<_, Option<Value>>(0)
            .map_err(|e| format!("result of {arg}: {e}"))?
            .ok_or_else(|| format!("NULL result for {arg}"))
    }
}

/// The cursor row (absent row = cursor 0, no lease) and the dead letters.
#[derive(Debug, PartialEq)]
struct Snapshot {
    cursor: i64,
    /// (lease_id, live, batch_start, batch_end): all None when released
    lease: (Option<Uuid>, Option<bool>, Option<i64>, Option<i64>),
    retry_count: i64,
    dead_lettered_total: i64,
    discarded_total: i64,
    /// (offset, transactionId, payload, error)
    dead_letters: Vec<(i64, String, Value, String)>,
}

fn payload(offset: i64) -> Value {
    json!({ "n": offset })
}

fn expected_snapshot(m: &Model) -> Snapshot {
    // As the database lists them: by offset, then in the order written (a
    // seek back can dead-letter a lower offset, or one offset again, later).
    let mut dead_letters: Vec<_> = m
        .dead_letters
        .iter()
        .map(|d| {
            (
                d.offset,
                m.txids[d.offset as usize - 1].clone(),
                payload(d.offset),
                d.reason.clone(),
            )
        })
        .collect();
    dead_letters.sort_by_key(|d| d.0);
    Snapshot {
        cursor: m.cursor,
        lease: match &m.lease {
            None => (None, None, None, None),
            Some(l) => (
                Some(l.id),
                Some(!l.expired),
                Some(l.batch_start),
                Some(l.batch_end),
            ),
        },
        retry_count: m.retry_count,
        dead_lettered_total: m.dead_letters.len() as i64,
        discarded_total: m.discarded,
        dead_letters,
    }
}

async fn db_snapshot(env: &Env, partition: Uuid, group: &str) -> Result<Snapshot, String> {
    let rows = env
        .client
        .query(&env.st.cursor_row, &[&partition, &group])
        .await
        .map_err(|e| format!("reading the cursor row: {e:?}"))?;
    let dls = env
        .client
        .query(&env.st.dead_letters, &[&partition, &group])
        .await
        .map_err(|e| format!("reading dead letters: {e:?}"))?;
    let dead_letters = dls
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    Ok(match rows.first() {
        None => Snapshot {
            cursor: 0,
            lease: (None, None, None, None),
            retry_count: 0,
            dead_lettered_total: 0,
            discarded_total: 0,
            dead_letters,
        },
        Some(r) => Snapshot {
            cursor: r.get(0),
            lease: (r.get(1), r.get(2), r.get(3), r.get(4)),
            retry_count: r.get(5),
            dead_lettered_total: r.get(6),
            discarded_total: r.get(7),
            dead_letters,
        },
    })
}

fn parse_results(v: &Value) -> Result<Vec<ItemResult>, String> {
    let arr = v
        .as_array()
        .ok_or_else(|| format!("ack_group answered a non-array: {v}"))?;
    arr.iter()
        .map(|r| {
            let bool_field = |k: &str| {
                r.get(k)
                    .and_then(Value::as_bool)
                    .ok_or_else(|| format!("result item without boolean {k}: {r}"))
            };
            Ok(ItemResult {
                index: r
                    .get("index")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| format!("result item without integer index: {r}"))?,
                transaction_id: r
                    .get("transactionId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("result item without transactionId: {r}"))?
                    .to_string(),
                success: bool_field("success")?,
                error: match r.get("error") {
                    Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    _ => return Err(format!("result item without string/null error: {r}")),
                },
                lease_released: bool_field("leaseReleased")?,
                dlq: bool_field("dlq")?,
                noop: bool_field("noop")?,
            })
        })
        .collect()
}

fn show_result(r: &ItemResult) -> String {
    format!(
        "#{} {} success={} error={:?} leaseReleased={} dlq={} noop={}",
        r.index, r.transaction_id, r.success, r.error, r.lease_released, r.dlq, r.noop
    )
}

fn show_model(m: &Model) -> String {
    let lease = match &m.lease {
        None => "none".to_string(),
        Some(l) => format!(
            "{}..{} {} {}",
            l.batch_start,
            l.batch_end,
            if l.expired { "expired" } else { "live" },
            short(l.id)
        ),
    };
    format!(
        "cursor={} lease={lease} retry={} dl={:?} discarded={}",
        m.cursor,
        m.retry_count,
        m.dead_letters
            .iter()
            .map(|d| (d.offset, d.reason.as_str()))
            .collect::<Vec<_>>(),
        m.discarded
    )
}

fn short(id: Uuid) -> String {
    id.simple().to_string()[24..].to_string()
}

// ---------------------------------------------------------------- one case

struct Case<'a> {
    env: &'a Env,
    queue: String,
    partition: Uuid,
    queue_mode: bool,
    model: Model,
    last_lease: Option<Uuid>,
    /// whether the group has a cursor row (made by a pop, or by an ack on the
    /// partition that changed something): a seek moves existing rows only
    has_row: bool,
    log: String,
}

impl Case<'_> {
    fn group(&self) -> &'static str {
        if self.queue_mode {
            "__QUEUE_MODE__"
        } else {
            "g"
        }
    }

    fn fail(&self, what: String) -> String {
        format!(
            "{what}\n--- steps so far (queue {}, partition {}):\n{}",
            self.queue, self.partition, self.log
        )
    }

    /// The offset an item names, resolved against the current state.
    fn txid(&self, t: Target) -> String {
        let head = self.model.head();
        match t {
            Target::Batch(k) => {
                let base = self
                    .model
                    .lease
                    .as_ref()
                    .map_or(self.model.cursor + 1, |l| l.batch_start);
                format!("t{}", (base + k as i64).clamp(1, head))
            }
            Target::Abs(k) => format!("t{}", (k as i64 - 1).rem_euclid(head) + 1),
            Target::Unknown => "never-pushed".into(),
            Target::OtherPartition => "o1".into(),
        }
    }

    async fn pop(&mut self, batch: u8) -> Result<(), String> {
        let mut req = json!({"queue": self.queue, "partition": "P", "batch": batch});
        if !self.queue_mode {
            req["consumerGroup"] = json!("g");
        }
        let resp = self
            .env
            .call(&self.env.st.pop, &req)
            .await
            .map_err(|e| self.fail(e))?;
        let lease = match resp.get("leaseId") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_str()
                    .and_then(|s| Uuid::parse_str(s).ok())
                    .ok_or_else(|| self.fail(format!("pop: leaseId not a uuid: {resp}")))?,
            ),
        };
        let got: Vec<(i64, String)> = resp
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| self.fail(format!("pop: no messages array: {resp}")))?
            .iter()
            .map(|m| {
                (
                    m.get("offset").and_then(Value::as_i64).unwrap_or(-1),
                    m.get("transactionId")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string(),
                )
            })
            .collect();
        let before = show_model(&self.model);
        let popped = self.model.pop(batch as i64, lease.unwrap_or(Uuid::nil()));
        let want: Vec<(i64, String)> = popped.as_ref().map_or(Vec::new(), |p| {
            (p.start..=p.end)
                .map(|o| (o, self.model.txids[o as usize - 1].clone()))
                .collect()
        });
        let _ = writeln!(
            self.log,
            "pop({batch})  [{before}] -> {}",
            match &popped {
                None => "nothing".to_string(),
                Some(p) => format!(
                    "{}..{} lease {}",
                    p.start,
                    p.end,
                    short(lease.unwrap_or_default())
                ),
            }
        );
        if got != want || popped.is_some() != lease.is_some() {
            return Err(self.fail(format!(
                "pop({batch}) mismatch: model {want:?} (lease expected: {}), database {got:?} leaseId {lease:?}\n{resp}",
                popped.is_some()
            )));
        }
        if lease.is_some() {
            self.last_lease = lease;
        }
        self.has_row = true;
        Ok(())
    }

    async fn seek(&mut self, to: SeekTo) -> Result<(), String> {
        let head = self.model.head();
        let (next, before_ms, to_end) = match to {
            SeekTo::End => (head + 1, 0, true),
            SeekTo::Message(k, half) => (
                (k as i64 - 1).rem_euclid(head + 1) + 1,
                if half { 500 } else { 0 },
                false,
            ),
        };
        let answer = self
            .env
            .client
            .query_one(
                &self.env.st.seek,
                &[
                    &self.group(),
                    &self.queue,
                    &next,
                    &before_ms,
                    &to_end,
                    &self.partition,
                ],
            )
            .await
            .map_err(|e| self.fail(format!("seek: {e:?}")))?;
        let before = show_model(&self.model);
        if self.has_row {
            self.model.seek(next - 1);
        }
        let _ = writeln!(
            self.log,
            "seek({to:?}: next {next}) [{before}] -> [{}] {}",
            show_model(&self.model),
            answer.get::<_, Value>(0)
        );
        Ok(())
    }

    async fn expire(&mut self) -> Result<(), String> {
        self.env
            .client
            .execute(&self.env.st.expire, &[&self.partition, &self.group()])
            .await
            .map_err(|e| self.fail(format!("expire: {e:?}")))?;
        self.model.expire();
        let _ = writeln!(self.log, "expire");
        Ok(())
    }

    async fn ack(&mut self, lease: Option<LeaseSel>, items: &[It]) -> Result<(), String> {
        let partition_known = lease.is_some();
        let partition = if partition_known {
            self.partition
        } else {
            Uuid::now_v7()
        };
        let mut req = Map::new();
        req.insert("partitionId".into(), json!(partition));
        if !self.queue_mode {
            req.insert("consumerGroup".into(), json!("g"));
        }
        let lease_id = match lease {
            Some(LeaseSel::Current) => Some(self.last_lease.unwrap_or_else(Uuid::now_v7)),
            Some(LeaseSel::Wrong) => Some(Uuid::now_v7()),
            Some(LeaseSel::Null) | None => {
                req.insert("leaseId".into(), Value::Null);
                None
            }
            Some(LeaseSel::Absent) => None,
        };
        if let Some(id) = lease_id {
            req.insert("leaseId".into(), json!(id));
        }
        let mut sent = Vec::new();
        let mut model_items = Vec::new();
        let mut shown = Vec::new();
        for (k, It(target, st, er)) in items.iter().enumerate() {
            let index = 3 * k as i64 + 1;
            let txid = self.txid(*target);
            let mut o = Map::new();
            o.insert("index".into(), json!(index));
            o.insert("transactionId".into(), json!(txid));
            let status = st.json();
            if let Some(s) = &status {
                o.insert("status".into(), s.clone());
            }
            if let Some(e) = er.json() {
                o.insert("error".into(), e);
            }
            shown.push(format!(
                "{txid}:{}{}",
                status
                    .as_ref()
                    .map_or("(absent)".to_string(), |s| s.to_string()),
                er.json().map_or(String::new(), |e| format!("/{e}"))
            ));
            sent.push(Value::Object(o));
            model_items.push(AckItem {
                index,
                transaction_id: txid,
                status: normalise(status.as_ref()),
                error: er.json().and_then(|e| e.as_str().map(str::to_string)),
            });
        }
        req.insert("items".into(), Value::Array(sent));
        let req = Value::Object(req);

        if self.model.refusal(partition_known, lease_id).is_none() {
            self.compare_ack_steps(&req, &model_items).await?;
        }
        let before = show_model(&self.model);
        let want = self.model.ack(partition_known, lease_id, &model_items);
        // An ack that changes nothing leaves a group without a row as it
        // found it (docs/ack-contract.md, step 1).
        self.has_row |= partition_known && show_model(&self.model) != before;
        let lease_desc = match (lease, lease_id) {
            (None, _) => "unknown partition".to_string(),
            (Some(sel), Some(id)) => format!("{sel:?} {}", short(id)),
            (Some(sel), None) => format!("{sel:?}"),
        };
        let _ = writeln!(
            self.log,
            "ack({lease_desc}) [{}]  [{before}] -> [{}]",
            shown.join(", "),
            show_model(&self.model)
        );
        let resp = self
            .env
            .call(&self.env.st.ack, &req)
            .await
            .map_err(|e| self.fail(e))?;
        let got = parse_results(&resp).map_err(|e| self.fail(e))?;
        if got != want {
            let mut msg = format!("ack_group results differ\nrequest {req}\n");
            for (i, w) in want.iter().enumerate() {
                let g = got.get(i).map_or("(missing)".to_string(), show_result);
                let mark = if got.get(i) == Some(w) { " " } else { "*" };
                let _ = writeln!(
                    msg,
                    "{mark} model    {}\n{mark} database {g}",
                    show_result(w)
                );
            }
            for g in got.iter().skip(want.len()) {
                let _ = writeln!(msg, "* extra    {}", show_result(g));
            }
            return Err(self.fail(msg));
        }
        Ok(())
    }

    /// The model's steps against the SQL's, in the order ack_group runs
    /// them: the first that differs is named. (No cursor row yet: nothing
    /// to decide against; the answers are still compared after the call.)
    async fn compare_ack_steps(&self, req: &Value, items: &[AckItem]) -> Result<(), String> {
        let (offsets, d) = self.model.ack_steps(items);
        let row = self
            .env
            .client
            .query_opt(
                &self.env.st.ack_steps,
                &[&self.partition, req, &self.group()],
            )
            .await
            .map_err(|e| self.fail(format!("ack steps: {e:?}")))?;
        let Some(row) = row else { return Ok(()) };
        let decision = |cursor: i64,
                        retry: i64,
                        released: bool,
                        terminal: bool,
                        dead: bool,
                        reason: Option<&str>| {
            format!("cursor {cursor}, retry count {retry}, lease released {released}, terminal {terminal}, dead-lettered {dead}, reason {reason:?}")
        };
        let lease_released = d.release || self.model.lease.is_none();
        let steps = [
            (
                "resolve_ack_items (offsets)",
                format!("{offsets:?}"),
                format!(
                    "{:?}",
                    row.get::<_, Option<Vec<Option<i64>>>>(0)
                        .unwrap_or_default()
                ),
            ),
            (
                "lowest_nack",
                format!("{:?}", d.nack_at),
                format!("{:?}", row.get::<_, Option<i64>>(1)),
            ),
            (
                "effective_status",
                format!("{:?}", d.nack_status.map(|s| s.name())),
                format!("{:?}", row.get::<_, Option<&str>>(2)),
            ),
            (
                "completed_prefix",
                d.prefix.to_string(),
                row.get::<_, i64>(3).to_string(),
            ),
            (
                "decide_ack",
                decision(
                    d.cursor,
                    d.retry_count,
                    lease_released,
                    d.terminal,
                    d.dead_lettered,
                    d.reason.as_deref(),
                ),
                decision(
                    row.get(4),
                    row.get(5),
                    row.get(6),
                    row.get(7),
                    row.get(8),
                    row.get(9),
                ),
            ),
        ];
        match steps.iter().find(|(_, model, db)| model != db) {
            None => Ok(()),
            Some((step, model, db)) => Err(self.fail(format!(
                "step {step} differs\nrequest  {req}\nmodel    {model}\ndatabase {db}"
            ))),
        }
    }

    async fn check_state(&self) -> Result<(), String> {
        let got = db_snapshot(self.env, self.partition, self.group())
            .await
            .map_err(|e| self.fail(e))?;
        let want = expected_snapshot(&self.model);
        if got != want {
            return Err(self.fail(format!(
                "state differs after the last step\nmodel    {want:?}\ndatabase {got:?}"
            )));
        }
        Ok(())
    }
}

async fn run_case(env: &'static Env, p: &Params, ops: &[Op]) -> Result<(), String> {
    let queue = format!("model-{}", Uuid::now_v7());
    let opts = json!({
        "queue": queue,
        "options": {
            "retryLimit": p.retry_limit,
            "deadLetterQueue": p.dead_letter_queue,
            "dlqAfterMaxRetries": p.dlq_after_max_retries,
        }
    });
    env.call(&env.st.configure, &opts).await?;
    let n = p.messages as i64;
    let txids: Vec<String> = (1..=n).map(|i| format!("t{i}")).collect();
    let mut items: Vec<Value> = (1..=n)
        .map(|i| {
            json!({"queue": queue, "partition": "P", "payload": payload(i),
                   "transactionId": txids[i as usize - 1]})
        })
        .collect();
    items.push(json!({"queue": queue, "partition": "Other", "payload": {}, "transactionId": "o1"}));
    let pushed = env.call(&env.st.push, &json!({ "items": items })).await?;
    let pushed = pushed
        .as_array()
        .ok_or_else(|| format!("push answered {pushed}"))?;
    for (i, r) in pushed.iter().take(n as usize).enumerate() {
        if r.get("offset").and_then(Value::as_i64) != Some(i as i64 + 1) {
            return Err(format!("push item {i} did not get offset {}: {r}", i + 1));
        }
    }
    let partition = pushed[0]
        .get("partitionId")
        .and_then(Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| format!("push answered no partitionId: {}", pushed[0]))?;

    let model = Model::new(
        txids,
        p.retry_limit as i64,
        p.dead_letter_queue,
        p.dlq_after_max_retries,
    );
    let mut case = Case {
        env,
        queue: queue.clone(),
        partition,
        queue_mode: p.queue_mode,
        model,
        last_lease: None,
        has_row: false,
        log: format!("{p:?}\n"),
    };
    env.client
        .execute(&env.st.space_out, &[&partition])
        .await
        .map_err(|e| format!("spacing out the messages: {e:?}"))?;
    case.check_state().await?;
    for op in ops {
        match op {
            Op::Pop(b) => case.pop(*b).await?,
            Op::Expire => case.expire().await?,
            Op::Ack(sel, items) => case.ack(Some(*sel), items).await?,
            Op::AckUnknownPartition(items) => case.ack(None, items).await?,
            Op::Seek(to) => case.seek(*to).await?,
        }
        case.check_state().await?;
    }
    // Passed: delete the queue (pgcursor.delete_queue, which removes its messages too) so repeated runs do not pile up rows.
    env.client
        .execute(&env.st.drop_queue, &[&queue])
        .await
        .map_err(|e| format!("dropping {queue}: {e:?}"))?;
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    ProptestConfig {
        cases,
        // Each shrink step is a full case against the database.
        max_shrink_iters: 4096,
        // No regression files in the source tree; a failure prints its
        // shrunk sequence, which is the thing to put in a report or a test.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ack_group_matches_the_model(p in params(), ops in vec(op(), 1..=24)) {
        let env = env();
        if let Err(msg) = env.rt.block_on(run_case(env, &p, &ops)) {
            return Err(TestCaseError::fail(msg));
        }
    }
}
