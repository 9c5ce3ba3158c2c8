//! GET /api/v1/resources/queues[/{queue}], /api/v1/resources/overview,
//! /api/v1/resources/namespaces, /api/v1/resources/tasks and
//! DELETE /api/v1/resources/queues/{queue}.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use pgcursor_tests::{client, db, Gateway};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{
    ack_all, fresh_queue, get, keys, pop, post, push_n, send, sent_into_a_deadlock,
};

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
            "id",
            "name",
            "queue",
            "namespace",
            "task",
            "partitions",
            "partitionCount",
            "depth",
            "messages",
            "consumerGroups",
            "options",
            "priority",
            "leaseTime",
            "retryLimit",
            "maxSize",
            "encryptionEnabled",
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
            "id",
            "name",
            "queue",
            "namespace",
            "task",
            "options",
            "createdAt",
            "depth",
            "consumerGroups",
            "partitions",
            "totals"
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
        BTreeSet::from([
            "queues",
            "partitions",
            "namespaces",
            "tasks",
            "messages",
            "deadLetters",
            "lag",
            "throughput",
            "timestamp",
            "statsAge"
        ])
    );
    assert!(
        overview["messages"]["total"].as_i64().unwrap() >= 4,
        "{overview}"
    );
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

/// A call PostgreSQL cancels as a deadlock's victim is made again: the
/// test's transaction and a queue delete lock the queue's two partitions in
/// opposite orders. The delete waited first, so its deadlock check runs
/// first and cancels it; the gateway deletes again, once the test's
/// transaction has ended. (Citus cancels calls in distributed deadlocks too.)
#[tokio::test]
async fn a_call_cancelled_as_a_deadlocks_victim_is_made_again() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("deadlock");
    push_n(&gw, &queue, "a", 1).await;
    push_n(&gw, &queue, "b", 1).await;
    let ids: Vec<Uuid> = crate::broker::column_of(
        &db().await,
        "SELECT id FROM pgcursor.partitions WHERE queue = $1 ORDER BY id",
        &[&queue],
    )
    .await;
    let path = format!("/api/v1/resources/queues/{queue}");
    let (status, body) = sent_into_a_deadlock(
        client().delete(gw.url(&path)),
        "SELECT FROM pgcursor.partitions WHERE id = $1 FOR UPDATE",
        [&ids[1], &ids[0]],
        "the delete waits for the second partition",
        "SELECT pgcursor.delete_queue(%",
    )
    .await;
    assert_eq!(
        (status, body),
        (200, json!({"deleted": true, "queue": queue}))
    );
    assert!(
        gw.stderr().contains("cancelled as a deadlock's victim"),
        "the delete was cancelled once: {}",
        gw.stderr()
    );
    assert_eq!(crate::broker::stored_messages(&queue).await, 0);
}

/// A queue deleted and configured again, over and over, while it is
/// pushed to, popped (by its groups and by new ones), traced and acked
/// (alone, or with a push to a new partition in one transaction):
/// every call answers as it would before or after a delete, never a 500,
/// and every partition's offsets stay dense (tests/sql/16_delete_races.sql
/// has each race in turn). Pushes, pops and traces answered 500 on foreign
/// keys and missing heads before delete_queue serialised with them.
#[tokio::test]
async fn a_queue_deleted_under_traffic_answers_every_call() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("delete-race");
    let until = Instant::now() + Duration::from_secs(4);
    let answers: RefCell<Vec<(&str, u16, Value)>> = RefCell::new(Vec::new());
    let note = |what: &'static str, (status, body): (u16, Value)| {
        answers.borrow_mut().push((what, status, body.clone()));
        (status, body)
    };
    let pusher = |k: usize| {
        let (gw, queue, note) = (&gw, &queue, &note);
        async move {
            for i in (0..).take_while(|_| Instant::now() < until) {
                let items: Vec<Value> = ["a", "b", if k == 0 { "c" } else { "d" }]
                    .iter()
                    .map(|p| json!({"queue": queue, "partition": p, "payload": i}))
                    .collect();
                note(
                    "push",
                    post(gw, "/api/v1/push", &json!({ "items": items })).await,
                );
            }
        }
    };
    let consumer = |k: usize| {
        let (gw, queue, note) = (&gw, &queue, &note);
        async move {
            for i in (0..).take_while(|_| Instant::now() < until) {
                let group = if i % 3 == 0 {
                    format!("new-{k}-{i}")
                } else {
                    format!("g{k}")
                };
                let path = format!("/api/v1/pop/queue/{queue}?batch=3&consumerGroup={group}");
                let (_, popped) = note("pop", get(gw, &path).await);
                let Some(last) = popped["messages"].as_array().and_then(|m| m.last()) else {
                    continue;
                };
                let trace = json!({"transactionId": last["transactionId"],
                                   "partitionId": last["partitionId"], "data": {"i": i}});
                note("trace", post(gw, "/api/v1/traces", &trace).await);
                let status = if i % 2 == 0 { "completed" } else { "failed" };
                let ack = json!({"transactionId": last["transactionId"], "partitionId": last["partitionId"],
                                 "leaseId": popped["leaseId"], "consumerGroup": group, "status": status});
                if i % 4 < 2 {
                    note("ack", post(gw, "/api/v1/ack", &ack).await);
                    continue;
                }
                // The ack with a push to a new partition, in one transaction.
                let mut operation = ack;
                operation["type"] = json!("ack");
                let push = json!({"type": "push", "items": [{"queue": queue, "partition": format!("t{k}-{i}"), "payload": i}]});
                let bundle = json!({"operations": [operation, push]});
                note(
                    "transaction",
                    post(gw, "/api/v1/transaction", &bundle).await,
                );
            }
        }
    };
    let deleter = async {
        let path = format!("/api/v1/resources/queues/{queue}");
        let options = json!({"queue": queue, "options": {"retryLimit": 1}});
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(30)).await;
            note("delete", send(client().delete(gw.url(&path))).await);
            tokio::time::sleep(Duration::from_millis(30)).await;
            note("configure", post(&gw, "/api/v1/configure", &options).await);
        }
    };
    tokio::join!(pusher(0), pusher(1), consumer(0), consumer(1), deleter);

    let answers = answers.into_inner();
    let failed: Vec<_> = answers
        .iter()
        .filter(|(_, status, _)| *status >= 500)
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed: {failed:?}",
        failed.len(),
        answers.len()
    );
    let count = |what: &str, status: u16| {
        answers
            .iter()
            .filter(|a| a.0 == what && a.1 == status)
            .count()
    };
    // (A delete takes about 0.6 s on Citus: 6 in the 4 s there.)
    assert!(
        count("delete", 200) >= 3,
        "the queue was deleted {} times",
        count("delete", 200)
    );
    assert!(
        count("push", 200) >= 10 && count("ack", 200) >= 1 && count("transaction", 200) >= 1,
        "pushes, acks and transactions went through"
    );
    // One more push, so the queue has a partition at least; then partition
    // by partition (on Citus, messages and heads join only on their
    // distribution column).
    crate::broker::push_n(&gw, &queue, "a", 1).await;
    let client = db().await;
    let heads = client
        .query(
            "SELECT p.id, p.name, h.head FROM pgcursor.partitions p
               JOIN pgcursor.partition_heads h ON h.partition_id = p.id WHERE p.queue = $1",
            &[&queue],
        )
        .await
        .unwrap();
    assert!(!heads.is_empty());
    let mut gaps = Vec::new();
    for row in &heads {
        let (id, name, head): (Uuid, String, i64) = (row.get(0), row.get(1), row.get(2));
        let stored = client
            .query_one(
                "SELECT count(*), coalesce(max(msg_offset), 0) FROM pgcursor.messages WHERE partition_id = $1",
                &[&id],
            )
            .await
            .unwrap();
        let (count, last): (i64, i64) = (stored.get(0), stored.get(1));
        if (count, last) != (head, head) {
            gaps.push((name, head, count, last));
        }
    }
    assert_eq!(
        gaps,
        vec![],
        "partitions whose offsets are not 1..head (name, head, stored, last)"
    );
}

/// A number of a JSON answer, for sums.
fn int(value: &Value) -> i64 {
    value
        .as_i64()
        .unwrap_or_else(|| panic!("an integer: {value}"))
}

#[tokio::test]
async fn queue_list_has_queens_fields_newest_first_and_filters() {
    let gw = Gateway::start().await;
    let older = fresh_queue("list-old");
    let newer = format!("{older}-new");
    let ns = format!("{older}-ns");
    for (queue, task) in [(&older, "first"), (&newer, "second")] {
        let body = json!({"queue": queue, "namespace": ns, "task": task,
                          "options": {"leaseTime": 45, "retryLimit": 7, "priority": 3, "maxSize": 100}});
        assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    }
    push_n(&gw, &newer, "a", 4).await;
    push_n(&gw, &newer, "b", 2).await;
    // One group leases 3 of partition a; the slowest group there has 4 unconsumed.
    pop(
        &gw,
        &format!("{newer}/partition/a"),
        "consumerGroup=billing&batch=3",
    )
    .await;

    let (status, list) = get(&gw, &format!("/api/v1/resources/queues?namespace={ns}")).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [newer.as_str(), older.as_str()], "newest first");
    let entry = &list["queues"][0];
    assert_eq!(entry["id"], json!(newer));
    assert_eq!(entry["queue"], json!(newer));
    assert_eq!(
        entry["messages"],
        json!({"total": 6, "pending": 3, "processing": 3}),
        "b: 2 pending; a: 1 pending, 3 leased"
    );
    assert_eq!(entry["depth"], json!(6));
    assert_eq!(
        (
            &entry["partitionCount"],
            &entry["partitions"],
            &entry["priority"],
            &entry["leaseTime"],
            &entry["retryLimit"],
            &entry["maxSize"],
            &entry["encryptionEnabled"]
        ),
        (
            &json!(2),
            &json!(2),
            &json!(3),
            &json!(45),
            &json!(7),
            &json!(100),
            &json!(false)
        )
    );
    assert_eq!(
        list["queues"][1]["messages"],
        json!({"total": 0, "pending": 0, "processing": 0})
    );

    let only = |query: String| {
        let gw = &gw;
        async move {
            let (status, list) = get(gw, &format!("/api/v1/resources/queues?{query}")).await;
            assert_eq!(status, 200, "{query}: {list}");
            list["queues"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        only(format!("namespace={ns}&task=first")).await,
        [older.as_str()]
    );
    assert_eq!(
        only(format!("search={}", newer.to_uppercase())).await,
        [newer.as_str()],
        "search: part of the name, any case"
    );
    assert_eq!(
        only(format!("namespace={ns}&limit=1&offset=1")).await,
        [older.as_str()]
    );
    assert_eq!(
        only(format!("namespace={ns}&task=&search=")).await.len(),
        2,
        "empty values count as absent"
    );
    for bad in ["limit=0", "limit=x", "offset=-1"] {
        let (status, body) = get(&gw, &format!("/api/v1/resources/queues?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("must be"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn queue_detail_has_partition_stats_message_times_and_totals() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("detail");
    push_n(&gw, &queue, "a", 5).await;
    push_n(&gw, &queue, "b", 1).await;
    let partition = |queue: &str| format!("{queue}/partition/a");
    // billing completes 2 of a; audit holds a lease on 3 of a.
    let done = pop(&gw, &partition(&queue), "consumerGroup=billing&batch=2").await;
    ack_all(&gw, &done).await;
    pop(&gw, &partition(&queue), "consumerGroup=audit&batch=3").await;

    let (status, detail) = get(&gw, &format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        (&detail["id"], &detail["name"]),
        (&json!(queue), &json!(queue))
    );
    let a = &detail["partitions"][0];
    assert_eq!(
        keys(a),
        BTreeSet::from([
            "id",
            "name",
            "partitionId",
            "partition",
            "head",
            "depth",
            "createdAt",
            "stats",
            "oldestMessage",
            "newestMessage",
            "consumerGroups"
        ])
    );
    assert_eq!((&a["id"], &a["name"]), (&a["partitionId"], &json!("a")));
    assert_eq!(
        a["stats"],
        json!({"total": 5, "pending": 3, "processing": 3, "completed": 2, "failed": 0,
               "deadLetter": 0}),
        "pending: billing's 3 (audit's 5 less its 3 leased: 2); processing: audit's lease"
    );
    assert!(
        is_utc(&a["oldestMessage"]) && is_utc(&a["newestMessage"]),
        "{a}"
    );
    assert_eq!(
        detail["totals"],
        json!({"total": 6, "pending": 4, "processing": 3, "completed": 2, "failed": 0,
               "deadLetter": 0})
    );

    // Retention gone: a partition with no stored message has null times.
    db().await
        .execute(
            "DELETE FROM pgcursor.messages m USING pgcursor.partitions p
              WHERE p.id = m.partition_id AND p.queue = $1 AND p.name = 'b'",
            &[&queue],
        )
        .await
        .unwrap();
    let (_, detail) = get(&gw, &format!("/api/v1/resources/queues/{queue}")).await;
    let b = &detail["partitions"][1];
    assert_eq!(
        (&b["name"], &b["oldestMessage"], &b["newestMessage"]),
        (&json!("b"), &Value::Null, &Value::Null)
    );
}

#[tokio::test]
async fn overview_counts_lifetime_totals_that_survive_deletes() {
    let gw = Gateway::start().await;
    let overview = || async {
        let (status, body) = get(&gw, "/api/v1/resources/overview").await;
        assert_eq!(status, 200, "{body}");
        body
    };
    let before = overview().await;
    assert_eq!(
        keys(&before["messages"]),
        BTreeSet::from([
            "total",
            "pending",
            "processing",
            "completed",
            "failed",
            "deadLetter"
        ])
    );
    for figure in ["time", "offset"] {
        assert_eq!(
            keys(&before["lag"][figure]),
            BTreeSet::from(["avg", "median", "min", "max"])
        );
    }
    assert_eq!(
        keys(&before["throughput"]),
        BTreeSet::from(["ingestedPerSecond", "processedPerSecond", "windowSeconds"])
    );
    assert!(is_utc(&before["timestamp"]), "{before}");
    assert_eq!(before["statsAge"], json!(0));

    let queue = fresh_queue("overview");
    let ns = format!("{queue}-ns");
    let body = json!({"queue": queue, "namespace": ns, "task": "t"});
    assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    push_n(&gw, &queue, "Default", 3).await;
    let answer = pop(&gw, &queue, "consumerGroup=ov&batch=2").await;
    ack_all(&gw, &answer).await;
    let after = overview().await;
    // Other tests run at the same time and only ever add to these.
    assert!(
        int(&after["messages"]["total"]) >= int(&before["messages"]["total"]) + 3,
        "{before} {after}"
    );
    assert!(
        int(&after["messages"]["completed"]) >= int(&before["messages"]["completed"]) + 2,
        "{before} {after}"
    );
    assert!(
        int(&after["namespaces"]) >= 1 && int(&after["tasks"]) >= 1,
        "{after}"
    );

    // Deleting the queue (and with it the group's cursor rows) keeps what
    // they counted: lifetime totals never go down.
    let path = format!("/api/v1/resources/queues/{queue}");
    assert_eq!(send(client().delete(gw.url(&path))).await.0, 200);
    let gone = overview().await;
    for figure in ["total", "completed"] {
        assert!(
            int(&gone["messages"][figure]) >= int(&after["messages"][figure]),
            "{figure}: {after} -> {gone}"
        );
    }
}

#[tokio::test]
async fn namespaces_and_tasks_list_non_empty_names_sorted() {
    let gw = Gateway::start().await;
    let base = fresh_queue("labels");
    let (ns_a, ns_b) = (format!("{base}-a"), format!("{base}-b"));
    let task_x = format!("{base}-x");
    let configure = [
        (format!("{base}-1"), json!(ns_b), json!(task_x)),
        (format!("{base}-2"), json!(ns_a), json!(task_x)),
        (format!("{base}-3"), json!(ns_a), json!("")),
        (format!("{base}-4"), json!(""), Value::Null),
    ];
    for (queue, ns, task) in &configure {
        let body = json!({"queue": queue, "namespace": ns, "task": task});
        assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    }
    push_n(&gw, &format!("{base}-2"), "p", 3).await;
    push_n(&gw, &format!("{base}-3"), "p", 1).await;
    push_n(&gw, &format!("{base}-3"), "q", 1).await;

    let (status, body) = get(&gw, "/api/v1/resources/namespaces").await;
    assert_eq!(status, 200, "{body}");
    let list = body["namespaces"].as_array().unwrap();
    assert!(
        list.iter().all(|n| n["namespace"] != json!("")),
        "no empty name: {body}"
    );
    let names: Vec<&str> = list
        .iter()
        .map(|n| n["namespace"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by name");
    let ours: Vec<&Value> = list
        .iter()
        .filter(|n| n["namespace"].as_str().unwrap().starts_with(&base))
        .collect();
    assert_eq!(
        ours,
        [
            &json!({"namespace": ns_a, "queues": 2, "partitions": 3,
                    "messages": {"total": 5, "pending": 5}}),
            &json!({"namespace": ns_b, "queues": 1, "partitions": 0,
                    "messages": {"total": 0, "pending": 0}})
        ]
    );

    let (status, body) = get(&gw, "/api/v1/resources/tasks").await;
    assert_eq!(status, 200, "{body}");
    let list = body["tasks"].as_array().unwrap();
    assert!(list.iter().all(|t| t["task"] != json!("")), "{body}");
    let ours: Vec<&Value> = list
        .iter()
        .filter(|t| t["task"].as_str().unwrap().starts_with(&base))
        .collect();
    assert_eq!(
        ours,
        [&json!({"task": task_x, "queues": 2, "partitions": 1,
                 "messages": {"total": 3, "pending": 3}})]
    );
}
