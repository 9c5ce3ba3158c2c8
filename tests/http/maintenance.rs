//! Maintenance mode (docs/http-api.md): a push is refused with 503 and
//! Retry-After and writes nothing; a pop answers at once, empty and paused,
//! even when asked to wait; acks and transactions go on. The flags are cluster-wide, so this
//! test runs on a database of its own, never under the other tests.

use std::time::{Duration, Instant};

use pgcursor_tests::{client, database_url, db, GatewayConfig};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{ack_all, get, messages, pop, post, push_n};

#[tokio::test]
async fn push_maintenance_refuses_pushes_and_pop_maintenance_pauses_pops() {
    let name = format!("maint_{}", Uuid::now_v7().simple());
    db().await
        .execute(&format!("CREATE DATABASE {name}"), &[])
        .await
        .unwrap();
    let url = format!("{}/{name}", database_url().rsplit_once('/').unwrap().0);
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
    let (status, bundle) = post(
        &gw,
        "/api/v1/transaction",
        &json!({"operations": [{"type": "push", "items": [{"queue": "m", "payload": 4}]}]}),
    )
    .await;
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
    let admin = db().await;
    admin
        .execute(&format!("DROP DATABASE {name} WITH (FORCE)"), &[])
        .await
        .unwrap();
}
