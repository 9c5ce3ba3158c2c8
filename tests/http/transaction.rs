//! POST /api/v1/transaction: acks and pushes in one PostgreSQL transaction.
//! (Its access level is checked by access_matrix.rs, with every route's.)

use pgcursor_tests::{db, Gateway};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{fresh_queue, get, pop, post, push_n, request, send, stored_messages};

/// (cursor, lease held?) of `group` on a partition, straight from the database.
async fn cursor_of(partition_id: &str, group: &str) -> (i64, bool) {
    let pid: Uuid = partition_id.parse().unwrap();
    let row = db()
        .await
        .query_one(
            "SELECT cursor, lease_id IS NOT NULL FROM pgcursor.cursors
              WHERE partition_id = $1 AND consumer_group = $2",
            &[&pid, &group],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// An ack operation for the i-th message of a pop answer, as the queen client sends it.
fn ack_op(message: &Value, lease: Value) -> Value {
    json!({"type": "ack", "transactionId": message["transactionId"],
           "partitionId": message["partitionId"], "status": "completed", "leaseId": lease})
}

fn push_op(queue: &str, payload: Value) -> Value {
    json!({"type": "push", "items": [{"queue": queue, "payload": payload}]})
}

#[tokio::test]
async fn two_stage_pipeline_hands_work_forward() {
    let gw = Gateway::start().await;
    let (a, b) = (fresh_queue("tx-a"), fresh_queue("tx-b"));
    push_n(&gw, &a, "Default", 1).await;
    let popped = pop(&gw, &a, "batch=1").await;
    let message = &popped["messages"][0];
    let bundle = json!({"operations": [ack_op(message, popped["leaseId"].clone()),
                                       push_op(&b, json!({"stage": 2, "from": message["data"]}))],
                        "requiredLeases": [popped["leaseId"]]});
    let (status, answer) = post(&gw, "/api/v1/transaction", &bundle).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["success"], true, "{answer}");
    assert!(answer["transactionId"]
        .as_str()
        .unwrap()
        .parse::<Uuid>()
        .is_ok());
    assert_eq!(answer["results"][0]["success"], true);
    assert_eq!(answer["results"][0]["leaseReleased"], true);
    assert_eq!(answer["results"][1][0]["status"], "queued");

    // A's cursor moved; B has the message.
    let partition = message["partitionId"].as_str().unwrap();
    assert_eq!(cursor_of(partition, "__QUEUE_MODE__").await, (1, false));
    let next = pop(&gw, &b, "batch=1").await;
    assert_eq!(
        next["messages"][0]["data"],
        json!({"stage": 2, "from": {"i": 1}})
    );
    assert_eq!(pop(&gw, &a, "batch=1").await["messages"], json!([]));
}

#[tokio::test]
async fn a_refused_ack_leaves_the_pushed_message_absent() {
    let gw = Gateway::start().await;
    let (a, b) = (fresh_queue("tx-a"), fresh_queue("tx-b"));
    push_n(&gw, &a, "Default", 1).await;
    let popped = pop(&gw, &a, "batch=1").await;
    let message = &popped["messages"][0];
    let bundle = json!({"operations": [push_op(&b, json!(1)),
                                       ack_op(message, json!(Uuid::now_v7()))]});
    let (status, answer) = post(&gw, "/api/v1/transaction", &bundle).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["success"], false);
    assert_eq!(answer["error"], "invalid or expired lease");
    assert_eq!(answer["failedIndex"], 1);
    assert_eq!(stored_messages(&b).await, 0, "the push was rolled back");
    let partition = message["partitionId"].as_str().unwrap();
    assert_eq!(cursor_of(partition, "__QUEUE_MODE__").await, (0, true));

    // A required lease that is not live refuses the bundle before anything runs.
    let bundle = json!({"operations": [push_op(&b, json!(2))], "requiredLeases": [Uuid::now_v7()]});
    let (status, answer) = post(&gw, "/api/v1/transaction", &bundle).await;
    assert_eq!(status, 200);
    assert_eq!(
        answer,
        json!({"success": false, "error": "invalid or expired lease", "failedIndex": null, "results": []})
    );
    assert_eq!(stored_messages(&b).await, 0);
}

#[tokio::test]
async fn a_malformed_operation_is_400_and_writes_nothing() {
    let gw = Gateway::start().await;
    let (a, b) = (fresh_queue("tx-a"), fresh_queue("tx-b"));
    push_n(&gw, &a, "Default", 1).await;
    let popped = pop(&gw, &a, "batch=1").await;
    let good_ack = ack_op(&popped["messages"][0], popped["leaseId"].clone());
    let good_push = push_op(&b, json!(1));
    let cases = [
        (json!([]), "request body must be a JSON object"),
        (json!({}), "operations is required and must be an array"),
        (json!({"operations": []}), "operations must not be empty"),
        (
            json!({"operations": [good_push, good_ack, {"type": "kv"}]}),
            "operations[2].type must be \"ack\" or \"push\"",
        ),
        (
            json!({"operations": [good_push, {"type": "ack", "partitionId": "nope", "transactionId": "t"}]}),
            "operations[1].partitionId must be a UUID string",
        ),
        (
            json!({"operations": [good_ack, {"type": "push", "items": [{"queue": b}]}]}),
            "operations[1].items[0].payload is required",
        ),
        (
            json!({"operations": [good_ack], "requiredLeases": "x"}),
            "requiredLeases must be an array",
        ),
    ];
    for (body, expected) in cases {
        let (status, answer) = post(&gw, "/api/v1/transaction", &body).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some(expected)),
            "{body}"
        );
    }
    let (status, _) =
        send(request(&gw, Method::POST, "/api/v1/transaction", None).body("{nope")).await;
    assert_eq!(status, 400);
    assert_eq!(stored_messages(&b).await, 0, "nothing pushed");
    let partition = popped["partitionId"].as_str().unwrap();
    assert_eq!(
        cursor_of(partition, "__QUEUE_MODE__").await,
        (0, true),
        "nothing acked"
    );
}

/// A backend killed before COMMIT leaves neither half of the bundle behind.
#[tokio::test]
async fn a_crash_before_commit_lands_neither_half() {
    let gw = Gateway::start().await;
    let (a, b) = (fresh_queue("tx-a"), fresh_queue("tx-b"));
    push_n(&gw, &a, "Default", 2).await;
    let popped = pop(&gw, &a, "batch=2").await;
    let message = &popped["messages"][1];
    let partition = message["partitionId"].as_str().unwrap().to_string();

    for via_transaction in [false, true] {
        let doomed = db().await;
        let pid: i32 = doomed
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        doomed.batch_execute("BEGIN").await.unwrap();
        if via_transaction {
            let bundle = json!({"operations": [ack_op(message, popped["leaseId"].clone()),
                                               push_op(&b, json!("late"))]});
            let answer: Value = doomed
                .query_one("SELECT pgcursor.transaction($1::jsonb)", &[&bundle])
                .await
                .unwrap()
                .get(0);
            assert_eq!(answer["success"], true, "{answer}");
        } else {
            // The same steps pgcursor.transaction takes.
            let group = json!({"partitionId": partition, "leaseId": popped["leaseId"],
                               "items": [{"index": 0, "transactionId": message["transactionId"],
                                          "status": "completed"}]});
            doomed
                .query_one("SELECT pgcursor.ack_group($1::jsonb)", &[&group])
                .await
                .unwrap();
            let items = json!({"items": [{"queue": b, "payload": "late"}]});
            doomed
                .query_one("SELECT pgcursor.push($1::jsonb)", &[&items])
                .await
                .unwrap();
        }
        // Both halves are in place inside the doomed transaction...
        let inside: i64 = doomed
            .query_one(
                "SELECT cursor FROM pgcursor.cursors WHERE partition_id = $1::text::uuid
                   AND consumer_group = '__QUEUE_MODE__'",
                &[&partition],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(inside, 2);
        // ...until its backend dies before COMMIT (waiting up to 5 s for it to go).
        let killed: bool = db()
            .await
            .query_one("SELECT pg_terminate_backend($1::int, 5000)", &[&pid])
            .await
            .unwrap()
            .get(0);
        assert!(killed);
        assert!(
            doomed.batch_execute("COMMIT").await.is_err(),
            "the connection is gone"
        );
        assert_eq!(stored_messages(&b).await, 0, "no push landed");
        assert_eq!(
            cursor_of(&partition, "__QUEUE_MODE__").await,
            (0, true),
            "no ack landed"
        );
    }
    // The lease survived: the real bundle still goes through afterwards.
    let bundle = json!({"operations": [ack_op(message, popped["leaseId"].clone()), push_op(&b, json!("ok"))]});
    let (status, answer) = post(&gw, "/api/v1/transaction", &bundle).await;
    assert_eq!(
        (status, &answer["success"]),
        (200, &json!(true)),
        "{answer}"
    );
    assert_eq!(stored_messages(&b).await, 1);
}

#[tokio::test]
async fn queen_client_bundle_shape_is_accepted() {
    // What queen-mq 2.x sends: requiredLeases always, no `error` key, consumerGroup
    // only when set, push items without a partition.
    let gw = Gateway::start().await;
    let (a, b) = (fresh_queue("tx-a"), fresh_queue("tx-b"));
    push_n(&gw, &a, "Default", 1).await;
    let (_, popped) = get(
        &gw,
        &format!("/api/v1/pop/queue/{a}?consumerGroup=workers&batch=1"),
    )
    .await;
    let m = &popped["messages"][0];
    let bundle = json!({
        "operations": [
            {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
             "status": "completed", "leaseId": m["leaseId"], "consumerGroup": "workers"},
            {"type": "push", "items": [{"queue": b, "payload": {"n": 1}, "transactionId": Uuid::now_v7()}]}],
        "requiredLeases": [m["leaseId"]]});
    let (status, answer) = post(&gw, "/api/v1/transaction", &bundle).await;
    assert_eq!(
        (status, &answer["success"]),
        (200, &json!(true)),
        "{answer}"
    );
    assert_eq!(answer["results"][1][0]["partition"], "Default");
    assert_eq!(
        cursor_of(m["partitionId"].as_str().unwrap(), "workers").await,
        (1, false)
    );
}
