//! Retention and eviction as the housekeeping clock runs them
//! (docs/http-api.md, Queue options; sql/80_retention.sql): retentionSeconds
//! (dead letters included, by failedAt), completedRetentionSeconds,
//! retentionEnabled false and maxWaitTimeSeconds. Each test runs a gateway
//! whose clock ticks every second and ages its own queue's messages by
//! moving created_at back. Housekeeping is database-wide: only these
//! queues carry retention options, so no other test's messages are touched.

use std::time::Duration;

use pgcursor_tests::{db, Gateway};
use serde_json::{json, Value};

use crate::broker::{
    age_messages, eventually, fresh_queue, get, offsets, post, push_n, seconds_before,
    stored_column,
};
use crate::dlq::{kill, listing};

/// Several runs, and another test holding the lock for a while meanwhile.
const WITHIN: Duration = Duration::from_secs(30);

async fn housekeeping_gateway() -> Gateway {
    Gateway::start_with(&[("PGCURSOR_HOUSEKEEPING_SECONDS", "1")]).await
}

async fn configure(gw: &Gateway, queue: &str, options: Value) -> String {
    let body = json!({"queue": queue, "options": options});
    let (status, answer) = post(gw, "/api/v1/configure", &body).await;
    assert_eq!(status, 200, "{answer}");
    queue.to_string()
}

/// The queue's stored messages as "partition:offset", sorted (from the database).
async fn stored(queue: &str) -> Vec<String> {
    stored_column(queue, "p.name || ':' || m.msg_offset").await
}

/// The queue's messages as GET /api/v1/messages lists them (any age), sorted like `stored`.
async fn listed(gw: &Gateway, queue: &str) -> Vec<String> {
    let path = format!("/api/v1/messages?queue={queue}&from=2000-01-01T00:00:00Z&limit=1000");
    let (status, body) = get(gw, &path).await;
    assert_eq!(status, 200, "{body}");
    let mut rows: Vec<String> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}:{}", m["partition"].as_str().unwrap(), m["offset"]))
        .collect();
    rows.sort();
    rows
}

/// Waits until `queue`'s stored messages are `left`, then checks that a
/// client listing sees the same.
async fn wait_left(gw: &Gateway, queue: &str, left: &[&str]) {
    let what = format!(
        "{queue} down to {left:?} (stored now: {:?})",
        stored(queue).await
    );
    eventually(&what, WITHIN, || async { stored(queue).await == left }).await;
    assert_eq!(listed(gw, queue).await, left, "what a client lists");
}

/// Moves the failedAt of `queue`'s dead letters at `offset` back by `seconds`.
async fn age_dead_letter(queue: &str, offset: i64, seconds: i32) {
    db().await
        .execute(
            &format!(
                "UPDATE pgcursor.dead_letters d SET failed_at = {}
                   FROM pgcursor.partitions p
                  WHERE p.id = d.partition_id AND p.queue = $1 AND d.msg_offset = $2",
                seconds_before("d.failed_at", "$3")
            ),
            &[&queue, &offset, &seconds],
        )
        .await
        .expect("age the dead letter");
}

/// The offsets of the queue's dead letters, as GET /api/v1/dlq lists them.
async fn dead_letters(gw: &Gateway, queue: &str) -> Vec<i64> {
    let mut found: Vec<i64> = listing(gw, &format!("queue={queue}")).await["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["offset"].as_i64().unwrap())
        .collect();
    found.sort();
    found
}

/// Consumes (autoAck) up to `batch` messages of (queue, partition) for `group`; answers their offsets.
async fn consume(
    gw: &Gateway,
    queue: &str,
    partition: &str,
    group: &str,
    batch: usize,
) -> Vec<i64> {
    let path = format!(
        "/api/v1/pop/queue/{queue}/partition/{partition}?consumerGroup={group}&batch={batch}&autoAck=true"
    );
    let (status, answer) = get(gw, &path).await;
    assert_eq!(status, 200, "{answer}");
    offsets(&answer)
}

#[tokio::test]
async fn retention_seconds_deletes_old_messages_pending_or_not_and_old_dead_letters() {
    let gw = housekeeping_gateway().await;
    let queue = configure(&gw, &fresh_queue("ret"), json!({"retentionSeconds": 3600})).await;
    let pid = push_n(&gw, &queue, "Default", 3).await[0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(consume(&gw, &queue, "Default", "done", 1).await, vec![1]);
    kill(&gw, &pid, "Default", "audit", 2).await;
    kill(&gw, &pid, "Default", "audit", 3).await;
    // Dead letter 2 failed two hours ago, 3 just now. Aged before the
    // messages: the run that deletes them has seen this too.
    age_dead_letter(&queue, 2, 7200).await;
    age_messages(&queue, 7200).await;
    push_n(&gw, &queue, "young", 1).await;

    wait_left(&gw, &queue, &["young:1"]).await;
    assert_eq!(
        consume(&gw, &queue, "Default", "done", 10).await,
        Vec::<i64>::new(),
        "2 and 3 went though pending for this group: nothing left to pop"
    );
    assert_eq!(
        dead_letters(&gw, &queue).await,
        vec![3],
        "the dead letter that failed 2 h ago went; the one that failed now stays"
    );
}

#[tokio::test]
async fn completed_retention_deletes_only_what_every_group_consumed() {
    let gw = housekeeping_gateway().await;
    let opts = json!({"completedRetentionSeconds": 3600});
    let queue = configure(&gw, &fresh_queue("cret"), opts).await;
    push_n(&gw, &queue, "a", 3).await;
    push_n(&gw, &queue, "b", 2).await; // no group consumes b
    assert_eq!(consume(&gw, &queue, "a", "g1", 10).await, vec![1, 2, 3]);
    assert_eq!(consume(&gw, &queue, "a", "g2", 2).await, vec![1, 2]);
    age_messages(&queue, 7200).await;
    // Young, though both groups consumed it.
    push_n(&gw, &queue, "c", 1).await;
    assert_eq!(consume(&gw, &queue, "c", "g1", 10).await, vec![1]);
    assert_eq!(consume(&gw, &queue, "c", "g2", 10).await, vec![1]);

    // a:3 is old but g2 has not consumed it; b is old, consumed by no one.
    wait_left(&gw, &queue, &["a:3", "b:1", "b:2", "c:1"]).await;
    assert_eq!(
        consume(&gw, &queue, "a", "g2", 10).await,
        vec![3],
        "g2 still gets what it had not consumed"
    );
}

#[tokio::test]
async fn retention_enabled_false_stops_message_retention_not_the_dead_letters() {
    let gw = housekeeping_gateway().await;
    let opts = json!({"retentionSeconds": 3600, "completedRetentionSeconds": 3600, "retentionEnabled": false});
    let queue = configure(&gw, &fresh_queue("off"), opts).await;
    let pid = push_n(&gw, &queue, "Default", 3).await[0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(consume(&gw, &queue, "Default", "g", 2).await, vec![1, 2]);
    kill(&gw, &pid, "Default", "audit", 3).await;
    age_dead_letter(&queue, 3, 7200).await;
    age_messages(&queue, 7200).await;
    // A witness with retention on, aged after: once a run has purged it,
    // that run saw every change above.
    let witness = configure(
        &gw,
        &fresh_queue("witness"),
        json!({"completedRetentionSeconds": 3600}),
    )
    .await;
    push_n(&gw, &witness, "Default", 1).await;
    assert_eq!(consume(&gw, &witness, "Default", "g", 1).await, vec![1]);
    age_messages(&witness, 7200).await;

    wait_left(&gw, &witness, &[]).await;
    assert_eq!(
        listed(&gw, &queue).await,
        ["Default:1", "Default:2", "Default:3"],
        "neither retention ran: consumed, pending, all kept"
    );
    assert_eq!(stored(&queue).await.len(), 3);
    assert_eq!(
        dead_letters(&gw, &queue).await,
        Vec::<i64>::new(),
        "the dead letter that failed 2 h ago went all the same"
    );
}

#[tokio::test]
async fn max_wait_time_evicts_what_a_group_has_not_consumed_without_dead_lettering() {
    let gw = housekeeping_gateway().await;
    let queue = configure(
        &gw,
        &fresh_queue("evict"),
        json!({"maxWaitTimeSeconds": 600}),
    )
    .await;
    push_n(&gw, &queue, "a", 3).await;
    push_n(&gw, &queue, "b", 2).await;
    assert_eq!(consume(&gw, &queue, "a", "g1", 10).await, vec![1, 2, 3]);
    assert_eq!(consume(&gw, &queue, "a", "g2", 1).await, vec![1]);
    age_messages(&queue, 1200).await;
    let item = json!({"queue": queue, "partition": "a", "payload": 4, "transactionId": "a-4"});
    let (_, young) = post(&gw, "/api/v1/push", &json!({ "items": [item] })).await;
    assert_eq!(young[0]["offset"], 4, "{young}");

    // a:1 every group consumed (retention's, not eviction's); a:4 is young.
    // a:2, a:3 g2 had not consumed; b nobody had.
    wait_left(&gw, &queue, &["a:1", "a:4"]).await;
    assert_eq!(
        consume(&gw, &queue, "a", "g2", 10).await,
        vec![4],
        "g2 skips what was evicted"
    );
    assert_eq!(
        dead_letters(&gw, &queue).await,
        Vec::<i64>::new(),
        "evicted, not dead-lettered"
    );
}
