//! GET /api/v1/resources/queues[/{queue}], /api/v1/resources/overview and
//! DELETE /api/v1/resources/queues/{queue}.

use std::collections::BTreeSet;

use pgcursor_tests::{client, Gateway};
use serde_json::{json, Value};

use crate::broker::{fresh_queue, get, keys, pop, post, push_n, send};

const OPTION_KEYS: [&str; 14] = [
    "leaseTime",
    "retryLimit",
    "deadLetterQueue",
    "dlqAfterMaxRetries",
    "transactionIndexRetentionSeconds",
    "retentionSeconds",
    "completedRetentionSeconds",
    "delayedProcessing",
    "maxSize",
    "priority",
    "windowBuffer",
    "maxWaitTimeSeconds",
    "retentionEnabled",
    "encryptionEnabled",
];

fn is_utc(timestamp: &Value) -> bool {
    timestamp.as_str().is_some_and(|t| t.ends_with('Z'))
}

#[tokio::test]
async fn queue_views_show_partitions_depth_and_groups() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("views");
    let body = json!({"queue": queue, "namespace": "shop", "task": "ship"});
    assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    push_n(&gw, &queue, "eu", 3).await;
    push_n(&gw, &queue, "us", 1).await;
    pop(
        &gw,
        &format!("{queue}/partition/eu"),
        "consumerGroup=billing",
    )
    .await;

    let (status, list) = get(&gw, "/api/v1/resources/queues").await;
    assert_eq!(status, 200);
    let entry = list["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == json!(queue))
        .expect("the queue is listed")
        .clone();
    assert_eq!(
        keys(&entry),
        BTreeSet::from([
            "queue",
            "namespace",
            "task",
            "partitions",
            "depth",
            "consumerGroups",
            "options",
            "createdAt"
        ])
    );
    assert_eq!(
        (
            &entry["namespace"],
            &entry["task"],
            &entry["partitions"],
            &entry["depth"],
            &entry["consumerGroups"]
        ),
        (
            &json!("shop"),
            &json!("ship"),
            &json!(2),
            &json!(4),
            &json!(["billing"])
        )
    );
    assert_eq!(keys(&entry["options"]), BTreeSet::from(OPTION_KEYS));
    assert!(is_utc(&entry["createdAt"]), "{entry}");

    let (status, detail) = get(&gw, &format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(status, 200);
    assert_eq!(
        keys(&detail),
        BTreeSet::from([
            "queue",
            "namespace",
            "task",
            "options",
            "createdAt",
            "depth",
            "consumerGroups",
            "partitions"
        ])
    );
    let eu = &detail["partitions"][0];
    assert_eq!(
        (&eu["partition"], &eu["head"], &eu["depth"]),
        (&json!("eu"), &json!(3), &json!(3))
    );
    assert_eq!(
        eu["consumerGroups"],
        json!([{"consumerGroup": "billing", "cursor": 0, "lag": 3, "leased": true,
                "retryCount": 0, "lastAckAt": null}])
    );
    assert!(is_utc(&eu["createdAt"]), "{eu}");
    assert_eq!(detail["partitions"][1]["partition"], "us");

    let (status, overview) = get(&gw, "/api/v1/resources/overview").await;
    assert_eq!(status, 200);
    assert_eq!(
        keys(&overview),
        BTreeSet::from(["queues", "partitions", "messages", "deadLetters"])
    );
    assert!(overview["messages"].as_i64().unwrap() >= 4, "{overview}");
}

#[tokio::test]
async fn an_unknown_queue_is_404() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("unknown");
    let (status, body) = get(&gw, &format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(
        (status, body),
        (404, json!({"error": format!("queue not found: {queue}")}))
    );
}

#[tokio::test]
async fn delete_removes_the_queue_with_its_messages_and_is_idempotent() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("delete");
    push_n(&gw, &queue, "Default", 2).await;
    let path = format!("/api/v1/resources/queues/{queue}");
    let (status, body) = send(client().delete(gw.url(&path))).await;
    assert_eq!(
        (status, body),
        (200, json!({"deleted": true, "queue": queue}))
    );
    assert_eq!(get(&gw, &path).await.0, 404);
    assert_eq!(get(&gw, &format!("/api/v1/pop/queue/{queue}")).await.0, 404);
    assert_eq!(crate::broker::stored_messages(&queue).await, 0);
    let (status, body) = send(client().delete(gw.url(&path))).await;
    assert_eq!(
        (status, body),
        (200, json!({"deleted": false, "queue": queue}))
    );
}
