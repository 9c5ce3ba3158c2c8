//! The gateway's housekeeping clock: it purges on its own, and never while
//! another run holds the advisory lock.

use std::time::Duration;

use pgcursor_tests::{db, db_at, Gateway, GatewayConfig};
use serde_json::json;

use crate::broker::{drop_database, eventually, fresh_queue, post, scratch_database};

/// `pgcursor_internal.housekeeping_lock()` (sql/90_housekeeping.sql, documented in docs/sql-api.md).
const HOUSEKEEPING_LOCK: i64 = 0x7067_6375_5f68_6b31;

/// A queue whose transaction index keeps rows for one second, with one message.
/// A queue whose index remembers ids for 1 s, with the entry a deleted
/// message left there (a stored message is its own entry: nothing to purge).
async fn short_lived_index(gw: &Gateway) -> String {
    let queue = fresh_queue("hk");
    let configure = json!({"queue": queue, "options": {"transactionIndexRetentionSeconds": 1}});
    assert_eq!(post(gw, "/api/v1/configure", &configure).await.0, 200);
    let push = json!({"items": [{"queue": queue, "payload": 1, "transactionId": "hk-1"}]});
    assert_eq!(post(gw, "/api/v1/push", &push).await.0, 200);
    db().await
        .execute(
            "INSERT INTO pgcursor.transaction_index (partition_id, transaction_id, msg_offset)
             SELECT id, 'hk-deleted', 0 FROM pgcursor.partitions WHERE queue = $1",
            &[&queue],
        )
        .await
        .unwrap();
    queue
}

async fn index_rows(queue: &str) -> i64 {
    db().await
        .query_one(
            "SELECT count(*) FROM pgcursor.transaction_index t
               JOIN pgcursor.partitions p ON p.id = t.partition_id WHERE p.queue = $1",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0)
}

/// Polls until the queue's index rows are gone, for at most `within`.
async fn wait_purged(queue: &str, within: Duration) {
    let what = format!("the index rows of {queue} purged");
    eventually(&what, within, || async { index_rows(queue).await == 0 }).await;
}

#[tokio::test]
async fn the_clock_purges_the_transaction_index() {
    let gw = Gateway::start_with(&[("PGCURSOR_HOUSEKEEPING_SECONDS", "1")]).await;
    let queue = short_lived_index(&gw).await;
    assert_eq!(index_rows(&queue).await, 1);
    // Generous: another test may hold the lock for a few seconds meanwhile.
    // (Any gateway's clock may do the purge: housekeeping is database-wide.)
    wait_purged(&queue, Duration::from_secs(20)).await;
}

#[tokio::test]
async fn nothing_is_purged_while_another_run_holds_the_lock() {
    let holder = db().await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&HOUSEKEEPING_LOCK])
        .await
        .unwrap();
    let gw = Gateway::start_with(&[("PGCURSOR_HOUSEKEEPING_SECONDS", "1")]).await;
    let queue = short_lived_index(&gw).await;
    // Three runs come and go (at 1, 2 and 3 s), each finding the lock taken.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(
        index_rows(&queue).await,
        1,
        "purged while the lock was held"
    );
    assert!(
        !gw.stderr().contains("housekeeping removed"),
        "{}",
        gw.stderr()
    );
    holder
        .execute("SELECT pg_advisory_unlock($1)", &[&HOUSEKEEPING_LOCK])
        .await
        .unwrap();
    wait_purged(&queue, Duration::from_secs(20)).await;
}

/// The partition names of `queue`, sorted.
async fn partition_names(client: &tokio_postgres::Client, queue: &str) -> Vec<String> {
    crate::broker::column_of(
        client,
        "SELECT name FROM pgcursor.partitions WHERE queue = $1 ORDER BY name",
        &[&queue],
    )
    .await
}

/// Pushes one message to partition `part` of `queue` and deletes it (its
/// transactionId forgotten with it), then moves the queue's partitions'
/// creation and last push back 31 days: `part` is idle. Answers its id.
async fn idle_partition(
    gw: &Gateway,
    client: &tokio_postgres::Client,
    queue: &str,
    part: &str,
) -> String {
    let push = json!({"items": [{"queue": queue, "partition": part, "payload": 1, "transactionId": "idle-1"}]});
    let (status, pushed) = post(gw, "/api/v1/push", &push).await;
    assert_eq!(status, 200, "{pushed}");
    let pid = pushed[0]["partitionId"].as_str().unwrap().to_string();
    let (status, body) = crate::broker::send(
        pgcursor_tests::client().delete(gw.url(&format!("/api/v1/messages/{pid}/idle-1"))),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    client
        .execute(
            "UPDATE pgcursor.partitions SET created_at = now() - interval '31 days' WHERE queue = $1",
            &[&queue],
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE pgcursor.partition_heads h SET pushed_at = now() - interval '31 days'
               FROM pgcursor.partitions p WHERE p.id = h.partition_id AND p.queue = $1",
            &[&queue],
        )
        .await
        .unwrap();
    pid
}

/// A partition emptied (its message deleted, so its transactionId
/// forgotten) and idle for 31 days goes on the clock's next run, with its
/// figures kept; one holding a message stays; the analytics count the
/// deletion; a push to its name makes it anew from offset 1.
#[tokio::test]
async fn the_clock_deletes_a_partition_idle_for_30_days() {
    let gw = Gateway::start_with(&[("PGCURSOR_HOUSEKEEPING_SECONDS", "1")]).await;
    let queue = fresh_queue("hk-idle");
    let kept = json!({"items": [{"queue": queue, "partition": "kept", "payload": 2}]});
    assert_eq!(post(&gw, "/api/v1/push", &kept).await.0, 200);
    let client = db().await;
    let gone = idle_partition(&gw, &client, &queue, "gone").await;
    let what = format!("the idle partition of {queue} deleted");
    eventually(&what, Duration::from_secs(20), || async {
        partition_names(&client, &queue).await == ["kept"]
    })
    .await;

    let (status, ops) =
        crate::broker::get(&gw, &format!("/api/v1/analytics/queue-ops?queue={queue}")).await;
    assert_eq!(status, 200, "{ops}");
    let deleted: i64 = ops["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["partitionsDeleted"].as_i64().unwrap())
        .sum();
    assert_eq!(deleted, 1, "{ops}");

    let again = json!({"items": [{"queue": queue, "partition": "gone", "payload": 3}]});
    let (_, pushed) = post(&gw, "/api/v1/push", &again).await;
    assert_eq!(pushed[0]["offset"], 1, "{pushed}");
    assert_ne!(pushed[0]["partitionId"], json!(gone), "{pushed}");
}

/// PGCURSOR_PARTITION_CLEANUP_DAYS=0 keeps every partition: runs go on (a
/// statistics snapshot written after the partition went idle) and it stays.
/// (A database of its own: every other test's gateways delete partitions
/// idle for 30 days.)
#[tokio::test]
async fn a_partition_cleanup_period_of_0_keeps_idle_partitions() {
    let (name, url) = scratch_database(&[]).await;
    let gw = GatewayConfig::new()
        .database_url(&url)
        .env("PGCURSOR_HOUSEKEEPING_SECONDS", "1")
        .env("PGCURSOR_PARTITION_CLEANUP_DAYS", "0")
        .start()
        .await;
    let client = db_at(&url).await;
    let queue = fresh_queue("hk-keep");
    idle_partition(&gw, &client, &queue, "idle").await;
    client
        .execute("DELETE FROM pgcursor.stats_snapshots", &[])
        .await
        .unwrap();
    eventually(
        "a housekeeping run after",
        Duration::from_secs(20),
        || async {
            let rows: i64 = client
                .query_one("SELECT count(*) FROM pgcursor.stats_snapshots", &[])
                .await
                .unwrap()
                .get(0);
            rows > 0
        },
    )
    .await;
    assert_eq!(partition_names(&client, &queue).await, ["idle"]);
    drop(gw);
    drop(client);
    drop_database(&name).await;
}
