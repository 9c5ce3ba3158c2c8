//! (i) Does a new consumer group's first pop stay cheap on a queue with many
//! partitions? Its first `pgcursor.pop` records the group's subscription and
//! writes cursor rows only on the partitions it claims (sql/30_pop.sql,
//! `add_claimable_cursors`); the rows of the others are written later by
//! housekeeping. For each partition count, one queue of that many partitions
//! (`MESSAGES` messages each) on which `OTHER_GROUPS` groups already have a
//! cursor row on every partition; then fresh groups pop once each (batch 10,
//! autoAck), in the three subscription variants: all (from offset 1),
//! `subscriptionMode=new` (from the head) and `subscriptionFrom=<T>` (T taken
//! between the second and the last message of every partition, so each
//! cursor is placed by a lookup). Partition counts and variants alternate, so
//! drift and the growing cursors table weigh on all alike. After each round
//! the fresh groups' cursor rows and subscriptions are deleted and the table
//! vacuumed (untimed), so every round sees the same cursors table (the
//! report gives its row count). Two figures per pop: the client's round
//! trip, and the server's own time for the call (`clock_timestamp()` around
//! it in one target list). One connection of its own, nothing else running.

use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};
use tokio_postgres::Client;

use crate::load::{self, Percentiles};
use crate::Result;

/// Messages per partition: the last one is pushed after `subscriptionFrom`'s T.
const MESSAGES: u64 = 3;
/// Groups that already have cursors on every partition before the first pops.
const OTHER_GROUPS: usize = 5;
/// Untimed first pops per partition count and variant (plans, caches).
const WARMUP_GROUPS: usize = 2;
/// The partition counts compared; the target is the last over the first.
pub const PARTITION_COUNTS: [usize; 2] = [50, 5000];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Variant {
    All,
    New,
    From,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::All, Variant::New, Variant::From];

    pub fn name(self) -> &'static str {
        match self {
            Variant::All => "all",
            Variant::New => "subscriptionMode=new",
            Variant::From => "subscriptionFrom=T",
        }
    }

    /// What the first pop must deliver: (messages, offset of the first).
    fn expected(self) -> (usize, Option<u64>) {
        match self {
            Variant::All => (MESSAGES as usize, Some(1)),
            Variant::New => (0, None),
            Variant::From => (1, Some(MESSAGES)),
        }
    }
}

/// (i)'s runs, and the size of the cursors table they ran against: what
/// every first pop's plan may have to read, whatever the queue.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FirstPops {
    pub runs: Vec<FirstPop>,
    pub cursor_rows_before: i64,
    pub cursor_rows_after: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FirstPop {
    pub variant: Variant,
    pub name: &'static str,
    pub partitions: usize,
    pub round_trip: Percentiles,
    pub server: Percentiles,
}

fn queue(partitions: usize) -> String {
    format!("bench-first-pop-{partitions}")
}

/// Seeds one queue per partition count, gives it `OTHER_GROUPS` groups, then
/// times `groups` first pops per partition count and variant.
pub async fn run(client: &Client, partition_counts: &[usize], groups: usize) -> Result<FirstPops> {
    let push = client.prepare("SELECT pgcursor.push($1::jsonb)").await?;
    let pop = client
        .prepare(
            "SELECT clock_timestamp() AS t0, pgcursor.pop($1::jsonb) AS answer, \
                    clock_timestamp() AS t1",
        )
        .await?;
    let mut since = Vec::new();
    for &n in partition_counts {
        let q = queue(n);
        seed(client, &push, &q, n, 1..MESSAGES).await?;
        let t: String = client
            .query_one(
                "SELECT pgcursor_internal.rfc3339_utc(clock_timestamp())",
                &[],
            )
            .await?
            .get(0);
        seed(client, &push, &q, n, MESSAGES..MESSAGES + 1).await?;
        for g in 0..OTHER_GROUPS {
            let request =
                json!({"queue": q, "consumerGroup": format!("other-{g}"), "autoAck": true});
            client.query_one(&pop, &[&request]).await?;
        }
        since.push(t);
    }
    // Their rows on the partitions they did not pop, as housekeeping writes
    // them; then statistics, as autovacuum keeps them on an established queue
    // (a run is shorter than its first analyze).
    client
        .execute("SELECT pgcursor_internal.materialize_cursors()", &[])
        .await?;
    client
        .batch_execute("ANALYZE pgcursor.partitions, pgcursor.cursors, pgcursor.subscriptions, pgcursor.messages")
        .await?;
    let cursor_rows = "SELECT count(*) FROM pgcursor.cursors";
    let cursor_rows_before: i64 = client.query_one(cursor_rows, &[]).await?.get(0);
    let cells = partition_counts.len() * Variant::ALL.len();
    let mut round_trip: Vec<_> = (0..cells).map(|_| load::histogram()).collect();
    let mut server: Vec<_> = (0..cells).map(|_| load::histogram()).collect();
    for i in 0..WARMUP_GROUPS + groups {
        for (p, &n) in partition_counts.iter().enumerate() {
            for (v, &variant) in Variant::ALL.iter().enumerate() {
                let mut request = json!({"queue": queue(n), "batch": 10, "autoAck": true,
                                         "consumerGroup": format!("first-{n}-{v}-{i}")});
                match variant {
                    Variant::All => {}
                    Variant::New => request["subscriptionMode"] = json!("new"),
                    Variant::From => request["subscriptionFrom"] = json!(since[p]),
                }
                let started = Instant::now();
                let row = client.query_one(&pop, &[&request]).await?;
                let round_trip_us = started.elapsed().as_micros().clamp(1, 60_000_000) as u64;
                check(variant, n, &row.get("answer"))?;
                if i < WARMUP_GROUPS {
                    continue;
                }
                let cell = p * Variant::ALL.len() + v;
                round_trip[cell].saturating_record(round_trip_us);
                let (t0, t1): (std::time::SystemTime, std::time::SystemTime) =
                    (row.get("t0"), row.get("t1"));
                let us = t1.duration_since(t0).unwrap_or_default().as_micros() as u64;
                server[cell].saturating_record(us.max(1));
            }
        }
        client
            .batch_execute(
                "DELETE FROM pgcursor.cursors WHERE consumer_group LIKE 'first-%';
                 DELETE FROM pgcursor.subscriptions WHERE consumer_group LIKE 'first-%';",
            )
            .await?;
        client.batch_execute("VACUUM pgcursor.cursors").await?;
    }
    let mut runs = Vec::new();
    for (p, &n) in partition_counts.iter().enumerate() {
        for (v, &variant) in Variant::ALL.iter().enumerate() {
            let cell = p * Variant::ALL.len() + v;
            runs.push(FirstPop {
                variant,
                name: variant.name(),
                partitions: n,
                round_trip: load::percentiles(&round_trip[cell]),
                server: load::percentiles(&server[cell]),
            });
        }
    }
    Ok(FirstPops {
        runs,
        cursor_rows_before,
        cursor_rows_after: client.query_one(cursor_rows, &[]).await?.get(0),
    })
}

/// Pushes offsets `offsets` into partitions p0..p<n> of `q`, 1000 items a call.
async fn seed(
    client: &Client,
    push: &tokio_postgres::Statement,
    q: &str,
    n: usize,
    offsets: std::ops::Range<u64>,
) -> Result<()> {
    let items: Vec<Value> = (0..n)
        .flat_map(|p| {
            offsets.clone().map(move |o| {
                json!({"queue": q, "partition": format!("p{p}"), "payload": {"o": o},
                       "transactionId": format!("p{p}-o{o}")})
            })
        })
        .collect();
    for chunk in items.chunks(1000) {
        client
            .query_one(push, &[&json!({ "items": chunk })])
            .await?;
    }
    Ok(())
}

/// The first pop delivered what its variant must: else the timing is of
/// something else.
fn check(variant: Variant, partitions: usize, answer: &Value) -> Result<()> {
    let messages = answer["messages"].as_array().map_or(0, Vec::len);
    let first = answer["messages"][0]["offset"].as_u64();
    if (messages, first) != variant.expected() {
        return Err(format!(
            "first pop ({}, {partitions} partitions): unexpected answer {}",
            variant.name(),
            load::short(answer)
        )
        .into());
    }
    Ok(())
}
