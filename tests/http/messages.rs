//! The message browser: GET /api/v1/messages, the detail's Queen fields,
//! DELETE /api/v1/messages/{partitionId}/{transactionId} and
//! POST /api/v1/messages/{partitionId}/{transactionId}/retry.

use std::time::{Duration, Instant};

use pgcursor_tests::{client, db, Gateway};
use serde_json::{json, Value};

use crate::broker::{
    drop_database, fresh_queue, get, offsets, pop, post, push_n, scratch_database, send,
};

/// "partition:offset:status" of a listing, in answer order.
fn rows(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}:{}:{}",
                m["partition"].as_str().unwrap(),
                m["offset"],
                m["status"].as_str().unwrap()
            )
        })
        .collect()
}

async fn listing(gw: &Gateway, query: &str) -> Value {
    let (status, body) = get(gw, &format!("/api/v1/messages?{query}")).await;
    assert_eq!(status, 200, "{query}: {body}");
    body
}

/// Dead-letters `<partition>-<offset>` for `group`.
async fn kill(gw: &Gateway, partition_id: &str, partition: &str, group: &str, offset: usize) {
    let ack = json!({"transactionId": format!("{partition}-{offset}"), "partitionId": partition_id,
                     "consumerGroup": group, "status": "dlq", "error": "poison"});
    let (status, answer) = post(gw, "/api/v1/ack", &ack).await;
    assert_eq!((status, &answer[0]["dlq"]), (200, &json!(true)), "{answer}");
}

async fn delete(gw: &Gateway, path: &str) -> (u16, Value) {
    send(client().delete(gw.url(path))).await
}

fn pid(pushed: &Value) -> String {
    pushed[0]["partitionId"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn listing_shows_each_status_newest_first_and_filters_before_paging() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("browse");
    let a = pid(&push_n(&gw, &queue, "a", 5).await);
    push_n(&gw, &queue, "b", 1).await;
    // a: 1..2 completed, 3..4 leased, 5 pending; 1 dead-lettered by audit.
    let a_path = format!("/api/v1/pop/queue/{queue}/partition/a?batch=2");
    let (_, done) = get(&gw, &format!("{a_path}&autoAck=true")).await;
    assert_eq!(done["messages"].as_array().unwrap().len(), 2, "{done}");
    let (_, leased) = get(&gw, &a_path).await;
    assert_eq!(leased["messages"].as_array().unwrap().len(), 2, "{leased}");
    kill(&gw, &a, "a", &format!("{queue}-audit"), 1).await;

    let all = listing(&gw, &format!("queue={queue}&partition=a")).await;
    assert_eq!(
        rows(&all),
        [
            "a:5:pending",
            "a:4:processing",
            "a:3:processing",
            "a:2:completed",
            "a:1:dead_letter"
        ]
    );
    assert_eq!(
        all["mode"],
        json!({"type": "hybrid", "hasQueueMode": true, "busGroupsCount": 1})
    );
    let first = &all["messages"][0];
    assert_eq!(first["queuePath"], format!("{queue}/a"));
    assert_eq!(
        first["busStatus"],
        json!({"consumedBy": 0, "totalGroups": 1})
    );
    assert_eq!(
        all["messages"][4]["busStatus"],
        json!({"consumedBy": 1, "totalGroups": 1})
    );
    assert_eq!(first["transactionId"], "a-5");
    assert!(
        first.get("payload").is_none() && first.get("data").is_none(),
        "no payload: {first}"
    );

    // The status filter applies before limit and offset.
    let page = listing(
        &gw,
        &format!("queue={queue}&status=pending&limit=1&offset=1"),
    )
    .await;
    assert_eq!(rows(&page).len(), 1);
    assert_eq!(page["messages"][0]["status"], "pending");
    let pending = listing(&gw, &format!("queue={queue}&status=pending")).await;
    assert_eq!(rows(&pending).len(), 2, "a:5 and b:1");
    assert_eq!(
        rows(&listing(&gw, &format!("queue={queue}&status=failed")).await).len(),
        0
    );
    // C's consumerGroup is ignored; empty values count as absent.
    let same = listing(
        &gw,
        &format!("queue={queue}&partition=a&consumerGroup=x&limit=&status="),
    )
    .await;
    assert_eq!(rows(&same), rows(&all));
    // The window: nothing an hour from now, nothing before yesterday.
    let later = listing(&gw, &format!("queue={queue}&from=2999-01-01T00:00:00Z")).await;
    assert_eq!(
        later,
        json!({"messages": [], "mode": {"type": "none", "hasQueueMode": false, "busGroupsCount": 0}})
    );
    let before = listing(
        &gw,
        &format!("queue={queue}&from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z"),
    )
    .await;
    assert_eq!(rows(&before).len(), 0);
}

#[tokio::test]
async fn listing_by_offset_range_reaches_old_messages() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("offsets");
    let a = pid(&push_n(&gw, &queue, "a", 5).await);
    push_n(&gw, &queue, "b", 3).await;
    // Offsets 1..3 of a are older than the default hour.
    db().await
        .execute(
            "UPDATE pgcursor.messages SET created_at = now() - interval '3 hours' \
             WHERE partition_id = $1::text::uuid AND msg_offset <= 3",
            &[&a],
        )
        .await
        .unwrap();
    assert_eq!(
        rows(&listing(&gw, &format!("queue={queue}&partition=a")).await),
        ["a:5:pending", "a:4:pending"],
        "by default only the last hour"
    );
    let range = listing(
        &gw,
        &format!("queue={queue}&partition=a&fromOffset=2&toOffset=4"),
    )
    .await;
    assert_eq!(rows(&range), ["a:4:pending", "a:3:pending", "a:2:pending"]);
    // Each partition's own offsets; from/to still bound the window when given.
    let both = listing(&gw, &format!("queue={queue}&fromOffset=3&toOffset=3")).await;
    assert_eq!(rows(&both), ["b:3:pending", "a:3:pending"]);
    let recent = listing(
        &gw,
        &format!("queue={queue}&partition=a&toOffset=4&from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z"),
    )
    .await;
    assert_eq!(rows(&recent).len(), 0);
}

/// `transactionId` lists the messages carrying it in every partition the
/// other filters select, whatever their age, unless from/to are given.
#[tokio::test]
async fn listing_by_transaction_id_finds_it_in_any_partition() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("by-txid");
    let a = pid(&push_n(&gw, &queue, "a", 3).await);
    push_n(&gw, &queue, "b", 3).await;
    let again = json!({"items": [{"queue": queue, "partition": "c", "transactionId": "a-2", "payload": 1}]});
    let (status, body) = post(&gw, "/api/v1/push", &again).await;
    assert_eq!(status, 200, "{body}");
    // a's copy is older than the default hour.
    db().await
        .execute(
            "UPDATE pgcursor.messages SET created_at = now() - interval '3 hours' \
             WHERE partition_id = $1::text::uuid",
            &[&a],
        )
        .await
        .unwrap();
    let found = listing(&gw, &format!("queue={queue}&transactionId=a-2")).await;
    assert_eq!(rows(&found), ["c:1:pending", "a:2:pending"], "{found}");
    assert!(found["messages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["transactionId"] == "a-2"));
    let in_a = listing(&gw, &format!("queue={queue}&partition=a&transactionId=a-2")).await;
    assert_eq!(rows(&in_a), ["a:2:pending"]);
    let long_ago = listing(
        &gw,
        &format!(
            "queue={queue}&transactionId=a-2&from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z"
        ),
    )
    .await;
    assert_eq!(rows(&long_ago).len(), 0, "from/to still bound it");
    let unknown = listing(&gw, &format!("queue={queue}&transactionId=a-9")).await;
    assert_eq!(rows(&unknown).len(), 0);
    let (status, body) = get(
        &gw,
        &format!("/api/v1/messages?queue={queue}&transactionId="),
    )
    .await;
    assert_eq!(
        (status, rows(&body).len()),
        (200, 4),
        "empty: no filter, the last hour: b and c"
    );
}

#[tokio::test]
async fn listing_refuses_bad_timestamps_and_counts_naming_them() {
    let gw = Gateway::start().await;
    for (query, field) in [
        ("from=yesterday-ish", "from"),
        ("to=13:99", "to"),
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("offset=-1", "offset"),
        ("fromOffset=-1", "fromOffset"),
        ("toOffset=x", "toOffset"),
        ("fromOffset=3&toOffset=2", "toOffset"),
    ] {
        let (status, body) = get(&gw, &format!("/api/v1/messages?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"].as_str().unwrap().starts_with(field),
            "{query}: {body}"
        );
    }
}

#[tokio::test]
async fn detail_has_queens_fields() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("detail");
    let (status, _) = post(
        &gw,
        "/api/v1/configure",
        &json!({"queue": queue, "options": {"leaseTime": 45, "retryLimit": 2}}),
    )
    .await;
    assert_eq!(status, 200);
    let p = pid(&push_n(&gw, &queue, "Default", 2).await);
    let billing = format!("{queue}-billing");
    kill(&gw, &p, "Default", &billing, 1).await;
    let (status, m) = get(&gw, &format!("/api/v1/messages/{p}/Default-1")).await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["status"], "dead_letter");
    assert_eq!(
        (&m["errorMessage"], &m["retryCount"]),
        (&json!("poison"), &json!(0))
    );
    assert_eq!(
        m["queueConfig"],
        json!({"leaseTime": 45, "retryLimit": 2, "retryDelay": 1000, "ttl": 3600, "priority": 0})
    );
    assert_eq!(
        m["consumerGroups"],
        json!([{"name": billing, "consumed": true, "leaseExpiresAt": null}])
    );
    assert_eq!(
        m["mode"],
        json!({"hasQueueMode": false, "busGroupsCount": 1, "consumedByGroups": 1, "type": "bus"})
    );
    assert_eq!(
        (&m["isEncrypted"], &m["producerSub"]),
        (&json!(false), &Value::Null)
    );
    assert_eq!(m["queuePath"], format!("{queue}/Default"));
    let (_, other) = get(&gw, &format!("/api/v1/messages/{p}/Default-2")).await;
    assert_eq!(
        (&other["status"], &other["errorMessage"]),
        (&json!("pending"), &Value::Null)
    );
}

#[tokio::test]
async fn delete_removes_the_message_its_dead_letters_and_traces() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("delete");
    let p = pid(&push_n(&gw, &queue, "Default", 3).await);
    kill(&gw, &p, "Default", &format!("{queue}-g1"), 2).await;
    kill(&gw, &p, "Default", &format!("{queue}-g2"), 2).await;
    let trace = json!({"partitionId": p, "transactionId": "Default-2", "data": {"text": "x"}});
    assert_eq!(post(&gw, "/api/v1/traces", &trace).await.0, 201);

    let (status, answer) = delete(&gw, &format!("/api/v1/messages/{p}/Default-2")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"success": true, "partitionId": p, "transactionId": "Default-2",
                              "message": "Message deleted successfully"})
    );
    assert_eq!(
        get(&gw, &format!("/api/v1/messages/{p}/Default-2")).await.0,
        404
    );
    let (_, dlq) = get(&gw, &format!("/api/v1/dlq?queue={queue}")).await;
    assert_eq!(dlq["total"], 0, "{dlq}");
    let (_, traces) = get(&gw, &format!("/api/v1/traces/{p}/Default-2")).await;
    assert_eq!(traces, json!({"traces": []}));
    // Cursors did not move: g1 and g2 stand where their dlq acks left them.
    let (_, cursors) = get(&gw, &format!("/api/v1/partitions/{p}/cursors")).await;
    let at: Vec<i64> = cursors
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cursor"].as_i64().unwrap())
        .collect();
    assert_eq!(at, [2, 2], "{cursors}");

    // Nothing left: 200 with success false. The transactionId is free again.
    let (status, again) = delete(&gw, &format!("/api/v1/messages/{p}/Default-2")).await;
    assert_eq!(
        (status, &again["success"], &again["message"]),
        (200, &json!(false), &json!("Message not found"))
    );
    let repush = json!({"items": [{"queue": queue, "transactionId": "Default-2", "payload": 1}]});
    let (_, pushed) = post(&gw, "/api/v1/push", &repush).await;
    assert_eq!(pushed[0]["status"], "queued", "{pushed}");

    let (status, bad) = delete(&gw, "/api/v1/messages/not-a-uuid/x").await;
    assert_eq!(
        (status, &bad["error"]),
        (400, &json!("partitionId must be a UUID string"))
    );
}

/// Deleting the one message of a live leased batch releases the lease, and
/// a pop long-polling the queue wakes at once for the message after it (not
/// at its periodic re-look, 5 s after its last empty look).
#[tokio::test]
async fn deleting_a_leased_batch_s_message_wakes_a_waiting_pop() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("delete-wake");
    let p = pid(&push_n(&gw, &queue, "Default", 2).await);
    assert_eq!(offsets(&pop(&gw, &queue, "batch=1").await), [1]);
    let url = gw.url(&format!(
        "/api/v1/pop/queue/{queue}?batch=1&wait=true&timeout=20000"
    ));
    let waiter = tokio::spawn(async move { send(client().get(url)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the pop did not wait");

    let started = Instant::now();
    let (status, answer) = delete(&gw, &format!("/api/v1/messages/{p}/Default-1")).await;
    assert_eq!(
        (status, &answer["success"]),
        (200, &json!(true)),
        "{answer}"
    );
    let (status, popped) = waiter.await.unwrap();
    let woke_after = started.elapsed();
    assert_eq!((status, offsets(&popped)), (200, vec![2]), "{popped}");
    assert!(
        woke_after < Duration::from_secs(2),
        "woke after {woke_after:?}"
    );
}

#[tokio::test]
async fn delete_finds_a_dead_letter_whose_message_retention_removed() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("delete-gone");
    let p = pid(&push_n(&gw, &queue, "Default", 1).await);
    kill(&gw, &p, "Default", &format!("{queue}-g"), 1).await;
    let id: uuid::Uuid = p.parse().unwrap();
    let db = db().await;
    db.execute(
        "DELETE FROM pgcursor.messages WHERE partition_id = $1",
        &[&id],
    )
    .await
    .unwrap();
    db.execute(
        "DELETE FROM pgcursor.transaction_index WHERE partition_id = $1",
        &[&id],
    )
    .await
    .unwrap();
    let (status, answer) = delete(&gw, &format!("/api/v1/messages/{p}/Default-1")).await;
    assert_eq!(
        (status, &answer["success"]),
        (200, &json!(true)),
        "{answer}"
    );
    let (_, dlq) = get(&gw, &format!("/api/v1/dlq?queue={queue}")).await;
    assert_eq!(dlq["total"], 0, "{dlq}");
}

#[tokio::test]
async fn retry_requeues_the_dead_letters_of_a_message() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("retry");
    let p = pid(&push_n(&gw, &queue, "Default", 2).await);
    kill(&gw, &p, "Default", &format!("{queue}-g"), 1).await;
    let path = format!("/api/v1/messages/{p}/Default-1/retry");
    let (status, answer) = send(client().post(gw.url(&path))).await; // no body, as queen-mq sends it
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (&answer["success"], &answer["transactionId"]),
        (&json!(true), &json!("Default-1"))
    );
    let requeued = &answer["requeued"][0];
    assert_eq!(
        (&requeued["offset"], &requeued["partitionId"]),
        (&json!(3), &json!(p)),
        "{answer}"
    );
    let (_, dlq) = get(&gw, &format!("/api/v1/dlq?queue={queue}")).await;
    assert_eq!(dlq["total"], 0, "{dlq}");
    // The group gets the payload again, as a new message.
    let popped = pop(&gw, &queue, &format!("consumerGroup={queue}-g&batch=10")).await;
    let payloads: Vec<&Value> = popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["data"])
        .collect();
    assert_eq!(payloads, [&json!({"i": 2}), &json!({"i": 1})]);
    // No dead letter (any more): 404.
    let (status, body) = send(client().post(gw.url(&path))).await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = send(client().post(gw.url("/api/v1/messages/nope/x/retry"))).await;
    assert_eq!(status, 400);
}

/// A timestamp without an offset in a request is read as UTC, as every
/// answer is written, even on a database whose default TimeZone is another
/// (the gateway's sessions run in UTC).
#[tokio::test]
async fn a_timestamp_without_an_offset_is_utc_whatever_the_servers_zone() {
    let (database, url) = scratch_database(&["TimeZone = 'Asia/Kolkata'"]).await;
    let gw = Gateway::start_with(&[("DATABASE_URL", &url)]).await;
    let queue = fresh_queue("tz");
    for n in 1..=2 {
        let body = json!({"items": [{"queue": queue, "payload": n}]});
        assert_eq!(post(&gw, "/api/v1/push", &body).await.0, 200);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let all = listing(&gw, &format!("queue={queue}")).await;
    let newest = all["messages"][0]["createdAt"]
        .as_str()
        .unwrap()
        .to_string();
    let zoneless = newest.trim_end_matches('Z');
    assert_ne!(zoneless, newest, "{all}");
    let answer = listing(&gw, &format!("queue={queue}&from={zoneless}")).await;
    assert_eq!(rows(&answer), vec!["Default:2:pending"], "{answer}");
    drop(gw);
    drop_database(&database).await;
}
