//! Metrics (docs/http-api.md "Metrics"): the exposition is
//! read with a real parser (openmetrics-parser, Prometheus text format), every family is there with its
//! type, and the counters move by exactly what a push, a pop and acks of
//! every outcome did. Each test starts its own gateway, so the gateway-side
//! counters are this test's alone; the database families are per queue.

use openmetrics_parser::prometheus::parse_prometheus;
use openmetrics_parser::{MetricFamily, MetricsExposition, PrometheusType, PrometheusValue};
use std::time::{Duration, Instant};

use pgcursor_tests::{client, database_url, db, Gateway, GatewayConfig, PrivateCluster};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::broker::{
    ack_all, configure_queue, drop_database, eventually, fresh_queue, get, lock_table, messages,
    pop, post, push_n, request, scratch_database, send, until_waiting_for_a_lock,
};

/// (family, type) of everything a scrape shows with a database behind it.
const FAMILIES: [(&str, &str); 54] = [
    ("queen_uptime_seconds", "gauge"),
    ("queen_cpu_user_microseconds_total", "counter"),
    ("queen_cpu_system_microseconds_total", "counter"),
    ("pgcursor_db_errors_total", "counter"),
    ("queen_cluster_db_errors_total", "counter"),
    ("queen_process_resident_memory_bytes", "gauge"),
    ("queen_process_virtual_memory_bytes", "gauge"),
    ("queen_db_pool_size", "gauge"),
    ("queen_db_pool_idle", "gauge"),
    ("queen_db_pool_active", "gauge"),
    ("pgcursor_db_pool_max_size", "gauge"),
    ("pgcursor_db_pool_waiters", "gauge"),
    ("pgcursor_notify_listener_up", "gauge"),
    ("pgcursor_push_waits", "gauge"),
    ("pgcursor_metrics_database_up", "gauge"),
    ("queen_maintenance_mode_enabled", "gauge"),
    ("pgcursor_pop_maintenance_mode_enabled", "gauge"),
    ("pgcursor_http_requests_total", "counter"),
    ("pgcursor_http_request_duration_seconds", "histogram"),
    ("pgcursor_http_push_requests_total", "counter"),
    ("pgcursor_http_pop_requests_total", "counter"),
    ("pgcursor_http_ack_requests_total", "counter"),
    ("pgcursor_http_transactions_total", "counter"),
    ("pgcursor_http_push_messages_total", "counter"),
    ("pgcursor_http_pop_messages_total", "counter"),
    ("pgcursor_pop_looks_total", "counter"),
    ("pgcursor_http_answers_abandoned_total", "counter"),
    ("pgcursor_http_body_bytes_held", "gauge"),
    ("pgcursor_http_body_bytes_max", "gauge"),
    ("pgcursor_http_answer_bytes_held", "gauge"),
    ("pgcursor_http_answer_bytes_max", "gauge"),
    ("pgcursor_ack_items_total", "counter"),
    ("pgcursor_ack_errors_total", "counter"),
    ("queen_dlq_depth", "gauge"),
    ("queen_dlq_depth_by_queue", "gauge"),
    ("queen_cluster_dlq_total", "counter"),
    ("queen_cluster_push_requests_total", "counter"),
    ("queen_cluster_pop_requests_total", "counter"),
    ("queen_cluster_ack_requests_total", "counter"),
    ("queen_cluster_transactions_total", "counter"),
    ("queen_cluster_push_messages_total", "counter"),
    ("queen_cluster_pop_messages_total", "counter"),
    ("queen_cluster_ack_messages_total", "counter"),
    ("queen_cluster_ack_total", "counter"),
    ("pgcursor_cluster_messages_total", "counter"),
    ("pgcursor_queue_messages_total", "counter"),
    ("pgcursor_queue_partitions", "gauge"),
    ("pgcursor_queue_depth", "gauge"),
    ("pgcursor_consumer_group_partitions", "gauge"),
    ("pgcursor_consumer_group_depth", "gauge"),
    ("pgcursor_consumer_group_lag_seconds", "gauge"),
    ("pgcursor_consumer_group_leased_partitions", "gauge"),
    ("pgcursor_consumer_group_expired_leases", "gauge"),
    ("pgcursor_consumer_group_lease_expiries_total", "counter"),
];

type Family = MetricFamily<PrometheusType, PrometheusValue>;

/// What `Exposition::parse` reads a raw carriage return as.
const CR: &str = "\u{240d}";

/// One scrape, parsed.
pub(crate) struct Exposition(MetricsExposition<PrometheusType, PrometheusValue>);

impl Exposition {
    /// The text format ends a line only at \n and lets a label value hold a
    /// raw carriage return (a consumer group's name may have one), but
    /// openmetrics-parser ends lines at a CR as well. So a CR is read as
    /// the placeholder ␍ (U+240D); a CR anywhere else, such as a \r\n line
    /// end, still fails the parse.
    fn parse(text: &str) -> Exposition {
        let text = text.replace('\r', CR);
        Exposition(parse_prometheus(&text).unwrap_or_else(|e| panic!("{e:?} parsing:\n{text}")))
    }

    fn family(&self, name: &str) -> Option<&Family> {
        self.0.families.get(name)
    }

    /// The samples of `family` whose labels include `labels`.
    fn samples<'a>(
        &'a self,
        family: &str,
        labels: &'a [(&'a str, &'a str)],
    ) -> Vec<&'a PrometheusValue> {
        let Some(family) = self.family(family) else {
            return Vec::new();
        };
        family
            .iter_samples()
            .filter(|s| {
                let set = s.get_labelset().expect("a label set");
                labels
                    .iter()
                    .all(|(k, v)| set.get_label_value(k) == Some(*v))
            })
            .map(|s| &s.value)
            .collect()
    }

    /// The value of the one sample of `family` with `labels` (0 when none).
    pub(crate) fn value(&self, family: &str, labels: &[(&str, &str)]) -> f64 {
        let found = self.samples(family, labels);
        assert!(
            found.len() <= 1,
            "{family}{labels:?}: {} series",
            found.len()
        );
        found.first().map_or(0.0, |value| match value {
            PrometheusValue::Counter(c) => c.value.as_f64(),
            PrometheusValue::Gauge(n) | PrometheusValue::Unknown(n) => n.as_f64(),
            other => panic!("{family}: not a single value: {other:?}"),
        })
    }

    fn has(&self, family: &str) -> bool {
        self.family(family)
            .is_some_and(|f| f.iter_samples().next().is_some())
    }
}

pub(crate) async fn scrape(gw: &Gateway) -> Exposition {
    Exposition::parse(&scrape_text(gw).await)
}

/// One scrape as written, its status and headers checked.
async fn scrape_text(gw: &Gateway) -> String {
    let response = client()
        .get(gw.url("/metrics/prometheus"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    assert_eq!(
        header("content-type").as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(header("cache-control").as_deref(), Some("no-cache"));
    response.text().await.unwrap()
}

/// Acks one item on the single route; answers its result.
async fn ack(gw: &Gateway, message: &Value, group: &str, status: &str) -> Value {
    let body = json!({"transactionId": message["transactionId"], "partitionId": message["partitionId"],
                      "leaseId": message["leaseId"], "consumerGroup": group, "status": status});
    let (code, answer) = post(gw, "/api/v1/ack", &body).await;
    assert_eq!(code, 200, "{answer}");
    answer[0].clone()
}

/// Queen's queen_cluster_* counters are lifetime figures of every gateway,
/// labelled scope="cluster", read from the database: what a gateway did
/// shows there once it has flushed its per-minute figures. (Other tests
/// count into the same database meanwhile: at least, not exactly.)
#[tokio::test]
async fn the_cluster_counters_add_up_every_gateways_flushed_figures() {
    let gw = Gateway::start_with(&[("PGCURSOR_STATS_FLUSH_SECONDS", "1")]).await;
    let queue = fresh_queue("cluster");
    let cluster = [("scope", "cluster")];
    let before = scrape(&gw).await;
    push_n(&gw, &queue, "p", 3).await;
    let popped = pop(&gw, &queue, "batch=3").await;
    ack_all(&gw, &popped).await;
    eventually("the cluster counters", Duration::from_secs(10), || async {
        let after = scrape(&gw).await;
        let moved = |family: &str, labels: &[(&str, &str)]| {
            after.value(family, labels) - before.value(family, labels)
        };
        moved("queen_cluster_push_requests_total", &cluster) >= 1.0
            && moved("queen_cluster_push_messages_total", &cluster) >= 3.0
            && moved("queen_cluster_pop_requests_total", &cluster) >= 1.0
            && moved("queen_cluster_pop_messages_total", &cluster) >= 3.0
            && moved("queen_cluster_ack_requests_total", &cluster) >= 1.0
            && moved("queen_cluster_ack_messages_total", &cluster) >= 3.0
            && moved(
                "queen_cluster_ack_total",
                &[("scope", "cluster"), ("result", "success")],
            ) >= 3.0
    })
    .await;
    let after = scrape(&gw).await;
    assert!(
        after
            .samples("queen_cluster_push_requests_total", &[])
            .len()
            == 1,
        "one series, scope=\"cluster\" only"
    );
}

#[tokio::test]
async fn every_family_is_there_with_its_type_and_the_counters_move() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("metrics");
    configure_queue(&gw, &queue).await;
    // One request first, so the request families have a series.
    let before = {
        scrape(&gw).await;
        scrape(&gw).await
    };
    for (name, kind) in FAMILIES {
        let family = before
            .family(name)
            .unwrap_or_else(|| panic!("{name}: missing"));
        assert_eq!(family.family_type.to_string(), kind, "{name}: # TYPE");
        assert!(!family.help.is_empty(), "{name}: # HELP");
        assert!(family.iter_samples().next().is_some(), "{name}: no series");
    }
    assert_eq!(before.value("pgcursor_notify_listener_up", &[]), 1.0);
    assert!(before.value("queen_db_pool_size", &[]) >= 1.0);
    assert!(before.value("queen_process_resident_memory_bytes", &[]) > 0.0);

    // 5 pushed (one a duplicate); popped 4 by group g; acked by outcome.
    push_n(&gw, &queue, "p", 4).await;
    push_n(&gw, &queue, "p", 1).await; // p-1 again: a duplicate, not stored
    let popped = pop(&gw, &queue, "batch=4&consumerGroup=g").await;
    let delivered = messages(&popped);
    assert_eq!(delivered.len(), 4);
    let first = ack(&gw, &delivered[0], "g", "completed").await;
    assert_eq!(first["success"], true, "{first}");
    // Completed again: changes nothing.
    assert_eq!(
        ack(&gw, &delivered[0], "g", "completed").await["noop"],
        true
    );
    // A retry of offset 2, then its dead-lettering.
    assert_eq!(ack(&gw, &delivered[1], "g", "retry").await["success"], true);
    let again = pop(&gw, &queue, "batch=1&consumerGroup=g").await;
    let dead = ack(&gw, &messages(&again)[0], "g", "dlq").await;
    assert_eq!(dead["dlq"], true, "{dead}");
    // A failed ack (budget left), then acks that cannot do anything.
    let third = pop(&gw, &queue, "batch=1&consumerGroup=g").await;
    assert_eq!(
        ack(&gw, &messages(&third)[0], "g", "failed").await["success"],
        true
    );
    let stale = ack(&gw, &messages(&third)[0], "g", "completed").await;
    assert_eq!(stale["error"], "invalid or expired lease", "{stale}");
    let unknown = json!({"transactionId": "never-pushed", "partitionId": delivered[0]["partitionId"],
                         "consumerGroup": "g"});
    let (code, answer) = post(&gw, "/api/v1/ack", &unknown).await;
    assert_eq!(
        answer[0]["error"], "transaction not found",
        "{code} {answer}"
    );
    // No route: labelled `unmatched`, never by the path asked for.
    let (code, _) = get(&gw, &format!("/no/such/{queue}")).await;
    assert_eq!(code, 404);
    let (code, _) = post(&gw, &format!("/api/v1/push/{queue}"), &json!({})).await;
    assert_eq!(code, 404);
    let (code, _) = post(&gw, "/api/v1/transaction", &json!({"operations": []})).await;
    assert!(code == 200 || code == 400, "{code}");

    let after = scrape(&gw).await;
    let moved = |family: &str, labels: &[(&str, &str)]| {
        after.value(family, labels) - before.value(family, labels)
    };
    assert_eq!(moved("pgcursor_http_push_requests_total", &[]), 2.0);
    assert_eq!(moved("pgcursor_http_push_messages_total", &[]), 4.0);
    assert_eq!(moved("pgcursor_http_pop_requests_total", &[]), 3.0);
    assert_eq!(moved("pgcursor_http_pop_messages_total", &[]), 6.0);
    assert_eq!(moved("pgcursor_pop_looks_total", &[]), 3.0);
    assert_eq!(moved("pgcursor_http_ack_requests_total", &[]), 7.0);
    assert_eq!(moved("pgcursor_http_transactions_total", &[]), 1.0);
    for (outcome, n) in [
        ("completed", 1.0),
        ("noop", 3.0),
        ("retry", 1.0),
        ("dlq", 1.0),
        ("failed", 1.0),
    ] {
        assert_eq!(
            moved("pgcursor_ack_items_total", &[("outcome", outcome)]),
            n,
            "outcome {outcome}"
        );
    }
    assert_eq!(
        moved(
            "pgcursor_ack_errors_total",
            &[("error", "invalid or expired lease")]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "pgcursor_ack_errors_total",
            &[("error", "transaction not found")]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "pgcursor_ack_errors_total",
            &[("error", "already completed")]
        ),
        0.0
    );

    // Requests by route PATTERN, method and status; latency per route.
    let push_route = [
        ("route", "/api/v1/push"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(moved("pgcursor_http_requests_total", &push_route), 2.0);
    let pop_route = [
        ("route", "/api/v1/pop/queue/{queue}"),
        ("method", "GET"),
        ("status", "200"),
    ];
    assert_eq!(moved("pgcursor_http_requests_total", &pop_route), 3.0);
    let unmatched = [("route", "unmatched"), ("status", "404")];
    assert_eq!(
        moved(
            "pgcursor_http_requests_total",
            &[("method", "GET"), unmatched[0], unmatched[1]]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "pgcursor_http_requests_total",
            &[("method", "POST"), unmatched[0], unmatched[1]]
        ),
        1.0
    );
    let requests = after
        .family("pgcursor_http_requests_total")
        .expect("requests");
    for sample in requests.iter_samples() {
        let route = sample
            .get_labelset()
            .unwrap()
            .get_label_value("route")
            .unwrap()
            .to_string();
        assert!(
            !route.contains(&queue),
            "a series names a raw path: {route}"
        );
    }
    let latency = after.samples(
        "pgcursor_http_request_duration_seconds",
        &[("route", "/api/v1/push"), ("method", "POST")],
    );
    match latency.as_slice() {
        [PrometheusValue::Histogram(h)] => {
            assert_eq!(h.count, Some(2), "{h:?}");
            let all = h.buckets.iter().find(|b| b.upper_bound.is_infinite());
            assert_eq!(all.map(|b| b.count.as_f64()), Some(2.0), "{h:?}");
        }
        other => panic!("not one histogram: {other:?}"),
    }

    // The database families, for this queue: offset 1 completed, 2 dead-lettered,
    // 3 failed (back to be delivered), 4 under no lease; the group's cursor is at 2.
    let q = [("queue", queue.as_str())];
    let g = [("queue", queue.as_str()), ("consumer_group", "g")];
    assert_eq!(after.value("pgcursor_queue_partitions", &q), 1.0);
    assert_eq!(after.value("pgcursor_queue_depth", &q), 2.0);
    assert_eq!(after.value("queen_dlq_depth_by_queue", &q), 1.0);
    assert_eq!(after.value("pgcursor_consumer_group_depth", &g), 2.0);
    assert_eq!(after.value("pgcursor_consumer_group_partitions", &g), 1.0);
    assert_eq!(
        after.value("pgcursor_consumer_group_leased_partitions", &g),
        0.0
    );
    let lag = after.value("pgcursor_consumer_group_lag_seconds", &g);
    assert!(lag > 0.0 && lag < 120.0, "lag {lag}");
    let fate = |f: &'static str| [("queue", queue.as_str()), ("fate", f)];
    assert_eq!(
        after.value("pgcursor_queue_messages_total", &fate("pushed")),
        4.0
    );
    assert_eq!(
        after.value("pgcursor_queue_messages_total", &fate("completed")),
        1.0
    );
    assert_eq!(
        after.value("pgcursor_queue_messages_total", &fate("dead_lettered")),
        1.0
    );
    assert!(
        moved("queen_cluster_dlq_total", &[("scope", "cluster")]) >= 1.0,
        "the cluster total includes this queue's dead letter"
    );
    assert!(after.value("queen_dlq_depth", &[("scope", "cluster")]) >= 1.0);

    // A lease that runs out is counted when a pop takes the partition over.
    let e = [("queue", queue.as_str()), ("consumer_group", "e")];
    let leased = pop(&gw, &queue, "batch=1&consumerGroup=e").await;
    assert_eq!(messages(&leased).len(), 1, "{leased}");
    expire_leases(&queue, "e").await;
    assert_eq!(
        scrape(&gw)
            .await
            .value("pgcursor_consumer_group_lease_expiries_total", &e),
        0.0,
        "expired, not yet taken over"
    );
    let again = pop(&gw, &queue, "batch=1&consumerGroup=e").await;
    assert_eq!(messages(&again).len(), 1, "{again}");
    assert_eq!(
        scrape(&gw)
            .await
            .value("pgcursor_consumer_group_lease_expiries_total", &e),
        1.0
    );
}

/// Names are free text (an empty queue name is valid, as in Queen), so a
/// label value is escaped as the text format says: \\, \" and \n, and
/// every other character, a carriage return too, as it is.
#[tokio::test]
async fn a_group_name_with_line_breaks_and_quotes_is_one_escaped_label() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("metrics-names");
    push_n(&gw, &queue, "p", 1).await;
    let group = "cr\rlf\nquote\"back\\end";
    let popped = pop(&gw, &queue, "consumerGroup=cr%0Dlf%0Aquote%22back%5Cend").await;
    assert_eq!(popped["consumerGroup"], group, "{popped}");

    let text = scrape_text(&gw).await;
    let written = format!(
        r#"pgcursor_consumer_group_partitions{{queue="{queue}",consumer_group="cr{}lf\nquote\"back\\end"}} 1"#,
        '\r'
    );
    assert!(text.contains(&written), "no line {written:?} in:\n{text}");
    let exposition = Exposition::parse(&text);
    // (The parser hands a label value back as written, escapes and all.)
    let read = format!(r#"cr{CR}lf\nquote\"back\\end"#);
    assert_eq!(
        exposition.value(
            "pgcursor_consumer_group_partitions",
            &[("queue", queue.as_str()), ("consumer_group", read.as_str())]
        ),
        1.0
    );
}

/// Makes the group's leases on the queue run out now.
async fn expire_leases(queue: &str, group: &str) {
    pgcursor_tests::db()
        .await
        .execute(
            "UPDATE pgcursor.cursors c SET lease_expires_at = now() - interval '1 second'
               FROM pgcursor.partitions p
              WHERE p.id = c.partition_id AND p.queue = $1 AND c.consumer_group = $2",
            &[&queue, &group],
        )
        .await
        .expect("expire the leases");
}

#[tokio::test]
async fn the_exposition_alone_carries_no_cors_headers() {
    let gw = Gateway::start().await;
    for method in [Method::GET, Method::OPTIONS] {
        let response = request(&gw, method.clone(), "/metrics/prometheus", None)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{method}");
        let cors: Vec<_> = response
            .headers()
            .keys()
            .filter(|k| k.as_str().starts_with("access-control-"))
            .collect();
        assert!(cors.is_empty(), "{method} /metrics/prometheus: {cors:?}");
    }
    for path in ["/metrics", "/health"] {
        let response = request(&gw, Method::GET, path, None).send().await.unwrap();
        assert_eq!(
            response
                .headers()
                .get("access-control-allow-origin")
                .unwrap(),
            "*",
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_json_metrics_have_queens_shape_with_real_values() {
    let gw = Gateway::start_with(&[("PGCURSOR_TOKENS", "admin-token:admin")]).await;
    let (status, first) = get(&gw, "/metrics").await;
    assert_eq!(status, 200, "no token needed: {first}");
    for (key, fields) in [
        ("requests", &["total", "rate"][..]),
        ("messages", &["total", "rate"]),
        (
            "database",
            &["poolSize", "idleConnections", "waitingRequests"],
        ),
        (
            "memory",
            &["rss", "heapTotal", "heapUsed", "external", "arrayBuffers"],
        ),
        ("cpu", &["user", "system"]),
    ] {
        for field in fields {
            assert!(first[key][field].is_number(), "{key}.{field}: {first}");
        }
    }
    assert!(first["uptime"].is_u64(), "{first}");
    assert!(first["memory"]["rss"].as_u64().unwrap() > 0, "{first}");
    assert!(
        first["cpu"]["user"].as_u64().unwrap() > 0,
        "the process's CPU time in µs: {first}"
    );
    let queue = fresh_queue("metrics-json");
    let push = json!({"items": [{"queue": queue, "payload": 1}, {"queue": queue, "payload": 2}]});
    let (code, _) = send_admin(&gw, "/api/v1/push", &push).await;
    assert_eq!(code, 200);
    let (_, second) = get(&gw, "/metrics").await;
    let total = |v: &Value, k: &str| v[k]["total"].as_u64().unwrap();
    assert_eq!(total(&second, "messages") - total(&first, "messages"), 2);
    assert_eq!(
        total(&second, "requests") - total(&first, "requests"),
        2,
        "the push and the first GET"
    );
    assert!(
        second["database"]["poolSize"].as_u64().unwrap() >= 1,
        "{second}"
    );
}

/// Waits, when less than 25 s of this minute are left, until the next one
/// begins: what a test then does falls in one minute's figures.
async fn early_in_a_minute() {
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 60_000;
    if second > 35_000 {
        tokio::time::sleep(Duration::from_millis(60_000 - second as u64 + 200)).await;
    }
}

/// Queen's queen_queue_* gauges hold each queue's newest minute of what
/// every gateway counted: requests, messages, acks by result, message age
/// at pop, long-polls waiting on average over the minute.
#[tokio::test]
async fn the_queue_families_show_each_queues_newest_minute() {
    let gw = Gateway::start_with(&[("PGCURSOR_STATS_FLUSH_SECONDS", "1")]).await;
    let (queue, idle) = (fresh_queue("per-minute"), fresh_queue("parked"));
    configure_queue(&gw, &idle).await;
    early_in_a_minute().await;
    push_n(&gw, &queue, "p", 3).await;
    push_n(&gw, &queue, "p", 1).await; // p-1 again: a request, no message stored
    let popped = pop(&gw, &queue, "batch=3").await;
    ack_all(&gw, &popped).await;
    let (_, empty) = get(&gw, &format!("/api/v1/pop/queue/{queue}?batch=3")).await;
    assert!(messages(&empty).is_empty(), "{empty}");
    let waited = Instant::now();
    get(
        &gw,
        &format!("/api/v1/pop/queue/{idle}?wait=true&timeout=3000"),
    )
    .await;
    let parked_ms = waited.elapsed().as_millis() as f64;

    let q = [("queue", queue.as_str())];
    eventually("the queue's minute", Duration::from_secs(10), || async {
        let m = scrape(&gw).await;
        m.value("queen_queue_push_requests_per_minute", &q) == 2.0
            && m.value(
                "queen_queue_ack_per_minute",
                &[("queue", &queue), ("result", "success")],
            ) == 3.0
            && m.value("queen_queue_parked_consumers", &[("queue", &idle)]) > 0.0
    })
    .await;
    let m = scrape(&gw).await;
    assert_eq!(m.value("queen_queue_push_messages_per_minute", &q), 3.0);
    assert_eq!(m.value("queen_queue_pop_messages_per_minute", &q), 3.0);
    assert_eq!(m.value("queen_queue_pop_empty_per_minute", &q), 1.0);
    assert_eq!(
        m.value(
            "queen_queue_ack_per_minute",
            &[("queue", &queue), ("result", "failed")]
        ),
        0.0
    );
    assert_eq!(m.value("queen_queue_transactions_per_minute", &q), 0.0);
    let lag = |stat| {
        m.value(
            "queen_queue_pop_lag_milliseconds",
            &[("queue", &queue), ("stat", stat)],
        )
    };
    assert!(
        lag("max") >= lag("avg"),
        "max {} avg {}",
        lag("max"),
        lag("avg")
    );
    assert_eq!(m.value("queen_queue_parked_consumers", &q), 0.0);
    let parked = m.value("queen_queue_parked_consumers", &[("queue", &idle)]);
    let expected = parked_ms / 60_000.0;
    assert!(
        (parked - expected).abs() <= 0.011,
        "parked {parked}, the long-poll waited {parked_ms} ms of the minute"
    );
    assert!(m.value("queen_queue_metrics_age_seconds", &q) < 60.0);
    assert_eq!(
        m.value("queen_queue_pop_empty_per_minute", &[("queue", &idle)]),
        1.0,
        "the long-poll ended empty"
    );
}

/// A database call that fails for the database's reason is counted by the
/// process at once and, once flushed, for the cluster and in /status; a
/// request the database refuses as bad input is not.
#[tokio::test]
async fn database_errors_are_counted_for_the_process_and_the_cluster() {
    let cluster = PrivateCluster::start();
    let gw = Gateway::start_with(&[
        ("DATABASE_URL", cluster.url()),
        ("PGCURSOR_DB_TIMEOUT_MS", "1000"),
        ("PGCURSOR_STATS_FLUSH_SECONDS", "1"),
    ])
    .await;
    let cluster_errors =
        |m: &Exposition| m.value("queen_cluster_db_errors_total", &[("scope", "cluster")]);
    // pgcursor.push refuses the partition's type (22023): a 400, no database error.
    let bad = json!({"items": [{"queue": "q", "partition": 5, "payload": 1}]});
    let (code, answer) = post(&gw, "/api/v1/push", &bad).await;
    assert_eq!(code, 400, "{answer}");
    let before = scrape(&gw).await;
    assert_eq!(before.value("pgcursor_db_errors_total", &[]), 0.0);
    assert_eq!(cluster_errors(&before), 0.0);

    cluster.stop();
    let (code, answer) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [{"queue": "q", "payload": 1}]}),
    )
    .await;
    assert_eq!(code, 503, "{answer}");
    assert!(scrape(&gw).await.value("pgcursor_db_errors_total", &[]) >= 1.0);
    cluster.start_again();
    eventually("the cluster's count", Duration::from_secs(15), || async {
        cluster_errors(&scrape(&gw).await) >= 1.0
    })
    .await;
    let (code, status) = get(&gw, "/api/v1/status").await;
    assert_eq!(code, 200, "{status}");
    assert!(
        status["errors"]["dbErrors"].as_u64().unwrap() >= 1,
        "{}",
        status["errors"]
    );
}

/// Each gateway process reports its own minute (Queen's queen_worker_*
/// gauges, worker_id its pid) and its samples of CPU, memory and pool
/// (system-metrics, worker-metrics, /status's workers).
#[tokio::test]
async fn a_gateway_process_reports_its_own_minute_and_samples() {
    let gw = Gateway::start_with(&[("PGCURSOR_STATS_FLUSH_SECONDS", "1")]).await;
    let pid = gw.pid().to_string();
    let port: u64 = gw.base.rsplit(':').next().unwrap().parse().unwrap();
    let (queue, idle) = (fresh_queue("process"), fresh_queue("process-idle"));
    configure_queue(&gw, &idle).await;
    early_in_a_minute().await;
    get(
        &gw,
        &format!("/api/v1/pop/queue/{idle}?wait=true&timeout=1500"),
    )
    .await;
    push_n(&gw, &queue, "p", 3).await;
    let popped = pop(&gw, &queue, "batch=3&consumerGroup=g").await;
    let delivered = messages(&popped);
    assert_eq!(
        ack(&gw, &delivered[0], "g", "completed").await["success"],
        true
    );
    assert_eq!(ack(&gw, &delivered[1], "g", "dlq").await["dlq"], true);

    let of = |extra: (&'static str, &'static str)| {
        [("pid", pid.clone()), (extra.0, extra.1.to_string())]
    };
    let value = |m: &Exposition, family: &str, extra: Option<(&'static str, &'static str)>| {
        let labels = match extra {
            Some(e) => of(e).to_vec(),
            None => vec![("pid", pid.clone())],
        };
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        m.value(family, &labels)
    };
    // Samples are taken every 5 s, the figures flushed every second.
    eventually(
        "the process's minute and a sample",
        Duration::from_secs(20),
        || async {
            let m = scrape(&gw).await;
            value(&m, "queen_worker_dlq_per_minute", None) == 1.0
                && value(&m, "queen_worker_db_connections", None) >= 1.0
        },
    )
    .await;
    let m = scrape(&gw).await;
    assert_eq!(
        value(&m, "queen_worker_requests_per_minute", Some(("op", "push"))),
        1.0
    );
    assert_eq!(
        value(&m, "queen_worker_requests_per_minute", Some(("op", "pop"))),
        2.0,
        "the long-poll and the pop"
    );
    assert_eq!(
        value(&m, "queen_worker_messages_per_minute", Some(("op", "push"))),
        3.0
    );
    assert_eq!(
        value(&m, "queen_worker_messages_per_minute", Some(("op", "pop"))),
        3.0
    );
    assert_eq!(
        value(&m, "queen_worker_messages_per_minute", Some(("op", "ack"))),
        2.0
    );
    assert_eq!(
        value(
            &m,
            "queen_worker_ack_per_minute",
            Some(("result", "success"))
        ),
        2.0
    );
    assert_eq!(value(&m, "queen_worker_db_errors_per_minute", None), 0.0);
    assert!(value(&m, "queen_worker_metrics_age_seconds", None) < 60.0);
    let by_worker_id = [("worker_id", pid.as_str())];
    let series = m.samples("queen_worker_dlq_per_minute", &by_worker_id);
    assert_eq!(series.len(), 1, "worker_id is the pid");

    let (code, system) = get(
        &gw,
        &format!("/api/v1/analytics/system-metrics?workerId={pid}"),
    )
    .await;
    assert_eq!(code, 200, "{system}");
    let replica = &system["replicas"][0];
    assert_eq!(system["replicaCount"], 1, "{system}");
    assert_eq!(replica["port"], port, "{replica}");
    let point = &replica["timeSeries"][0];
    assert!(point["sampleCount"].as_u64().unwrap() >= 1, "{point}");
    assert!(
        point["metrics"]["memory"]["rss_bytes"]["last"]
            .as_f64()
            .unwrap()
            > 1e6,
        "{point}"
    );
    assert!(
        point["metrics"]["database"]["pool_size"]["max"]
            .as_f64()
            .unwrap()
            >= 1.0,
        "{point}"
    );
    let (_, workers) = get(
        &gw,
        &format!("/api/v1/analytics/worker-metrics?workerId={pid}"),
    )
    .await;
    assert_eq!(
        workers["workers"][0]["workerId"].to_string(),
        pid,
        "{}",
        workers["workers"]
    );
    let popped: u64 = workers["timeSeries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["popMessages"].as_u64().unwrap())
        .sum();
    assert_eq!(popped, 3, "this process's pops only");
    let (_, parked) = get(
        &gw,
        &format!("/api/v1/analytics/queue-parked-replicas?queue={idle}"),
    )
    .await;
    let series = parked["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "{parked}");
    assert_eq!(series[0]["workerId"], gw.pid(), "{parked}");
    let count = series[0]["parkedCount"].as_f64().unwrap();
    assert!(count > 0.0 && count <= 0.05, "1.5 s of a minute: {parked}");
    assert_eq!(parked["replicas"][0]["workerId"], gw.pid(), "{parked}");
    let (_, status) = get(&gw, "/api/v1/status").await;
    assert!(
        status["workers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["workerId"] == gw.pid()),
        "{}",
        status["workers"]
    );
}

async fn send_admin(gw: &Gateway, path: &str, body: &Value) -> (u16, Value) {
    crate::broker::send(request(gw, Method::POST, path, Some("admin-token")).json(body)).await
}

#[tokio::test]
async fn without_the_database_a_scrape_still_answers_the_process_families() {
    let cluster = PrivateCluster::start();
    let gw = Gateway::start_with(&[
        ("DATABASE_URL", cluster.url()),
        ("PGCURSOR_DB_TIMEOUT_MS", "1000"),
    ])
    .await;
    let up = scrape(&gw).await;
    for family in DATABASE_FAMILIES {
        assert!(up.has(family), "{family}, while the database is up");
    }
    assert_eq!(up.value("pgcursor_metrics_database_up", &[]), 1.0);

    // A slow database: the query waits on a lock, its timeout ends it.
    let locker = lock_table(cluster.url(), "pgcursor.dead_letters").await;
    let started = Instant::now();
    let slow = scrape(&gw).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the scrape took {took:?}");
    assert_process_families_only(&slow, "a slow database");
    assert!(
        gw.stderr()
            .contains("a metrics scrape went out without the database figures"),
        "the log says why:\n{}",
        gw.stderr()
    );
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert!(
        scrape(&gw).await.has("queen_dlq_depth"),
        "back after the lock"
    );

    cluster.stop();
    assert_process_families_only(&scrape(&gw).await, "no database");
    cluster.start_again();
}

/// Reads take at most half of a worker's connections (docs/operations.md):
/// with a pool of two, one slow status read holds the read half; a push
/// still goes through on the other, and a scrape, which waits for a read's
/// turn, goes out within its 2 s without the database figures, never as a
/// 503 after PGCURSOR_DB_TIMEOUT_MS.
#[tokio::test]
async fn a_slow_read_holds_up_neither_pushes_nor_the_scrape() {
    let (name, url) = scratch_database(&[]).await;
    let gw = GatewayConfig::new()
        .database_url(&url)
        .pool_size(2)
        .env("PGCURSOR_HTTP_WORKERS", "2") // (one worker: half the pool each is the least)
        .start()
        .await;
    let queue = fresh_queue("slow-read");
    configure_queue(&gw, &queue).await;
    let locker = lock_table(&url, "pgcursor.gateway_minutes").await;
    let read = tokio::spawn(send(client().get(gw.url("/api/v1/status"))));
    until_waiting_for_a_lock("the status read holds the read half", "%status%").await;

    let started = Instant::now();
    let (status, pushed) = post(
        &gw,
        "/api/v1/push",
        &json!({"items": [{"queue": queue, "payload": 1}]}),
    )
    .await;
    assert_eq!(
        (status, &pushed[0]["status"]),
        (200, &json!("queued")),
        "{pushed}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the push waited {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let scraped = scrape(&gw).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the scrape took {:?}",
        started.elapsed()
    );
    assert_process_families_only(&scraped, "a slow read holding the read half");

    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(read.await.unwrap().0, 200);
    drop(gw);
    drop_database(&name).await;
}

/// Families only the database query supplies (on an empty database too).
const DATABASE_FAMILIES: [&str; 5] = [
    "queen_dlq_depth",
    "queen_maintenance_mode_enabled",
    "queen_cluster_dlq_total",
    "queen_cluster_push_requests_total",
    "pgcursor_cluster_messages_total",
];

fn assert_process_families_only(exposition: &Exposition, what: &str) {
    for family in [
        "queen_uptime_seconds",
        "queen_db_pool_size",
        "pgcursor_notify_listener_up",
        "pgcursor_http_push_requests_total",
    ] {
        assert!(exposition.has(family), "{family} with {what}");
    }
    for family in DATABASE_FAMILIES {
        assert!(!exposition.has(family), "{family} with {what}");
    }
    assert_eq!(
        exposition.value("pgcursor_metrics_database_up", &[]),
        0.0,
        "with {what}"
    );
}

/// wire-admin §5.2: the per-queue and per-worker families, HELP and TYPE
/// lines included, are left out while no minute of them is stored (a fresh
/// database); a push's flushed minute brings the queue families.
#[tokio::test]
async fn per_queue_families_are_left_out_until_a_minute_is_stored() {
    let (name, url) = scratch_database(&[]).await;
    let gw = GatewayConfig::new().database_url(&url).start().await;
    let text = scrape_text(&gw).await;
    for prefix in [
        "# TYPE queen_queue_",
        "# HELP queen_queue_",
        "# TYPE queen_worker_",
        "queen_queue_",
    ] {
        assert!(
            !text.lines().any(|l| l.starts_with(prefix)),
            "{prefix} on a fresh database:\n{text}"
        );
    }
    drop(gw);
    let gw = GatewayConfig::new()
        .database_url(&url)
        .env("PGCURSOR_STATS_FLUSH_SECONDS", "1")
        .start()
        .await;
    push_n(&gw, "fresh", "Default", 1).await;
    eventually(
        "the push's minute shows",
        Duration::from_secs(10),
        || async {
            scrape_text(&gw)
                .await
                .lines()
                .any(|l| l.starts_with("# TYPE queen_queue_push_requests_per_minute"))
        },
    )
    .await;
    drop(gw);
    drop_database(&name).await;
}

/// pgcursor_push_waits: the queues this gateway's pops wait on, each
/// counted once however many pops wait on it, while they wait.
#[tokio::test]
async fn push_waits_count_the_queues_waited_on() {
    let gw = Gateway::start().await;
    let (a, b) = (fresh_queue("waits-a"), fresh_queue("waits-b"));
    let mut pops = Vec::new();
    for queue in [&a, &a, &b] {
        configure_queue(&gw, queue).await;
        let url = gw.url(&format!("/api/v1/pop/queue/{queue}?wait=true&timeout=1500"));
        pops.push(tokio::spawn(async move { client().get(url).send().await }));
    }
    eventually("two queues waited on", Duration::from_secs(5), || async {
        scrape(&gw).await.value("pgcursor_push_waits", &[]) == 2.0
    })
    .await;
    for p in pops {
        assert_eq!(p.await.unwrap().unwrap().status().as_u16(), 200);
    }
    eventually("no queue waited on", Duration::from_secs(5), || async {
        scrape(&gw).await.value("pgcursor_push_waits", &[]) == 0.0
    })
    .await;
}

/// PGCURSOR_POOL_SIZE is the gateway's request connections in all: its HTTP
/// workers share them out (here 3 and 2), and each worker's requests wait
/// for its own. Pushes held up by a lock on their queue's row show how many
/// connections the gateway opened for them.
#[tokio::test]
async fn the_http_workers_share_out_the_pool() {
    let sessions = format!("pool-share-{}", Uuid::now_v7());
    let url = format!("{}?application_name={sessions}", database_url());
    let gw = GatewayConfig::new()
        .database_url(&url)
        .pool_size(5)
        .env("PGCURSOR_HTTP_WORKERS", "2")
        // The pushes beyond the 5 wait for a connection till the lock goes
        // (slow to reach on Citus): not a 503 meanwhile.
        .env("PGCURSOR_DB_TIMEOUT_MS", "60000")
        .start()
        .await;
    assert_eq!(
        scrape(&gw).await.value("pgcursor_db_pool_max_size", &[]),
        5.0
    );
    let queue = fresh_queue("pool-share");
    // Every push to a partition locks its head row: pushes to one partition
    // wait in turn behind the test's lock.
    let pushed = push_n(&gw, &queue, "Default", 1).await;
    let partition: Uuid = pushed[0]["partitionId"].as_str().unwrap().parse().unwrap();
    let mut holder = db().await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        "SELECT FROM pgcursor.partition_heads WHERE partition_id = $1 FOR UPDATE",
        &[&partition],
    )
    .await
    .unwrap();
    let pushes: Vec<_> = (0..12)
        .map(|i| {
            let items = json!({"items": [{"queue": queue, "payload": {"i": i}}]});
            tokio::spawn(send(client().post(gw.url("/api/v1/push")).json(&items)))
        })
        .collect();
    // (Busy, not waiting for a lock: on Citus the lock wait is a worker's.)
    let busy = || async {
        db().await
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE application_name = $1 AND state = 'active'",
                &[&sessions],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    eventually(
        "both workers' connections are busy",
        Duration::from_secs(10),
        || async { busy().await == 5 },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(busy().await, 5, "no more connections than the pool's 5");
    // (The JSON metrics read no table: every connection is taken.)
    let (status, metrics) = get(&gw, "/metrics").await;
    assert_eq!(status, 200, "{metrics}");
    assert_eq!(metrics["database"]["poolSize"], 5, "{metrics}");
    assert_eq!(metrics["database"]["idleConnections"], 0, "{metrics}");
    tx.commit().await.unwrap();
    for push in pushes {
        let (status, body) = push.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
}
