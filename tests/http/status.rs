//! GET /api/v1/status, /api/v1/status/queues[/{queue}[/messages]],
//! /api/v1/status/analytics and /api/v1/analytics/* (docs/http-api.md "Status
//! and analytics"). Per-minute figures come from pgcursor.stats_snapshots (the
//! tests write snapshot rows of their own queue at chosen minutes, as
//! housekeeping would) and from what the gateways flush into
//! pgcursor.gateway_minutes.

use std::time::{Duration, Instant};

use pgcursor_tests::{db, Gateway};
use serde_json::{json, Value};

use crate::broker::{ack_all, fresh_queue, get, keys, pop, post, push_n};

async fn ok(gw: &Gateway, path: &str) -> Value {
    let (status, body) = get(gw, path).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// A snapshot row of `queue`, `minutes_ago` minutes before this minute.
async fn snapshot(queue: &str, minutes_ago: i32, pushed: i64, completed: i64, dead_lettered: i64) {
    db().await
        .execute(
            "INSERT INTO pgcursor.stats_snapshots (minute, queue, taken_at, pushed, completed, dead_lettered, discarded)
             SELECT m, $1, m, $3, $4, $5, 0
             FROM (SELECT date_trunc('minute', now()) - make_interval(mins => $2) AS m) x",
            &[&queue, &minutes_ago, &pushed, &completed, &dead_lettered],
        )
        .await
        .unwrap();
}

/// Dead-letters transactionId `<partition>-<offset>` for `group` with `error`.
async fn kill(
    gw: &Gateway,
    partition_id: &Value,
    partition: &str,
    group: &str,
    offset: usize,
    error: &str,
) {
    let ack = json!({"transactionId": format!("{partition}-{offset}"), "partitionId": partition_id,
                     "consumerGroup": group, "status": "dlq", "error": error});
    let (status, answer) = post(gw, "/api/v1/ack", &ack).await;
    assert_eq!((status, &answer[0]["dlq"]), (200, &json!(true)), "{answer}");
}

fn sum(series: &Value, field: &str) -> i64 {
    series
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[field].as_i64().unwrap())
        .sum()
}

#[tokio::test]
async fn status_throughput_comes_from_snapshot_deltas_per_bucket() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("status-tp");
    push_n(&gw, &queue, "Default", 5).await;
    ack_all(&gw, &pop(&gw, &queue, "batch=2").await).await;
    // 10 minutes ago nothing, 5 minutes ago 3 pushed; now 5 pushed, 2 completed.
    snapshot(&queue, 10, 0, 0, 0).await;
    snapshot(&queue, 5, 3, 0, 0).await;

    let status = ok(&gw, &format!("/api/v1/status?queue={queue}")).await;
    assert_eq!(status["bucketMinutes"], 1);
    let series = &status["throughput"];
    let buckets = series.as_array().unwrap();
    assert!(buckets.len() >= 60, "{status}");
    assert_eq!(status["pointCount"], buckets.len());
    let labels: Vec<&str> = buckets
        .iter()
        .map(|b| b["timestamp"].as_str().unwrap())
        .collect();
    let mut newest_first = labels.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(labels, newest_first, "newest first");
    assert!(
        labels.iter().all(|l| l.ends_with(":00Z") && l.len() == 20),
        "{labels:?}"
    );
    assert_eq!(sum(series, "ingested"), 5, "{series}");
    assert_eq!(sum(series, "processed"), 2, "{series}");
    // The bucket of the 10-minute-old snapshot holds what happened until the next one.
    let first = buckets
        .iter()
        .find(|b| b["ingested"] == 3)
        .expect("a bucket of 3");
    assert_eq!(
        (
            first["processed"].clone(),
            first["ingestedPerSecond"].clone()
        ),
        (json!(0), json!(0.05))
    );
    // (CPU and pool figures are every gateway process's: other tests' count.)
    for zero in ["popPerSecond", "avgLagMs", "maxEventLoopLagMs"] {
        assert_eq!(first[zero], 0, "{zero}");
    }
    assert_eq!(status["messages"]["total"], 5);
    assert_eq!(status["messages"]["completed"], 2);
    assert_eq!(status["messages"]["pending"], 3);
    // Every gateway process that flushed in the last 2 minutes (other tests' too).
    for worker in status["workers"].as_array().unwrap() {
        assert!(worker["workerId"].as_u64().unwrap() > 0, "{worker}");
        assert!(worker["hostname"].is_string(), "{worker}");
    }
    let names: Vec<&Value> = status["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| &q["name"])
        .collect();
    assert_eq!(names, vec![&json!(queue)]);
    assert_eq!(status["queues"][0]["totalConsumed"], 2);

    // Six hours: 5-minute buckets, labels on multiples of 5 minutes.
    let wide = ok(
        &gw,
        &format!("/api/v1/status?queue={queue}&from=2026-01-01T00:03:00Z&to=2026-01-01T06:00:00Z"),
    )
    .await;
    assert_eq!(wide["bucketMinutes"], 5);
    assert_eq!(wide["throughput"][0]["timestamp"], "2026-01-01T06:00:00Z");
    assert_eq!(
        wide["throughput"].as_array().unwrap().last().unwrap()["timestamp"],
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(wide["timeRange"]["from"], "2026-01-01T00:03:00.000000Z");
}

#[tokio::test]
async fn status_shows_leases_dead_letters_and_filters() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("status-dlq");
    let namespace = fresh_queue("ns");
    let body = json!({"queue": queue, "namespace": namespace});
    assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    let pushed = push_n(&gw, &queue, "Default", 6).await;
    let pid = &pushed[0]["partitionId"];
    let (g1, g2) = (fresh_queue("g1"), fresh_queue("g2"));
    kill(&gw, pid, "Default", &g1, 1, "boom").await;
    kill(&gw, pid, "Default", &g1, 2, "boom").await;
    kill(&gw, pid, "Default", &g2, 3, "bang").await;
    pop(&gw, &queue, "batch=4").await; // a live lease over 4 messages

    let status = ok(&gw, &format!("/api/v1/status?namespace={namespace}")).await;
    let dlq = &status["deadLetterQueue"];
    assert_eq!(dlq["totalMessages"], 3);
    assert_eq!(dlq["affectedPartitions"], 1);
    assert_eq!(
        dlq["topErrors"],
        json!([{"error": "boom", "count": 2}, {"error": "bang", "count": 1}])
    );
    assert_eq!(
        status["leases"],
        json!({"active": 1, "partitionsWithLeases": 1, "totalBatchSize": 4, "totalAcked": 0})
    );
    assert_eq!(status["messages"]["deadLetter"], 3);
    assert_eq!(status["messages"]["processing"], 4);
    assert_eq!(
        status["messages"]["batchEfficiency"],
        json!({"push": 0, "pop": 0, "ack": 0})
    );
    // Another namespace sees none of it.
    let other = ok(&gw, &format!("/api/v1/status?namespace={namespace}-none")).await;
    assert_eq!(other["deadLetterQueue"]["totalMessages"], 0);
    assert_eq!(other["queues"], json!([]));
    // Bad windows are 400s naming the field.
    for (query, error) in [
        ("from=yesterday-ish", "from must be an ISO timestamp"),
        (
            "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
            "from must not be after to",
        ),
        (
            "to=infinity",
            "to must be a time from 1970-01-01 to 9999-01-01",
        ),
    ] {
        let (code, body) = get(&gw, &format!("/api/v1/status?{query}")).await;
        assert_eq!(
            (code, body["error"].as_str().unwrap()),
            (400, error),
            "{query}"
        );
    }
}

#[tokio::test]
async fn status_queue_list_detail_and_messages() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("status-q");
    let namespace = fresh_queue("ns");
    let body =
        json!({"queue": queue, "namespace": namespace, "task": "t", "options": {"leaseTime": 30}});
    assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    push_n(&gw, &queue, "a", 3).await;
    let b = push_n(&gw, &queue, "b", 2).await;
    ack_all(
        &gw,
        &pop(&gw, &format!("{queue}/partition/a"), "batch=3").await,
    )
    .await;
    pop(&gw, &format!("{queue}/partition/b"), "batch=1").await; // leases b-1
    kill(&gw, &b[0]["partitionId"], "b", &fresh_queue("g"), 2, "x").await;

    let list = ok(
        &gw,
        &format!("/api/v1/status/queues?namespace={namespace}&limit=5"),
    )
    .await;
    assert_eq!(list["pagination"], json!({"limit": 5, "offset": 0}));
    let entry = &list["queues"][0];
    assert_eq!(entry["name"], json!(queue));
    assert_eq!(entry["partitions"], 2);
    // pending: the slowest group's unconsumed, leased included; completed: lifetime, over
    // the groups (g's dead letter at b-2 completed b-1 for g).
    assert_eq!(
        entry["messages"],
        json!({"total": 5, "pending": 2, "processing": 1, "completed": 4})
    );
    let (code, body) = get(&gw, "/api/v1/status/queues?limit=0").await;
    assert_eq!(
        (code, body["error"].as_str().unwrap()),
        (400, "limit must be a positive integer")
    );

    let detail = ok(&gw, &format!("/api/v1/status/queues/{queue}")).await;
    assert_eq!(detail["queue"]["namespace"], json!(namespace));
    assert_eq!(detail["queue"]["config"]["leaseTime"], 30);
    let parts = detail["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0]["name"], "a");
    assert_eq!(
        parts[0]["messages"],
        json!({"total": 3, "pending": 0, "processing": 0, "completed": 3, "failed": 0, "deadLetter": 0})
    );
    assert_eq!(parts[0]["cursor"]["totalConsumed"], 3);
    assert_eq!(
        parts[1]["messages"],
        json!({"total": 2, "pending": 2, "processing": 1, "completed": 0, "failed": 0, "deadLetter": 1})
    );
    assert_eq!(detail["totals"]["messages"]["total"], 5);
    assert_eq!(detail["totals"]["pending"], 2);
    assert_eq!(detail["totals"]["deadLetter"], 1);
    assert!(keys(&parts[0])
        .is_superset(&["oldestMessage", "newestMessage", "lastActivity", "stats"].into()));
    let (code, body) = get(&gw, &format!("/api/v1/status/queues/{queue}-none")).await;
    assert_eq!(code, 404, "{body}");

    let msgs = ok(
        &gw,
        &format!("/api/v1/status/queues/{queue}/messages?limit=10"),
    )
    .await;
    let shown: Vec<String> = msgs
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}:{}",
                m["partition"].as_str().unwrap(),
                m["transactionId"].as_str().unwrap(),
                m["status"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(shown.len(), 5);
    assert!(shown.contains(&"a/a-3:completed".to_string()), "{shown:?}");
    assert!(shown.contains(&"b/b-1:processing".to_string()), "{shown:?}");
    assert!(
        shown.contains(&"b/b-2:dead_letter".to_string()),
        "{shown:?}"
    );
    let second = ok(
        &gw,
        &format!("/api/v1/status/queues/{queue}/messages?limit=2&offset=1"),
    )
    .await;
    assert_eq!(second.as_array().unwrap().len(), 2);
    assert_eq!(second[0], msgs[1]);
    assert_eq!(
        ok(&gw, &format!("/api/v1/status/queues/{queue}-none/messages")).await,
        json!([])
    );
}

#[tokio::test]
async fn status_analytics_counts_messages_per_interval() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("status-an");
    push_n(&gw, &queue, "Default", 4).await;
    db().await
        .execute(
            "UPDATE pgcursor.messages m SET created_at = '2026-01-01T10:20:30Z'
             FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = $1 AND m.msg_offset <= 3",
            &[&queue],
        )
        .await
        .unwrap();
    let path = format!("/api/v1/status/analytics?queue={queue}&interval=hour&from=2026-01-01T08:59:00Z&to=2026-01-01T11:00:00Z");
    let answer = ok(&gw, &path).await;
    assert_eq!(answer["interval"], "hour");
    assert_eq!(
        answer["dataPoints"],
        json!([{"timestamp": "2026-01-01T08:00:00Z", "messages": 0}, {"timestamp": "2026-01-01T09:00:00Z", "messages": 0},
               {"timestamp": "2026-01-01T10:00:00Z", "messages": 3}, {"timestamp": "2026-01-01T11:00:00Z", "messages": 0}])
    );
    let day = ok(
        &gw,
        &format!("/api/v1/status/analytics?queue={queue}&interval=day"),
    )
    .await;
    assert_eq!(
        sum(&day["dataPoints"], "messages"),
        1,
        "the default window is the last 24 h: {day}"
    );
    let (code, body) = get(&gw, "/api/v1/status/analytics?interval=week").await;
    assert_eq!(
        (code, body["error"].as_str().unwrap()),
        (400, "interval must be minute, hour or day")
    );

    // No window and no interval (wire-admin §4.5): the last 24 hours, by the
    // hour. Messages 25, 23 and 1 hours old: the last two count.
    let queue = fresh_queue("status-an-default");
    push_n(&gw, &queue, "Default", 3).await;
    // (One offset a statement: Citus takes no now() beside a column in an UPDATE.)
    for (offset, hours) in [(1i64, 25i32), (2, 23), (3, 1)] {
        db().await
            .execute(
                "UPDATE pgcursor.messages m SET created_at = now() - $2::int * interval '1 hour'
                 FROM pgcursor.partitions p
                 WHERE p.id = m.partition_id AND p.queue = $1 AND m.msg_offset = $3",
                &[&queue, &hours, &offset],
            )
            .await
            .unwrap();
    }
    let answer = ok(&gw, &format!("/api/v1/status/analytics?queue={queue}")).await;
    assert_eq!(answer["interval"], "hour", "{answer}");
    assert_eq!(sum(&answer["dataPoints"], "messages"), 2, "{answer}");
    let span: f64 = db()
        .await
        .query_one(
            "SELECT extract(epoch FROM $2::text::timestamptz - $1::text::timestamptz)::float8",
            &[&answer["from"].as_str(), &answer["to"].as_str()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(span, 86_400.0, "{answer}");
}

/// A window before any process of these tests ran: its analytics are empty.
const QUIET_HOURS: &str = "from=2026-01-01T00:00:00Z&to=2026-01-01T02:00:00Z";

#[tokio::test]
async fn analytics_routes_answer_queens_shapes() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("status-ops");
    push_n(&gw, &queue, "Default", 3).await;
    snapshot(&queue, 3, 1, 0, 0).await;

    let ops = ok(&gw, &format!("/api/v1/analytics/queue-ops?queue={queue}")).await;
    assert_eq!(ops["bucketMinutes"], 1);
    assert_eq!(ops["queues"], json!([queue]));
    assert_eq!(sum(&ops["series"], "pushMessages"), 2, "{ops}");
    assert_eq!(ops["series"][0]["queueName"], json!(queue));
    assert_eq!(ops["series"][0]["pushPerSecond"], 0.03);
    assert_eq!(
        ok(&gw, &format!("/api/v1/analytics/queue-lag?queue={queue}")).await,
        json!([])
    );
    let retention = ok(&gw, &format!("/api/v1/analytics/retention?queue={queue}")).await;
    assert_eq!(
        (
            retention["series"].clone(),
            retention["totals"]["totalMsgs"].clone()
        ),
        (json!([]), json!(0)),
        "nothing deleted yet"
    );
    let (status, body) = post(
        &gw,
        "/api/v1/configure",
        &json!({"queue": queue, "options": {"retentionSeconds": 60}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let psql = db().await;
    psql.execute(
        "UPDATE pgcursor.messages m SET created_at = now() - interval '2 minutes'
           FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = $1",
        &[&queue],
    )
    .await
    .unwrap();
    // A whole housekeeping run, as a housekeeping gateway makes (a purge
    // alone would leave another test's dead letters to a later run), once
    // no other run holds its lock.
    let mut ran = false;
    for _ in 0..100 {
        let answer: Value = psql
            .query_one("SELECT pgcursor.housekeeping()", &[])
            .await
            .unwrap()
            .get(0);
        if answer["skipped"] == false {
            ran = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ran, "housekeeping was held by another run for 5 s");
    let retention = ok(&gw, &format!("/api/v1/analytics/retention?queue={queue}")).await;
    assert_eq!(
        retention["totals"],
        json!({"retentionMsgs": 3, "completedRetentionMsgs": 0, "evictionMsgs": 0,
               "totalMsgs": 3, "eventCount": 1}),
        "{retention}"
    );
    assert_eq!(
        retention["series"].as_array().map(Vec::len),
        Some(1),
        "{retention}"
    );
    assert_eq!(retention["series"][0]["retentionMsgs"], 3);
    let system = ok(&gw, "/api/v1/analytics/system-metrics").await;
    let replicas = system["replicas"].as_array().unwrap();
    assert_eq!(system["replicaCount"], replicas.len(), "{system}");
    let old = ok(
        &gw,
        &format!("/api/v1/analytics/system-metrics?{QUIET_HOURS}"),
    )
    .await;
    assert_eq!(
        (old["replicas"].clone(), old["replicaCount"].clone()),
        (json!([]), json!(0)),
        "no process sampled in 2026's first hours"
    );
    let workers = ok(
        &gw,
        &format!("/api/v1/analytics/worker-metrics?{QUIET_HOURS}"),
    )
    .await;
    assert_eq!(workers["bucketMinutes"], 5);
    assert_eq!(
        workers["pointCount"],
        workers["timeSeries"].as_array().unwrap().len()
    );
    for worker in workers["workers"].as_array().unwrap() {
        assert!(worker["workerId"].as_u64().unwrap() > 0, "{worker}");
    }
    let parked = ok(
        &gw,
        &format!("/api/v1/analytics/queue-parked-replicas?{QUIET_HOURS}"),
    )
    .await;
    assert_eq!(
        (parked["series"].clone(), parked["replicas"].clone()),
        (json!([]), json!([])),
        "no long-poll waited in 2026's first hours"
    );
    let pg = ok(&gw, "/api/v1/analytics/postgres-stats").await;
    let tables: Vec<&str> = pg["tableSizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert!(tables.contains(&"messages"), "{tables:?}");
    assert!(pg["databaseCache"]["cacheHitRatio"].as_f64().unwrap() > 0.0);
    for key in [
        "tableCache",
        "indexCache",
        "cacheSummary",
        "deadTuples",
        "hotUpdates",
        "activeQueries",
        "autovacuumStatus",
        "bufferConfig",
        "bufferUsage",
    ] {
        assert!(pg.get(key).is_some(), "{key}");
    }
    // wire-admin §4.6: the top-N cuts, what deadTuples keeps, ratios as
    // percentages with 2 decimals.
    let list = |key: &str| pg[key].as_array().unwrap().clone();
    for (key, most) in [
        ("indexCache", 20),
        ("tableSizes", 20),
        ("deadTuples", 15),
        ("hotUpdates", 15),
        ("activeQueries", 10),
    ] {
        assert!(list(key).len() <= most, "{key}: {}", pg[key]);
    }
    assert!(
        list("deadTuples")
            .iter()
            .all(|t| t["deadTuples"].as_i64() > Some(0)),
        "{}",
        pg["deadTuples"]
    );
    let two_decimals = |r: &Value| {
        let r = r.as_f64().unwrap();
        (0.0..=100.0).contains(&r) && ((r * 100.0).round() - r * 100.0).abs() < 1e-6
    };
    let db_cache = &pg["databaseCache"];
    assert!(two_decimals(&db_cache["cacheHitRatio"]), "{db_cache}");
    let (hits, reads) = (
        db_cache["cacheHits"].as_f64().unwrap(),
        db_cache["diskReads"].as_f64().unwrap(),
    );
    let ratio = (hits / (hits + reads) * 10_000.0).round() / 100.0;
    assert!(
        (db_cache["cacheHitRatio"].as_f64().unwrap() - ratio).abs() <= 0.011,
        "{db_cache}"
    );
    for entry in list("tableCache").iter().chain(list("indexCache").iter()) {
        assert!(two_decimals(&entry["cacheHitRatio"]), "{entry}");
    }
    let (code, _) = get(&gw, "/api/v1/analytics/queue-ops?from=nope").await;
    assert_eq!(code, 400);
}

/// Polls `path` until `done` says yes (a flush is due every second).
async fn wait_for(gw: &Gateway, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = ok(gw, path).await;
        if done(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never got there: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn pops_the_gateway_counted_show_in_status_and_analytics_after_a_flush() {
    let gw = Gateway::start_with(&[("PGCURSOR_STATS_FLUSH_SECONDS", "1")]).await;
    let queue = fresh_queue("status-pops");
    push_n(&gw, &queue, "Default", 3).await;
    let first = pop(&gw, &queue, "batch=2").await;
    ack_all(&gw, &first).await;
    pop(&gw, &queue, "batch=2").await; // the third message
    pop(&gw, &queue, "batch=2").await; // nothing left: an empty pop
    let stale = json!({"transactionId": "Default-1", "partitionId": first["messages"][0]["partitionId"],
                       "leaseId": first["leaseId"], "status": "completed"});
    let (_, refused) = post(&gw, "/api/v1/ack", &stale).await;
    assert_eq!(refused[0]["success"], false, "{refused}");

    let path = format!("/api/v1/status?queue={queue}");
    let status = wait_for(&gw, &path, |s| {
        sum(&s["throughput"], "popMessages") == 3 && s["messages"]["requests"]["ack"] == 2
    })
    .await;
    assert_eq!(
        status["messages"]["requests"],
        json!({"push": 1, "pop": 3, "ack": 2}),
        "{status}"
    );
    assert_eq!(
        status["messages"]["batchEfficiency"]["pop"].as_f64(),
        Some(1.0)
    );
    assert_eq!(status["errors"]["ackFailed"], 1, "the stale ack");
    // The pops fell in one minute's bucket, or two when a minute began meanwhile.
    for bucket in status["throughput"].as_array().unwrap() {
        let pops = bucket["popMessages"].as_i64().unwrap();
        let rate = (pops as f64 / 60.0 * 100.0).round() / 100.0;
        assert_eq!(bucket["popPerSecond"].as_f64(), Some(rate), "{bucket}");
        assert!(
            bucket["maxLagMs"].as_i64() >= bucket["avgLagMs"].as_i64(),
            "{bucket}"
        );
    }

    let ops = ok(&gw, &format!("/api/v1/analytics/queue-ops?queue={queue}")).await;
    assert_eq!(sum(&ops["series"], "popMessages"), 3, "{ops}");
    assert_eq!(sum(&ops["series"], "popEmpty"), 1, "{ops}");
    assert_eq!(sum(&ops["series"], "pushRequests"), 1, "{ops}");
    assert_eq!(sum(&ops["series"], "ackFailed"), 1, "{ops}");
    let lag = ok(&gw, &format!("/api/v1/analytics/queue-lag?queue={queue}")).await;
    let lag = lag.as_array().unwrap();
    assert_eq!(
        lag.iter()
            .map(|m| m["popCount"].as_i64().unwrap())
            .sum::<i64>(),
        3
    );
    assert!(
        lag.iter().all(|m| m["queueName"] == json!(queue)),
        "{lag:?}"
    );
}
