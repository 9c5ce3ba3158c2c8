//! The queue options Queen's clients send, each enforced (docs/http-api.md,
//! Queue options): delayedProcessing, windowBuffer, maxSize; configure
//! refusing an unknown option; subscriptionMode and empty queue names as
//! Queen reads them; message_id; the 60-second lease extension default;
//! retryLimit over HTTP acks; priority in namespace pops. (The retention
//! options: retention.rs.)

use std::time::Duration;

use pgcursor_tests::{db, Gateway};
use serde_json::{json, Value};

use crate::broker::{ack_all_as, fresh_queue, get, messages, offsets, pop, post, push_n};

async fn configure(gw: &Gateway, queue: &str, options: Value) -> Value {
    let (status, body) = post(
        gw,
        "/api/v1/configure",
        &json!({"queue": queue, "options": options}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn configure_echoes_every_option_and_refuses_an_unknown_one() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("opts");
    let all = json!({"leaseTime": 30, "retryLimit": 2, "deadLetterQueue": true, "dlqAfterMaxRetries": false,
        "transactionIndexRetentionSeconds": 600, "retentionSeconds": 7, "completedRetentionSeconds": 8,
        "retentionEnabled": false, "delayedProcessing": 1, "windowBuffer": 2, "maxSize": 100,
        "maxWaitTimeSeconds": 900, "priority": 4, "encryptionEnabled": false});
    let answer = configure(&gw, &queue, all.clone()).await;
    assert_eq!(answer["options"], all, "every option stored is echoed");
    let (status, body) = post(
        &gw,
        "/api/v1/configure",
        &json!({"queue": queue, "options": {"leaseTime": 99, "ttl": 5}}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("options.ttl is not a queue option"))
    );
    let (_, detail) = get(&gw, &format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(
        detail["options"]["leaseTime"], 30,
        "a refused configure changes nothing"
    );
}

#[tokio::test]
async fn a_delayed_message_is_invisible_until_its_time_then_delivered_in_order() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("delay");
    // Each look comes about 2 s before or after a message is due, so that
    // a slow machine (a first pop on Citus) does not move it across.
    configure(&gw, &queue, json!({"delayedProcessing": 4})).await;
    push_n(&gw, &queue, "Default", 1).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let (_, second) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [
        {"queue": queue, "payload": 2, "transactionId": "later"}]}),
    )
    .await;
    assert_eq!(second[0]["status"], "queued");
    assert!(
        messages(&pop(&gw, &queue, "batch=10").await).is_empty(),
        "both still delayed"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let first = pop(&gw, &queue, "batch=10").await;
    assert_eq!(
        offsets(&first),
        vec![1],
        "only the first is old enough: the prefix in order"
    );
    crate::broker::ack_all(&gw, &first).await;
    assert!(
        messages(&pop(&gw, &queue, "batch=10").await).is_empty(),
        "the second is not due yet"
    );
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(offsets(&pop(&gw, &queue, "batch=10").await), vec![2]);
}

#[tokio::test]
async fn a_window_buffered_partition_waits_until_it_has_been_quiet() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("window");
    configure(&gw, &queue, json!({"windowBuffer": 2})).await;
    push_n(&gw, &queue, "Default", 2).await;
    assert!(
        messages(&pop(&gw, &queue, "batch=10").await).is_empty(),
        "newest message too young"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    push_n(&gw, &queue, "other", 1).await; // another partition's push does not reset this one's window
    let (_, more) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [
        {"queue": queue, "payload": 3, "transactionId": "p3"}]}),
    )
    .await;
    assert_eq!(
        more[0]["offset"], 3,
        "a new message restarts this partition's quiet time"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let answer = get(
        &gw,
        &format!("/api/v1/pop/queue/{queue}/partition/Default?batch=10"),
    )
    .await
    .1;
    assert_eq!(
        answer,
        json!({"success": true, "messages": [], "windowBufferActive": true, "leaseId": ""}),
        "quiet for 1.2 s only since message 3: the named partition's window is open, as Queen says"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let answer = get(
        &gw,
        &format!("/api/v1/pop/queue/{queue}/partition/Default?batch=10"),
    )
    .await
    .1;
    assert_eq!(
        offsets(&answer),
        vec![1, 2, 3],
        "then every pending message, up to batch"
    );
}

#[tokio::test]
async fn max_size_refuses_the_items_past_capacity_and_accepts_the_rest() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("full");
    configure(&gw, &queue, json!({"maxSize": 3})).await;
    push_n(&gw, &queue, "a", 2).await;
    let items: Vec<Value> = (1..=3)
        .map(|i| json!({"queue": queue, "partition": "b", "payload": i, "transactionId": format!("b-{i}")}))
        .collect();
    let (status, answer) = post(&gw, "/api/v1/push", &json!({"items": items})).await;
    assert_eq!(status, 200);
    let statuses: Vec<&str> = answer
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["queued", "failed", "failed"], "{answer}");
    assert_eq!(answer[1]["error"], "queue is full");
    assert_eq!(answer[1]["offset"], Value::Null);
    assert_eq!(
        crate::broker::stored_messages(&queue).await,
        3,
        "nothing past capacity was stored"
    );
    // Consuming makes room again: depth counts what some group has not consumed.
    let popped = pop(&gw, &queue, "batch=10&partitions=2").await;
    crate::broker::ack_all(&gw, &popped).await;
    let (_, answer) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [
        {"queue": queue, "partition": "b", "payload": 2, "transactionId": "b-2"}]}),
    )
    .await;
    assert_eq!(answer[0]["status"], "queued", "{answer}");
}

/// Concurrent pushes to a queue with a maxSize each locked heads and then
/// the queue's row. On Citus, where that row is a reference table's (locked
/// on every node), pushes holding heads while they waited for it deadlocked
/// across nodes (the gateway's retries hid most; five at once outlasted
/// them). They now take the queue's turn before any head and lock no queue
/// row, so none is a deadlock's victim (not one retry in the gateway's log)
/// and a session holding the queue's row holds none of them up.
#[tokio::test]
async fn concurrent_pushes_to_a_queue_with_a_max_size_wait_their_turn_without_deadlocks() {
    let gw = pgcursor_tests::GatewayConfig::new()
        .pool_size(5)
        .env("PGCURSOR_DB_TIMEOUT_MS", "60000")
        .start()
        .await;
    let queue = fresh_queue("full-turns");
    configure(&gw, &queue, json!({"maxSize": 1000})).await;
    let mut holder = db().await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        "SELECT FROM pgcursor.queues WHERE name = $1 FOR UPDATE",
        &[&queue],
    )
    .await
    .unwrap();
    let pushes: Vec<_> = (0..12)
        .map(|i| {
            let items = json!({"items": [{"queue": queue, "partition": format!("p{}", i % 3), "payload": i}]});
            tokio::spawn(crate::broker::send(
                pgcursor_tests::client().post(gw.url("/api/v1/push")).json(&items),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    tx.commit().await.unwrap();
    for push in pushes {
        let (status, body) = push.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body[0]["status"], "queued", "{body}");
    }
    assert_eq!(crate::broker::stored_messages(&queue).await, 12);
    let log = gw.stderr();
    assert!(!log.contains("deadlock"), "{log}");
}

#[tokio::test]
async fn subscription_mode_follows_queens_rule_and_empty_queue_names_work() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("submode");
    push_n(&gw, &queue, "Default", 2).await;
    let all = pop(
        &gw,
        &queue,
        "consumerGroup=old&subscriptionMode=from_beginning&batch=10",
    )
    .await;
    assert_eq!(
        offsets(&all),
        vec![1, 2],
        "any value but new/new-only means all"
    );
    for (group, mode) in [("n1", "new"), ("n2", "new-only")] {
        let answer = pop(
            &gw,
            &queue,
            &format!("consumerGroup={group}&subscriptionMode={mode}"),
        )
        .await;
        assert!(messages(&answer).is_empty(), "{mode}: starts at the head");
    }
    push_n(&gw, &queue, "x", 1).await;
    // The empty name is a name (Queen's rule): push, configure, read back, ack.
    // Not popped here: neither HTTP pop route can name "" (the path needs a
    // segment; the selection route reads `queue=` as absent). pgTAP pops it
    // through pgcursor.pop (25_queue_options.sql).
    let (status, pushed) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [{"queue": "", "payload": 1}]}),
    )
    .await;
    assert_eq!(
        (status, &pushed[0]["status"]),
        (200, &json!("queued")),
        "{pushed}"
    );
    let (status, _) = post(&gw, "/api/v1/configure", &json!({"queue": ""})).await;
    assert_eq!(status, 200);
    let (pid, tx) = (&pushed[0]["partitionId"], &pushed[0]["transactionId"]);
    let detail = format!(
        "/api/v1/messages/{}/{}",
        pid.as_str().unwrap(),
        tx.as_str().unwrap()
    );
    let (status, shown) = get(&gw, &detail).await;
    assert_eq!((status, &shown["queue"]), (200, &json!("")), "{shown}");
    let ack = json!({"transactionId": tx, "partitionId": pid, "status": "completed"});
    let (status, acked) = post(&gw, "/api/v1/ack", &ack).await;
    assert_eq!(
        (status, &acked[0]["success"]),
        (200, &json!(true)),
        "{acked}"
    );
}

#[tokio::test]
async fn message_id_is_answered_on_push_and_shown_on_pop_and_detail() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("mid");
    let pushed = push_n(&gw, &queue, "Default", 2).await;
    let id = pushed[0]["message_id"]
        .as_str()
        .expect("a message_id")
        .to_string();
    assert_ne!(pushed[1]["message_id"], pushed[0]["message_id"]);
    let (_, again) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [
        {"queue": queue, "payload": "dup", "transactionId": "Default-1"}]}),
    )
    .await;
    assert_eq!(
        (again[0]["status"].as_str(), again[0]["message_id"].as_str()),
        (Some("duplicate"), Some(id.as_str())),
        "a duplicate answers the original's id"
    );
    let popped = pop(&gw, &queue, "batch=1").await;
    assert_eq!(messages(&popped)[0]["id"], json!(id));
    let pid = pushed[0]["partitionId"].as_str().unwrap();
    let (_, detail) = get(&gw, &format!("/api/v1/messages/{pid}/Default-1")).await;
    assert_eq!(detail["id"], json!(id));
    let stored: uuid::Uuid = db().await
        .query_one("SELECT message_id FROM pgcursor.messages WHERE partition_id = $1::text::uuid AND msg_offset = 1", &[&pid])
        .await.unwrap().get(0);
    assert_eq!(stored.to_string(), id, "stored once, with the message");
}

#[tokio::test]
async fn a_lease_extension_without_seconds_extends_by_60_seconds() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("renew");
    configure(&gw, &queue, json!({"leaseTime": 2})).await;
    push_n(&gw, &queue, "Default", 1).await;
    let popped = pop(&gw, &queue, "batch=1").await;
    let lease = popped["leaseId"].as_str().unwrap();
    // No body (Queen's client), then `{}` (wire-admin §11.2: both give 60 s).
    for body in [None, Some("{}")] {
        db().await
            .execute(
                "UPDATE pgcursor.cursors SET lease_expires_at = now() + interval '2 s'
                  WHERE lease_id = $1::text::uuid",
                &[&lease],
            )
            .await
            .unwrap();
        let mut request =
            pgcursor_tests::client().post(gw.url(&format!("/api/v1/lease/{lease}/extend")));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        assert_eq!(request.send().await.unwrap().status(), 200, "{body:?}");
        let left: f64 = db()
            .await
            .query_one(
                "SELECT extract(epoch FROM max(lease_expires_at) - now())::float8 FROM pgcursor.cursors
                         WHERE lease_id = $1::text::uuid",
                &[&lease],
            )
            .await
            .unwrap()
            .get(0);
        assert!(
            (55.0..=61.0).contains(&left),
            "a 2-second lease renewed with body {body:?} lasts ~60 s, not 2: {left}"
        );
    }
}

#[tokio::test]
async fn a_configured_retry_limit_is_spent_by_failed_acks_then_the_message_is_dead_lettered() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("retry");
    configure(&gw, &queue, json!({"retryLimit": 2})).await;
    push_n(&gw, &queue, "Default", 2).await;
    let dlq = format!("/api/v1/dlq?queue={queue}");
    for call in 1..=2 {
        let popped = pop(&gw, &queue, "batch=1").await;
        assert_eq!(offsets(&popped), vec![1], "failed call {call} redelivers");
        let results = ack_all_as(&gw, &popped, "failed").await;
        assert_eq!(results[0]["dlq"], false, "call {call}: {results}");
        assert_eq!(
            get(&gw, &dlq).await.1["total"],
            0,
            "nothing dead-lettered yet"
        );
    }
    let popped = pop(&gw, &queue, "batch=1").await;
    assert_eq!(
        offsets(&popped),
        vec![1],
        "the budget of 2 is spent, not yet past"
    );
    let results = ack_all_as(&gw, &popped, "failed").await;
    assert_eq!(
        results[0]["dlq"], true,
        "the third failure dead-letters: {results}"
    );
    let (_, dead) = get(&gw, &dlq).await;
    assert_eq!(dead["total"], 1, "{dead}");
    assert_eq!(
        (
            &dead["messages"][0]["offset"],
            &dead["messages"][0]["retryCount"]
        ),
        (&json!(1), &json!(2)),
        "{dead}"
    );
    assert_eq!(
        offsets(&pop(&gw, &queue, "batch=1").await),
        vec![2],
        "the queue moves on"
    );
}

#[tokio::test]
async fn a_namespace_pop_serves_the_higher_priority_queue_first() {
    let gw = Gateway::start().await;
    let ns = fresh_queue("prio");
    // low sorts first by name, is created first and has the older partition
    // id: only its priority puts it second.
    let (low, high) = (format!("{ns}-a"), format!("{ns}-b"));
    for (queue, priority) in [(&low, 0), (&high, 5)] {
        let body = json!({"queue": queue, "namespace": ns, "options": {"priority": priority}});
        assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
        push_n(&gw, queue, "Default", 2).await;
    }
    let path = format!("/api/v1/pop?namespace={ns}&batch=2");
    for expected in [&high, &low] {
        let (status, answer) = get(&gw, &path).await;
        assert_eq!(status, 200, "{answer}");
        let queues: Vec<&str> = messages(&answer)
            .iter()
            .map(|m| m["queue"].as_str().unwrap())
            .collect();
        assert_eq!(queues, [expected.as_str(); 2], "{answer}");
        crate::broker::ack_all(&gw, &answer).await;
    }
    assert!(messages(&get(&gw, &path).await.1).is_empty());
}
