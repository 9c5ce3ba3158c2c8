//! Black-box tests of POST /api/v1/ack and /api/v1/ack/batch against the
//! real gateway binary and a real PostgreSQL (docs/ack-contract.md §2–§15).

use std::collections::BTreeSet;
use std::time::Duration;

use pgcursor_tests::fixtures::{bad_ack_items, AckIds};
use pgcursor_tests::{client, db, Gateway};

use crate::broker::{eventually, get};
use serde_json::{json, Value};
use uuid::Uuid;

/// A fresh queue with one partition of `n` messages `<queue>-1..n`.
struct Partition {
    queue: String,
    id: Uuid,
    /// The session its fixtures and reads use. (A new session for each
    /// call compiled pgcursor's functions anew each time: most of
    /// PostgreSQL's work in the tests that create a hundred partitions.)
    db: tokio_postgres::Client,
}

impl Partition {
    async fn create(n: usize) -> Partition {
        let queue = format!("ack-{}", Uuid::now_v7());
        let items: Vec<Value> = (1..=n)
            .map(|i| json!({"queue": queue, "payload": {"i": i}, "transactionId": format!("{queue}-{i}")}))
            .collect();
        let db = db().await;
        let pushed = call(&db, "push", json!({ "items": items })).await;
        let id = pushed[0]["partitionId"].as_str().unwrap().parse().unwrap();
        Partition { queue, id, db }
    }

    fn tx(&self, offset: usize) -> String {
        format!("{}-{offset}", self.queue)
    }

    /// Pops `batch` messages for `group` and returns the lease id.
    async fn pop(&self, group: &str, batch: usize) -> Uuid {
        let answer = call(
            &self.db,
            "pop",
            json!({"queue": self.queue, "consumerGroup": group, "batch": batch}),
        )
        .await;
        answer["leaseId"]
            .as_str()
            .expect("a lease")
            .parse()
            .unwrap()
    }

    /// (cursor, lease id, retry counter) of `group` on this partition.
    async fn state(&self, group: &str) -> (i64, Option<Uuid>, i32) {
        let row = self
            .db
            .query_opt(
                "SELECT cursor, lease_id, retry_count FROM pgcursor.cursors
                  WHERE partition_id = $1 AND consumer_group = $2",
                &[&self.id, &group],
            )
            .await
            .unwrap();
        row.map(|r| (r.get(0), r.get(1), r.get(2)))
            .unwrap_or((0, None, 0))
    }

    /// Every row a refused call could have touched: the partition's cursor
    /// rows (all groups, every column), its dead letters and the queue's totals.
    async fn everything(&self) -> Value {
        self.db
            .query_one(
                "SELECT jsonb_build_array(
                    (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.consumer_group) FROM pgcursor.cursors c
                      WHERE c.partition_id = $1),
                    (SELECT jsonb_agg(to_jsonb(d) ORDER BY d.id) FROM pgcursor.dead_letters d
                      WHERE d.partition_id = $1),
                    (SELECT to_jsonb(q) FROM pgcursor.queues q WHERE q.name = $2))",
                &[&self.id, &self.queue],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// A session of its own holding this partition's cursor rows locked
    /// (FOR UPDATE) in an open transaction, till ROLLBACK on it.
    async fn lock_cursor_rows(&self) -> tokio_postgres::Client {
        let holder = db().await;
        holder
            .batch_execute(&format!(
                "BEGIN; SELECT 1 FROM pgcursor.cursors WHERE partition_id = '{}' FOR UPDATE",
                self.id
            ))
            .await
            .unwrap();
        holder
    }

    fn item(&self, offset: usize, status: &str, lease: Option<Uuid>) -> Value {
        json!({"transactionId": self.tx(offset), "partitionId": self.id,
               "status": status, "leaseId": lease})
    }
}

/// Calls `pgcursor.<function>(jsonb)` directly, for fixtures.
async fn call(db: &tokio_postgres::Client, function: &str, arg: Value) -> Value {
    db.query_one(&format!("SELECT pgcursor.{function}($1::jsonb)"), &[&arg])
        .await
        .unwrap()
        .get(0)
}

async fn post(gw: &Gateway, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let response = client()
        .post(format!("{}{path}", gw.base))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn post_json(gw: &Gateway, path: &str, body: &Value) -> (u16, Value) {
    post(gw, path, body.to_string()).await
}

const FIELDS: [&str; 7] = [
    "index",
    "transactionId",
    "success",
    "error",
    "leaseReleased",
    "dlq",
    "noop",
];

fn field_set(item: &Value) -> BTreeSet<String> {
    item.as_object().unwrap().keys().cloned().collect()
}

/// The gateway reads a UUID as the SQL functions do (§2: both paths behave
/// alike): 32 hex digits, any of the four hyphens left out. Braced and
/// `urn:uuid:` spellings, which the uuid crate takes, are a 400 here as
/// they are a 22023 from psql.
#[tokio::test]
async fn the_gateway_and_the_sql_functions_take_the_same_uuid_spellings() {
    let gw = Gateway::start().await;
    let p = Partition::create(1).await;
    let id = p.id.to_string();
    let spellings = [
        (id.clone(), true),
        (id.to_uppercase(), true),
        (id.replace('-', ""), true),
        (id.replacen('-', "", 2), true),
        (format!("{{{id}}}"), false),
        (format!("urn:uuid:{id}"), false),
        (format!("{id}-"), false),
    ];
    let psql = db().await;
    for (spelled, taken) in spellings {
        let item = json!({"transactionId": p.tx(1), "partitionId": spelled});
        let (status, body) = post_json(&gw, "/api/v1/ack", &item).await;
        let group = json!({"partitionId": spelled, "items": [{"transactionId": p.tx(1)}]});
        let by_sql = psql
            .query_one("SELECT pgcursor.ack_group($1::jsonb)", &[&group])
            .await;
        let refused_by_sql = by_sql
            .as_ref()
            .err()
            .and_then(|e| e.code())
            .map(|c| c.code());
        match taken {
            true => assert_eq!((status, refused_by_sql), (200, None), "{spelled}: {body}"),
            false => assert_eq!(
                (status, body, refused_by_sql),
                (
                    400,
                    json!({"error": "partitionId must be a UUID string"}),
                    Some("22023")
                ),
                "{spelled}"
            ),
        }
    }
}

#[tokio::test]
async fn the_documented_ack_requests_answer_the_exact_field_set() {
    let gw = Gateway::start().await;
    let p = Partition::create(2).await;
    // docs/http-api.md "Acknowledging" > "Requests": its transactionIds, with a real
    // partition and lease in place of its example ones.
    let queue = p.queue.clone();
    let push = json!({"items": [
        {"queue": queue, "payload": 1, "transactionId": "order-8891-created"},
        {"queue": queue, "payload": 2, "transactionId": "order-8892-created"}]});
    call(&p.db, "push", push).await;
    let lease = p.pop("billing", 3).await;

    let single = json!({"transactionId": "order-8891-created", "partitionId": p.id,
        "consumerGroup": "billing", "leaseId": lease, "status": "completed"});
    let (status, body) = post_json(&gw, "/api/v1/ack", &single).await;
    assert_eq!(status, 200);
    let answers = body.as_array().expect("a top-level array");
    assert_eq!(answers.len(), 1);
    assert_eq!(
        field_set(&answers[0]),
        FIELDS.iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(
        answers[0],
        json!({"index": 0, "transactionId": "order-8891-created", "success": true,
               "error": null, "leaseReleased": true, "dlq": false, "noop": false})
    );
    // Acking order-8891 (offset 3, the batch end) completed 1..3 too: a cursor, not a delete.
    assert_eq!(p.state("billing").await.0, 3);

    let lease = p.pop("billing", 4).await;
    let batch = json!({"consumerGroup": "billing", "acknowledgments": [
        {"transactionId": "order-8891-created", "partitionId": p.id, "status": "completed", "leaseId": lease},
        {"transactionId": "order-8892-created", "partitionId": p.id, "status": "failed", "leaseId": lease,
         "error": "downstream 502"}]});
    let (status, body) = post_json(&gw, "/api/v1/ack/batch", &batch).await;
    assert_eq!(status, 200);
    let answers = body.as_array().unwrap();
    assert_eq!(answers.len(), 2);
    for a in answers {
        assert_eq!(field_set(a), FIELDS.iter().map(|s| s.to_string()).collect());
    }
    assert_eq!(answers[0]["success"], true);
    assert_eq!(answers[0]["noop"], true, "8891 was already completed");
    assert_eq!(answers[1]["success"], true);
    assert_eq!(answers[1]["leaseReleased"], true);
    assert_eq!(
        p.state("billing").await,
        (3, None, 1),
        "failed 4 charged the budget once"
    );
}

/// Every malformed acknowledgement of tests/fixtures/bad_ack_items.json
/// (docs/ack-contract.md §13), through both owners of the rule: over HTTP a
/// 400 with the case's message, from SQL (as psql calls it) a 22023 with
/// the same message; neither moves the cursor, the lease or the budget.
#[tokio::test]
async fn bad_items_are_refused_alike_by_http_and_sql_and_change_nothing() {
    let gw = Gateway::start().await;
    let p = Partition::create(5).await;
    let lease = p.pop("g", 5).await;
    let ids = AckIds {
        partition: p.id.to_string(),
        lease: lease.to_string(),
        tx: p.tx(5),
    };
    let cases = bad_ack_items();
    assert!(cases.len() >= 20, "the fixture lost its cases");
    let db = db().await;
    let untouched = p.everything().await;
    for case in cases {
        let (path, body) = case.http(&ids);
        let (status, answer) = post_json(&gw, path, &body).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some(case.message.as_str())),
            "HTTP, {}: {body}",
            case.name
        );
        assert_eq!(
            p.state("g").await,
            (0, Some(lease), 0),
            "HTTP, {}: moved",
            case.name
        );
        assert_eq!(
            p.everything().await,
            untouched,
            "HTTP, {}: a row changed",
            case.name
        );

        let Some(request) = case.sql(&ids) else {
            assert!(case.not_in_sql.is_some());
            continue;
        };
        let refused = db
            .query_one("SELECT pgcursor.ack_group($1::jsonb)", &[&request])
            .await
            .expect_err(&format!("SQL, {}: {request} was accepted", case.name));
        let refused = refused.as_db_error().expect("a database error");
        assert_eq!(
            (refused.code().code(), refused.message()),
            ("22023", case.message.as_str()),
            "SQL, {}: {request}",
            case.name
        );
        assert_eq!(
            p.state("g").await,
            (0, Some(lease), 0),
            "SQL, {}: moved",
            case.name
        );
        assert_eq!(
            p.everything().await,
            untouched,
            "SQL, {}: a row changed",
            case.name
        );
    }
}

/// The 400s about the body as a whole, which only HTTP can receive.
#[tokio::test]
async fn malformed_bodies_are_400_and_change_nothing() {
    let gw = Gateway::start().await;
    let p = Partition::create(5).await;
    let lease = p.pop("g", 5).await;
    let good = p.item(5, "completed", Some(lease));
    let batch: Vec<(Vec<u8>, &str)> = vec![
        (b"{not json".to_vec(), "not valid JSON"),
        (b"[]".to_vec(), "must be a JSON object"),
        (b"\"text\"".to_vec(), "must be a JSON object"),
        (
            json!({"consumerGroup": "g"}).to_string().into_bytes(),
            "acknowledgments is required",
        ),
        (
            json!({"acknowledgments": {}}).to_string().into_bytes(),
            "acknowledgments must be an array",
        ),
        (
            json!({"acknowledgments": []}).to_string().into_bytes(),
            "acknowledgments must not be empty",
        ),
        (
            json!({"acknowledgments": [good.clone(), "x"]})
                .to_string()
                .into_bytes(),
            "acknowledgments[1] must be an object",
        ),
        (
            ("[".repeat(500) + &"]".repeat(500)).into_bytes(),
            "recursion limit",
        ),
        // Invalid UTF-8 is not JSON either.
        (vec![0xff, 0xfe, b'{'], ""),
    ];
    // The single route refuses a body that is no JSON object alike.
    let single = batch[..3].iter().chain(batch.last()).cloned();
    let cases = batch
        .iter()
        .cloned()
        .map(|case| ("/api/v1/ack/batch", case))
        .chain(single.map(|case| ("/api/v1/ack", case)));
    for (route, (body, expected)) in cases {
        let shown = String::from_utf8_lossy(&body)
            .chars()
            .take(200)
            .collect::<String>();
        let (status, answer) = post(&gw, route, body).await;
        assert_eq!(status, 400, "{route} {shown}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(expected),
            "{route}: {error:?} should contain {expected:?}"
        );
        assert_eq!(
            p.state("g").await,
            (0, Some(lease), 0),
            "a 400 moved something: {route} {shown}"
        );
    }
}

/// docs/ack-contract.md §15: two groups of one partition (the live lease,
/// and no lease) run in request order, every time. Cursor at 9, lease over
/// 10–19: completed 19 (lease) then failed 15 (no lease) finds 15 already
/// completed; failed 15 then completed 19 releases the lease first, so 19
/// is refused.
#[tokio::test]
async fn groups_of_one_partition_answer_in_request_order_every_time() {
    let gw = Gateway::start().await;
    for round in 0..50 {
        for complete_first in [true, false] {
            let p = Partition::create(20).await;
            let first = p.pop("g", 9).await;
            let (_, done) = post_json(
                &gw,
                "/api/v1/ack",
                &json!({"consumerGroup": "g",
                "transactionId": p.tx(9), "partitionId": p.id, "leaseId": first}),
            )
            .await;
            assert_eq!(done[0]["success"], true);
            let lease = p.pop("g", 10).await;
            let complete = p.item(19, "completed", Some(lease));
            let fail = p.item(15, "failed", None);
            let items = if complete_first {
                vec![complete, fail]
            } else {
                vec![fail, complete]
            };
            let body = json!({"consumerGroup": "g", "acknowledgments": items});
            let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &body).await;
            assert_eq!(status, 200);
            let by_tx = |offset: usize| {
                answer
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["transactionId"] == p.tx(offset))
                    .cloned()
                    .unwrap()
            };
            let (nineteen, fifteen) = (by_tx(19), by_tx(15));
            if complete_first {
                assert_eq!(nineteen["success"], true, "round {round}: {answer}");
                assert_eq!(
                    fifteen["error"], "already completed",
                    "round {round}: {answer}"
                );
                assert_eq!(p.state("g").await, (19, None, 0), "round {round}");
            } else {
                assert_eq!(fifteen["success"], true, "round {round}: {answer}");
                assert_eq!(
                    nineteen["error"], "invalid or expired lease",
                    "round {round}: {answer}"
                );
                assert_eq!(p.state("g").await, (9, None, 1), "round {round}");
            }
        }
    }
}

#[tokio::test]
async fn oversize_body_and_too_many_items_are_413() {
    let gw = Gateway::start_with(&[
        ("PGCURSOR_MAX_BODY_BYTES", "2000"),
        ("PGCURSOR_MAX_ACK_ITEMS", "3"),
    ])
    .await;
    let p = Partition::create(4).await;
    let items: Vec<Value> = (1..=4).map(|o| p.item(o, "completed", None)).collect();
    let (status, answer) =
        post_json(&gw, "/api/v1/ack/batch", &json!({"acknowledgments": items})).await;
    assert_eq!(status, 413);
    assert!(answer["error"].as_str().unwrap().contains("limit is 3"));
    let big = json!({"acknowledgments": [p.item(1, "completed", None)], "pad": "x".repeat(3000)});
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &big).await;
    assert_eq!(status, 413);
    assert!(answer["error"].is_string());
    assert_eq!(
        p.state("__QUEUE_MODE__").await.0,
        0,
        "a 413 moved the cursor"
    );
    // At the limit it is accepted.
    let items: Vec<Value> = (1..=3).map(|o| p.item(o, "completed", None)).collect();
    let (status, _) = post_json(&gw, "/api/v1/ack/batch", &json!({"acknowledgments": items})).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_wrong_lease_in_one_of_three_partitions_fails_only_that_group() {
    let gw = Gateway::start().await;
    let (a, b, c) = (
        Partition::create(3).await,
        Partition::create(3).await,
        Partition::create(3).await,
    );
    let (la, lb, _lc) = (
        a.pop("g", 3).await,
        b.pop("g", 3).await,
        c.pop("g", 3).await,
    );
    let body = json!({"consumerGroup": "g", "acknowledgments": [
        a.item(3, "completed", Some(la)),
        b.item(3, "completed", Some(lb)),
        c.item(3, "completed", Some(Uuid::now_v7())),
    ]});
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &body).await;
    assert_eq!(status, 200, "a stale lease is no 409");
    assert_eq!(answer[0]["success"], true);
    assert_eq!(answer[1]["success"], true);
    assert_eq!(answer[2]["success"], false);
    assert_eq!(answer[2]["error"], "invalid or expired lease");
    assert_eq!(a.state("g").await.0, 3);
    assert_eq!(b.state("g").await.0, 3);
    assert_eq!(c.state("g").await.0, 0);
}

/// One group's call fails (its cursor row is locked past lock_timeout by
/// another session); the other groups' answers stand.
#[tokio::test]
async fn a_database_error_in_one_group_leaves_the_others_standing() {
    let url = format!(
        "{}?options=-c%20lock_timeout%3D300",
        pgcursor_tests::database_url()
    );
    let gw = Gateway::start_with(&[("DATABASE_URL", url.as_str())]).await;
    let (a, b, c) = (
        Partition::create(2).await,
        Partition::create(2).await,
        Partition::create(2).await,
    );
    for p in [&a, &b, &c] {
        p.pop("g", 2).await;
    }
    let holder = b.lock_cursor_rows().await;
    let body = json!({"consumerGroup": "g", "acknowledgments": [
        a.item(2, "completed", None), b.item(2, "completed", None), c.item(2, "completed", None)]});
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &body).await;
    holder.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer[0]["success"], true);
    assert_eq!(answer[2]["success"], true);
    assert_eq!(answer[1]["success"], false);
    let error = answer[1]["error"].as_str().unwrap();
    assert!(error.starts_with("database error: "), "{error}");
    assert!(error.contains("lock"), "{error}");
    assert_eq!(
        (
            a.state("g").await.0,
            b.state("g").await.0,
            c.state("g").await.0
        ),
        (2, 0, 2)
    );
}

/// docs/ack-contract.md §15: groups on different partitions run
/// concurrently. While B's cursor row is locked by another session, the
/// request's group for A (after B's in the request) commits all the same.
#[tokio::test]
async fn groups_on_different_partitions_run_concurrently() {
    let gw = Gateway::start().await;
    // b first in the request and in id order: run one after another either
    // way, a's group would wait behind b's.
    let (one, two) = (Partition::create(1).await, Partition::create(1).await);
    let (b, a) = if one.id < two.id {
        (one, two)
    } else {
        (two, one)
    };
    b.pop("g", 1).await; // b's cursor row, for the lock below
    let holder = b.lock_cursor_rows().await;
    let body = json!({"consumerGroup": "g", "acknowledgments": [
        b.item(1, "completed", None), a.item(1, "completed", None)]});
    let request = {
        let url = format!("{}/api/v1/ack/batch", gw.base);
        tokio::spawn(async move { client().post(url).json(&body).send().await.unwrap() })
    };
    eventually(
        "a's group committed while b's waits",
        Duration::from_secs(10),
        || async { a.state("g").await.0 == 1 },
    )
    .await;
    assert!(!request.is_finished(), "the request did not wait for b");
    assert_eq!(b.state("g").await.0, 0);
    holder.batch_execute("ROLLBACK").await.unwrap();
    let answer: Value = request.await.unwrap().json().await.unwrap();
    assert_eq!(
        (answer[0]["success"].clone(), answer[1]["success"].clone()),
        (json!(true), json!(true)),
        "{answer}"
    );
    assert_eq!(b.state("g").await.0, 1);
}

/// The seed: consumerGroup is read at the top level only; one on an item is
/// not read (and makes no cursor row for that group).
#[tokio::test]
async fn an_item_s_consumer_group_is_not_read() {
    let gw = Gateway::start().await;
    let p = Partition::create(2).await;
    let mut item = p.item(2, "completed", None);
    item["consumerGroup"] = json!("other");
    let body = json!({"consumerGroup": "billing", "acknowledgments": [item]});
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &body).await;
    assert_eq!(
        (status, &answer[0]["success"]),
        (200, &json!(true)),
        "{answer}"
    );
    assert_eq!(
        p.state("billing").await.0,
        2,
        "the top-level group's cursor moved"
    );
    let rows: i64 = db()
        .await
        .query_one(
            "SELECT count(*) FROM pgcursor.cursors WHERE partition_id = $1 AND consumer_group = 'other'",
            &[&p.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "the item's group got a cursor row");
}

#[tokio::test]
async fn answers_keep_request_order_across_interleaved_partitions() {
    let gw = Gateway::start().await;
    let (a, b) = (Partition::create(4).await, Partition::create(4).await);
    let order = [
        (&a, 1),
        (&b, 1),
        (&a, 2),
        (&b, 2),
        (&a, 3),
        (&b, 3),
        (&a, 4),
        (&b, 4),
    ];
    let items: Vec<Value> = order
        .iter()
        .map(|(p, o)| p.item(*o, "completed", None))
        .collect();
    let (status, answer) =
        post_json(&gw, "/api/v1/ack/batch", &json!({"acknowledgments": items})).await;
    assert_eq!(status, 200);
    for (i, (p, o)) in order.iter().enumerate() {
        assert_eq!(answer[i]["index"], i);
        assert_eq!(answer[i]["transactionId"], p.tx(*o));
        assert_eq!(answer[i]["success"], true);
    }
    assert_eq!(
        (
            a.state("__QUEUE_MODE__").await.0,
            b.state("__QUEUE_MODE__").await.0
        ),
        (4, 4)
    );
}

#[tokio::test]
async fn unknown_transaction_and_partition_are_per_item_outcomes_in_a_200() {
    let gw = Gateway::start().await;
    let p = Partition::create(1).await;
    let body = json!({"acknowledgments": [
        {"transactionId": "never-pushed", "partitionId": p.id, "status": "failed"},
        {"transactionId": "x", "partitionId": Uuid::now_v7()}]});
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &body).await;
    assert_eq!(status, 200, "no 404 for an unknown transactionId");
    assert_eq!(answer[0]["error"], "transaction not found");
    assert_eq!(answer[0]["noop"], true);
    assert_eq!(answer[1]["error"], "partition not found");
    let (status, answer) = post_json(
        &gw,
        "/api/v1/ack",
        &json!({"transactionId": "never", "partitionId": p.id}),
    )
    .await;
    assert_eq!((status, answer.as_array().map(Vec::len)), (200, Some(1)));
    assert_eq!(answer[0]["error"], "transaction not found");
}

/// An ack answered with noops and refusals changes nothing, also for a
/// group that never consumed the partition: it leaves that group no cursor,
/// so the group holds no message back (a full queue stays full only of
/// what its real consumers have not consumed) and its first pop in mode
/// `new` still starts at the head.
#[tokio::test]
async fn an_ack_that_changes_nothing_leaves_a_new_group_no_cursor() {
    let gw = Gateway::start().await;
    let queue = format!("ack-nothing-{}", Uuid::now_v7());
    let configure = json!({"queue": queue, "options": {"maxSize": 3}});
    assert_eq!(post_json(&gw, "/api/v1/configure", &configure).await.0, 200);
    let push = |n: usize| {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({"queue": queue, "payload": {"i": i}}))
            .collect();
        json!({ "items": items })
    };
    let (status, pushed) = post_json(&gw, "/api/v1/push", &push(3)).await;
    assert_eq!(status, 200, "{pushed}");
    let partition_id = pushed[0]["partitionId"].clone();
    let first_tx = pushed[0]["transactionId"].clone();
    let (_, popped) = get(
        &gw,
        &format!("/api/v1/pop/queue/{queue}?batch=3&autoAck=true"),
    )
    .await;
    assert_eq!(
        popped["messages"].as_array().map(Vec::len),
        Some(3),
        "{popped}"
    );

    let unknown =
        json!({"transactionId": "bogus", "partitionId": partition_id, "consumerGroup": "typo"});
    let (status, answer) = post_json(&gw, "/api/v1/ack", &unknown).await;
    assert_eq!(
        (status, &answer[0]["noop"]),
        (200, &json!(true)),
        "{answer}"
    );
    let wrong_lease = json!({"acknowledgments": [{"transactionId": first_tx, "partitionId": partition_id,
                                                  "leaseId": Uuid::now_v7()}],
                             "consumerGroup": "late"});
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &wrong_lease).await;
    assert_eq!(
        (status, &answer[0]["error"]),
        (200, &json!("invalid or expired lease")),
        "{answer}"
    );
    let groups: i64 = db()
        .await
        .query_one(
            "SELECT count(*) FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
              WHERE p.queue = $1 AND c.consumer_group <> '__QUEUE_MODE__'",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(groups, 0, "no cursor row for typo or late");

    let (status, pushed) = post_json(&gw, "/api/v1/push", &push(1)).await;
    assert_eq!(
        (status, &pushed[0]["status"]),
        (200, &json!("queued")),
        "the queue holds nothing unconsumed: {pushed}"
    );
    let (_, late) = get(
        &gw,
        &format!("/api/v1/pop/queue/{queue}?batch=10&consumerGroup=late&subscriptionMode=new"),
    )
    .await;
    assert_eq!(
        late["messages"],
        json!([]),
        "mode new starts at the head: {late}"
    );
}

/// `"consumerGroup": ""` is queue mode, as `?consumerGroup=` is on a pop:
/// a consumer popping with an empty group and acking with it acks what it
/// popped, not a group named "" that could never pop.
#[tokio::test]
async fn an_empty_consumer_group_acks_in_queue_mode() {
    let gw = Gateway::start().await;
    let p = Partition::create(2).await;
    let (_, popped) = get(
        &gw,
        &format!("/api/v1/pop/queue/{}?batch=2&consumerGroup=", p.queue),
    )
    .await;
    assert_eq!(popped["consumerGroup"], "__QUEUE_MODE__", "{popped}");
    let body = json!({"transactionId": p.tx(2), "partitionId": p.id, "leaseId": popped["leaseId"],
                      "consumerGroup": ""});
    let (status, answer) = post_json(&gw, "/api/v1/ack", &body).await;
    assert_eq!(
        (status, &answer[0]["success"], &answer[0]["noop"]),
        (200, &json!(true), &json!(false)),
        "{answer}"
    );
    assert_eq!(
        p.state("__QUEUE_MODE__").await,
        (2, None, 0),
        "the lease released, both completed"
    );
    assert_eq!(
        p.everything().await[0].as_array().map(Vec::len),
        Some(1),
        "no group \"\" made"
    );
}

/// A consumer group too long for a cursor row's key is a bad request (as
/// on pop and transaction): a 400 naming the field, on both routes, before
/// any group runs, and nothing written. (It was each item's `database
/// error`, which tells a client the outcome is unknown.)
#[tokio::test]
async fn a_consumer_group_over_1024_bytes_is_a_400_naming_it() {
    let gw = Gateway::start().await;
    let p = Partition::create(1).await;
    let before = p.everything().await;
    let long = "g".repeat(1025);
    let single = json!({"transactionId": p.tx(1), "partitionId": p.id, "consumerGroup": long});
    let batch = json!({"consumerGroup": long, "acknowledgments": [p.item(1, "completed", None)]});
    for (route, body) in [("/api/v1/ack", single), ("/api/v1/ack/batch", batch)] {
        let (status, answer) = post_json(&gw, route, &body).await;
        assert_eq!(
            (status, &answer),
            (
                400,
                &json!({"error": "consumerGroup must be at most 1024 bytes"})
            ),
            "{route}"
        );
    }
    assert_eq!(p.everything().await, before, "nothing written");
}

/// No status is a validation error (§2), not even one PostgreSQL could
/// not store: a number past `numeric` or a string holding NUL is a failure
/// like any other unknown status (both were 400s). The status is never
/// stored, so what PostgreSQL holds is no reason to refuse it.
#[tokio::test]
async fn a_status_postgres_could_not_store_is_a_failure_not_a_400() {
    let gw = Gateway::start().await;
    let p = Partition::create(3).await;
    for (charged, raw_status) in [(1, "1e131072"), (2, r#""a\u0000b""#)] {
        let lease = p.pop("g", 3).await;
        let body = format!(
            r#"{{"consumerGroup":"g","acknowledgments":[{{"transactionId":"{}","partitionId":"{}","leaseId":"{lease}","status":{raw_status}}}]}}"#,
            p.tx(1),
            p.id
        );
        let (status, answer) = post(&gw, "/api/v1/ack/batch", body).await;
        assert_eq!(
            (status, &answer[0]["success"]),
            (200, &json!(true)),
            "{raw_status}: {answer}"
        );
        assert_eq!(
            p.state("g").await,
            (0, None, charged),
            "{raw_status}: a failure, charged once, the lease released"
        );
    }
}

#[tokio::test]
async fn status_is_normalised_by_the_gateway() {
    let gw = Gateway::start().await;
    let p = Partition::create(3).await;
    let lease = p.pop("g", 3).await;
    // "Completed" (wrong case) is a failure: it charges the budget.
    let body =
        json!({"consumerGroup": "g", "acknowledgments": [p.item(2, "Completed", Some(lease))]});
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &body).await;
    assert_eq!((status, &answer[0]["success"]), (200, &json!(true)));
    assert_eq!(p.state("g").await, (0, None, 1));
    // An absent status completes.
    let single = json!({"transactionId": p.tx(3), "partitionId": p.id, "consumerGroup": "g"});
    let (_, answer) = post_json(&gw, "/api/v1/ack", &single).await;
    assert_eq!(answer[0]["success"], true);
    assert_eq!(p.state("g").await.0, 3);
}

#[tokio::test]
async fn no_database_connection_at_all_is_503() {
    let cluster = pgcursor_tests::PrivateCluster::start();
    let gw = Gateway::start_with(&[
        ("DATABASE_URL", cluster.url()),
        ("PGCURSOR_DB_TIMEOUT_MS", "1000"),
    ])
    .await;
    cluster.stop();
    let body = json!({"acknowledgments": [{"transactionId": "t", "partitionId": Uuid::now_v7()}]});
    let started = std::time::Instant::now();
    let (status, answer) = post_json(&gw, "/api/v1/ack/batch", &body).await;
    assert_eq!(status, 503);
    assert!(answer["error"].is_string());
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A nack releases the lease with messages still pending: a pop of the same
/// group that is long-polling wakes at once, as it would on a push (not at
/// its periodic re-check).
#[tokio::test]
async fn a_nack_wakes_a_waiting_pop_of_the_group() {
    let gw = Gateway::start().await;
    let p = Partition::create(4).await;
    let lease = p.pop("g", 2).await;
    let url = format!(
        "{}/api/v1/pop/queue/{}?consumerGroup=g&batch=2&wait=true&timeout=20000",
        gw.base, p.queue
    );
    let waiter = tokio::spawn(async move {
        let response = client().get(url).send().await.unwrap();
        response.json::<Value>().await.unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let body = json!({"consumerGroup": "g", "acknowledgments": [p.item(1, "retry", Some(lease))]});
    let (status, _) = post_json(&gw, "/api/v1/ack/batch", &body).await;
    assert_eq!(status, 200);
    let popped = waiter.await.unwrap();
    let woke_after = started.elapsed();
    println!(
        "nack -> waiting pop woke after {} ms",
        woke_after.as_millis()
    );
    assert_eq!(popped["messages"][0]["offset"], 1, "the tail redelivers");
    assert!(
        woke_after < Duration::from_secs(3),
        "woke after {woke_after:?}"
    );
}
