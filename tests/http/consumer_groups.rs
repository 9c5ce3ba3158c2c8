//! The consumer-group routes (docs/http-api.md, Consumer groups): list,
//! lagging, describe, delete (everywhere / one queue, with and without the
//! subscription), update subscription, seek a group and seek a partition,
//! and stats refresh, through the real binary.

use std::time::{Duration, Instant};

use pgcursor_tests::{client, db, Gateway};
use reqwest::Method;
use serde_json::{json, Value};

use crate::broker::{
    age_messages, configure_queue, fresh_queue, get, messages, offsets, pop, post, push_n, request,
    send, sent_into_a_deadlock,
};

/// Where the group stands on (queue, partition), straight from the database
/// (its row, or the one its subscription will write: `cursor_rows()`).
async fn cursor(queue: &str, partition: &str, group: &str) -> Option<i64> {
    db().await
        .query_opt(
            "SELECT c.cursor FROM pgcursor_internal.cursor_rows() c
               JOIN pgcursor.partitions p ON p.id = c.partition_id
              WHERE p.queue = $1 AND p.name = $2 AND c.consumer_group = $3",
            &[&queue, &partition, &group],
        )
        .await
        .unwrap()
        .map(|row| row.get(0))
}

async fn delete(gw: &Gateway, path: &str) -> (u16, Value) {
    send(request(gw, Method::DELETE, path, None)).await
}

/// POST with a raw body (possibly empty).
async fn post_raw(gw: &Gateway, path: &str, body: &'static str) -> (u16, Value) {
    send(client().post(gw.url(path)).body(body)).await
}

/// One ack through /api/v1/ack; answers the item's error (null on success).
async fn ack_error(gw: &Gateway, popped: &Value, transaction_id: &str) -> Value {
    let body = json!({"transactionId": transaction_id, "partitionId": popped["partitionId"],
                      "leaseId": popped["leaseId"], "consumerGroup": popped["consumerGroup"],
                      "status": "completed"});
    let (status, answer) = post(gw, "/api/v1/ack", &body).await;
    assert_eq!(status, 200, "{answer}");
    answer[0]["error"].clone()
}

#[tokio::test]
async fn list_describe_and_lagging_show_the_group() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-list");
    push_n(&gw, &queue, "p1", 3).await;
    push_n(&gw, &queue, "p2", 1).await;
    age_messages(&queue, 600).await;
    let group = format!("{queue}-g");
    let p1 = format!("/api/v1/pop/queue/{queue}/partition/p1?consumerGroup={group}&autoAck=true");
    assert_eq!(offsets(&get(&gw, &p1).await.1), vec![1]);

    let (status, list) = get(&gw, "/api/v1/consumer-groups").await;
    assert_eq!(status, 200, "{list}");
    let mine: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == group)
        .collect();
    assert_eq!(mine.len(), 1, "{list}");
    let entry = mine[0];
    assert_eq!(entry["queueName"], queue.as_str());
    assert_eq!(entry["topics"], json!([queue]));
    assert_eq!(entry["members"], 2, "a row per partition: {entry}");
    assert_eq!(entry["partitionsWithLag"], 2);
    assert_eq!(entry["totalLag"], 3, "{entry}");
    assert_eq!(
        entry["state"], "Lagging",
        "the oldest unconsumed message is 600 s old"
    );
    assert!(entry["maxTimeLag"].as_i64().unwrap() >= 600, "{entry}");
    assert_eq!(
        entry["subscriptionMode"],
        Value::Null,
        "from the beginning: null, as Queen's"
    );

    let (status, detail) = get(&gw, &format!("/api/v1/consumer-groups/{group}")).await;
    assert_eq!(status, 200, "{detail}");
    let parts = detail[&queue]["partitions"]
        .as_array()
        .expect("keyed by queue");
    let names: Vec<&str> = parts
        .iter()
        .map(|p| p["partition"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{detail}");
    assert!(names[0] < names[1], "sorted by name: {detail}");
    let consumed: i64 = parts
        .iter()
        .map(|p| p["totalConsumed"].as_i64().unwrap())
        .sum();
    assert_eq!(consumed, 1, "{detail}");
    let lags: i64 = parts.iter().map(|p| p["offsetLag"].as_i64().unwrap()).sum();
    assert_eq!(lags, 3, "{detail}");
    assert!(parts.iter().all(|p| p["leaseActive"] == false), "{detail}");
    assert_eq!(
        get(&gw, "/api/v1/consumer-groups/nobody-at-all").await,
        (200, json!({}))
    );

    let (status, lagging) = get(&gw, "/api/v1/consumer-groups/lagging?minLagSeconds=300").await;
    assert_eq!(status, 200, "{lagging}");
    let rows: Vec<&Value> = lagging
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["consumer_group"] == group)
        .collect();
    assert_eq!(rows.len(), 2, "{lagging}");
    assert!(rows[0]["time_lag_seconds"].as_i64().unwrap() >= 600);
    assert_eq!(rows[0]["queue_name"], queue.as_str());
    // The list's oldestPartition is the pair's first lagging row.
    let oldest = &entry["oldestPartition"];
    assert_eq!(
        oldest["partition"], rows[0]["partition_name"],
        "{entry} {lagging}"
    );
    assert_eq!(oldest["partitionId"], rows[0]["partition_id"]);
    assert_eq!(oldest["offsetLag"], rows[0]["offset_lag"]);
    assert_eq!(
        oldest["oldestUnconsumedAt"],
        rows[0]["oldest_unconsumed_at"]
    );
    assert_eq!(oldest["timeLagSeconds"], entry["maxTimeLag"]);
    let (_, lagging) = get(&gw, "/api/v1/consumer-groups/lagging?minLagSeconds=100000").await;
    assert!(!lagging
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["consumer_group"] == group));
    let (_, lagging) = get(&gw, "/api/v1/consumer-groups/lagging").await;
    assert!(
        !lagging
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["consumer_group"] == group),
        "the default threshold is an hour: {lagging}"
    );
    assert_eq!(
        get(&gw, "/api/v1/consumer-groups/lagging?minLagSeconds=1h").await,
        (400, json!({"error": "minLagSeconds must be an integer"}))
    );
    // An integer past int4 is one: the answer says the bound, as elsewhere.
    assert_eq!(
        get(
            &gw,
            "/api/v1/consumer-groups/lagging?minLagSeconds=2147483648"
        )
        .await,
        (
            400,
            json!({"error": "minLagSeconds must be at most 2147483647"})
        )
    );
}

#[tokio::test]
async fn a_seek_back_replays_in_offset_order_and_voids_the_live_lease() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-seek");
    push_n(&gw, &queue, "Default", 5).await;
    let group = "replayer";
    let first = pop(&gw, &queue, &format!("consumerGroup={group}&batch=5")).await;
    assert_eq!(ack_error(&gw, &first, "Default-5").await, Value::Null);
    // Replays must resolve even after the transaction index forgot them
    // (as purge_transaction_index(cutoff) does, for this queue alone).
    // The clock is read first: Citus refuses a VOLATILE function in an
    // UPDATE of its tables (queues is a reference table there).
    let db = db().await;
    let now: std::time::SystemTime = db
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .unwrap()
        .get(0);
    db.execute(
        "UPDATE pgcursor.queues SET transaction_index_from = $2 WHERE name = $1",
        &[&queue, &now],
    )
    .await
    .unwrap();

    let leased = pop(&gw, &queue, &format!("consumerGroup={group}")).await;
    assert!(messages(&leased).is_empty(), "everything consumed");
    let path = format!("/api/v1/consumer-groups/{group}/queues/{queue}/seek");
    let (status, answer) = post(&gw, &path, &json!({"timestamp": "2000-01-01T00:00:00Z"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"success": true, "consumerGroup": group, "queueName": queue, "seekToEnd": false,
               "targetTimestamp": "2000-01-01T00:00:00.000000Z", "partitionsUpdated": 1})
    );
    let replay = pop(&gw, &queue, &format!("consumerGroup={group}&batch=10")).await;
    assert_eq!(offsets(&replay), vec![1, 2, 3, 4, 5], "{replay}");
    assert!(messages(&replay).iter().all(|m| m["retryCount"] == 0));

    // Seek to the end under that live lease: its holder's acks then fail.
    let (status, answer) = post(&gw, &path, &json!({"toEnd": true})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["seekToEnd"], true);
    assert_eq!(answer["targetTimestamp"], Value::Null);
    assert_eq!(
        ack_error(&gw, &replay, "Default-2").await,
        "invalid or expired lease"
    );
    assert_eq!(cursor(&queue, "Default", group).await, Some(5));

    // Back again and ack the replayed message without an index entry: it resolves.
    post(&gw, &path, &json!({"timestamp": "2000-01-01T00:00:00Z"})).await;
    let replay = pop(&gw, &queue, &format!("consumerGroup={group}&batch=2")).await;
    assert_eq!(offsets(&replay), vec![1, 2]);
    assert_eq!(ack_error(&gw, &replay, "Default-2").await, Value::Null);
    assert_eq!(cursor(&queue, "Default", group).await, Some(2));
}

#[tokio::test]
async fn a_seek_names_what_is_wrong_and_changes_nothing() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-seek-bad");
    push_n(&gw, &queue, "Default", 3).await;
    pop(&gw, &queue, "consumerGroup=g&batch=2&autoAck=true").await;
    let path = format!("/api/v1/consumer-groups/g/queues/{queue}/seek");
    let neither = "Must specify either 'toEnd': true or 'timestamp'";
    for (body, error) in [
        ("", neither),
        ("{}", neither),
        (r#"{"toEnd": false}"#, neither),
        (r#"{"toEnd": "soon"}"#, "toEnd must be a boolean"),
        (r#"{"timestamp": 5}"#, "timestamp must be a string"),
        (
            r#"{"timestamp": "yesterday-ish"}"#,
            "timestamp must be an ISO timestamp",
        ),
        (
            r#"{"timestamp": "-infinity"}"#,
            "timestamp must be a time from 0001-01-01 to 9999-12-31",
        ),
        ("[]", "request body must be a JSON object"),
    ] {
        let (status, answer) = post_raw(&gw, &path, body).await;
        assert_eq!(
            (status, &answer["error"]),
            (400, &json!(error)),
            "body {body:?}: {answer}"
        );
        assert_eq!(
            cursor(&queue, "Default", "g").await,
            Some(2),
            "body {body:?} moved the cursor"
        );
    }
    let (status, answer) = post(
        &gw,
        &format!("/api/v1/consumer-groups/nobody/queues/{queue}/seek"),
        &json!({"toEnd": true}),
    )
    .await;
    assert_eq!(
        (status, &answer["partitionsUpdated"]),
        (200, &json!(0)),
        "{answer}"
    );
    assert_eq!(
        cursor(&queue, "Default", "nobody").await,
        None,
        "a seek creates no row"
    );
}

#[tokio::test]
async fn a_seek_back_wakes_a_waiting_pop() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-seek-wake");
    configure_queue(&gw, &queue).await;
    push_n(&gw, &queue, "Default", 2).await;
    pop(&gw, &queue, "consumerGroup=w&batch=2&autoAck=true").await;
    let url = gw.url(&format!(
        "/api/v1/pop/queue/{queue}?consumerGroup=w&batch=2&wait=true&timeout=20000"
    ));
    let waiting = tokio::spawn(async move { send(client().get(url)).await });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "nothing to deliver: the pop waits");
    let sought = Instant::now();
    let path = format!("/api/v1/consumer-groups/w/queues/{queue}/seek");
    assert_eq!(
        post(&gw, &path, &json!({"timestamp": "2000-01-01T00:00:00Z"}))
            .await
            .0,
        200
    );
    let (status, answer) = waiting.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(offsets(&answer), vec![1, 2], "{answer}");
    assert!(
        sought.elapsed() < Duration::from_secs(10),
        "woken by the seek, not the timeout"
    );
}

#[tokio::test]
async fn seek_one_partition_to_its_end() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-seek-part");
    push_n(&gw, &queue, "hot", 4).await;
    push_n(&gw, &queue, "cold", 1).await;
    pop(&gw, &queue, "consumerGroup=s&partitions=2&batch=1").await;
    let path = format!("/api/v1/consumer-groups/s/queues/{queue}/partitions/hot/seek");
    let (status, answer) = post_raw(&gw, &path, "").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["updated"], true);
    assert_eq!(answer["partitionName"], "hot");
    assert!(answer["cursorMovedTo"].is_string(), "{answer}");
    assert_eq!(cursor(&queue, "hot", "s").await, Some(4));
    assert_eq!(
        cursor(&queue, "cold", "s").await,
        Some(0),
        "other partitions stay"
    );
    let (status, answer) = post_raw(
        &gw,
        &format!("/api/v1/consumer-groups/other/queues/{queue}/partitions/hot/seek"),
        "{}",
    )
    .await;
    assert_eq!(
        (status, &answer["updated"]),
        (200, &json!(false)),
        "no cursor there: {answer}"
    );
    let (status, answer) = post_raw(
        &gw,
        &format!("/api/v1/consumer-groups/s/queues/{queue}/partitions/nowhere/seek"),
        "",
    )
    .await;
    assert_eq!(
        (status, answer),
        (404, json!({"error": "Partition not found"}))
    );
}

#[tokio::test]
async fn deleting_a_group_keeps_or_drops_its_subscription() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-delete");
    let other = fresh_queue("cg-delete-other");
    push_n(&gw, &queue, "Default", 3).await;
    push_n(&gw, &other, "Default", 1).await;
    let late = format!("{queue}-late");
    // "late" subscribes in mode new: the three are before its time.
    let leased = pop(
        &gw,
        &queue,
        &format!("consumerGroup={late}&subscriptionMode=new"),
    )
    .await;
    assert!(messages(&leased).is_empty());
    push_n(&gw, &queue, "more", 2).await;
    let leased = pop(&gw, &queue, &format!("consumerGroup={late}")).await;
    assert_eq!(
        offsets(&leased),
        vec![1],
        "only partition more has news: {leased}"
    );
    pop(&gw, &other, &format!("consumerGroup={late}")).await;

    let path = format!("/api/v1/consumer-groups/{late}/queues/{queue}?deleteMetadata=false");
    let (status, answer) = delete(&gw, &path).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"success": true, "consumerGroup": late, "queueName": queue,
               "deletedPartitions": 2, "metadataDeleted": false})
    );
    assert_eq!(
        ack_error(&gw, &leased, "more-1").await,
        "invalid or expired lease"
    );
    assert_eq!(
        cursor(&other, "Default", &late).await,
        Some(0),
        "other queues keep their rows"
    );
    // The kept subscription decides, not this pop's mode: only what came after it.
    let again = pop(
        &gw,
        &queue,
        &format!("consumerGroup={late}&partitions=2&batch=10"),
    )
    .await;
    assert_eq!(offsets(&again), vec![1, 2], "{again}");
    assert_eq!(messages(&again)[0]["partition"], "more");

    let (status, answer) = delete(&gw, &format!("/api/v1/consumer-groups/{late}")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["deletedPartitions"], 3,
        "two on the queue, one on the other: {answer}"
    );
    assert_eq!(answer["metadataDeleted"], true);
    let fresh = pop(
        &gw,
        &queue,
        &format!("consumerGroup={late}&partitions=2&batch=10"),
    )
    .await;
    assert_eq!(
        messages(&fresh).len(),
        5,
        "a new group's first pop, mode all: {fresh}"
    );
    assert_eq!(
        delete(&gw, "/api/v1/consumer-groups/never-was").await.1["deletedPartitions"],
        0
    );
}

#[tokio::test]
async fn update_subscription_moves_never_consumed_rows() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-sub");
    push_n(&gw, &queue, "a", 2).await;
    push_n(&gw, &queue, "b", 2).await;
    age_messages(&queue, 3600).await;
    let group = format!("{queue}-u");
    let a = format!("/api/v1/pop/queue/{queue}/partition/a?consumerGroup={group}&autoAck=true");
    assert_eq!(offsets(&get(&gw, &a).await.1), vec![1]);
    let path = &format!("/api/v1/consumer-groups/{group}/subscription");
    let (status, answer) = post(
        &gw,
        path,
        &json!({"subscriptionTimestamp": "2000-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"success": true, "consumerGroup": group, "newTimestamp": "2000-01-01T00:00:00Z",
               "rowsUpdated": 1})
    );
    let now = json!({"subscriptionTimestamp": database_now().await});
    assert_eq!(post(&gw, path, &now).await.0, 200);
    assert_eq!(
        cursor(&queue, "a", &group).await,
        Some(1),
        "consumed something: stays"
    );
    assert_eq!(
        cursor(&queue, "b", &group).await,
        Some(2),
        "never consumed: moved past the old messages"
    );
    for (body, error) in [
        ("", "Missing subscriptionTimestamp in request body"),
        ("{}", "Missing subscriptionTimestamp in request body"),
        (
            r#"{"subscriptionTimestamp": 7}"#,
            "subscriptionTimestamp must be a string",
        ),
        (
            r#"{"subscriptionTimestamp": "then"}"#,
            "subscriptionTimestamp must be an ISO timestamp",
        ),
        (
            r#"{"subscriptionTimestamp": "0044-03-15 BC"}"#,
            "subscriptionTimestamp must be a time from 0001-01-01 to 9999-12-31",
        ),
    ] {
        let (status, answer) = post_raw(&gw, path, body).await;
        assert_eq!(
            (status, &answer["error"]),
            (400, &json!(error)),
            "{body:?}: {answer}"
        );
    }
    let (_, answer) = post(&gw, "/api/v1/consumer-groups/nobody/subscription", &now).await;
    assert_eq!(answer["rowsUpdated"], 0);
}

/// Now, as the database writes timestamps.
async fn database_now() -> String {
    db().await
        .query_one("SELECT pgcursor_internal.rfc3339_utc(now())", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn group_names_are_percent_decoded_and_stats_refresh_answers() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("cg-names");
    push_n(&gw, &queue, "Default", 1).await;
    pop(&gw, &queue, "consumerGroup=team%20a%2Bb&autoAck=true").await;
    let (status, detail) = get(&gw, "/api/v1/consumer-groups/team%20a%2Bb").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        detail[&queue]["partitions"][0]["totalConsumed"], 1,
        "{detail}"
    );
    // In a path, a raw + is a plus (wire-admin §0), not a space as in a query.
    pop(&gw, &queue, "consumerGroup=x%2By").await;
    let (status, detail) = get(&gw, "/api/v1/consumer-groups/x+y").await;
    assert_eq!(
        (
            status,
            detail[&queue]["partitions"][0]["totalConsumed"].as_i64()
        ),
        (200, Some(0)),
        "{detail}"
    );
    let (status, seek) = post_raw(
        &gw,
        &format!("/api/v1/consumer-groups/x+y/queues/{queue}/seek"),
        r#"{"toEnd": true}"#,
    )
    .await;
    assert_eq!(
        (status, &seek["consumerGroup"], &seek["partitionsUpdated"]),
        (200, &json!("x+y"), &json!(1)),
        "{seek}"
    );
    assert_eq!(
        post_raw(&gw, "/api/v1/stats/refresh", "").await,
        (200, json!({"success": true}))
    );
    assert_eq!(
        delete(&gw, "/api/v1/consumer-groups/lagging").await,
        (
            405,
            json!({"error": "method DELETE is not allowed here; allowed: GET"})
        ),
        "lagging is a literal segment for every method"
    );
}

/// A group's first pop writes its subscriptions (in queue order), and a
/// pop cancelled as a deadlock's victim is made again, as other calls are
/// (on Citus, writers of the reference tables meet in distributed
/// deadlocks). Here the test's transaction writes the group's
/// subscription on the second queue, the pop writes the first and waits
/// for the second, then the test writes the first: the pop waited first,
/// so it is the one cancelled, and the gateway pops again once the test's
/// transaction has committed.
#[tokio::test]
async fn a_pop_cancelled_as_a_deadlocks_victim_is_made_again() {
    let gw = Gateway::start().await;
    let ns = fresh_queue("cg-deadlock");
    let (first, second) = (format!("{ns}-a"), format!("{ns}-b"));
    for queue in [&first, &second] {
        let body = json!({"queue": queue, "namespace": ns});
        assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
        push_n(&gw, queue, "Default", 1).await;
    }
    let subscribe = "INSERT INTO pgcursor.subscriptions (consumer_group, queue, mode, cursor_rows)
                     VALUES ('g', $1, 'all', 'pending')";
    let path = format!("/api/v1/pop?namespace={ns}&consumerGroup=g&batch=10&partitions=2");
    let (status, answer) = sent_into_a_deadlock(
        client().get(gw.url(&path)),
        subscribe,
        [&second, &first],
        "the pop waits for the second subscription",
        "%pgcursor.pop_messages(%",
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        offsets(&answer),
        vec![1, 1],
        "both queues' message: {answer}"
    );
    assert!(
        gw.stderr().contains("cancelled as a deadlock's victim"),
        "the pop was cancelled once: {}",
        gw.stderr()
    );
}
