//! The systems compared end to end, each as push / pop / ack:
//! pgcursor through SQL, pgcursor over HTTP, and pgmq through SQL
//! (`send_batch` → `read` → `archive` or `delete`).
//!
//! A pgcursor consumer acks a delivery by its last message: an ack commits
//! the cursor, so acking offset N completes the whole batch
//! (docs/ack-contract.md §1: acking the last message finishes the batch). pgmq has no cursor and archives or
//! deletes every id. `pgcursor-sql-every-item` acks each message instead,
//! for comparison (not in the default set).
//!
//! Fan-out (g): a pgcursor broker can read for a consumer group (`in_group`);
//! pgmq has none, so its producer side is `PgmqFanOut`, sending every batch
//! to one queue per group.

use deadpool_postgres::Pool;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    PgcursorSql,
    PgcursorSqlEveryItem,
    PgcursorHttp,
    PgmqArchive,
    PgmqDelete,
}

impl System {
    pub const ALL: [System; 4] = [
        System::PgcursorSql,
        System::PgcursorHttp,
        System::PgmqArchive,
        System::PgmqDelete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            System::PgcursorSql => "pgcursor (SQL)",
            System::PgcursorSqlEveryItem => "pgcursor (SQL, ack every item)",
            System::PgcursorHttp => "pgcursor (HTTP)",
            System::PgmqArchive => "pgmq read→archive",
            System::PgmqDelete => "pgmq read→delete",
        }
    }
}

/// A connected system, pointed at one queue.
#[derive(Clone)]
pub enum Broker {
    PgcursorSql {
        pool: Pool,
        queue: String,
        ack_every_item: bool,
        /// None: queue mode (pgcursor's default group).
        group: Option<String>,
    },
    PgcursorHttp {
        http: reqwest::Client,
        base: String,
        queue: String,
    },
    Pgmq {
        pool: Pool,
        queue: String,
        archive: bool,
    },
    /// Producer side only: every batch goes to each of `queues`.
    PgmqFanOut { pool: Pool, queues: Vec<String> },
}

/// What a pop handed out, and what its ack needs.
pub enum Delivery {
    Pgcursor {
        partition_id: String,
        /// The partition's name (`p3`): where a scenario puts messages back.
        partition: String,
        lease_id: String,
        transaction_ids: Vec<String>,
    },
    Pgmq {
        ids: Vec<i64>,
    },
}

impl Delivery {
    pub fn len(&self) -> usize {
        match self {
            Delivery::Pgcursor {
                transaction_ids, ..
            } => transaction_ids.len(),
            Delivery::Pgmq { ids } => ids.len(),
        }
    }

    /// The pgcursor partition's name (`p3`); pgmq has none.
    pub fn partition(&self) -> Option<&str> {
        match self {
            Delivery::Pgcursor { partition, .. } => Some(partition),
            Delivery::Pgmq { .. } => None,
        }
    }
}

impl Broker {
    /// A fresh, empty queue for one run (pgmq's is created here; pgcursor's
    /// queue and partitions are created by the first push).
    pub async fn new(
        system: System,
        pool: &Pool,
        gateway: Option<&str>,
        queue: String,
    ) -> Result<Broker> {
        if matches!(
            system,
            System::PgcursorSql | System::PgcursorSqlEveryItem | System::PgcursorHttp
        ) {
            // Consumers may look before the first push: the queue must exist.
            pool.get()
                .await?
                .execute(
                    "SELECT pgcursor.configure($1::jsonb)",
                    &[&json!({ "queue": queue })],
                )
                .await?;
        }
        Ok(match system {
            System::PgcursorSql | System::PgcursorSqlEveryItem => Broker::PgcursorSql {
                pool: pool.clone(),
                queue,
                ack_every_item: system == System::PgcursorSqlEveryItem,
                group: None,
            },
            System::PgcursorHttp => Broker::PgcursorHttp {
                http: reqwest::Client::new(),
                base: gateway
                    .ok_or("the HTTP system needs the gateway")?
                    .to_string(),
                queue,
            },
            System::PgmqArchive | System::PgmqDelete => {
                pool.get()
                    .await?
                    .execute("SELECT pgmq.create($1)", &[&queue])
                    .await?;
                Broker::Pgmq {
                    pool: pool.clone(),
                    queue,
                    archive: system == System::PgmqArchive,
                }
            }
        })
    }

    /// The same pgcursor queue, read by consumer group `group`: every group
    /// gets every message (SQL only).
    pub fn in_group(&self, group: String) -> Result<Broker> {
        match self {
            Broker::PgcursorSql {
                pool,
                queue,
                ack_every_item,
                ..
            } => Ok(Broker::PgcursorSql {
                pool: pool.clone(),
                queue: queue.clone(),
                ack_every_item: *ack_every_item,
                group: Some(group),
            }),
            _ => Err("consumer groups: pgcursor through SQL only".into()),
        }
    }

    /// One batch into one partition (pgmq has no partitions: its one queue).
    pub async fn push(&self, partition: usize, payloads: &[Value]) -> Result<()> {
        match self {
            Broker::PgcursorSql { pool, queue, .. } => {
                // push_items, as the gateway pushes (and as pgmq's send_batch takes jsonb[])
                let client = pool.get().await?;
                let statement = client
                    .prepare_cached(
                        "SELECT count(*) FILTER (WHERE status = 'queued') \
                         FROM pgcursor.push_items($1::text[], $2::jsonb[], $3::text[])",
                    )
                    .await?;
                let queues = vec![queue.as_str(); payloads.len()];
                let partitions = vec![format!("p{partition}"); payloads.len()];
                let queued: i64 = client
                    .query_one(&statement, &[&queues, &payloads, &partitions])
                    .await?
                    .get(0);
                match queued as usize == payloads.len() {
                    true => Ok(()),
                    false => {
                        Err(format!("push_items queued {queued} of {}", payloads.len()).into())
                    }
                }
            }
            Broker::PgcursorHttp { http, base, queue } => {
                let request = push_request(queue, partition, payloads);
                let response = http
                    .post(format!("{base}/api/v1/push"))
                    .json(&request)
                    .send()
                    .await?;
                let items: Vec<IgnoredAny> = read_json(response, "push").await?;
                match items.len() == payloads.len() {
                    true => Ok(()),
                    false => {
                        Err(
                            format!("push: {} answers for {} items", items.len(), payloads.len())
                                .into(),
                        )
                    }
                }
            }
            Broker::Pgmq { pool, queue, .. } => {
                let client = pool.get().await?;
                let statement = client
                    .prepare_cached("SELECT pgmq.send_batch($1, $2::jsonb[])")
                    .await?;
                let ids = client.query(&statement, &[queue, &payloads]).await?;
                match ids.len() == payloads.len() {
                    true => Ok(()),
                    false => Err(format!("send_batch returned {} ids", ids.len()).into()),
                }
            }
            Broker::PgmqFanOut { pool, queues } => {
                // One statement, so one transaction and one commit for all
                // the copies: pgmq's cheapest way to fan a batch out.
                let client = pool.get().await?;
                let statement = client
                    .prepare_cached(
                        "SELECT count(*) FROM unnest($1::text[]) q, \
                         LATERAL pgmq.send_batch(q, $2::jsonb[])",
                    )
                    .await?;
                let n: i64 = client
                    .query_one(&statement, &[queues, &payloads])
                    .await?
                    .get(0);
                match n as usize == payloads.len() * queues.len() {
                    true => Ok(()),
                    false => Err(format!("fan-out send_batch returned {n} ids").into()),
                }
            }
        }
    }

    /// Up to `batch` messages, payloads included; `None` when nothing is ready.
    pub async fn pop(&self, batch: usize) -> Result<Option<Delivery>> {
        match self {
            Broker::PgcursorSql {
                pool, queue, group, ..
            } => {
                let mut request = json!({"queue": queue, "batch": batch});
                if let Some(group) = group {
                    request["consumerGroup"] = json!(group);
                }
                // pop_messages, as the gateway pops; the payloads are read as pgmq's are
                let client = pool.get().await?;
                let statement = client
                    .prepare_cached(
                        "SELECT partition_id::text, partition, lease_id::text, transaction_id, payload \
                         FROM pgcursor.pop_messages($1::jsonb)",
                    )
                    .await?;
                let rows = client.query(&statement, &[&request]).await?;
                let transaction_ids: Vec<String> = rows
                    .iter()
                    .filter_map(|r| {
                        let _payload: Option<Value> = r.get(4);
                        r.get(3)
                    })
                    .collect();
                let first = rows.first().ok_or("pop_messages answered no row")?;
                Ok((!transaction_ids.is_empty()).then(|| Delivery::Pgcursor {
                    partition_id: first.get(0),
                    partition: first.get(1),
                    lease_id: first.get(2),
                    transaction_ids,
                }))
            }
            Broker::PgcursorHttp { http, base, queue } => {
                let response = http
                    .get(format!("{base}/api/v1/pop/queue/{queue}?batch={batch}"))
                    .send()
                    .await?;
                Ok(read_json::<PopAnswer>(response, "pop").await?.delivery())
            }
            Broker::Pgmq { pool, queue, .. } => {
                let client = pool.get().await?;
                let statement = client
                    .prepare_cached("SELECT msg_id, message FROM pgmq.read($1, 30, $2)")
                    .await?;
                let rows = client.query(&statement, &[queue, &(batch as i32)]).await?;
                let ids: Vec<i64> = rows
                    .iter()
                    .map(|r| {
                        let _payload: Value = r.get(1);
                        r.get(0)
                    })
                    .collect();
                Ok((!ids.is_empty()).then_some(Delivery::Pgmq { ids }))
            }
            Broker::PgmqFanOut { .. } => Err("a fan-out producer does not pop".into()),
        }
    }

    /// Completes every message of the delivery.
    pub async fn ack(&self, delivery: &Delivery) -> Result<()> {
        match (self, delivery) {
            (
                Broker::PgcursorSql {
                    pool,
                    ack_every_item,
                    group,
                    ..
                },
                Delivery::Pgcursor {
                    partition_id,
                    lease_id,
                    transaction_ids,
                    ..
                },
            ) => {
                let items: Vec<Value> = acked(transaction_ids, *ack_every_item)
                    .iter()
                    .enumerate()
                    .map(|(index, t)| json!({"index": index, "transactionId": t, "status": "completed", "error": null}))
                    .collect();
                let mut request =
                    json!({"partitionId": partition_id, "leaseId": lease_id, "items": items});
                if let Some(group) = group {
                    request["consumerGroup"] = json!(group);
                }
                let client = pool.get().await?;
                let statement = client
                    .prepare_cached("SELECT pgcursor.ack_group($1::jsonb)")
                    .await?;
                expect_acked(&client.query_one(&statement, &[&request]).await?.get(0))
            }
            (
                Broker::PgcursorHttp { http, base, .. },
                Delivery::Pgcursor {
                    partition_id,
                    lease_id,
                    transaction_ids,
                    ..
                },
            ) => {
                let items: Vec<Value> = acked(transaction_ids, false)
                    .iter()
                    .map(|t| json!({"transactionId": t, "partitionId": partition_id, "leaseId": lease_id, "status": "completed"}))
                    .collect();
                let response = http
                    .post(format!("{base}/api/v1/ack/batch"))
                    .json(&json!({ "acknowledgments": items }))
                    .send()
                    .await?;
                // (an ack answer is one small item: read whole, as the SQL one is)
                expect_acked(&read_json(response, "ack").await?)
            }
            (
                Broker::Pgmq {
                    pool,
                    queue,
                    archive,
                },
                Delivery::Pgmq { ids },
            ) => {
                let sql = match archive {
                    true => "SELECT count(*) FROM pgmq.archive($1, $2::bigint[])",
                    false => "SELECT count(*) FROM pgmq.delete($1, $2::bigint[])",
                };
                let client = pool.get().await?;
                let statement = client.prepare_cached(sql).await?;
                let n: i64 = client.query_one(&statement, &[queue, ids]).await?.get(0);
                match n as usize == ids.len() {
                    true => Ok(()),
                    false => Err(format!("{sql}: {n} of {} ids", ids.len()).into()),
                }
            }
            _ => Err("a delivery acked on another system".into()),
        }
    }
}

/// The transactionIds a pgcursor ack names: the delivery's last, or all.
fn acked(transaction_ids: &[String], every_item: bool) -> &[String] {
    match every_item {
        true => transaction_ids,
        false => &transaction_ids[transaction_ids.len().saturating_sub(1)..],
    }
}

/// Partition `n` of a queue is named `p<n>` (here, in `load::seed` and in
/// every scenario).
fn push_request(queue: &str, partition: usize, payloads: &[Value]) -> Value {
    let partition = format!("p{partition}");
    let items: Vec<Value> = payloads
        .iter()
        .map(|p| json!({"queue": queue, "partition": partition, "payload": p}))
        .collect();
    json!({ "items": items })
}

/// `n` from a partition name `p<n>`, as `push` takes it.
pub fn partition_number(name: &str) -> Result<usize> {
    name.strip_prefix('p')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("not a bench partition name: {name:?}").into())
}

/// An HTTP answer read into `T`, as a client with types for it reads it
/// (the fields it names; the rest skipped by the parser); one that does not
/// fit is the run's error, shown.
async fn read_json<T: DeserializeOwned>(response: reqwest::Response, what: &str) -> Result<T> {
    let body = response.bytes().await?;
    serde_json::from_slice(&body).map_err(|e| {
        let shown = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        format!("{what}: unexpected answer ({e}): {shown}").into()
    })
}

/// A pop's answer, as far as a consumer reads it: what its ack names, and
/// each message's `data` decoded, once, as the SQL pop decodes each payload
/// once (`payload`, the same bytes again, is skipped, not decoded). All
/// messages of a one-partition pop share partition and lease.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PopAnswer {
    partition_id: Option<String>,
    partition: Option<String>,
    lease_id: Option<String>,
    #[serde(default)]
    messages: Vec<PoppedMessage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoppedMessage {
    transaction_id: String,
    #[allow(dead_code)] // decoded as a consumer would, never read
    data: Value,
}

impl PopAnswer {
    fn delivery(self) -> Option<Delivery> {
        if self.messages.is_empty() {
            return None;
        }
        Some(Delivery::Pgcursor {
            partition_id: self.partition_id?,
            partition: self.partition?,
            lease_id: self.lease_id?,
            transaction_ids: self
                .messages
                .into_iter()
                .map(|m| m.transaction_id)
                .collect(),
        })
    }
}

fn expect_acked(answer: &Value) -> Result<()> {
    match answer.as_array() {
        Some(items) if items.iter().all(|i| i["success"] == true) => Ok(()),
        _ => Err(format!("ack: unexpected answer {}", crate::load::short(answer)).into()),
    }
}
