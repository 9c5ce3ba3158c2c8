//! Configure, push, pop and lease extension over HTTP (docs/http-api.md
//! "Queues", "Pushing", "Popping", "Extending a lease"), against the real
//! gateway and PostgreSQL.

use std::collections::BTreeSet;

use futures::future::join_all;
use pgcursor_tests::{client, db, Gateway};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{
    ack_all, configure_queue, fresh_queue, get, keys, messages, offsets, pop, post, push_n, send,
    stored_messages,
};

const HEADER_FIELDS: [&str; 8] = [
    "success",
    "queue",
    "partition",
    "partitionId",
    "leaseId",
    "consumerGroup",
    "messages",
    "partitionsClaimed",
];
const MESSAGE_FIELDS: [&str; 14] = [
    "id",
    "transactionId",
    "partitionId",
    "partition",
    "queue",
    "offset",
    "leaseId",
    "consumerGroup",
    "data",
    "payload",
    "createdAt",
    "traceId",
    "producerSub",
    "retryCount",
];

#[tokio::test]
async fn pop_answers_exactly_the_wire_fields() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("fields");
    let trace = Uuid::now_v7();
    // producerSub is Queen's JWT subject of the pusher: never taken from the body.
    let item = json!({"queue": queue, "partition": "eu", "payload": {"id": 7},
                      "transactionId": "order-7", "traceId": trace, "producerSub": "spoofed"});
    let (status, pushed) = post(&gw, "/api/v1/push", &json!({"items": [item]})).await;
    assert_eq!(status, 200, "{pushed}");

    let answer = pop(
        &gw,
        &format!("{queue}/partition/eu"),
        "consumerGroup=billing",
    )
    .await;
    assert_eq!(keys(&answer), BTreeSet::from(HEADER_FIELDS));
    let partition_id = pushed[0]["partitionId"].clone();
    let lease = answer["leaseId"].clone();
    assert!(lease.is_string(), "{answer}");
    assert_eq!(
        answer,
        json!({"success": true, "queue": queue, "partition": "eu", "partitionId": partition_id,
               "leaseId": lease, "consumerGroup": "billing", "partitionsClaimed": 1,
               "messages": answer["messages"]})
    );
    let message = &messages(&answer)[0];
    assert_eq!(keys(message), BTreeSet::from(MESSAGE_FIELDS));
    let created_at = message["createdAt"].as_str().unwrap().to_string();
    assert_eq!(
        message,
        &json!({"id": pushed[0]["message_id"], "transactionId": "order-7", "partitionId": partition_id, "partition": "eu",
                "queue": queue, "offset": 1, "leaseId": lease, "consumerGroup": "billing",
                "data": {"id": 7}, "payload": {"id": 7}, "createdAt": created_at,
                "traceId": trace, "producerSub": null, "retryCount": 0})
    );
    assert_rfc3339_utc_is_stored_time(&created_at, &queue).await;
}

/// The gateway writes the pop answer itself from `pgcursor.pop_messages`; psql's
/// `pgcursor.pop` writes it in SQL. Two groups at the same place get the
/// same answer from each, but for their name and lease: over several
/// partitions and queues (a namespace pop), with payloads of every JSON
/// kind, escapes in names, traces, a gap retention left, and a redelivery.
#[tokio::test]
async fn http_pop_answers_what_sql_pop_answers() {
    let gw = Gateway::start().await;
    let namespace = fresh_queue("twins-ns");
    let queues = [format!("{namespace}-a\"q\\"), format!("{namespace}-b")];
    for queue in &queues {
        let (status, body) = post(
            &gw,
            "/api/v1/configure",
            &json!({"queue": queue, "namespace": namespace}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let payloads = [
        json!({"n": 1, "s": "é\u{1F600}\"\n"}),
        json!([1, 2.5, null]),
        json!("text"),
        json!(42),
        json!(null),
        json!(true),
        json!({}),
    ];
    let items: Vec<Value> = payloads
        .iter()
        .enumerate()
        .map(|(i, payload)| {
            json!({"queue": queues[i % 2], "partition": format!("p{}", i % 3), "payload": payload,
               "traceId": if i % 2 == 0 { json!(Uuid::now_v7()) } else { json!(null) }})
        })
        .collect();
    let (status, body) = post(&gw, "/api/v1/push", &json!({"items": items})).await;
    assert_eq!(status, 200, "{body}");
    // a gap: retention removed one message of a partition
    db().await
        .execute(
            "DELETE FROM pgcursor.messages m USING pgcursor.partitions p
          WHERE p.id = m.partition_id AND p.queue = $1 AND p.name = 'p0' AND m.msg_offset = 1",
            &[&queues[0]],
        )
        .await
        .unwrap();
    let query = format!("namespace={namespace}&batch=100&partitions=10");
    for round in 0..2 {
        let http = crate::broker::get(&gw, &format!("/api/v1/pop?{query}&consumerGroup=twin-http"))
            .await
            .1;
        let sql: Value = db().await.query_one(
            "SELECT pgcursor.pop(jsonb_build_object('namespace', $1::text, 'batch', 100, 'partitions', 10,
                                                    'consumerGroup', 'twin-sql'))",
            &[&namespace]).await.unwrap().get(0);
        assert!(
            http["messages"].as_array().is_some_and(|m| m.len() >= 5),
            "round {round}: {http}"
        );
        let alike = |answer: &Value| {
            let text = answer.to_string();
            let text = text.replace(answer["leaseId"].as_str().unwrap(), "LEASE");
            text.replace("twin-http", "GROUP")
                .replace("twin-sql", "GROUP")
        };
        let (http_text, sql_text) = (alike(&http), alike(&sql));
        let (http_value, sql_value): (Value, Value) = (
            serde_json::from_str(&http_text).unwrap(),
            serde_json::from_str(&sql_text).unwrap(),
        );
        assert_eq!(http_value, sql_value, "round {round}");
        // let both leases expire at once, so the next round redelivers
        db().await
            .execute(
                "UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 second'
              WHERE consumer_group IN ('twin-http', 'twin-sql')",
                &[],
            )
            .await
            .unwrap();
    }
}

/// `2025-01-31T09:30:00.123456Z`, and the very instant stored for the message.
async fn assert_rfc3339_utc_is_stored_time(created_at: &str, queue: &str) {
    let b = created_at.as_bytes();
    assert!(
        b.len() == 27 && b[10] == b'T' && b[19] == b'.' && created_at.ends_with('Z'),
        "{created_at}"
    );
    let same: bool = db()
        .await
        .query_one(
            "SELECT $1::text::timestamptz = m.created_at FROM pgcursor.messages m
               JOIN pgcursor.partitions p ON p.id = m.partition_id WHERE p.queue = $2",
            &[&created_at, &queue],
        )
        .await
        .unwrap()
        .get(0);
    assert!(same, "{created_at} is not the stored created_at");
}

#[tokio::test]
async fn nothing_available_is_200_success_with_no_messages() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("empty");
    let (status, _) = post(&gw, "/api/v1/configure", &json!({"queue": queue})).await;
    assert_eq!(status, 200);
    for query in ["", "wait=false", "autopilot=true&wait=true&timeout=0"] {
        let (status, body) = get(&gw, &format!("/api/v1/pop/queue/{queue}?{query}")).await;
        assert_eq!(
            (status, body),
            (200, json!({"success": true, "messages": []})),
            "{query}"
        );
    }
}

#[tokio::test]
async fn a_partition_is_never_leased_to_two_consumers_of_a_group() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("race");
    push_n(&gw, &queue, "only", 5).await;
    for group in ["", "&consumerGroup=workers"] {
        let pops = (0..8).map(|_| {
            let url = gw.url(&format!("/api/v1/pop/queue/{queue}?batch=10{group}"));
            send(client().get(url))
        });
        let answers = join_all(pops).await;
        let got: Vec<usize> = answers
            .iter()
            .map(|(status, body)| {
                assert_eq!(*status, 200, "{body}");
                messages(body).len()
            })
            .collect();
        let winners = got.iter().filter(|n| **n > 0).count();
        assert_eq!(winners, 1, "group {group:?}: {got:?}");
        assert!(
            got.contains(&5),
            "the winner got the whole partition: {got:?}"
        );
    }
}

#[tokio::test]
async fn offsets_come_in_order_within_a_partition_across_pop_ack_cycles() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("order");
    push_n(&gw, &queue, "p1", 7).await;
    push_n(&gw, &queue, "p2", 5).await;
    let mut seen: Vec<(String, i64)> = Vec::new();
    loop {
        let answer = pop(&gw, &queue, "batch=3&consumerGroup=g").await;
        if messages(&answer).is_empty() {
            break;
        }
        for m in messages(&answer) {
            seen.push((
                m["partition"].as_str().unwrap().into(),
                m["offset"].as_i64().unwrap(),
            ));
        }
        ack_all(&gw, &answer).await;
    }
    for (partition, n) in [("p1", 7), ("p2", 5)] {
        let order: Vec<i64> = seen
            .iter()
            .filter(|(p, _)| p == partition)
            .map(|(_, o)| *o)
            .collect();
        assert_eq!(order, (1..=n).collect::<Vec<_>>(), "{partition}: {seen:?}");
    }
}

#[tokio::test]
async fn every_consumer_group_sees_every_message() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("groups");
    push_n(&gw, &queue, "Default", 4).await;
    for group in ["consumerGroup=billing", "consumerGroup=audit", ""] {
        let answer = pop(&gw, &queue, &format!("batch=10&{group}")).await;
        assert_eq!(offsets(&answer), vec![1, 2, 3, 4], "{group}");
    }
}

#[tokio::test]
async fn subscription_mode_new_skips_history() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("subscribe");
    push_n(&gw, &queue, "Default", 3).await;
    let late = "batch=10&consumerGroup=late&subscriptionMode=new";
    assert!(messages(&pop(&gw, &queue, late).await).is_empty());
    let items =
        json!({"items": [{"queue": queue, "payload": "a"}, {"queue": queue, "payload": "b"}]});
    assert_eq!(post(&gw, "/api/v1/push", &items).await.0, 200);
    assert_eq!(offsets(&pop(&gw, &queue, late).await), vec![4, 5]);
    let early = "batch=10&consumerGroup=early&subscriptionMode=all";
    assert_eq!(offsets(&pop(&gw, &queue, early).await), vec![1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn auto_ack_completes_on_delivery_and_leaves_no_lease() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("autoack");
    let pushed = push_n(&gw, &queue, "Default", 3).await;
    let answer = pop(&gw, &queue, "batch=10&autoAck=true").await;
    assert_eq!(offsets(&answer), vec![1, 2, 3]);
    assert_eq!(answer["leaseId"], Value::Null);
    let partition: Uuid = pushed[0]["partitionId"].as_str().unwrap().parse().unwrap();
    let row = db()
        .await
        .query_one(
            "SELECT cursor, lease_id, lease_expires_at IS NULL FROM pgcursor.cursors
              WHERE partition_id = $1 AND consumer_group = '__QUEUE_MODE__'",
            &[&partition],
        )
        .await
        .unwrap();
    let (cursor, lease, no_expiry): (i64, Option<Uuid>, bool) =
        (row.get(0), row.get(1), row.get(2));
    assert_eq!((cursor, lease, no_expiry), (3, None, true));
    assert!(messages(&pop(&gw, &queue, "batch=10").await).is_empty());
}

#[tokio::test]
async fn duplicate_transaction_ids_are_reported_not_written() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("dup");
    let item = |tx: &str| json!({"queue": queue, "payload": tx, "transactionId": tx});
    let (_, first) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [item("t1"), item("t2")]}),
    )
    .await;
    let statuses = |answer: &Value| -> Vec<(String, i64)> {
        answer
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["status"].as_str().unwrap().into(),
                    a["offset"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        statuses(&first),
        [("queued".into(), 1), ("queued".into(), 2)]
    );
    let (status, again) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [item("t1"), item("t3"), item("t3")]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        statuses(&again),
        [
            ("duplicate".into(), 1),
            ("queued".into(), 3),
            ("duplicate".into(), 3)
        ]
    );
    let push_fields = BTreeSet::from([
        "index",
        "transactionId",
        "partitionId",
        "partition",
        "queue",
        "offset",
        "message_id",
        "status",
        "error",
    ]);
    for answer in again.as_array().unwrap() {
        assert_eq!(keys(answer), push_fields);
        assert_eq!(answer["error"], Value::Null);
    }
    assert_eq!(stored_messages(&queue).await, 3);
}

/// The gateway pushes through push_items and writes the answer itself;
/// psql's pgcursor.push answers the same request with the same fields.
#[tokio::test]
async fn http_push_answers_what_sql_push_answers() {
    let gw = Gateway::start().await;
    let (http_queue, sql_queue) = (fresh_queue("push-http"), fresh_queue("push-sql"));
    let items = |queue: &str| {
        json!({"items": [
            {"queue": queue, "payload": {"n": 1}},
            {"queue": queue, "partition": "eu", "payload": null, "traceId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"},
            {"queue": queue, "payload": "x\u{e9}\n", "transactionId": "t-\"1\""},
            {"queue": queue, "payload": [1, 2.5e3], "transactionId": "t-\"1\""},
        ]})
    };
    let (status, by_http) = post(&gw, "/api/v1/push", &items(&http_queue)).await;
    assert_eq!(status, 200, "{by_http}");
    let by_sql: Value = db()
        .await
        .query_one("SELECT pgcursor.push($1::jsonb)", &[&items(&sql_queue)])
        .await
        .unwrap()
        .get(0);
    let comparable = |answer: &Value, queue: &str| -> Vec<Value> {
        let answer = answer.as_array().expect("an array");
        answer
            .iter()
            .map(|a| {
                let mut a = a.clone();
                assert_eq!(a["queue"], json!(queue));
                let generated = a["transactionId"] == a["message_id"];
                for id in ["queue", "partitionId", "message_id"] {
                    a.as_object_mut().unwrap().remove(id);
                }
                if generated {
                    a["transactionId"] = json!("the message_id");
                }
                a
            })
            .collect()
    };
    assert_eq!(
        comparable(&by_http, &http_queue),
        comparable(&by_sql, &sql_queue)
    );
    assert_eq!(by_http[3]["status"], "duplicate");
    assert_eq!(by_http[3]["message_id"], by_http[2]["message_id"]);
    let stored: Vec<Value> = db()
        .await
        .query(
            "SELECT m.payload FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id \
              WHERE p.queue = $1 ORDER BY p.name, m.msg_offset",
            &[&http_queue],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, Option<Value>>(0).unwrap_or(Value::Null))
        .collect();
    assert_eq!(stored, [json!({"n": 1}), json!("x\u{e9}\n"), Value::Null]);
}

/// wire.md: a request body is parsed whatever its Content-Type: `curl -d`
/// sends application/x-www-form-urlencoded, other tools text/plain.
#[tokio::test]
async fn a_body_is_json_whatever_its_content_type() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("ctype");
    for content_type in [
        "application/x-www-form-urlencoded",
        "text/plain",
        "application/octet-stream",
    ] {
        let configure = json!({"queue": queue, "options": {"retryLimit": 7}});
        let (status, answer) = send(
            client()
                .post(gw.url("/api/v1/configure"))
                .header("content-type", content_type)
                .body(configure.to_string()),
        )
        .await;
        assert_eq!(
            (status, &answer["options"]["retryLimit"]),
            (200, &json!(7)),
            "{content_type}: {answer}"
        );
        let push = json!({"items": [{"queue": queue, "payload": content_type}]});
        let (status, answer) = send(
            client()
                .post(gw.url("/api/v1/push"))
                .header("content-type", content_type)
                .body(push.to_string()),
        )
        .await;
        assert_eq!(
            (status, &answer[0]["status"]),
            (200, &json!("queued")),
            "{content_type}: {answer}"
        );
    }
    assert_eq!(stored_messages(&queue).await, 3);
}

#[tokio::test]
async fn push_validation_names_index_and_field_and_writes_nothing() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("invalid");
    let ok = json!({"queue": queue, "payload": 1});
    let cases = [
        (
            json!({"items": [ok, {"payload": 2}]}),
            "items[1].queue is required and must be a string",
        ),
        (
            json!({"items": [ok, {"queue": queue}]}),
            "items[1].payload is required",
        ),
        (
            json!({"items": [ok, ok, {"queue": queue, "payload": 1, "traceId": "nope"}]}),
            "items[2].traceId must be a UUID string",
        ),
        (
            json!({"items": [ok, {"queue": queue, "payload": 1, "transactionId": 5}]}),
            "items[1].transactionId must be a non-empty string",
        ),
        (
            json!({"items": [ok, {"queue": queue, "payload": 1, "partition": ""}]}),
            "items[1].partition must be a non-empty string",
        ),
        (
            json!({"items": [ok, {"queue": queue, "payload": 1, "transactionId": ""}]}),
            "items[1].transactionId must be a non-empty string",
        ),
        (
            json!({"items": [ok, {"queue": queue, "payload": 1, "transactionId": "t".repeat(1025)}]}),
            "items[1].transactionId must be at most 1024 bytes",
        ),
        (
            json!({"items": [ok, {"queue": queue, "payload": 1,
                   "traceId": "{0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90}"}]}),
            "items[1].traceId must be a UUID string",
        ),
        (json!({"items": [ok, 1]}), "items[1] must be an object"),
        (
            json!({"items": {}}),
            "items is required and must be an array",
        ),
        (json!([ok]), "request body must be a JSON object"),
    ];
    for (body, error) in cases {
        let (status, answer) = post(&gw, "/api/v1/push", &body).await;
        assert_eq!((status, answer), (400, json!({"error": error})), "{body}");
    }
    let (status, answer) = send(client().post(gw.url("/api/v1/push")).body("{nope")).await;
    assert_eq!(status, 400);
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .starts_with("request body is not valid JSON"));
    assert_eq!(stored_messages(&queue).await, 0);
    let (status, _) = get(&gw, &format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(status, 404, "a rejected push creates no queue");
}

#[tokio::test]
async fn too_many_items_or_too_many_bytes_is_413() {
    let gw = Gateway::start_with(&[
        ("PGCURSOR_MAX_PUSH_ITEMS", "3"),
        ("PGCURSOR_MAX_BODY_BYTES", "4096"),
    ])
    .await;
    let queue = fresh_queue("big");
    let items: Vec<Value> = (0..4)
        .map(|i| json!({"queue": queue, "payload": i}))
        .collect();
    let (status, body) = post(&gw, "/api/v1/push", &json!({ "items": items })).await;
    assert_eq!(
        (status, body),
        (413, json!({"error": "items has 4 entries; the limit is 3"}))
    );
    let big = json!({"items": [{"queue": queue, "payload": "x".repeat(5000)}]});
    let (status, body) = post(&gw, "/api/v1/push", &big).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["error"].is_string(), "{body}");
    assert_eq!(stored_messages(&queue).await, 0);
}

/// A pop answers at most PGCURSOR_MAX_POP_BATCH messages, whatever batch
/// it asks (the gateway holds an answer in memory); the rest stay for the
/// next pops. A batch that is no positive integer is still a 400.
#[tokio::test]
async fn a_pop_answers_at_most_the_max_pop_batch() {
    let gw = Gateway::start_with(&[("PGCURSOR_MAX_POP_BATCH", "3")]).await;
    let queue = fresh_queue("capped");
    push_n(&gw, &queue, "Default", 5).await;
    let path = format!("/api/v1/pop/queue/{queue}?batch=1000&autoAck=true");
    let (status, first) = get(&gw, &path).await;
    assert_eq!((status, offsets(&first)), (200, vec![1, 2, 3]), "{first}");
    let (status, rest) = get(&gw, &path).await;
    assert_eq!((status, offsets(&rest)), (200, vec![4, 5]), "{rest}");
    let (status, body) = get(&gw, &format!("/api/v1/pop/queue/{queue}?batch=0")).await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "batch must be a positive integer"}))
    );
}

/// A pop also stops at `PGCURSOR_MAX_ANSWER_BYTES` of payload (a batch of
/// large messages would otherwise be an answer of gigabytes, held in the
/// gateway's memory), the first message aside. A client may ask for less
/// with `maxBytes`, not for more; an invalid one is a 400 naming it.
#[tokio::test]
async fn a_pop_answers_at_most_the_max_answer_bytes() {
    let gw = Gateway::start_with(&[("PGCURSOR_MAX_ANSWER_BYTES", "5000")]).await;
    let queue = fresh_queue("heavy");
    let items: Vec<Value> = (0..10)
        .map(|i| json!({"queue": queue, "payload": format!("{i}{}", "x".repeat(1999))}))
        .collect();
    let (status, body) = post(&gw, "/api/v1/push", &json!({ "items": items })).await;
    assert_eq!(status, 200, "{body}");
    let path = |query: &str| format!("/api/v1/pop/queue/{queue}?batch=10&autoAck=true{query}");
    // Payloads of 2,000 characters: two fit in 5,000 bytes, three do not.
    let (status, answer) = get(&gw, &path("")).await;
    assert_eq!((status, offsets(&answer)), (200, vec![1, 2]), "{answer}");
    let (status, answer) = get(&gw, &path("&maxBytes=2500")).await;
    assert_eq!((status, offsets(&answer)), (200, vec![3]), "{answer}");
    let (status, answer) = get(&gw, &path("&maxBytes=1")).await;
    assert_eq!(
        (status, offsets(&answer)),
        (200, vec![4]),
        "the first comes whatever its size: {answer}"
    );
    let (status, answer) = get(&gw, &path("&maxBytes=1000000")).await;
    assert_eq!(
        (status, offsets(&answer)),
        (200, vec![5, 6]),
        "capped at the gateway's: {answer}"
    );
    let (status, body) = get(&gw, &path("&maxBytes=0")).await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "maxBytes must be a positive integer"}))
    );
}

#[tokio::test]
async fn pop_errors_are_404_or_400_with_a_reason() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("poperr");
    push_n(&gw, &queue, "Default", 1).await;
    let missing = fresh_queue("missing");
    let cases = [
        (
            format!("/api/v1/pop/queue/{missing}"),
            404,
            format!("queue not found: {missing}"),
        ),
        (
            format!("/api/v1/pop/queue/{missing}?wait=true&timeout=5000"),
            404,
            format!("queue not found: {missing}"),
        ),
        (
            format!("/api/v1/pop/queue/{queue}?batch=0"),
            400,
            "batch must be a positive integer".into(),
        ),
        (
            format!("/api/v1/pop/queue/{queue}?batch=ten"),
            400,
            "batch must be a positive integer".into(),
        ),
        (
            format!("/api/v1/pop/queue/{queue}?partitions=-1"),
            400,
            "partitions must be a positive integer".into(),
        ),
        (
            format!("/api/v1/pop/queue/{queue}?timeout=soon"),
            400,
            "timeout must be a non-negative integer (milliseconds)".into(),
        ),
        (
            format!("/api/v1/pop/queue/{queue}?wait=maybe"),
            400,
            "wait must be true or false".into(),
        ),
        (
            format!("/api/v1/pop/queue/{queue}?autoAck=maybe"),
            400,
            "autoAck must be a boolean".into(),
        ),
        (
            format!("/api/v1/pop/queue/{queue}?conflation=true"),
            400,
            "conflation is not supported".into(),
        ),
        (
            "/api/v1/pop?batch=1".into(),
            400,
            "queue, or namespace and/or task, is required".into(),
        ),
    ];
    for (path, want_status, error) in cases {
        let (status, body) = get(&gw, &path).await;
        assert_eq!(
            (status, body),
            (want_status, json!({ "error": error })),
            "{path}"
        );
    }
    assert_eq!(
        offsets(&pop(&gw, &queue, "").await),
        vec![1],
        "nothing was leased by the errors"
    );
}

#[tokio::test]
async fn partition_and_namespace_routes_select_what_they_name() {
    let gw = Gateway::start().await;
    let ns = fresh_queue("ns");
    let (a, b) = (fresh_queue("a"), fresh_queue("b"));
    for (queue, task) in [(&a, "t1"), (&b, "t2")] {
        let body = json!({"queue": queue, "namespace": ns, "task": task});
        assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    }
    push_n(&gw, &a, "p1", 2).await;
    push_n(&gw, &a, "p2", 2).await;

    let answer = pop(&gw, &format!("{a}/partition/p2"), "batch=10").await;
    assert_eq!(answer["partition"], "p2");
    assert_eq!(offsets(&answer), vec![1, 2]);
    let (status, answer) = get(&gw, &format!("/api/v1/pop?namespace={ns}&task=t1&batch=10")).await;
    assert_eq!(status, 200);
    assert_eq!(
        (answer["queue"].as_str(), answer["partition"].as_str()),
        (Some(a.as_str()), Some("p1"))
    );
    let (status, answer) = get(&gw, &format!("/api/v1/pop?namespace={ns}&task=t2")).await;
    assert_eq!(
        (status, answer),
        (200, json!({"success": true, "messages": []}))
    );

    // `partitions` on the queue route; autopilot without batch still means 1 message.
    let c = fresh_queue("c");
    push_n(&gw, &c, "p1", 2).await;
    push_n(&gw, &c, "p2", 2).await;
    let answer = pop(&gw, &c, "batch=10&partitions=2&consumerGroup=wide").await;
    assert_eq!(
        (
            answer["partitionsClaimed"].as_i64(),
            messages(&answer).len()
        ),
        (Some(2), 4)
    );
    let answer = pop(&gw, &c, "autopilot=true&consumerGroup=pilot").await;
    assert_eq!(messages(&answer).len(), 1);
}

#[tokio::test]
async fn configure_answers_every_effective_option() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("conf");
    // What the queen client sends for a bare create(), plus a dead-letter option.
    let body = json!({"queue": queue, "namespace": null, "task": null, "options": {
        "leaseTime": 300, "retryLimit": 3, "priority": 0, "delayedProcessing": 0, "windowBuffer": 0,
        "maxSize": 0, "retentionSeconds": 0, "completedRetentionSeconds": 0,
        "encryptionEnabled": false, "deadLetterQueue": true}});
    let (status, answer) = post(&gw, "/api/v1/configure", &body).await;
    assert_eq!(status, 200);
    assert_eq!(
        answer,
        json!({"configured": true, "queue": queue, "namespace": null, "task": null, "options": {
            "leaseTime": 300, "retryLimit": 3, "deadLetterQueue": true, "dlqAfterMaxRetries": null,
            "transactionIndexRetentionSeconds": 86400, "retentionSeconds": 0,
            "completedRetentionSeconds": 0, "delayedProcessing": 0, "maxSize": 0, "priority": 0,
            "windowBuffer": 0, "maxWaitTimeSeconds": 0, "retentionEnabled": null,
            "encryptionEnabled": false}})
    );
    let update = json!({"queue": queue, "namespace": "shop", "options": {"leaseTime": 60}});
    let (_, answer) = post(&gw, "/api/v1/configure", &update).await;
    assert_eq!(
        (
            answer["namespace"].clone(),
            answer["options"]["leaseTime"].clone(),
            answer["options"]["retryLimit"].clone()
        ),
        (json!("shop"), json!(60), json!(3))
    );
}

#[tokio::test]
async fn configure_type_errors_name_the_option_and_change_nothing() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("conferr");
    configure_queue(&gw, &queue).await;
    let cases = [
        (
            json!({"queue": queue, "options": {"leaseTime": "60"}}),
            "options.leaseTime must be a positive integer",
        ),
        (
            json!({"queue": queue, "options": {"retryLimit": 1.5}}),
            "options.retryLimit must be a non-negative integer",
        ),
        (
            json!({"queue": queue, "options": {"deadLetterQueue": "yes"}}),
            "options.deadLetterQueue must be a boolean or null",
        ),
        (
            json!({"queue": queue, "options": []}),
            "options must be an object",
        ),
        (
            json!({"options": {}}),
            "queue is required and must be a string",
        ),
        (json!([]), "request body must be a JSON object"),
    ];
    for (body, error) in cases {
        let (status, answer) = post(&gw, "/api/v1/configure", &body).await;
        assert_eq!((status, answer), (400, json!({ "error": error })), "{body}");
    }
    let (_, detail) = get(&gw, &format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(detail["options"]["leaseTime"], 300);
}

/// Seconds from now until an RFC 3339 instant, by the database's clock.
async fn seconds_until(instant: &Value) -> f64 {
    let text = instant.as_str().expect("a timestamp string").to_string();
    db().await
        .query_one(
            "SELECT extract(epoch FROM $1::text::timestamptz - now())::float8",
            &[&text],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn lease_extend_without_seconds_gives_60_s_never_shortening_and_seconds_otherwise() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("lease");
    let config = json!({"queue": queue, "options": {"leaseTime": 120}});
    assert_eq!(post(&gw, "/api/v1/configure", &config).await.0, 200);
    push_n(&gw, &queue, "Default", 2).await;
    let answer = pop(&gw, &queue, "batch=1").await;
    let lease = answer["leaseId"].as_str().unwrap().to_string();
    let path = format!("/api/v1/lease/{lease}/extend");

    // The queen client's renew: no body, no Content-Type.
    let (status, body) = send(client().post(gw.url(&path))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        keys(&body),
        BTreeSet::from(["leaseId", "success", "newExpiresAt", "renewed", "error"])
    );
    assert_eq!(
        (
            body["leaseId"].as_str(),
            &body["success"],
            &body["renewed"],
            &body["error"]
        ),
        (Some(lease.as_str()), &json!(true), &json!(1), &Value::Null)
    );
    assert!(
        body["newExpiresAt"].as_str().unwrap().ends_with('Z'),
        "{body}"
    );
    let left = seconds_until(&body["newExpiresAt"]).await;
    assert!(
        (110.0..=121.0).contains(&left),
        "60 s would shorten the 120 s lease: it is kept, {left}"
    );
    // With less than 60 s left, the same call gives 60 s, not the leaseTime's 120.
    let lease_id: Uuid = lease.parse().unwrap();
    db().await
        .execute(
            "UPDATE pgcursor.cursors SET lease_expires_at = now() + interval '5 s' WHERE lease_id = $1",
            &[&lease_id],
        )
        .await
        .unwrap();
    let (status, body) = send(client().post(gw.url(&path))).await;
    assert_eq!((status, &body["success"]), (200, &json!(true)), "{body}");
    let left = seconds_until(&body["newExpiresAt"]).await;
    assert!((55.0..=61.0).contains(&left), "60 s, not 120: {left}");

    let (status, body) = post(&gw, &path, &json!({"seconds": 1000})).await;
    assert_eq!((status, &body["success"]), (200, &json!(true)));
    let left = seconds_until(&body["newExpiresAt"]).await;
    assert!((990.0..=1001.0).contains(&left), "{left}");

    let (status, body) = post(&gw, &path, &json!({"seconds": 0})).await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "seconds must be a positive integer"}))
    );

    // Released by the ack: nothing left to extend.
    ack_all(&gw, &answer).await;
    let (status, body) = send(client().post(gw.url(&path))).await;
    assert_eq!(
        (status, &body["success"], &body["error"]),
        (200, &json!(false), &json!("invalid or expired lease"))
    );
}

#[tokio::test]
async fn lease_extend_of_an_unknown_or_malformed_lease() {
    let gw = Gateway::start().await;
    let unknown = Uuid::now_v7();
    let (status, body) =
        send(client().post(gw.url(&format!("/api/v1/lease/{unknown}/extend")))).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"leaseId": unknown, "success": false, "newExpiresAt": null, "renewed": 0,
               "error": "invalid or expired lease"})
    );
    let (status, body) = send(client().post(gw.url("/api/v1/lease/not-a-uuid/extend"))).await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "leaseId is required and must be a UUID string"})
        )
    );
}
