//! GET /metrics (JSON) and GET /metrics/prometheus (text exposition), both
//! described in docs/http-api.md "Metrics", both open to everyone (access
//! none).
//!
//! A scrape renders the process-wide recorder (the gateway's counters and
//! request histograms, gateway/src/metrics.rs), then a fresh one holding the
//! point-in-time gauges: process, pool and listener state, and what one
//! `pgcursor.metrics_snapshot()` call says, run with a short statement
//! timeout. When that call fails the scrape still answers 200, without the
//! database families.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use actix_web::{web, HttpResponse};
use metrics::{describe_counter, describe_gauge, gauge, Counter, Gauge};
use metrics_exporter_prometheus::PrometheusBuilder;
use serde::Deserialize;
use serde_json::json;
use tracing::{debug, warn};

use crate::app::AppState;
use crate::db;

/// How long a scrape waits for its database figures (a connection and the
/// query): Prometheus' own scrape timeout is 10 s by default.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(2);
/// One round trip. PostgreSQL ends the query itself before the scrape gives
/// up on it, so the connection goes back to the pool idle, not mid-query;
/// the implicit transaction takes the setting away with it.
const SNAPSHOT_SQL: &str =
    "SET LOCAL statement_timeout = 1500; SELECT pgcursor.metrics_snapshot()::text";
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/metrics").get(json_metrics))
        .service(web::resource("/metrics/prometheus").get(prometheus));
}

/// `pgcursor.metrics_snapshot()`, as read here.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    maintenance_mode: bool,
    pop_maintenance_mode: bool,
    dead_letters: u64,
    totals: Lifetime,
    queues: Vec<QueueFigures>,
    groups: Vec<GroupFigures>,
    gateway_totals: GatewayTotals,
    queue_minutes: Vec<QueueMinute>,
    process_minutes: Vec<ProcessMinute>,
}

/// A gateway process's newest minute of the last 5, with its pool samples
/// (Queen's queen_worker_*; worker_id is the pid).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProcessMinute {
    hostname: String,
    pid: u32,
    age_seconds: u64,
    push_requests: u64,
    pop_requests: u64,
    ack_requests: u64,
    transactions: u64,
    push_messages: u64,
    pop_messages: u64,
    ack_messages: u64,
    ack_success: u64,
    ack_failed: u64,
    lag_avg_ms: u64,
    lag_max_ms: u64,
    db_errors: u64,
    dead_lettered: u64,
    db_connections: f64,
    free_slots_avg: f64,
    free_slots_min: f64,
}

/// What every gateway counted, lifetime (pgcursor.gateway_totals).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GatewayTotals {
    push_requests: u64,
    pop_requests: u64,
    pop_messages: u64,
    ack_requests: u64,
    ack_messages: u64,
    ack_failed: u64,
    transactions: u64,
    db_errors: u64,
}

/// A queue's newest minute of the last 5 that the gateways flushed figures
/// for, every gateway added up (Queen's queen_queue_*_per_minute).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueueMinute {
    queue: String,
    age_seconds: u64,
    push_requests: u64,
    push_messages: u64,
    pop_messages: u64,
    pop_empty: u64,
    ack_success: u64,
    ack_failed: u64,
    transactions: u64,
    lag_avg_ms: u64,
    lag_max_ms: u64,
    parked: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Lifetime {
    pushed: u64,
    completed: u64,
    dead_lettered: u64,
    discarded: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueueFigures {
    queue: String,
    partitions: u64,
    depth: u64,
    dead_letters: u64,
    #[serde(flatten)]
    lifetime: Lifetime,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupFigures {
    queue: String,
    consumer_group: String,
    partitions: u64,
    depth: u64,
    lag_seconds: f64,
    leased_partitions: u64,
    expired_leases: u64,
    lease_expiries: u64,
}

async fn prometheus(state: web::Data<AppState>) -> HttpResponse {
    let snapshot = match tokio::time::timeout(SNAPSHOT_TIMEOUT, snapshot(&state)).await {
        Ok(Ok(snapshot)) => Some(snapshot),
        Ok(Err(why)) => without_database_figures(&why),
        Err(_) => without_database_figures(&format!("no answer within {SNAPSHOT_TIMEOUT:?}")),
    };
    let mut body = state.metrics.render();
    body.push_str(&render_gauges(&state, snapshot.as_ref()));
    HttpResponse::Ok()
        .content_type(CONTENT_TYPE)
        .insert_header(("cache-control", "no-cache"))
        .body(body)
}

/// The scrape goes out without the database families, and
/// `pgcursor_metrics_database_up` says so; the log says why, at most once a
/// minute (a database too large to sum up in time fails every scrape).
fn without_database_figures(why: &str) -> Option<Snapshot> {
    static WARNED_AT: AtomicU64 = AtomicU64::new(0);
    if crate::clock::once_a_minute(&WARNED_AT) {
        warn!("a metrics scrape went out without the database figures: {why}");
    } else {
        debug!("scrape without database figures: {why}");
    }
    None
}

async fn snapshot(state: &AppState) -> Result<Snapshot, String> {
    // A read like the status routes' (reads.rs): it waits its turn, within
    // SNAPSHOT_TIMEOUT, and never takes the broker's half of the pool.
    let _permit = state
        .reads
        .acquire()
        .await
        .map_err(|_| "the read permits are closed".to_string())?;
    let client = state
        .pool
        .get()
        .await
        .map_err(|e| db::pool_error_detail(&e))?;
    let messages = client
        .simple_query(SNAPSHOT_SQL)
        .await
        .map_err(|e| db::error_detail(&e))?;
    let text = messages
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0),
            _ => None,
        })
        .ok_or("metrics_snapshot answered no row")?;
    serde_json::from_str(text).map_err(|e| format!("unreadable metrics_snapshot: {e}"))
}

/// The point-in-time families, on a recorder of their own.
fn render_gauges(state: &AppState, snapshot: Option<&Snapshot>) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        process_gauges(state);
        describe_gauge!(
            "pgcursor_metrics_database_up",
            "1 when this scrape carries the database families, 0 when pgcursor.metrics_snapshot() failed or took over 1.5 s"
        );
        set(gauge!("pgcursor_metrics_database_up"), f64::from(u8::from(snapshot.is_some())));
        if let Some(snapshot) = snapshot {
            database_families(snapshot);
        }
    });
    recorder.handle().render()
}

/// `<name>_held` and `<name>_max`, in bytes, of a budget of `kib` KiB with
/// `left_kib` not taken.
fn budget_gauges(name: &'static str, held_help: &'static str, max_help: &'static str, kib: u32, left_kib: usize) {
    let (held_name, max_name) = (format!("{name}_held"), format!("{name}_max"));
    describe_gauge!(held_name.clone(), held_help);
    describe_gauge!(max_name.clone(), max_help);
    let room = u64::from(kib);
    let held = room.saturating_sub(left_kib as u64);
    set(gauge!(held_name), (held * 1024) as f64);
    set(gauge!(max_name), (room * 1024) as f64);
}

fn set(gauge: Gauge, value: f64) {
    gauge.set(value.max(0.0));
}

fn process_gauges(state: &AppState) {
    describe_gauge!("queen_uptime_seconds", "Seconds since the gateway started serving");
    set(gauge!("queen_uptime_seconds"), crate::metrics::uptime().as_secs() as f64);
    if let Some((rss, virt)) = crate::metrics::memory() {
        describe_gauge!("queen_process_resident_memory_bytes", "Resident set size of the gateway process");
        describe_gauge!("queen_process_virtual_memory_bytes", "Virtual memory size of the gateway process");
        set(gauge!("queen_process_resident_memory_bytes"), rss as f64);
        set(gauge!("queen_process_virtual_memory_bytes"), virt as f64);
    }
    if let Some((user, system)) = crate::metrics::cpu_times() {
        describe_counter!("queen_cpu_user_microseconds_total", "CPU time the gateway process spent in user mode, in microseconds");
        describe_counter!("queen_cpu_system_microseconds_total", "CPU time the gateway process spent in the kernel, in microseconds");
        absolute(counter_of("queen_cpu_user_microseconds_total", &[]), user);
        absolute(counter_of("queen_cpu_system_microseconds_total", &[]), system);
    }
    describe_gauge!("pgcursor_http_connections", "Client connections open now (a waiting long-poll holds one)");
    describe_gauge!(
        "pgcursor_http_connections_max",
        "The most client connections the gateway holds at once, from its open-files limit; more wait to be accepted"
    );
    set(gauge!("pgcursor_http_connections"), crate::connections::open() as f64);
    set(gauge!("pgcursor_http_connections_max"), state.max_connections as f64);
    budget_gauges(
        "pgcursor_http_body_bytes",
        "Room request bodies take now in PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT (each its Content-Length, rounded up to KiB), until their request is answered",
        "PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT: the most room request bodies take at once; more wait, unread",
        state.config.bodies_kib(),
        state.bodies.available_permits(),
    );
    budget_gauges(
        "pgcursor_http_answer_bytes",
        "Room pop answers take now in PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT (while a pop looks, what its maxBytes may fill; then its answer's length, rounded up to KiB), until the answer is sent",
        "PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT: the most room pop answers take at once; more answer fewer messages, or wait",
        state.answers.kib(),
        state.answers.left_kib(),
    );
    let pool = state.pool_status();
    describe_gauge!("queen_db_pool_size", "Database connections open in the pool");
    describe_gauge!("queen_db_pool_idle", "Pool connections open and not checked out");
    describe_gauge!("queen_db_pool_active", "Pool connections checked out by a request");
    describe_gauge!("pgcursor_db_pool_max_size", "The most connections the pool opens (PGCURSOR_POOL_SIZE)");
    describe_gauge!("pgcursor_db_pool_waiters", "Requests waiting for a pool connection");
    set(gauge!("queen_db_pool_size"), pool.size as f64);
    set(gauge!("queen_db_pool_idle"), pool.available as f64);
    set(gauge!("queen_db_pool_active"), pool.size.saturating_sub(pool.available) as f64);
    set(gauge!("pgcursor_db_pool_max_size"), pool.max_size as f64);
    set(gauge!("pgcursor_db_pool_waiters"), pool.waiting as f64);
    describe_gauge!(
        "pgcursor_notify_listener_up",
        "1 while the push-notification listener (long-poll wake-ups) is connected and listening"
    );
    set(
        gauge!("pgcursor_notify_listener_up"),
        f64::from(u8::from(state.wakeups.is_listening())),
    );
    describe_gauge!(
        "pgcursor_push_waits",
        "Queues this gateway's waiting pops wait on (a namespace or task pop's every queue counts as one): pushes to them notify"
    );
    set(gauge!("pgcursor_push_waits"), state.wakeups.queues_waited_on() as f64);
}

fn database_families(s: &Snapshot) {
    describe_gauge!("queen_maintenance_mode_enabled", "1 while push maintenance is on");
    describe_gauge!("pgcursor_pop_maintenance_mode_enabled", "1 while pop maintenance is on");
    set(gauge!("queen_maintenance_mode_enabled"), f64::from(u8::from(s.maintenance_mode)));
    set(
        gauge!("pgcursor_pop_maintenance_mode_enabled"),
        f64::from(u8::from(s.pop_maintenance_mode)),
    );
    describe_gauge!("queen_dlq_depth", "Dead letters stored now");
    set(gauge!("queen_dlq_depth", "scope" => "cluster"), s.dead_letters as f64);
    describe_counter!(
        "queen_cluster_dlq_total",
        "Messages dead-lettered, lifetime, every queue ever (deleted ones included)"
    );
    absolute(counter_of("queen_cluster_dlq_total", &[("scope", "cluster")]), s.totals.dead_lettered);
    describe_counter!(
        "pgcursor_cluster_messages_total",
        "Messages by fate, lifetime, every queue ever: pushed, completed, dead_lettered, discarded"
    );
    lifetime("pgcursor_cluster_messages_total", &[("scope", "cluster")], &s.totals);
    cluster_families(s);
    queue_minute_families(&s.queue_minutes);
    process_minute_families(&s.process_minutes);

    describe_gauge!("pgcursor_queue_partitions", "Partitions of the queue");
    describe_gauge!("pgcursor_queue_depth", "Messages of the queue its slowest consumer group has not consumed");
    describe_gauge!("queen_dlq_depth_by_queue", "Dead letters stored now, per queue");
    describe_counter!(
        "pgcursor_queue_messages_total",
        "Messages of the queue by fate, lifetime: pushed, completed, dead_lettered, discarded"
    );
    for q in &s.queues {
        let queue = q.queue.clone();
        set(gauge!("pgcursor_queue_partitions", "queue" => queue.clone()), q.partitions as f64);
        set(gauge!("pgcursor_queue_depth", "queue" => queue.clone()), q.depth as f64);
        set(gauge!("queen_dlq_depth_by_queue", "queue" => queue), q.dead_letters as f64);
        lifetime("pgcursor_queue_messages_total", &[("queue", &q.queue)], &q.lifetime);
    }

    describe_gauge!("pgcursor_consumer_group_partitions", "Partitions of the queue the group has a cursor on");
    describe_gauge!("pgcursor_consumer_group_depth", "Messages after the group's cursors");
    describe_gauge!(
        "pgcursor_consumer_group_lag_seconds",
        "Age of the group's oldest unconsumed message (0 when caught up)"
    );
    describe_gauge!(
        "pgcursor_consumer_group_leased_partitions",
        "Partitions the group holds a live lease on"
    );
    describe_gauge!(
        "pgcursor_consumer_group_expired_leases",
        "Partitions whose lease for the group expired and that no pop has leased again yet"
    );
    describe_counter!(
        "pgcursor_consumer_group_lease_expiries_total",
        "Leases of the group that expired and a pop took over (reset when the group's rows are deleted)"
    );
    for g in &s.groups {
        let labels = [
            ("queue", g.queue.clone()),
            ("consumer_group", g.consumer_group.clone()),
        ];
        absolute(
            counter_of(
                "pgcursor_consumer_group_lease_expiries_total",
                &[("queue", &g.queue), ("consumer_group", &g.consumer_group)],
            ),
            g.lease_expiries,
        );
        set(gauge!("pgcursor_consumer_group_partitions", &labels), g.partitions as f64);
        set(gauge!("pgcursor_consumer_group_depth", &labels), g.depth as f64);
        set(gauge!("pgcursor_consumer_group_lag_seconds", &labels), g.lag_seconds);
        set(gauge!("pgcursor_consumer_group_leased_partitions", &labels), g.leased_partitions as f64);
        set(gauge!("pgcursor_consumer_group_expired_leases", &labels), g.expired_leases as f64);
    }
}

/// Queen's queen_cluster_* counters: lifetime, every gateway (as they
/// flushed their per-minute figures) and every push (messages pushed is
/// the stored lifetime total), labelled scope="cluster".
fn cluster_families(s: &Snapshot) {
    let g = &s.gateway_totals;
    for (name, help, value) in [
        ("queen_cluster_push_requests_total", "Push requests, every gateway, lifetime (once per queue they pushed to)", g.push_requests),
        ("queen_cluster_pop_requests_total", "Pop requests, every gateway, lifetime (once per queue they popped from)", g.pop_requests),
        ("queen_cluster_ack_requests_total", "Ack requests, every gateway, lifetime (once per partition they acked on)", g.ack_requests),
        ("queen_cluster_transactions_total", "Transaction requests, every gateway, lifetime", g.transactions),
        ("queen_cluster_push_messages_total", "Messages pushed, lifetime, every queue ever", s.totals.pushed),
        ("queen_cluster_pop_messages_total", "Messages delivered by pops, every gateway, lifetime", g.pop_messages),
        ("queen_cluster_ack_messages_total", "Acked items, every gateway, lifetime", g.ack_messages),
        ("queen_cluster_db_errors_total", "Requests the database failed, every gateway, lifetime", g.db_errors),
    ] {
        describe_counter!(name, help);
        absolute(counter_of(name, &[("scope", "cluster")]), value);
    }
    describe_counter!(
        "queen_cluster_ack_total",
        "Acked items by result, every gateway, lifetime: failed is an item answered with an error"
    );
    for (result, value) in [
        ("success", g.ack_messages.saturating_sub(g.ack_failed)),
        ("failed", g.ack_failed),
    ] {
        absolute(
            counter_of("queen_cluster_ack_total", &[("scope", "cluster"), ("result", result)]),
            value,
        );
    }
}

/// Queen's queen_queue_* gauges, from each queue's newest minute: not
/// rates, so not for rate(). With no queue in the list no family is
/// written, HELP and TYPE included (the exporter writes none without a series).
fn queue_minute_families(minutes: &[QueueMinute]) {
    for (name, help) in [
        ("queen_queue_push_requests_per_minute", "Push requests to the queue in its newest minute, every gateway"),
        ("queen_queue_push_messages_per_minute", "Messages stored by pushes to the queue in its newest minute, every gateway"),
        ("queen_queue_pop_messages_per_minute", "Messages popped from the queue in its newest minute (one per group delivered), every gateway"),
        ("queen_queue_pop_empty_per_minute", "Pops of the queue answered empty in its newest minute, every gateway"),
        ("queen_queue_ack_per_minute", "Acked items of the queue in its newest minute by result: failed is an item answered with an error"),
        ("queen_queue_transactions_per_minute", "Transactions touching the queue in its newest minute, every gateway"),
        ("queen_queue_pop_lag_milliseconds", "Message age at pop (now - createdAt) in the queue's newest minute: avg over its messages, max the oldest"),
        ("queen_queue_parked_consumers", "Long-polls waiting on the queue, averaged over its newest minute, every gateway"),
        ("queen_queue_metrics_age_seconds", "Seconds since the start of the queue's newest minute"),
    ] {
        describe_gauge!(name, help);
    }
    for m in minutes {
        let q = || m.queue.clone();
        set(gauge!("queen_queue_push_requests_per_minute", "queue" => q()), m.push_requests as f64);
        set(gauge!("queen_queue_push_messages_per_minute", "queue" => q()), m.push_messages as f64);
        set(gauge!("queen_queue_pop_messages_per_minute", "queue" => q()), m.pop_messages as f64);
        set(gauge!("queen_queue_pop_empty_per_minute", "queue" => q()), m.pop_empty as f64);
        set(gauge!("queen_queue_ack_per_minute", "queue" => q(), "result" => "success"), m.ack_success as f64);
        set(gauge!("queen_queue_ack_per_minute", "queue" => q(), "result" => "failed"), m.ack_failed as f64);
        set(gauge!("queen_queue_transactions_per_minute", "queue" => q()), m.transactions as f64);
        set(gauge!("queen_queue_pop_lag_milliseconds", "queue" => q(), "stat" => "avg"), m.lag_avg_ms as f64);
        set(gauge!("queen_queue_pop_lag_milliseconds", "queue" => q(), "stat" => "max"), m.lag_max_ms as f64);
        set(gauge!("queen_queue_parked_consumers", "queue" => q()), m.parked);
        set(gauge!("queen_queue_metrics_age_seconds", "queue" => q()), m.age_seconds as f64);
    }
}

/// Queen's queen_worker_* gauges, from each gateway process's newest
/// minute (labels hostname, worker_id = pid, pid); left out, HELP and TYPE
/// too, when no process flushed in 5 minutes.
fn process_minute_families(minutes: &[ProcessMinute]) {
    for (name, help) in [
        ("queen_worker_requests_per_minute", "Requests the gateway process received in its newest minute, by op"),
        ("queen_worker_messages_per_minute", "Messages the gateway process pushed, popped and acked in its newest minute, by op"),
        ("queen_worker_ack_per_minute", "Acked items of the gateway process in its newest minute by result"),
        ("queen_worker_lag_milliseconds", "Message age at pop in the gateway process's newest minute: avg over its messages, max the oldest"),
        ("queen_worker_db_errors_per_minute", "Database calls of the gateway process that failed in its newest minute"),
        ("queen_worker_dlq_per_minute", "Messages the gateway process's acks dead-lettered in its newest minute"),
        ("queen_worker_db_connections", "Pool connections the gateway process held at its newest sample"),
        ("queen_worker_free_slots", "Idle pool connections of the gateway process over its newest minute: avg and min of its samples"),
        ("queen_worker_metrics_age_seconds", "Seconds since the start of the gateway process's newest minute"),
    ] {
        describe_gauge!(name, help);
    }
    for m in minutes {
        let pid = m.pid.to_string();
        let labels = |extra: Option<(&'static str, &'static str)>| {
            let mut all = vec![
                ("hostname", m.hostname.clone()),
                ("worker_id", pid.clone()),
                ("pid", pid.clone()),
            ];
            all.extend(extra.map(|(k, v)| (k, v.to_string())));
            all
        };
        for (op, n) in [
            ("push", m.push_requests),
            ("pop", m.pop_requests),
            ("ack", m.ack_requests),
            ("transaction", m.transactions),
        ] {
            set(gauge!("queen_worker_requests_per_minute", &labels(Some(("op", op)))), n as f64);
        }
        for (op, n) in [("push", m.push_messages), ("pop", m.pop_messages), ("ack", m.ack_messages)] {
            set(gauge!("queen_worker_messages_per_minute", &labels(Some(("op", op)))), n as f64);
        }
        for (result, n) in [("success", m.ack_success), ("failed", m.ack_failed)] {
            set(gauge!("queen_worker_ack_per_minute", &labels(Some(("result", result)))), n as f64);
        }
        set(gauge!("queen_worker_lag_milliseconds", &labels(Some(("stat", "avg")))), m.lag_avg_ms as f64);
        set(gauge!("queen_worker_lag_milliseconds", &labels(Some(("stat", "max")))), m.lag_max_ms as f64);
        set(gauge!("queen_worker_db_errors_per_minute", &labels(None)), m.db_errors as f64);
        set(gauge!("queen_worker_dlq_per_minute", &labels(None)), m.dead_lettered as f64);
        set(gauge!("queen_worker_db_connections", &labels(None)), m.db_connections);
        set(gauge!("queen_worker_free_slots", &labels(Some(("stat", "avg")))), m.free_slots_avg);
        set(gauge!("queen_worker_free_slots", &labels(Some(("stat", "min")))), m.free_slots_min);
        set(gauge!("queen_worker_metrics_age_seconds", &labels(None)), m.age_seconds as f64);
    }
}

fn counter_of(name: &'static str, labels: &[(&'static str, &str)]) -> Counter {
    let labels: Vec<(&'static str, String)> =
        labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
    metrics::counter!(name, &labels)
}

fn absolute(counter: Counter, value: u64) {
    counter.absolute(value);
}

/// One lifetime family, labelled by fate.
fn lifetime(name: &'static str, labels: &[(&'static str, &str)], figures: &Lifetime) {
    for (fate, value) in [
        ("pushed", figures.pushed),
        ("completed", figures.completed),
        ("dead_lettered", figures.dead_lettered),
        ("discarded", figures.discarded),
    ] {
        let mut all = labels.to_vec();
        all.push(("fate", fate));
        absolute(counter_of(name, &all), value);
    }
}

/// Queen's JSON object (docs/http-api.md "GET /metrics"), with the values
/// pgcursor has filled for real: rates are per second since start, CPU in
/// microseconds since start (as Node's process.cpuUsage()).
async fn json_metrics(state: web::Data<AppState>) -> HttpResponse {
    let uptime = crate::metrics::uptime().as_secs_f64();
    let (requests, messages) = crate::metrics::totals();
    let rate = |n: u64| {
        if uptime > 0.0 {
            (n as f64 / uptime * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    let pool = state.pool_status();
    let rss = crate::metrics::memory().map_or(0, |(rss, _)| rss);
    let (user, system) = crate::metrics::cpu_times().unwrap_or_default();
    HttpResponse::Ok().json(json!({
        "uptime": uptime.floor() as u64,
        "requests": {"total": requests, "rate": rate(requests)},
        "messages": {"total": messages, "rate": rate(messages)},
        "database": {
            "poolSize": pool.size,
            "idleConnections": pool.available,
            "waitingRequests": pool.waiting,
        },
        "memory": {"rss": rss, "heapTotal": 0, "heapUsed": 0, "external": 0, "arrayBuffers": 0},
        "cpu": {"user": user, "system": system},
    }))
}
