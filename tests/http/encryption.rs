//! Encrypted queues (docs/http-api.md "Encrypted queues"):
//! payloads are stored as an AES-256-GCM envelope, which psql sees, and
//! every HTTP reader (pop, message detail, dead letters) sees plaintext.

use std::collections::BTreeSet;

use pgcursor_tests::{db, Gateway, GatewayConfig};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{
    fresh_queue, get, keys, messages, pop, post, push_200_of, send, stored_column, stored_messages,
};

const KEY: &str = "8f3a1c5e7b9d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5d7f9a2c4e6b8d0f1a";

async fn keyed_gateway() -> Gateway {
    Gateway::start_with(&[("PGCURSOR_ENCRYPTION_KEY", KEY)]).await
}

/// A gateway with no key, whatever the tests' own environment holds.
async fn keyless_gateway() -> Gateway {
    GatewayConfig::new()
        .env_remove("PGCURSOR_ENCRYPTION_KEY")
        .env_remove("QUEEN_ENCRYPTION_KEY")
        .start()
        .await
}

async fn configure_encrypted(gw: &Gateway, queue: &str) {
    let (status, answer) = post(
        gw,
        "/api/v1/configure",
        &json!({"queue": queue, "options": {"encryptionEnabled": true}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["options"]["encryptionEnabled"], true, "{answer}");
}

/// The payloads stored for `queue`, in offset order, straight from the database.
async fn stored_payloads(queue: &str) -> Vec<Value> {
    stored_column(queue, "m.payload").await
}

/// An envelope as Queen stores it, not holding `secret` in the clear.
fn assert_envelope(stored: &Value, secret: &str) {
    let expected: BTreeSet<&str> = ["authTag", "encrypted", "iv"].into();
    assert_eq!(keys(stored), expected, "{stored}");
    for field in ["authTag", "encrypted", "iv"] {
        assert!(stored[field].is_string(), "{stored}");
    }
    assert!(!stored.to_string().contains(secret), "{stored}");
}

#[tokio::test]
async fn stored_encrypted_read_in_plaintext_dead_letters_included() {
    let gw = keyed_gateway().await;
    let queue = fresh_queue("enc");
    configure_encrypted(&gw, &queue).await;
    let secret = format!("card-{}", Uuid::now_v7());
    let payloads = [
        json!({"card": secret, "amount": 12.5}),
        json!({"card": secret, "amount": 7}),
    ];
    let items: Vec<Value> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| json!({"queue": queue, "transactionId": format!("t{i}"), "payload": p}))
        .collect();
    let (status, answer) = post(&gw, "/api/v1/push", &json!({ "items": items })).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer[0]["status"], "queued", "{answer}");
    assert_eq!(answer[1]["status"], "queued", "{answer}");

    // psql sees the envelope.
    let stored = stored_payloads(&queue).await;
    assert_eq!(stored.len(), 2);
    for envelope in &stored {
        assert_envelope(envelope, &secret);
    }
    assert_ne!(stored[0]["iv"], stored[1]["iv"], "a fresh IV per message");

    // Pop: data and payload in plaintext.
    let popped = pop(&gw, &queue, "batch=10&consumerGroup=g").await;
    let got = messages(&popped);
    assert_eq!(got.len(), 2, "{popped}");
    for (message, payload) in got.iter().zip(&payloads) {
        assert_eq!(&message["data"], payload, "{popped}");
        assert_eq!(&message["payload"], payload, "{popped}");
    }

    // Message detail: payload and data in plaintext.
    let partition_id = got[0]["partitionId"].as_str().unwrap();
    let (status, detail) = get(&gw, &format!("/api/v1/messages/{partition_id}/t0")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["payload"], payloads[0], "{detail}");
    assert_eq!(detail["data"], payloads[0], "{detail}");

    // Dead-letter the second: stored as the envelope, listed in plaintext.
    let ack = json!({"transactionId": "t1", "partitionId": partition_id, "consumerGroup": "g",
                     "leaseId": popped["leaseId"], "status": "dlq", "error": "bad card"});
    let (status, answer) = post(&gw, "/api/v1/ack", &ack).await;
    assert_eq!((status, &answer[0]["dlq"]), (200, &json!(true)), "{answer}");
    let pid: Uuid = partition_id.parse().unwrap();
    let dead: Value = db()
        .await
        .query_one(
            "SELECT payload FROM pgcursor.dead_letters WHERE partition_id = $1",
            &[&pid],
        )
        .await
        .unwrap()
        .get(0);
    assert_envelope(&dead, &secret);
    let (status, listing) = get(&gw, &format!("/api/v1/dlq?queue={queue}")).await;
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["total"], 1, "{listing}");
    assert_eq!(listing["messages"][0]["data"], payloads[1], "{listing}");
}

#[tokio::test]
async fn only_the_encrypted_queues_of_a_push_are_sealed() {
    let gw = keyed_gateway().await;
    let (secret_queue, open_queue) = (fresh_queue("enc-mixed"), fresh_queue("plain-mixed"));
    configure_encrypted(&gw, &secret_queue).await;
    // Twice: the first push learns that the queue is encrypted, the second
    // seals it up front.
    for round in 0..2 {
        let body = json!({"items": [
            {"queue": open_queue, "payload": {"round": round, "open": true}},
            {"queue": secret_queue, "payload": {"round": round, "hidden": "shh-hidden"}}]});
        let (status, answer) = post(&gw, "/api/v1/push", &body).await;
        assert_eq!(status, 200, "{answer}");
    }
    assert_eq!(
        stored_payloads(&open_queue).await,
        [
            json!({"round": 0, "open": true}),
            json!({"round": 1, "open": true})
        ]
    );
    let sealed = stored_payloads(&secret_queue).await;
    assert_eq!(sealed.len(), 2);
    for envelope in &sealed {
        assert_envelope(envelope, "shh-hidden");
    }
    let popped = pop(&gw, &secret_queue, "batch=10").await;
    let data: Vec<&Value> = messages(&popped).iter().map(|m| &m["data"]).collect();
    assert_eq!(
        data,
        [
            &json!({"round": 0, "hidden": "shh-hidden"}),
            &json!({"round": 1, "hidden": "shh-hidden"})
        ]
    );
}

#[tokio::test]
async fn transaction_pushes_are_stored_encrypted() {
    let gw = keyed_gateway().await;
    let queue = fresh_queue("enc-tx");
    configure_encrypted(&gw, &queue).await;
    let bundle = json!({"operations": [
        {"type": "push", "items": [{"queue": queue, "payload": {"pin": "tx-secret-4321"}}]}]});
    let (status, answer) = post(&gw, "/api/v1/transaction", &bundle).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["success"], true, "{answer}");
    let stored = stored_payloads(&queue).await;
    assert_eq!(stored.len(), 1);
    assert_envelope(&stored[0], "tx-secret-4321");
    let popped = pop(&gw, &queue, "batch=1").await;
    assert_eq!(
        popped["messages"][0]["payload"],
        json!({"pin": "tx-secret-4321"})
    );
}

/// A plaintext payload shaped like an envelope (exactly the string fields
/// encrypted, iv and authTag) passes the database's guard as one: a gateway
/// that had not yet learned its queue is encrypted stored it in the clear,
/// and readers got it "opened" or as sent depending on that gateway's
/// memory. It is sealed like any other payload, pushed alone or in a
/// transaction, and comes back as sent.
#[tokio::test]
async fn a_payload_shaped_like_an_envelope_is_sealed_too() {
    let gw = keyed_gateway().await;
    let shaped =
        json!({"encrypted": "card 4111-1111-1111-1111", "iv": "cvv 123", "authTag": "pin 9999"});
    let (alone, bundled) = (fresh_queue("enc-shape"), fresh_queue("enc-shape-tx"));
    for queue in [&alone, &bundled] {
        configure_encrypted(&gw, queue).await;
    }
    let item = |queue: &str| json!({"queue": queue, "payload": shaped});
    let (status, answer) = post(&gw, "/api/v1/push", &json!({"items": [item(&alone)]})).await;
    assert_eq!(status, 200, "{answer}");
    let bundle = json!({"operations": [{"type": "push", "items": [item(&bundled)]}]});
    let (status, answer) = post(&gw, "/api/v1/transaction", &bundle).await;
    assert_eq!(status, 200, "{answer}");
    // The key written with an escape is the same key once parsed.
    let escaped = fresh_queue("enc-shape-escaped");
    configure_encrypted(&gw, &escaped).await;
    let body = format!(
        r#"{{"items":[{{"queue":"{escaped}","payload":{{"encrypted":"card 4111-1111-1111-1111","iv":"cvv 123","auth\u0054ag":"pin 9999"}}}}]}}"#
    );
    let (status, answer) = send(
        pgcursor_tests::client()
            .post(gw.url("/api/v1/push"))
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    for queue in [&alone, &bundled, &escaped] {
        let stored = stored_payloads(queue).await;
        assert_eq!(stored.len(), 1, "{queue}");
        assert_envelope(&stored[0], "4111");
        let popped = pop(&gw, queue, "batch=1").await;
        assert_eq!(popped["messages"][0]["payload"], shaped, "{queue}");
    }
}

/// Numbers are data: a 30-digit integer, a 22-digit fraction and 1e400 come
/// back as sent, from a plain queue and an encrypted one, pushed alone or
/// in a transaction. (The gateway once read payloads it seals as f64s, and
/// 123456789012345678901234567890 came back as 1.2345678901234568e+29.)
#[tokio::test]
async fn payload_numbers_come_back_digit_for_digit() {
    let gw = keyed_gateway().await;
    let db = db().await;
    let payload = r#"{"big": 123456789012345678901234567890, "fine": 0.1000000000000000000001, "huge": 1e400}"#;
    let sealed = fresh_queue("digits-enc");
    configure_encrypted(&gw, &sealed).await;
    for queue in [fresh_queue("digits"), sealed] {
        let items = format!(r#"[{{"queue": "{queue}", "payload": {payload}}}]"#);
        for (route, body) in [
            ("push", format!(r#"{{"items": {items}}}"#)),
            (
                "transaction",
                format!(r#"{{"operations": [{{"type": "push", "items": {items}}}]}}"#),
            ),
        ] {
            let request = pgcursor_tests::client()
                .post(gw.url(&format!("/api/v1/{route}")))
                .header("content-type", "application/json")
                .body(body);
            let (status, answer) = send(request).await;
            assert_eq!(status, 200, "{route} to {queue}: {answer}");
        }
        // Read by PostgreSQL, whose jsonb keeps every digit, not by serde.
        let popped = pgcursor_tests::client()
            .get(gw.url(&format!("/api/v1/pop/queue/{queue}?batch=2")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let rows = db
            .query(
                "SELECT m -> f ->> 'big', m -> f ->> 'fine', (m -> f -> 'huge')::numeric = 1e400
                   FROM jsonb_array_elements($1::text::jsonb -> 'messages') m,
                        unnest(ARRAY['data', 'payload']) f",
                &[&popped],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 4, "two messages, data and payload: {popped}");
        for row in rows {
            let got: (&str, &str, bool) = (row.get(0), row.get(1), row.get(2));
            let want = (
                "123456789012345678901234567890",
                "0.1000000000000000000001",
                true,
            );
            assert_eq!(got, want, "{queue}: {popped:.2000}");
        }
    }
}

#[tokio::test]
async fn without_a_key_encryption_is_refused_never_stored_in_plaintext() {
    let keyless = keyless_gateway().await;
    let queue = fresh_queue("enc-nokey");
    let (status, answer) = post(
        &keyless,
        "/api/v1/configure",
        &json!({"queue": queue, "options": {"encryptionEnabled": true, "leaseTime": 9}}),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("encryptionEnabled") && error.contains("PGCURSOR_ENCRYPTION_KEY"),
        "{answer}"
    );
    // Nothing changed: the queue was not even created.
    let (status, _) = get(&keyless, &format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(status, 404);

    // Encrypted by a gateway with the key, the queue refuses the keyless one's pushes.
    let keyed = keyed_gateway().await;
    configure_encrypted(&keyed, &queue).await;
    let body = json!({"items": [{"queue": queue, "payload": {"plain": "text"}}]});
    let (status, answer) = post(&keyless, "/api/v1/push", &body).await;
    assert_eq!(status, 503, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains(&queue), "{answer}");
    assert!(error.contains("PGCURSOR_ENCRYPTION_KEY"), "{answer}");
    let bundle = json!({"operations": [{"type": "push", "items": body["items"]}]});
    let (status, answer) = post(&keyless, "/api/v1/transaction", &bundle).await;
    assert_eq!(status, 503, "{answer}");
    // A payload shaped like an envelope too: the push's guard would take it
    // for one, sealed by a gateway with the key.
    let shaped = json!({"items": [{"queue": queue, "payload": {"encrypted": "card 4111", "iv": "x", "authTag": "y"}}]});
    let (status, answer) = post(&keyless, "/api/v1/push", &shaped).await;
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains(&queue),
        "{answer}"
    );
    let bundle = json!({"operations": [{"type": "push", "items": shaped["items"]}]});
    let (status, answer) = post(&keyless, "/api/v1/transaction", &bundle).await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(stored_messages(&queue).await, 0);

    // Turning it off again needs no key.
    let (status, answer) = post(
        &keyless,
        "/api/v1/configure",
        &json!({"queue": queue, "options": {"encryptionEnabled": false}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = post(&keyless, "/api/v1/push", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(stored_payloads(&queue).await, [json!({"plain": "text"})]);
}

#[tokio::test]
async fn psql_cannot_store_plaintext_in_an_encrypted_queue() {
    let gw = keyed_gateway().await;
    let queue = fresh_queue("enc-sql");
    configure_encrypted(&gw, &queue).await;
    let push = json!({"items": [{"queue": queue, "payload": {"plain": 1}}]});
    let err = db()
        .await
        .query_one("SELECT pgcursor.push($1)", &[&push])
        .await
        .unwrap_err();
    let db_err = err.as_db_error().expect("a database error");
    assert_eq!(db_err.code().code(), "PCENC");
    assert_eq!(db_err.detail(), Some(json!([queue]).to_string().as_str()));
    assert_eq!(stored_messages(&queue).await, 0);
}

#[tokio::test]
async fn queen_key_variable_is_accepted() {
    let queen = GatewayConfig::new()
        .env_remove("PGCURSOR_ENCRYPTION_KEY")
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .start()
        .await;
    let queue = fresh_queue("enc-queen");
    configure_encrypted(&queen, &queue).await;
    let body = json!({"items": [{"queue": queue, "payload": "queen-secret"}]});
    let (status, answer) = post(&queen, "/api/v1/push", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_envelope(&stored_payloads(&queue).await[0], "queen-secret");
    // Same key under the other name: the other gateway reads it.
    let ours = keyed_gateway().await;
    let popped = pop(&ours, &queue, "batch=1").await;
    assert_eq!(popped["messages"][0]["data"], "queen-secret", "{popped}");
}

/// Dead-letters (queue, t) for group g; answers the dead letter's id.
async fn dead_letter(gw: &Gateway, queue: &str, transaction_id: &str) -> String {
    let popped = pop(gw, queue, "batch=1&consumerGroup=g").await;
    let message = &popped["messages"][0];
    assert_eq!(message["transactionId"], transaction_id, "{popped}");
    let ack = json!({"transactionId": transaction_id, "partitionId": message["partitionId"],
                     "consumerGroup": "g", "leaseId": popped["leaseId"], "status": "dlq"});
    let (status, answer) = post(gw, "/api/v1/ack", &ack).await;
    assert_eq!((status, &answer[0]["dlq"]), (200, &json!(true)), "{answer}");
    let (_, listing) = get(gw, &format!("/api/v1/dlq?queue={queue}")).await;
    listing["messages"][0]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn requeue_keeps_envelopes_and_refuses_plaintext_into_an_encrypted_queue() {
    let gw = keyed_gateway().await;
    let queue = fresh_queue("enc-requeue");
    configure_encrypted(&gw, &queue).await;
    let body =
        json!({"items": [{"queue": queue, "transactionId": "a", "payload": {"n": "sealed"}}]});
    assert_eq!(post(&gw, "/api/v1/push", &body).await.0, 200);
    let id = dead_letter(&gw, &queue, "a").await;
    let (status, answer) = post(&gw, &format!("/api/v1/dlq/{id}/requeue"), &json!({})).await;
    assert_eq!(status, 200, "{answer}");
    let stored = stored_payloads(&queue).await;
    assert_envelope(&stored[1], "sealed");
    let (_, detail) = get(
        &gw,
        &format!(
            "/api/v1/messages/{}/{}",
            answer["partitionId"].as_str().unwrap(),
            answer["transactionId"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(detail["data"], json!({"n": "sealed"}), "{detail}");

    // A plaintext dead letter cannot go back into a queue encrypted since.
    let plain = fresh_queue("enc-requeue-plain");
    let body = json!({"items": [{"queue": plain, "transactionId": "b", "payload": {"n": "open"}}]});
    assert_eq!(post(&gw, "/api/v1/push", &body).await.0, 200);
    let id = dead_letter(&gw, &plain, "b").await;
    configure_encrypted(&gw, &plain).await;
    let (status, answer) = post(&gw, &format!("/api/v1/dlq/{id}/requeue"), &json!({})).await;
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("cannot requeue"),
        "{answer}"
    );
    assert_eq!(stored_messages(&plain).await, 1);
}

/// Opening the envelopes of a long pop answer takes a while (70-120 ms for
/// 32 MB in a release build, seconds in a debug one). It is done off the
/// HTTP worker's event loop, so /health answers promptly meanwhile (on the
/// loop, one health check would wait for the whole opening).
#[tokio::test]
async fn health_answers_while_a_long_answer_is_opened() {
    let gw = keyed_gateway().await;
    let queue = fresh_queue("enc-long");
    configure_encrypted(&gw, &queue).await;
    let text = "x".repeat(40_000);
    push_200_of(&gw, &queue, &text).await;
    let popping = tokio::spawn(send(
        pgcursor_tests::client().get(gw.url(&format!("/api/v1/pop/queue/{queue}?batch=200"))),
    ));
    let mut slowest = std::time::Duration::ZERO;
    let mut checks = 0;
    while !popping.is_finished() {
        let started = std::time::Instant::now();
        let (status, body) = get(&gw, "/health").await;
        assert_eq!(status, 200, "{body}");
        slowest = slowest.max(started.elapsed());
        checks += 1;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (status, answer) = popping.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(messages(&answer).len(), 200);
    for message in messages(&answer) {
        assert_eq!(message["payload"]["text"], text.as_str());
        assert_eq!(message["data"], message["payload"]);
    }
    assert!(
        slowest < std::time::Duration::from_millis(1000),
        "of {checks} health checks, one waited {slowest:?} while the answer was opened"
    );
}
