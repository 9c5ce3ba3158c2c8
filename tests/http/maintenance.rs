//! Maintenance mode (docs/http-api.md): a push is refused with 503 and
//! Retry-After and writes nothing; a pop answers at once, empty and paused,
//! even when asked to wait; acks and transactions go on. The flags are cluster-wide, so this
//! test runs on a database of its own, never under the other tests.

use std::time::{Duration, Instant};

use pgcursor_tests::{client, db_at, Gateway, GatewayConfig};
use serde_json::{json, Value};

use crate::broker::{
    ack_all, drop_database, eventually, get, messages, pop, post, push_n, scratch_database,
};

#[tokio::test]
async fn push_maintenance_refuses_pushes_and_pop_maintenance_pauses_pops() {
    let (name, url) = scratch_database(&[]).await; // the flags are the database's
    let gw = GatewayConfig::new().database_url(&url).start().await;

    push_n(&gw, "m", "Default", 2).await;
    let popped = pop(&gw, "m", "batch=1").await;

    let (status, on) = post(&gw, "/api/v1/system/maintenance", &json!({"enabled": true})).await;
    assert_eq!(
        (status, &on["maintenanceMode"]),
        (200, &json!(true)),
        "{on}"
    );
    let response = client()
        .post(gw.url("/api/v1/push"))
        .json(&json!({"items": [{"queue": "m", "payload": 3}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "30");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "maintenance mode", "{body}");
    let (_, state) = get(&gw, "/api/v1/system/maintenance").await;
    assert_eq!(state["maintenanceMode"], true);
    ack_all(&gw, &popped).await; // acks are unaffected
    let (status, bundle) = push_in_a_transaction(&gw).await;
    assert_eq!(
        (status, &bundle["success"]),
        (200, &json!(true)),
        "a transaction's push goes on: {bundle}"
    );
    assert_eq!(
        messages(&pop(&gw, "m", "batch=1").await).len(),
        1,
        "pops are unaffected"
    );

    let (status, _) = post(
        &gw,
        "/api/v1/system/maintenance/pop",
        &json!({"enabled": true}),
    )
    .await;
    assert_eq!(status, 200);
    let started = Instant::now();
    let paused = pop(&gw, "m", "wait=true&timeout=5000&consumerGroup=other").await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a paused pop answers at once"
    );
    assert_eq!(
        paused,
        json!({"success": true, "messages": [], "paused": true})
    );
    assert_eq!(
        pop(&gw, "no-such-queue", "").await,
        paused,
        "paused before any queue lookup, as Queen's pop is"
    );
    let (_, flag) = get(&gw, "/api/v1/system/maintenance/pop").await;
    assert_eq!(flag["popMaintenanceMode"], true);

    let (status, bad) = post(
        &gw,
        "/api/v1/system/maintenance",
        &json!({"enabled": "yes"}),
    )
    .await;
    assert_eq!(
        (status, bad["error"].as_str()),
        (400, Some("enabled (boolean) is required"))
    );
    let empty = client()
        .post(gw.url("/api/v1/system/maintenance/pop"))
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), 400, "an empty body");
    assert_eq!(
        empty.json::<Value>().await.unwrap()["error"],
        "enabled (boolean) is required"
    );
    for path in [
        "/api/v1/system/maintenance",
        "/api/v1/system/maintenance/pop",
    ] {
        assert_eq!(post(&gw, path, &json!({"enabled": false})).await.0, 200);
    }
    let (status, pushed) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [{"queue": "m", "payload": 3}]}),
    )
    .await;
    assert_eq!(
        (status, &pushed[0]["offset"]),
        (200, &json!(4)),
        "nothing the push route refused was written (the transaction's push was)"
    );
    let other = pop(&gw, "m", "consumerGroup=other&batch=10").await;
    assert_eq!(messages(&other).len(), 4);

    drop(gw);
    drop_database(&name).await;
}

/// A transaction of one push to queue m.
async fn push_in_a_transaction(gw: &Gateway) -> (u16, Value) {
    let body = json!({"operations": [{"type": "push", "items": [{"queue": "m", "payload": 4}]}]});
    post(gw, "/api/v1/transaction", &body).await
}

async fn turn_pop_maintenance(gw: &Gateway, enabled: bool) -> (u16, Value) {
    let body = json!({ "enabled": enabled });
    post(gw, "/api/v1/system/maintenance/pop", &body).await
}

/// wire-admin §8.2: the answers' exact shapes (pgcursor buffers nothing, so
/// Queen's buffer figures are zeros); pop maintenance alone leaves pushes,
/// acks, lease extension and transactions alone, and another gateway on the
/// database pauses its pops at once. A paused pop of a queue that does not
/// exist makes no figures of that queue.
#[tokio::test]
async fn pop_maintenance_alone_pauses_pops_only_on_every_gateway() {
    let (name, url) = scratch_database(&[]).await; // the flags are the database's
    let start = || {
        GatewayConfig::new()
            .database_url(&url)
            .env("PGCURSOR_STATS_FLUSH_SECONDS", "1")
            .start()
    };
    let (a, b) = (start().await, start().await);
    push_n(&a, "m", "Default", 2).await;
    let leased = pop(&a, "m", "batch=1").await;
    let lease = leased["leaseId"].as_str().unwrap().to_string();

    let zeros = json!({"pendingCount": 0, "failedCount": 0, "dbHealthy": true,
                       "failedFiles": {"count": 0, "totalBytes": 0, "totalMB": 0,
                                       "failoverCount": 0, "qos0Count": 0}});
    // The switches as they stand, with a message when one was turned.
    let flags = |pop: bool, message: Option<&str>| {
        let mut flags = json!({"maintenanceMode": false, "popMaintenanceMode": pop,
                               "bufferedMessages": 0, "bufferHealthy": true, "bufferStats": zeros});
        if let Some(message) = message {
            flags["message"] = json!(message);
        }
        flags
    };
    assert_eq!(
        turn_pop_maintenance(&a, true).await,
        (200, flags(true, Some("Pop maintenance mode enabled")))
    );
    assert_eq!(
        get(&b, "/api/v1/system/maintenance/pop").await,
        (
            200,
            json!({"popMaintenanceMode": true, "message": "Pop maintenance mode is enabled"})
        )
    );
    assert_eq!(
        get(&b, "/api/v1/system/maintenance").await,
        (200, flags(true, None))
    );
    let paused = json!({"success": true, "messages": [], "paused": true});
    assert_eq!(
        pop(&b, "m", "").await,
        paused,
        "the other gateway pauses at once"
    );
    assert_eq!(pop(&b, "no-such-queue", "").await, paused);

    let (status, pushed) = post(
        &b,
        "/api/v1/push",
        &json!({"items": [{"queue": "m", "payload": 3}]}),
    )
    .await;
    assert_eq!(
        (status, &pushed[0]["status"]),
        (200, &json!("queued")),
        "{pushed}"
    );
    let (status, extended) = post(
        &b,
        &format!("/api/v1/lease/{lease}/extend"),
        &json!({"seconds": 30}),
    )
    .await;
    assert_eq!(
        (status, &extended["success"]),
        (200, &json!(true)),
        "{extended}"
    );
    ack_all(&b, &leased).await;
    let (status, bundle) = push_in_a_transaction(&b).await;
    assert_eq!(
        (status, &bundle["success"]),
        (200, &json!(true)),
        "{bundle}"
    );

    assert_eq!(
        turn_pop_maintenance(&b, false).await,
        (200, flags(false, Some("Pop maintenance mode disabled")))
    );
    assert_eq!(
        messages(&pop(&a, "m", "batch=10").await).len(),
        3,
        "2, 3 and 4"
    );
    let (status, gone) = get(&a, "/api/v1/pop/queue/no-such-queue").await;
    assert_eq!(status, 404, "{gone}");
    eventually(
        "both gateways' minutes flushed",
        Duration::from_secs(10),
        || async {
            let flushed: i64 = db_at(&url)
                .await
                .query_one(
                    "SELECT coalesce(sum(pop_requests), 0)::int8 FROM pgcursor.gateway_minutes",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            flushed == 4 // a's two on m, b's two paused (the 404 is no pop)
        },
    )
    .await;
    let queues: Vec<Option<String>> = crate::broker::column_of(
        &db_at(&url).await,
        "SELECT DISTINCT queue FROM pgcursor.gateway_minutes ORDER BY 1",
        &[],
    )
    .await;
    assert_eq!(
        queues,
        [Some("m".to_string()), None],
        "no figures of no-such-queue"
    );

    drop((a, b));
    drop_database(&name).await;
}
