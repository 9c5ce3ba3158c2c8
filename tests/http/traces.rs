//! Traces: POST /api/v1/traces, GET /api/v1/traces/{partitionId}/{transactionId},
//! GET /api/v1/traces/by-name/{traceName}, GET /api/v1/traces/names.

use pgcursor_tests::{client, Gateway};
use serde_json::{json, Value};

use crate::broker::{fresh_queue, get, post, push_n, send};

async fn record(gw: &Gateway, body: &Value) -> Value {
    let (status, answer) = post(gw, "/api/v1/traces", body).await;
    assert_eq!(status, 201, "{body}: {answer}");
    answer
}

#[tokio::test]
async fn a_trace_is_recorded_and_read_back_by_message_and_by_name() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("traces");
    let pushed = push_n(&gw, &queue, "Default", 2).await;
    let p = pushed[0]["partitionId"].as_str().unwrap().to_string();
    // A name needing escapes in a path: percent-decoded.
    let name = format!("{queue} order/1+x");
    let first = record(
        &gw,
        &json!({"partitionId": p, "transactionId": "Default-1", "consumerGroup": "billing",
                                    "eventType": "step", "data": {"text": "charged"},
                                    "traceNames": [name, name, "b"]}),
    )
    .await;
    assert_eq!(first["success"], true);
    let trace_id = first["traceId"].as_str().unwrap().to_string();
    record(
        &gw,
        &json!({"partitionId": p, "transactionId": "Default-1", "data": {"text": "shipped"},
                        "traceNames": name}),
    )
    .await;
    record(
        &gw,
        &json!({"partitionId": p, "transactionId": "Default-2", "data": {"text": "other"},
                        "traceNames": null}),
    )
    .await;

    let (status, of_message) = get(&gw, &format!("/api/v1/traces/{p}/Default-1")).await;
    assert_eq!(status, 200, "{of_message}");
    let events = of_message["traces"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    let e = &events[0];
    assert_eq!(e["id"], trace_id.as_str());
    assert_eq!(
        (&e["event_type"], &e["consumer_group"], &e["data"]),
        (
            &json!("step"),
            &json!("billing"),
            &json!({"text": "charged"})
        )
    );
    assert_eq!(e["trace_names"], json!(["b", name]));
    let worker = e["worker_id"].as_str().unwrap();
    assert!(
        worker.ends_with(&format!(":{}", gw.pid())),
        "the gateway's hostname:pid, got {worker}"
    );
    assert_eq!(
        (&events[1]["event_type"], &events[1]["consumer_group"]),
        (&json!("info"), &json!("__QUEUE_MODE__"))
    );

    let encoded = crate::operations::encode(&name);
    let (status, by_name) = get(
        &gw,
        &format!("/api/v1/traces/by-name/{encoded}?limit=1&offset=1"),
    )
    .await;
    assert_eq!(status, 200, "{by_name}");
    assert_eq!(
        (&by_name["total"], &by_name["pagination"]),
        (&json!(2), &json!({"limit": 1, "offset": 1}))
    );
    let t = &by_name["traces"][0];
    assert_eq!(t["data"], json!({"text": "shipped"}));
    assert_eq!(
        (&t["queue_name"], &t["partition_name"], &t["transaction_id"]),
        (&json!(queue), &json!("Default"), &json!("Default-1"))
    );
    assert_eq!(t["message_payload"], json!({"i": 1}));
    let (_, default_page) = get(&gw, &format!("/api/v1/traces/by-name/{encoded}")).await;
    assert_eq!(
        default_page["pagination"],
        json!({"limit": 100, "offset": 0})
    );
    assert_eq!(default_page["traces"].as_array().unwrap().len(), 2);

    let (status, names) = get(&gw, "/api/v1/traces/names?limit=1000").await;
    assert_eq!(status, 200, "{names}");
    let ours: Vec<&Value> = names["trace_names"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["trace_name"] == json!(name))
        .collect();
    assert_eq!(ours.len(), 1, "{names}");
    assert_eq!(
        (&ours[0]["trace_count"], &ours[0]["message_count"]),
        (&json!(2), &json!(1))
    );
    assert!(names["total"].as_i64().unwrap() >= 2);
}

#[tokio::test]
async fn a_trace_needs_its_fields_and_a_stored_message() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("traces-bad");
    let pushed = push_n(&gw, &queue, "Default", 1).await;
    let p = pushed[0]["partitionId"].as_str().unwrap().to_string();
    for (body, status, error) in [
        (
            json!({"partitionId": p, "data": 1}),
            400,
            "transactionId and partitionId are required",
        ),
        (
            json!({"transactionId": "Default-1", "partitionId": "x", "data": 1}),
            400,
            "transactionId and partitionId are required",
        ),
        (
            json!({"transactionId": "Default-1", "partitionId": p}),
            400,
            "data is required",
        ),
        (
            json!({"transactionId": "Default-9", "partitionId": p, "data": 1}),
            404,
            "Message not found",
        ),
    ] {
        let (got, answer) = post(&gw, "/api/v1/traces", &body).await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (status, Some(error)),
            "{body}"
        );
    }
    // queen-mq sends a body; an empty one counts as {}.
    let (status, answer) = send(client().post(gw.url("/api/v1/traces"))).await;
    assert_eq!(
        (status, &answer["error"]),
        (400, &json!("transactionId and partitionId are required"))
    );
    let (status, _) = get(&gw, "/api/v1/traces/nope/x").await;
    assert_eq!(status, 400);
    let (_, none) = get(&gw, &format!("/api/v1/traces/{p}/unknown")).await;
    assert_eq!(none, json!({"traces": []}));
    for query in ["limit=0", "limit=x", "offset=-1"] {
        let (status, body) = get(&gw, &format!("/api/v1/traces/names?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        let (status, _) = get(&gw, &format!("/api/v1/traces/by-name/x?{query}")).await;
        assert_eq!(status, 400, "{query}");
    }
}

#[tokio::test]
async fn literal_segments_win_over_the_partition_id() {
    let gw = Gateway::start().await;
    let (status, names) = get(&gw, "/api/v1/traces/names").await;
    assert_eq!(status, 200, "{names}");
    assert!(names["trace_names"].is_array(), "{names}");
    let (status, by_name) = get(&gw, "/api/v1/traces/by-name/names").await;
    assert_eq!(status, 200, "{by_name}");
    assert_eq!(by_name["pagination"], json!({"limit": 100, "offset": 0}));
}

#[tokio::test]
async fn encrypted_payloads_are_shown_in_plaintext() {
    let key = "5b1e0c2a4d6f8a9b3c7e1f0a2b4c6d8e9f1a3b5c7d9e0f2a4b6c8d0e1f3a5b7c";
    let gw = Gateway::start_with(&[("PGCURSOR_ENCRYPTION_KEY", key)]).await;
    let queue = fresh_queue("traces-sealed");
    let configure = json!({"queue": queue, "options": {"encryptionEnabled": true}});
    assert_eq!(post(&gw, "/api/v1/configure", &configure).await.0, 200);
    let pushed = push_n(&gw, &queue, "Default", 1).await;
    let p = pushed[0]["partitionId"].as_str().unwrap().to_string();
    let name = format!("{queue}-name");
    record(
        &gw,
        &json!({"partitionId": p, "transactionId": "Default-1", "data": {"text": "x"},
                        "traceNames": [name]}),
    )
    .await;
    let (_, by_name) = get(&gw, &format!("/api/v1/traces/by-name/{name}")).await;
    assert_eq!(
        by_name["traces"][0]["message_payload"],
        json!({"i": 1}),
        "{by_name}"
    );
    let (_, detail) = get(&gw, &format!("/api/v1/messages/{p}/Default-1")).await;
    assert_eq!(
        (&detail["isEncrypted"], &detail["payload"]),
        (&json!(true), &json!({"i": 1})),
        "{detail}"
    );
}

/// The two listings carry at most PGCURSOR_MAX_ANSWER_BYTES of trace data
/// and message payloads: every event is listed, those past it with data
/// (and message_payload) null and `dataOmitted`. A message's events are as
/// many as clients record, each up to a body's size: one answer of them all
/// could be larger than PostgreSQL's jsonb holds.
#[tokio::test]
async fn trace_listings_carry_data_up_to_the_answer_limit() {
    let gw = Gateway::start_with(&[("PGCURSOR_MAX_ANSWER_BYTES", "2500")]).await;
    let queue = fresh_queue("traces-bytes");
    let pushed = push_n(&gw, &queue, "Default", 1).await;
    let p = pushed[0]["partitionId"].as_str().unwrap().to_string();
    let name = format!("{queue}-big");
    for letter in ["a", "b", "c"] {
        record(
            &gw,
            &json!({"partitionId": p, "transactionId": "Default-1",
                    "data": {"text": letter.repeat(1000)}, "traceNames": name}),
        )
        .await;
    }
    let data = |events: &Value, field: &str| -> Vec<Value> {
        events["traces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[field].clone())
            .collect()
    };
    let (status, of_message) = get(&gw, &format!("/api/v1/traces/{p}/Default-1")).await;
    assert_eq!(status, 200, "{of_message}");
    assert_eq!(
        data(&of_message, "data"),
        [
            json!({"text": "a".repeat(1000)}),
            json!({"text": "b".repeat(1000)}),
            Value::Null
        ]
    );
    assert_eq!(
        data(&of_message, "dataOmitted"),
        [Value::Null, Value::Null, json!(true)]
    );
    let (status, by_name) = get(&gw, &format!("/api/v1/traces/by-name/{name}")).await;
    assert_eq!(status, 200, "{by_name}");
    assert_eq!(
        data(&by_name, "dataOmitted"),
        [Value::Null, Value::Null, json!(true)]
    );
    let payloads = data(&by_name, "message_payload");
    assert!(
        payloads[0].is_object() && payloads[2].is_null(),
        "{by_name}"
    );
}
