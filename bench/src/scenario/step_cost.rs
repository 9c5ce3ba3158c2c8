//! (f) What one batch costs at each step, on one connection with nothing
//! else running: the server's own time for each call (`clock_timestamp()`
//! read before and after it in one target list; commits are not included,
//! and every system commits once per step).
//!
//! - pgcursor: `push_items` → `pop_messages` → `ack_group` of the batch's last
//!   message (what the gateway calls);
//! - pgmq: `send_batch` → `read` → `archive`, and → `delete`;
//! - the floor: the work no pgcursor push/pop/ack can avoid, done with plain
//!   SQL on copies of pgcursor's tables (same columns and indexes, in schema
//!   `bench_floor`): insert the batch's rows into messages, each with its
//!   message id as its transactionId (one UUIDv7 run, as push draws them);
//!   write a lease into one cursor row and select the batch's rows; move
//!   that cursor row.
//!
//! pgcursor's cycle over the floor's is what its functions add; pgmq's
//! cycle over the floor's is what pgcursor could gain, per connection, if
//! they added nothing.

use serde::Serialize;
use serde_json::{json, Value};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use crate::load::{self, Percentiles};
use crate::Result;

/// One system's three steps: put a batch in, take it out, complete it.
#[derive(Debug, Clone, Serialize)]
pub struct StepCost {
    pub system: &'static str,
    /// What each step calls.
    pub calls: [&'static str; 3],
    pub server: [Percentiles; 3],
}

impl StepCost {
    /// Sum of the three steps' p50, µs.
    pub fn cycle_p50_us(&self) -> u64 {
        self.server.iter().map(|p| p.p50_us).sum()
    }
}

const QUEUE: &str = "bench-step";
const PGMQ_ARCHIVE: &str = "bench_step_archive";
const PGMQ_DELETE: &str = "bench_step_delete";

const FLOOR_SCHEMA: &str = "
    CREATE SCHEMA bench_floor;
    CREATE TABLE bench_floor.messages (LIKE pgcursor.messages INCLUDING ALL);
    CREATE TABLE bench_floor.cursor (pos bigint NOT NULL, lease uuid);
    INSERT INTO bench_floor.cursor VALUES (0, NULL);
    -- PL/pgSQL, as pgcursor's own functions, so each statement is planned
    -- once per session (a SQL function is planned on every call), and the
    -- run's head drawn once, as push_write draws it.
    CREATE FUNCTION bench_floor.write(p uuid, first bigint, payload jsonb, n integer)
    RETURNS integer LANGUAGE plpgsql AS $$
    DECLARE
        run uuid := pgcursor_internal.uuidv7();
        run_head text := pgcursor_internal.uuidv7_head(run);
        run_rand bigint := pgcursor_internal.uuidv7_rand_b(run);
    BEGIN
        INSERT INTO bench_floor.messages (partition_id, msg_offset, transaction_id, payload, message_id)
        SELECT p, first + i, id::text, payload, id
        FROM (SELECT i, pgcursor_internal.uuidv7_step(run_head, run_rand, i) AS id
                FROM generate_series(0, n - 1) i) ids;
        RETURN n;
    END $$;
    CREATE FUNCTION bench_floor.read(p uuid, first bigint, last bigint)
    RETURNS bigint LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE bench_floor.cursor SET lease = gen_random_uuid();
        RETURN (SELECT count(payload) FROM bench_floor.messages
                 WHERE partition_id = p AND msg_offset BETWEEN first AND last);
    END $$;
    CREATE FUNCTION bench_floor.advance(pos bigint)
    RETURNS bigint LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE bench_floor.cursor SET pos = advance.pos, lease = NULL;
        RETURN pos;
    END $$;
";

/// A call wrapped so the server reports its own time.
struct Timed(Statement);

impl Timed {
    async fn new(client: &Client, call: &str) -> Result<Timed> {
        let sql =
            format!("SELECT clock_timestamp() AS t0, {call} AS answer, clock_timestamp() AS t1");
        Ok(Timed(client.prepare(&sql).await?))
    }

    /// The answer and the server's µs.
    async fn call<T>(&self, client: &Client, params: &[&(dyn ToSql + Sync)]) -> Result<(T, u64)>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        let row = client.query_one(&self.0, params).await?;
        let (t0, t1): (std::time::SystemTime, std::time::SystemTime) =
            (row.get("t0"), row.get("t1"));
        let us = t1.duration_since(t0).unwrap_or_default().as_micros() as u64;
        Ok((row.get("answer"), us.max(1)))
    }
}

pub async fn run(
    client: &Client,
    batch: usize,
    payload: &Value,
    iterations: usize,
) -> Result<Vec<StepCost>> {
    client.batch_execute(FLOOR_SCHEMA).await?;
    client
        .execute(
            "SELECT pgcursor.configure($1::jsonb)",
            &[&json!({ "queue": QUEUE })],
        )
        .await?;
    for queue in [PGMQ_ARCHIVE, PGMQ_DELETE] {
        client.execute("SELECT pgmq.create($1)", &[&queue]).await?;
    }
    // push_items, as the gateway pushes
    let push = Timed::new(
        client,
        "(SELECT count(*) FROM pgcursor.push_items($1::text[], $2::jsonb[], $3::text[]))",
    )
    .await?;
    // pop_messages, as the gateway pops (every row is read): the last
    // message's partition, lease and transactionId
    let pop = Timed::new(
        client,
        "(SELECT ARRAY[b.partition_id::text, b.lease_id::text, b.transaction_id] \
         FROM pgcursor.pop_messages($1::jsonb) WITH ORDINALITY b ORDER BY b.ordinality DESC LIMIT 1)",
    )
    .await?;
    let ack = Timed::new(client, "pgcursor.ack_group($1::jsonb)").await?;
    let send = Timed::new(
        client,
        "(SELECT count(*) FROM pgmq.send_batch($1, $2::jsonb[]))",
    )
    .await?;
    let read = Timed::new(
        client,
        "(SELECT array_agg(msg_id) FROM pgmq.read($1, 30, $2))",
    )
    .await?;
    let archive = Timed::new(
        client,
        "(SELECT count(*) FROM pgmq.archive($1, $2::bigint[]))",
    )
    .await?;
    let delete = Timed::new(
        client,
        "(SELECT count(*) FROM pgmq.delete($1, $2::bigint[]))",
    )
    .await?;
    let write = Timed::new(client, "bench_floor.write($1, $2, $3, $4)").await?;
    let select = Timed::new(client, "bench_floor.read($1, $2, $3)").await?;
    let advance = Timed::new(client, "bench_floor.advance($1)").await?;

    let queues = vec![QUEUE; batch];
    let partitions = vec!["p0"; batch];
    let pop_request = json!({"queue": QUEUE, "batch": batch});
    let payloads = vec![payload.clone(); batch];
    let floor_partition = uuid::Uuid::from_u128(1);
    let n = batch as i32;

    let mut h: Vec<[_; 3]> = (0..4)
        .map(|_| [load::histogram(), load::histogram(), load::histogram()])
        .collect();
    for i in 0..iterations as i64 {
        // pgcursor
        let (_, us): (i64, _) = push
            .call(client, &[&queues, &payloads, &partitions])
            .await?;
        h[0][0].saturating_record(us);
        let (popped, us): (Vec<Option<String>>, _) = pop.call(client, &[&pop_request]).await?;
        h[0][1].saturating_record(us);
        let [Some(partition_id), Some(lease_id), Some(last)] = popped.as_slice() else {
            return Err(format!("step cost: pgcursor pop delivered nothing: {popped:?}").into());
        };
        let request = json!({
            "partitionId": partition_id, "leaseId": lease_id,
            "items": [{"transactionId": last, "status": "completed"}],
        });
        let (answer, us): (Value, _) = ack.call(client, &[&request]).await?;
        h[0][2].saturating_record(us);
        if answer[0]["leaseReleased"] != true {
            return Err(format!("step cost: unexpected ack answer {answer}").into());
        }
        // pgmq, both ways of completing
        for (k, queue, complete) in [(1, PGMQ_ARCHIVE, &archive), (2, PGMQ_DELETE, &delete)] {
            let (_, us): (i64, _) = send.call(client, &[&queue, &payloads]).await?;
            h[k][0].saturating_record(us);
            let (ids, us): (Option<Vec<i64>>, _) = read.call(client, &[&queue, &n]).await?;
            h[k][1].saturating_record(us);
            let ids = ids.unwrap_or_default();
            if ids.len() != batch {
                return Err(format!("step cost: pgmq read {} of {batch}", ids.len()).into());
            }
            let (_, us): (i64, _) = complete.call(client, &[&queue, &ids]).await?;
            h[k][2].saturating_record(us);
        }
        // the floor
        let first = i * batch as i64 + 1;
        let last = first + batch as i64 - 1;
        let (_, us): (i32, _) = write
            .call(client, &[&floor_partition, &first, payload, &n])
            .await?;
        h[3][0].saturating_record(us);
        let (rows, us): (i64, _) = select
            .call(client, &[&floor_partition, &first, &last])
            .await?;
        h[3][1].saturating_record(us);
        if rows != batch as i64 {
            return Err(format!("step cost: floor read {rows} of {batch}").into());
        }
        let (_, us): (i64, _) = advance.call(client, &[&last]).await?;
        h[3][2].saturating_record(us);
    }
    let systems = [
        (
            "pgcursor (SQL)",
            ["push_items", "pop_messages", "ack_group (last message)"],
        ),
        ("pgmq read→archive", ["send_batch", "read", "archive"]),
        ("pgmq read→delete", ["send_batch", "read", "delete"]),
        (
            "floor: pgcursor's unavoidable statements",
            [
                "INSERT into messages",
                "UPDATE the cursor row (lease) + SELECT the batch's rows",
                "UPDATE the cursor row (position)",
            ],
        ),
    ];
    Ok(systems
        .into_iter()
        .zip(h)
        .map(|((system, calls), h)| StepCost {
            system,
            calls,
            server: h.map(|h| load::percentiles(&h)),
        })
        .collect())
}
