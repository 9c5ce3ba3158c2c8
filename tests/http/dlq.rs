//! GET /api/v1/dlq (filters, pagination, the payload snapshot) and
//! POST /api/v1/dlq/{id}/requeue.

use pgcursor_tests::{db, Gateway};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{fresh_queue, get, keys, post, push_n};

/// Dead-letters offset `offset` (transactionId `<partition>-<offset>`) of
/// (queue, partition) for `group` with an explicit dlq ack.
pub(crate) async fn kill(
    gw: &Gateway,
    partition_id: &str,
    partition: &str,
    group: &str,
    offset: usize,
) {
    let ack = json!({"transactionId": format!("{partition}-{offset}"), "partitionId": partition_id,
                     "consumerGroup": group, "status": "dlq", "error": format!("bad {offset}")});
    let (status, answer) = post(gw, "/api/v1/ack", &ack).await;
    assert_eq!((status, &answer[0]["dlq"]), (200, &json!(true)), "{answer}");
}

pub(crate) async fn listing(gw: &Gateway, query: &str) -> Value {
    let (status, body) = get(gw, &format!("/api/v1/dlq?{query}")).await;
    assert_eq!(status, 200, "{query}: {body}");
    body
}

/// The listing's entries as "partition/group/offset".
fn entries(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}/{}",
                m["partition"].as_str().unwrap(),
                m["consumerGroup"].as_str().unwrap(),
                m["offset"]
            )
        })
        .collect()
}

fn want(expected: &[&String]) -> Vec<String> {
    expected.iter().map(|s| s.to_string()).collect()
}

/// Queue q: Default (4 messages) and eu (2); dead letters Default/g1 at 2
/// and 4, Default/g2 at 1, eu/g1 at 2. eu's failed two hours ago.
async fn scene(gw: &Gateway, g1: &str, g2: &str) -> (String, String) {
    let queue = fresh_queue("dlq");
    let default = push_n(gw, &queue, "Default", 4).await[0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    let eu = push_n(gw, &queue, "eu", 2).await[0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    kill(gw, &default, "Default", g1, 2).await;
    kill(gw, &default, "Default", g1, 4).await;
    kill(gw, &default, "Default", g2, 1).await;
    kill(gw, &eu, "eu", g1, 2).await;
    let eu_id: Uuid = eu.parse().unwrap();
    db().await
        .execute(
            "UPDATE pgcursor.dead_letters SET failed_at = now() - interval '2 hours' WHERE partition_id = $1",
            &[&eu_id],
        )
        .await
        .unwrap();
    (queue, default)
}

#[tokio::test]
async fn listing_filters_and_pages() {
    let gw = Gateway::start().await;
    let (g1, g2) = (fresh_queue("g1"), fresh_queue("g2"));
    let (queue, _) = scene(&gw, &g1, &g2).await;

    let all = listing(&gw, &format!("queue={queue}")).await;
    assert_eq!(all["total"], 4);
    let d1 = format!("Default/{g1}/2");
    let d2 = format!("Default/{g1}/4");
    let d3 = format!("Default/{g2}/1");
    let e1 = format!("eu/{g1}/2");
    // Newest first (each kill was its own transaction; eu's are two hours old).
    assert_eq!(entries(&all), want(&[&d3, &d2, &d1, &e1]));
    let fields = [
        "id",
        "queue",
        "partition",
        "partitionId",
        "offset",
        "transactionId",
        "consumerGroup",
        "data",
        "errorMessage",
        "retryCount",
        "createdAt",
        "failedAt",
    ];
    assert_eq!(keys(&all["messages"][0]), fields.into_iter().collect());
    let d1_entry = &all["messages"][2];
    assert_eq!(
        (
            d1_entry["transactionId"].as_str(),
            d1_entry["errorMessage"].as_str()
        ),
        (Some("Default-2"), Some("bad 2"))
    );
    assert_eq!(
        (d1_entry["data"].clone(), d1_entry["retryCount"].clone()),
        (json!({"i": 2}), json!(0))
    );

    let q = &queue;
    assert_eq!(
        entries(&listing(&gw, &format!("queue={q}&consumerGroup={g1}")).await),
        want(&[&d2, &d1, &e1])
    );
    assert_eq!(
        entries(&listing(&gw, &format!("queue={q}&partition=eu")).await),
        want(&[&e1])
    );
    assert_eq!(
        entries(&listing(&gw, &format!("consumerGroup={g2}")).await),
        want(&[&d3]),
        "a group alone"
    );
    let hour_ago = iso_hours_ago(1).await;
    assert_eq!(
        entries(&listing(&gw, &format!("queue={q}&from={hour_ago}")).await),
        want(&[&d3, &d2, &d1])
    );
    assert_eq!(
        entries(&listing(&gw, &format!("queue={q}&to={hour_ago}")).await),
        want(&[&e1])
    );
    assert_eq!(
        listing(&gw, &format!("queue={q}&partition=nowhere")).await,
        json!({"messages": [], "total": 0})
    );

    // Pagination: total counts every match, limit/offset pick the page.
    let page = listing(&gw, &format!("queue={q}&limit=2&offset=1")).await;
    assert_eq!(
        (entries(&page), page["total"].clone()),
        (vec![d2.clone(), d1.clone()], json!(4))
    );
    let page = listing(&gw, &format!("queue={q}&limit=2&offset=3")).await;
    assert_eq!(entries(&page), want(&[&e1]));

    for (query, error) in [
        ("limit=0", "limit must be a positive integer"),
        ("offset=-1", "offset must be a non-negative integer"),
        ("from=soon", "from must be an ISO timestamp"),
    ] {
        let (status, body) = get(&gw, &format!("/api/v1/dlq?{query}")).await;
        assert_eq!((status, body), (400, json!({ "error": error })), "{query}");
    }
}

/// An RFC 3339 timestamp `hours` ago, URL-safe ('+' would be a space).
async fn iso_hours_ago(hours: i32) -> String {
    db().await
        .query_one(
            "SELECT to_char((now() - $1::int * interval '1 hour') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
            &[&hours],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn data_survives_the_message_and_requeue_pushes_it_back() {
    let gw = Gateway::start().await;
    let (g1, g2) = (fresh_queue("g1"), fresh_queue("g2"));
    let (queue, default) = scene(&gw, &g1, &g2).await;
    let pid: Uuid = default.parse().unwrap();
    db().await
        .execute(
            "DELETE FROM pgcursor.messages WHERE partition_id = $1",
            &[&pid],
        )
        .await
        .unwrap();
    let listed = listing(
        &gw,
        &format!("queue={queue}&partition=Default&consumerGroup={g2}"),
    )
    .await;
    let dead = &listed["messages"][0];
    assert_eq!(
        dead["data"],
        json!({"i": 1}),
        "the snapshot outlives the message"
    );

    let id = dead["id"].as_str().unwrap();
    let (status, answer) = post(&gw, &format!("/api/v1/dlq/{id}/requeue"), &json!({})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["requeued"], true);
    assert_eq!(
        (answer["queue"].as_str(), answer["partition"].as_str()),
        (Some(queue.as_str()), Some("Default"))
    );
    assert_eq!(answer["offset"], 5, "a new message at the head");
    assert_ne!(
        answer["transactionId"], dead["transactionId"],
        "with a fresh transactionId"
    );
    assert_eq!(
        listing(&gw, &format!("queue={queue}")).await["total"],
        3,
        "the dead letter is gone"
    );

    // g2 dead-lettered offset 1 and has nothing else pending: it gets the requeued message.
    let path = format!("/api/v1/pop/queue/{queue}/partition/Default?consumerGroup={g2}&batch=10");
    let (_, popped) = get(&gw, &path).await;
    let offsets: Vec<&Value> = popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["offset"])
        .collect();
    assert_eq!(offsets, [&json!(5)], "{popped}");
    assert_eq!(popped["messages"][0]["data"], json!({"i": 1}));

    let (status, body) = post(&gw, &format!("/api/v1/dlq/{id}/requeue"), &json!({})).await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"error": format!("dead letter not found: {id}")})
        )
    );
    let (status, body) = post(&gw, "/api/v1/dlq/nope/requeue", &json!({})).await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "id must be a UUID string"}))
    );
}

/// A queue at its maxSize takes no dead letter back: the requeue (and the
/// message's retry) is a 409 naming the queue, and the dead letter stays
/// (it was deleted, and the refused push lost it).
#[tokio::test]
async fn a_requeue_into_a_full_queue_is_a_409_and_keeps_the_dead_letter() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("dlq-full");
    let (status, body) = post(
        &gw,
        "/api/v1/configure",
        &json!({"queue": queue, "options": {"maxSize": 1}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let pid = push_n(&gw, &queue, "Default", 1).await[0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    kill(&gw, &pid, "Default", "g", 1).await;
    let (status, pushed) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [{"queue": queue, "payload": 2}]}),
    )
    .await;
    assert_eq!((status, &pushed[0]["status"]), (200, &json!("queued")));
    let id = listing(&gw, &format!("queue={queue}")).await["messages"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let (status, body) = post(&gw, &format!("/api/v1/dlq/{id}/requeue"), &json!({})).await;
    assert_eq!(
        (status, body),
        (
            409,
            json!({"error": format!("queue {queue} cannot take dead letter {id}: queue is full")})
        )
    );
    let path = format!("/api/v1/messages/{pid}/Default-1/retry");
    let (status, body) = post(&gw, &path, &json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        listing(&gw, &format!("queue={queue}")).await["total"],
        1,
        "the dead letter stays"
    );
}

/// A page of dead letters carries at most PGCURSOR_MAX_ANSWER_BYTES of
/// payload (or a smaller `maxBytes`), the first one's in any case: every
/// dead letter is listed, those past it with `data` null and
/// `"dataOmitted": true`; a page of one shows it. (A page of large payloads
/// was a jsonb too large to build, a 400, or an answer of hundreds of MB.)
#[tokio::test]
async fn a_page_of_dead_letters_carries_at_most_the_max_answer_bytes() {
    let gw = Gateway::start_with(&[("PGCURSOR_MAX_ANSWER_BYTES", "2500")]).await;
    let queue = fresh_queue("dlq-heavy");
    let items: Vec<Value> = (1..=3)
        .map(|i| json!({"queue": queue, "payload": "x".repeat(1000), "transactionId": format!("Default-{i}")}))
        .collect();
    let (status, pushed) = post(&gw, "/api/v1/push", &json!({ "items": items })).await;
    assert_eq!(status, 200, "{pushed}");
    let partition_id = pushed[0]["partitionId"].as_str().unwrap().to_string();
    for offset in 1..=3 {
        kill(&gw, &partition_id, "Default", "g", offset).await;
    }
    let with_data = |answer: &Value| -> Vec<(bool, bool)> {
        answer["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["data"].is_string(), m["dataOmitted"] == json!(true)))
            .collect()
    };
    let page = listing(&gw, &format!("queue={queue}")).await;
    assert_eq!(page["total"], 3, "{page}");
    assert_eq!(
        with_data(&page),
        [(true, false), (true, false), (false, true)],
        "{page}"
    );
    let page = listing(&gw, &format!("queue={queue}&maxBytes=1")).await;
    assert_eq!(
        with_data(&page),
        [(true, false), (false, true), (false, true)],
        "{page}"
    );
    let page = listing(&gw, &format!("queue={queue}&maxBytes=1000000000")).await;
    assert_eq!(
        with_data(&page),
        [(true, false), (true, false), (false, true)],
        "capped: {page}"
    );
    let page = listing(&gw, &format!("queue={queue}&limit=1&offset=2")).await;
    assert_eq!(with_data(&page), [(true, false)], "{page}");
    let (status, body) = get(&gw, &format!("/api/v1/dlq?queue={queue}&maxBytes=0")).await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "maxBytes must be a positive integer"}))
    );
}
