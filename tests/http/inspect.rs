//! The inspection routes: GET /api/v1/partitions/{partitionId}/cursors,
//! GET /api/v1/messages/{partitionId}/{transactionId} and GET /api/v1/leases.

use std::collections::BTreeSet;
use std::time::Duration;

use pgcursor_tests::Gateway;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{fresh_queue, get, keys, pop, post};

/// A queue with messages "order 1".."order 3" (a space: path decoding), group
/// g1 holding a lease over 1..2 with 1 acked, group g2 done with all three.
async fn scene(gw: &Gateway) -> (String, String) {
    let queue = fresh_queue("inspect");
    let items: Vec<Value> = (1..=3)
        .map(
            |i| json!({"queue": queue, "payload": {"i": i}, "transactionId": format!("order {i}")}),
        )
        .collect();
    let (status, pushed) = post(gw, "/api/v1/push", &json!({ "items": items })).await;
    assert_eq!(status, 200, "{pushed}");
    let partition = pushed[0]["partitionId"].as_str().unwrap().to_string();
    let popped = pop(gw, &queue, "consumerGroup=g1&batch=2").await;
    let ack = json!({"transactionId": "order 1", "partitionId": partition, "consumerGroup": "g1",
                     "leaseId": popped["leaseId"], "status": "completed"});
    assert_eq!(post(gw, "/api/v1/ack", &ack).await.0, 200);
    pop(gw, &queue, "consumerGroup=g2&batch=3&autoAck=true").await;
    (queue, partition)
}

fn set(names: &[&'static str]) -> BTreeSet<&'static str> {
    names.iter().copied().collect()
}

#[tokio::test]
async fn cursors_show_every_group_with_the_documented_fields() {
    let gw = Gateway::start().await;
    let (_, partition) = scene(&gw).await;
    let (status, cursors) = get(&gw, &format!("/api/v1/partitions/{partition}/cursors")).await;
    assert_eq!(status, 200, "{cursors}");
    let groups = cursors.as_array().expect("an array, one entry per group");
    assert_eq!(groups.len(), 2);
    let fields = set(&[
        "consumerGroup",
        "cursor",
        "head",
        "lag",
        "lease",
        "retryCount",
        "retryLimit",
        "retriesLeft",
        "completedTotal",
        "implicitlyCompletedTotal",
        "deadLetteredTotal",
        "discardedTotal",
        "lastAckAt",
    ]);
    for g in groups {
        assert_eq!(keys(g), fields, "{g}");
    }
    let g1 = &groups[0];
    assert_eq!(g1["consumerGroup"], "g1");
    assert_eq!(
        (g1["cursor"].clone(), g1["head"].clone(), g1["lag"].clone()),
        (json!(1), json!(3), json!(2))
    );
    assert_eq!(
        keys(&g1["lease"]),
        set(&["leaseId", "expiresAt", "batchStart", "batchEnd"])
    );
    assert_eq!(
        (
            g1["lease"]["batchStart"].clone(),
            g1["lease"]["batchEnd"].clone()
        ),
        (json!(1), json!(2))
    );
    assert!(g1["lease"]["leaseId"]
        .as_str()
        .unwrap()
        .parse::<Uuid>()
        .is_ok());
    assert_eq!(
        [
            &g1["retryCount"],
            &g1["retryLimit"],
            &g1["retriesLeft"],
            &g1["completedTotal"]
        ],
        [&json!(0), &json!(3), &json!(3), &json!(1)]
    );
    // Timestamps: RFC 3339 in UTC.
    assert!(g1["lastAckAt"].as_str().unwrap().ends_with('Z'), "{g1}");
    assert!(
        g1["lease"]["expiresAt"].as_str().unwrap().ends_with('Z'),
        "{g1}"
    );
    let g2 = &groups[1];
    assert_eq!(
        (
            g2["consumerGroup"].clone(),
            g2["cursor"].clone(),
            g2["lag"].clone()
        ),
        (json!("g2"), json!(3), json!(0))
    );
    assert_eq!(g2["lease"], Value::Null);
    assert_eq!(g2["completedTotal"], 3);
}

#[tokio::test]
async fn cursors_of_an_unknown_partition_is_404_and_a_bad_id_400() {
    let gw = Gateway::start().await;
    let unknown = Uuid::now_v7();
    let (status, body) = get(&gw, &format!("/api/v1/partitions/{unknown}/cursors")).await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"error": format!("partition not found: {unknown}")})
        )
    );
    let (status, body) = get(&gw, "/api/v1/partitions/not-a-uuid/cursors").await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "partitionId must be a UUID string"}))
    );
}

#[tokio::test]
async fn message_shows_its_offset_and_where_each_group_stands() {
    let gw = Gateway::start().await;
    let (queue, partition) = scene(&gw).await;
    let (status, m) = get(&gw, &format!("/api/v1/messages/{partition}/order%202")).await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(
        keys(&m),
        set(&[
            "id",
            "transactionId",
            "offset",
            "partitionId",
            "partition",
            "queue",
            "payload",
            "data",
            "createdAt",
            "traceId",
            "groups",
            // Queen's detail fields (tests/http/messages.rs)
            "queuePath",
            "namespace",
            "task",
            "producerSub",
            "status",
            "isEncrypted",
            "errorMessage",
            "retryCount",
            "leaseExpiresAt",
            "queueConfig",
            "mode",
            "consumerGroups"
        ])
    );
    assert_eq!(m["transactionId"], "order 2");
    assert_eq!(m["offset"], 2);
    assert_eq!(
        (m["partitionId"].as_str(), m["partition"].as_str()),
        (Some(partition.as_str()), Some("Default"))
    );
    assert_eq!(m["queue"], queue.as_str());
    assert_eq!(
        (m["payload"].clone(), m["data"].clone()),
        (json!({"i": 2}), json!({"i": 2}))
    );
    assert!(m["createdAt"].as_str().unwrap().ends_with('Z'), "{m}");
    assert_eq!(
        m["groups"],
        json!([{"consumerGroup": "g1", "state": "leased"}, {"consumerGroup": "g2", "state": "completed"}])
    );
    let (_, first) = get(&gw, &format!("/api/v1/messages/{partition}/order%201")).await;
    assert_eq!(
        first["groups"][0],
        json!({"consumerGroup": "g1", "state": "completed"})
    );
    let (_, last) = get(&gw, &format!("/api/v1/messages/{partition}/order%203")).await;
    assert_eq!(
        last["groups"][0],
        json!({"consumerGroup": "g1", "state": "pending"})
    );
}

#[tokio::test]
async fn message_unknown_is_404_and_a_bad_partition_id_400() {
    let gw = Gateway::start().await;
    let (_, partition) = scene(&gw).await;
    let (status, body) = get(&gw, &format!("/api/v1/messages/{partition}/order%209")).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("message not found"),
        "{body}"
    );
    let (status, _) = get(
        &gw,
        &format!("/api/v1/messages/{}/order%201", Uuid::now_v7()),
    )
    .await;
    assert_eq!(
        status, 404,
        "a transactionId of another partition is not found"
    );
    let (status, body) = get(&gw, "/api/v1/messages/nope/order%201").await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "partitionId must be a UUID string"}))
    );
    let (status, body) = get(&gw, &format!("/api/v1/messages/{partition}/a%00b")).await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": "transactionId contains a NUL character"})
        )
    );
}

#[tokio::test]
async fn leases_list_the_live_ones_longest_held_first() {
    let gw = Gateway::start().await;
    let (queue, partition) = scene(&gw).await;
    tokio::time::sleep(Duration::from_millis(5)).await; // a leaseId orders by its millisecond
    let later = pop(&gw, &queue, "consumerGroup=g3&batch=1").await;

    let (status, listed) = get(&gw, &format!("/api/v1/leases?queue={queue}")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        listed["total"], 2,
        "g1's and g3's; g2 popped with autoAck: {listed}"
    );
    let leases = listed["leases"].as_array().unwrap();
    let groups: Vec<&str> = leases
        .iter()
        .map(|l| l["consumerGroup"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["g1", "g3"], "longest held first: {listed}");
    let fields = set(&[
        "leaseId",
        "takenAt",
        "expiresAt",
        "consumerGroup",
        "queue",
        "partition",
        "partitionId",
        "batchStart",
        "batchEnd",
    ]);
    let g3 = &leases[1];
    assert_eq!(keys(g3), fields, "{g3}");
    assert_eq!(g3["leaseId"], later["leaseId"]);
    assert_eq!(g3["queue"], queue.as_str());
    assert_eq!(g3["partition"], "Default");
    assert_eq!(g3["partitionId"], partition.as_str());
    assert_eq!((&g3["batchStart"], &g3["batchEnd"]), (&json!(1), &json!(1)));
    let taken = g3["takenAt"].as_str().unwrap();
    assert!(taken < g3["expiresAt"].as_str().unwrap(), "{g3}");

    let (_, first) = get(&gw, &format!("/api/v1/leases?queue={queue}&limit=1")).await;
    assert_eq!(first["total"], 2, "{first}");
    assert_eq!(first["leases"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first["leases"][0]["consumerGroup"], "g1");
    let (_, g3_only) = get(
        &gw,
        &format!("/api/v1/leases?queue={queue}&consumerGroup=g3"),
    )
    .await;
    assert_eq!(
        g3_only["leases"][0]["leaseId"], later["leaseId"],
        "{g3_only}"
    );
    assert_eq!(g3_only["total"], 1);
    assert_eq!(
        get(&gw, &format!("/api/v1/leases?queue={queue}&limit=0")).await,
        (400, json!({"error": "limit must be a positive integer"}))
    );
    let (status, capped) = get(&gw, &format!("/api/v1/leases?queue={queue}&limit=100000")).await;
    assert_eq!(
        (status, &capped["total"]),
        (200, &json!(2)),
        "a larger limit is capped: {capped}"
    );
}
