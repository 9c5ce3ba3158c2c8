//! How many client connections the gateway holds: it raises its soft limit
//! on open files to the hard one, and accepts no more connections than that
//! limit leaves once its database connections are counted, so it can
//! always reopen those (gateway/src/connections.rs).

use std::time::Duration;

use pgcursor_tests::{db_at, Gateway, GatewayConfig, PrivateCluster};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

use crate::broker::{configure_queue, eventually, fresh_queue, messages, post};
use crate::metrics::scrape;

/// A long-poll of `queue` for consumer group `group` on a connection of its
/// own, sent now: its status and answer. `Connection: close`, so the
/// gateway closes the connection once it has answered.
fn long_poll(
    address: &str,
    queue: &str,
    group: &str,
    timeout: Duration,
) -> JoinHandle<(u16, Value)> {
    let request = format!(
        "GET /api/v1/pop/queue/{queue}?wait=true&timeout={}&consumerGroup={group} HTTP/1.1\r\n\
         Host: {address}\r\nConnection: close\r\n\r\n",
        timeout.as_millis()
    );
    let address = address.to_string();
    tokio::spawn(async move {
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8(answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    })
}

/// A new queue, and `n` long-polls of it, each for a consumer group of its
/// own (so that each gets the message pushed next), each on a connection
/// of its own.
async fn long_polls_on_a_new_queue(
    gw: &Gateway,
    prefix: &str,
    n: usize,
    timeout: Duration,
) -> (String, Vec<JoinHandle<(u16, Value)>>) {
    let queue = fresh_queue(prefix);
    configure_queue(gw, &queue).await;
    let address = gw.url("").trim_start_matches("http://").to_string();
    let polls = (0..n)
        .map(|i| long_poll(&address, &queue, &format!("g{i}"), timeout))
        .collect();
    (queue, polls)
}

/// Every long-poll answered 200 with the one message pushed.
async fn each_got_the_message(polls: Vec<JoinHandle<(u16, Value)>>) {
    for (i, poll) in polls.into_iter().enumerate() {
        let (status, answer) = poll.await.unwrap();
        assert_eq!(status, 200, "long-poll {i}: {answer}");
        assert_eq!(messages(&answer).len(), 1, "long-poll {i}: {answer}");
    }
}

/// Sockets the process holds open (/proc/<pid>/fd).
fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Started with the common soft limit of a shell or a systemd unit, far
/// below the hard one, the gateway serves more long-polls than the soft
/// limit would allow, and still answers other clients meanwhile.
#[tokio::test]
async fn a_gateway_started_with_a_low_soft_limit_serves_more_long_polls_than_it() {
    const SOFT: u64 = 128;
    const POLLS: usize = 300;
    // The pops the push wakes all want a pool connection at once: let them
    // wait their turn (the first pops of 300 groups take seconds on Citus).
    let gw = GatewayConfig::new()
        .env("PGCURSOR_DB_TIMEOUT_MS", "60000")
        .open_files(SOFT, 2048)
        .start()
        .await;
    // A long-poll ends as the message reaches it; its timeout only bounds a
    // failure. On Citus, the 300 pops the push wakes took 15-19 s with
    // nothing else running, and one of them ran past 20 s in a make test-citus.
    let (queue, polls) =
        long_polls_on_a_new_queue(&gw, "many-polls", POLLS, Duration::from_secs(60)).await;
    eventually(
        "every long-poll is accepted",
        Duration::from_secs(10),
        || async { scrape(&gw).await.value("pgcursor_http_connections", &[]) >= POLLS as f64 },
    )
    .await;
    let body = json!({"items": [{"queue": queue, "payload": "for everyone"}]});
    let (status, answer) = post(&gw, "/api/v1/push", &body).await;
    assert_eq!(status, 200, "{answer}");
    each_got_the_message(polls).await;
}

/// At its cap the gateway accepts no more connections: those wait, and it
/// can still reopen its database connections. Here PostgreSQL crashes while
/// the gateway holds as many long-polls as its limit allows and more
/// wait to be accepted; every long-poll still gets the message pushed
/// after. Without the cap, the waiting clients took the descriptors the
/// lost database connections freed, and the pops could not reconnect.
#[tokio::test]
async fn at_its_cap_the_gateway_still_reopens_its_database_connections() {
    const LIMIT: u64 = 160;
    // The limit less 64 for the process and 2 + 2 database connections.
    const CAP: usize = 92;
    const POLLS: usize = 150;
    let cluster = PrivateCluster::start();
    let gw = GatewayConfig::new()
        .database_url(cluster.url())
        .pool_size(2)
        .env("PGCURSOR_HTTP_WORKERS", "1")
        .open_files(LIMIT, LIMIT)
        .start()
        .await;
    let gauges = scrape(&gw).await;
    assert_eq!(
        gauges.value("pgcursor_http_connections_max", &[]),
        CAP as f64
    );
    let (queue, polls) =
        long_polls_on_a_new_queue(&gw, "capped", POLLS, Duration::from_secs(25)).await;
    // The cap's connections accepted, besides the listening socket and the
    // database connections.
    eventually(
        "the gateway holds its cap of connections",
        Duration::from_secs(10),
        || async { sockets_of(gw.pid()) > CAP },
    )
    .await;
    // The crash comes while they wait, not while their first looks still
    // queue for the pool's two connections (a look the crash fails is a
    // 503): each first look recorded its group's subscription.
    let (db, connection) = tokio_postgres::connect(cluster.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    let watcher = tokio::spawn(connection);
    eventually(
        "every accepted long-poll has looked once",
        Duration::from_secs(30),
        || async {
            let row = db
                .query_one(
                    "SELECT count(*) FROM pgcursor.subscriptions WHERE queue = $1",
                    &[&queue],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0) >= CAP as i64
        },
    )
    .await;
    drop(db);
    let _ = watcher.await;
    cluster.restart_immediate();
    let db = db_at(cluster.url()).await;
    let push = json!({"items": [{"queue": queue, "payload": "for everyone"}]});
    db.execute("SELECT pgcursor.push($1)", &[&push])
        .await
        .unwrap();
    each_got_the_message(polls).await;
    let log = gw.stderr();
    assert!(!log.contains("Too many open files"), "{log}");
    assert!(
        log.contains(&format!(
            "{CAP} HTTP connections open, the most the open-files limit allows"
        )),
        "{log}"
    );
}
