//! The gateway when PostgreSQL goes away: every database route answers 503
//! within `PGCURSOR_DB_TIMEOUT_MS`, `/health` says so, and the gateway comes
//! back by itself. And on SIGTERM: in-flight requests (a long-poll too) get
//! a complete answer, then the process exits 0. And slow reads: they never
//! take the connections pushes, pops and /health need; nor does a long body
//! being parsed hold up the requests that arrive meanwhile; and a body that
//! does not arrive in time is given up.

use std::process::Command;
use std::time::{Duration, Instant};

use pgcursor_tests::{client, db, db_at, Gateway, PrivateCluster};
use serde_json::{json, Value};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::broker::{
    answer_within, configure_queue, drop_database, eventually, fresh_queue, get, lock_table,
    messages, pop, post, post_head, push_200_of, push_n, scratch_database, send, stored_messages,
    stored_messages_at, until_waiting_for_a_lock,
};

/// The database timeout the outage tests give the gateway.
const DB_TIMEOUT: Duration = Duration::from_millis(1000);
/// What an answer may take beyond it on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

async fn outage_gateway(cluster: &PrivateCluster) -> Gateway {
    let ms = DB_TIMEOUT.as_millis().to_string();
    Gateway::start_with(&[
        ("DATABASE_URL", cluster.url()),
        ("PGCURSOR_DB_TIMEOUT_MS", &ms),
    ])
    .await
}

/// Sends and times it.
async fn timed(request: reqwest::RequestBuilder) -> (u16, Value, Duration) {
    let started = Instant::now();
    let (status, body) = send(request).await;
    (status, body, started.elapsed())
}

fn push_body(queue: &str, txid: &str) -> Value {
    json!({"items": [{"queue": queue, "partition": "p", "transactionId": txid, "payload": {"n": txid}}]})
}

/// Pushes until it is answered 200, for at most `within`; how long that
/// took and how many 503s came first.
async fn push_until_ok(
    gw: &Gateway,
    queue: &str,
    txid: &str,
    within: Duration,
) -> (Duration, usize) {
    let started = Instant::now();
    let mut refused = 0;
    loop {
        let (status, body) = post(gw, "/api/v1/push", &push_body(queue, txid)).await;
        if status == 200 {
            assert_eq!(body[0]["status"], "queued", "{body}");
            return (started.elapsed(), refused);
        }
        refused += 1;
        assert_eq!(status, 503, "{body}");
        assert!(
            started.elapsed() < within,
            "push still 503 after {within:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn every_database_route_answers_503_quickly_while_postgres_is_down_then_recovers() {
    let cluster = PrivateCluster::start();
    let gw = outage_gateway(&cluster).await;
    let queue = fresh_queue("outage");
    configure_queue(&gw, &queue).await;
    push_until_ok(&gw, &queue, "before-1", Duration::ZERO).await;
    push_until_ok(&gw, &queue, "before-2", Duration::ZERO).await;
    let (status, popped) = get(&gw, &format!("/api/v1/pop/queue/{queue}?batch=1")).await;
    assert_eq!(status, 200, "{popped}");
    let delivered = &messages(&popped)[0];
    let ack = json!({"transactionId": delivered["transactionId"], "partitionId": delivered["partitionId"],
                     "leaseId": popped["leaseId"], "status": "completed"});

    cluster.stop();
    let pop = format!("/api/v1/pop/queue/{queue}?batch=10");
    // A long-poll that starts while the database is down cannot even look:
    // it is a 503 at once, not a 200 after its timeout (the client retries).
    let long_poll = format!("/api/v1/pop/queue/{queue}?wait=true&timeout=2000");
    let http = client();
    let requests = [
        (
            "push",
            http.post(gw.url("/api/v1/push"))
                .json(&push_body(&queue, "down")),
        ),
        ("pop", http.get(gw.url(&pop))),
        ("long-poll pop", http.get(gw.url(&long_poll))),
        ("ack", http.post(gw.url("/api/v1/ack")).json(&ack)),
        (
            "ack/batch",
            http.post(gw.url("/api/v1/ack/batch"))
                .json(&json!({"acknowledgments": [ack]})),
        ),
        (
            "transaction",
            http.post(gw.url("/api/v1/transaction"))
                .json(&json!({"operations": [
            {"type": "push", "items": [{"queue": queue, "payload": 1}]}]})),
        ),
        (
            "configure",
            http.post(gw.url("/api/v1/configure"))
                .json(&json!({"queue": queue})),
        ),
        ("health", http.get(gw.url("/health"))),
    ];
    for (what, request) in requests {
        let (status, body, took) = timed(request).await;
        println!(
            "{what} while PostgreSQL is down: {status} in {} ms: {body}",
            took.as_millis()
        );
        assert_eq!(status, 503, "{what}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{what}: {body}"
        );
        assert!(took < DB_TIMEOUT + SLACK, "{what} took {took:?}");
        if what == "health" {
            assert_eq!(body["status"], "unhealthy", "{body}");
        }
    }

    cluster.start_again();
    let (took, _) = push_until_ok(&gw, &queue, "after", Duration::from_secs(15)).await;
    println!(
        "push answered 200 {} ms after PostgreSQL was back",
        took.as_millis()
    );
    let (status, body) = get(&gw, "/health").await;
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("healthy")),
        "{body}"
    );
    // Nothing written while it was down: the second message is next, then "after".
    let (status, body) = post(&gw, "/api/v1/ack", &ack).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["success"], true, "{body}");
    let (status, popped) = get(&gw, &pop).await;
    assert_eq!(status, 200, "{popped}");
    let txids: Vec<&Value> = messages(&popped)
        .iter()
        .map(|m| &m["transactionId"])
        .collect();
    assert_eq!(txids, [&json!("before-2"), &json!("after")], "{popped}");
}

#[tokio::test]
async fn the_gateway_recovers_from_a_postgres_crash_by_itself() {
    let cluster = PrivateCluster::start();
    let gw = outage_gateway(&cluster).await;
    let queue = fresh_queue("crash");
    push_until_ok(&gw, &queue, "before", Duration::ZERO).await;
    // Every pooled connection dies with its backend; none is noticed before use.
    cluster.restart_immediate();
    let (took, refused) = push_until_ok(&gw, &queue, "after", Duration::from_secs(15)).await;
    println!(
        "push answered 200 {} ms after the crash recovery, after {refused} 503s",
        took.as_millis()
    );
    let (status, popped) = get(&gw, &format!("/api/v1/pop/queue/{queue}?batch=10")).await;
    assert_eq!(status, 200, "{popped}");
    assert_eq!(messages(&popped).len(), 2, "{popped}");
}

fn sigterm(gw: &Gateway) {
    signal(gw, "TERM");
}

fn signal(gw: &Gateway, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &gw.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

#[tokio::test]
async fn sigterm_answers_in_flight_long_polls_then_exits_0() {
    stopping_answers_in_flight_long_polls_then_exits_0("TERM").await;
}

/// Ctrl-C under `make run` is as gentle as SIGTERM.
#[tokio::test]
async fn sigint_answers_in_flight_long_polls_then_exits_0() {
    stopping_answers_in_flight_long_polls_then_exits_0("INT").await;
}

async fn stopping_answers_in_flight_long_polls_then_exits_0(name: &str) {
    let mut gw = Gateway::start().await;
    let queue = fresh_queue("sigterm");
    configure_queue(&gw, &queue).await;
    // Far longer than the gateway's 10 s shutdown grace: the wait must end
    // because of the shutdown, not because of its timeout.
    let url = gw.url(&format!(
        "/api/v1/pop/queue/{queue}?wait=true&timeout=30000"
    ));
    let waiting = tokio::spawn(timed(client().get(url)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "the pop did not wait");

    let signalled = Instant::now();
    signal(&gw, name);
    let (status, body, _) = waiting.await.unwrap();
    let answered = signalled.elapsed();
    assert_eq!(
        (status, body),
        (200, json!({"success": true, "messages": []}))
    );
    let exit = gw.wait_exit(Duration::from_secs(5)).await;
    println!(
        "SIG{name}: the long-poll was answered after {} ms, the process exited ({exit:?}) after {} ms",
        answered.as_millis(),
        signalled.elapsed().as_millis()
    );
    assert!(answered < Duration::from_secs(3), "{answered:?}");
    let exit = exit.expect("the gateway did not exit within 5 s of the signal");
    assert!(exit.success(), "{exit:?}:\n{}", gw.stderr());
}

#[tokio::test]
async fn sigterm_lets_a_request_in_progress_finish() {
    // Its own cluster: the push in progress is found in pg_stat_activity.
    let cluster = PrivateCluster::start();
    let mut gw = Gateway::start_with(&[("DATABASE_URL", cluster.url())]).await;
    let queue = fresh_queue("sigterm-push");
    let items: Vec<Value> = (0..5000)
        .map(|i| json!({"queue": queue, "partition": format!("p{}", i % 8), "payload": {"i": i, "pad": "x".repeat(200)}}))
        .collect();
    let url = gw.url("/api/v1/push");
    let pushing = tokio::spawn(timed(client().post(url).json(&json!({"items": items}))));
    wait_for_query(&cluster, "pgcursor.push_items(").await;
    sigterm(&gw);
    let (status, body, _) = pushing.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_array().map(Vec::len), Some(5000));
    let exit = gw.wait_exit(Duration::from_secs(10)).await;
    let exit = exit.expect("the gateway did not exit within 10 s of SIGTERM");
    assert!(exit.success(), "{exit:?}:\n{}", gw.stderr());
}

/// A push still waiting on a lock when a stop's 10 s run out goes unanswered:
/// it must then not be stored either. Its session is ended once the gateway
/// is gone (client_connection_check_interval), so it rolls back instead of
/// committing when the lock goes.
#[tokio::test]
async fn a_push_cut_off_by_a_stop_is_not_stored_later() {
    let cluster = PrivateCluster::start();
    let mut gw = Gateway::start_with(&[("DATABASE_URL", cluster.url())]).await;
    let queue = fresh_queue("stop-cut");
    let first = json!({"items": [{"queue": queue, "payload": 1}]});
    let (status, pushed) = send(client().post(gw.url("/api/v1/push")).json(&first)).await;
    assert_eq!(status, 200, "{pushed}");
    let partition = pushed[0]["partitionId"].as_str().unwrap().to_string();
    let holder = db_at(cluster.url()).await;
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT FROM pgcursor.partition_heads WHERE partition_id = '{partition}' FOR UPDATE"
        ))
        .await
        .unwrap();
    let second = json!({"items": [{"queue": queue, "payload": 2}]});
    let request = client().post(gw.url("/api/v1/push")).json(&second);
    let pushing = tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) });
    wait_for_query(&cluster, "pgcursor.push_items(").await;
    sigterm(&gw);
    let exit = gw.wait_exit(Duration::from_secs(15)).await;
    assert!(
        exit.is_some(),
        "the gateway did not exit within 15 s of SIGTERM"
    );
    let answer = pushing.await.unwrap();
    assert!(answer.is_err(), "the cut-off push was answered: {answer:?}");
    // Its session ends within a second or two of the gateway (checked each
    // second); then the lock goes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    holder.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        stored_messages_at(&holder, &queue).await,
        1,
        "the unanswered push was stored"
    );
}

/// Until a query containing `call` is running on the cluster.
async fn wait_for_query(cluster: &PrivateCluster, call: &str) {
    let db = db_at(cluster.url()).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let pattern = format!("%{call}%");
    loop {
        let running: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1",
                &[&pattern],
            )
            .await
            .unwrap()
            .get(0);
        if running > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "no {call:?} started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn sigterm_flushes_the_per_minute_figures_counted_since_the_last_flush() {
    // The default interval: the first flush is a minute away, so only the
    // shutdown's can write these pops.
    let mut gw = Gateway::start().await;
    let queue = fresh_queue("sigterm-minutes");
    push_n(&gw, &queue, "Default", 2).await;
    pop(&gw, &queue, "batch=2").await;
    sigterm(&gw);
    let exit = gw.wait_exit(Duration::from_secs(10)).await;
    assert!(
        exit.is_some_and(|e| e.success()),
        "{exit:?}:\n{}",
        gw.stderr()
    );
    let popped: i64 = db()
        .await
        .query_one(
            "SELECT coalesce(sum(pop_messages), 0)::bigint FROM pgcursor.gateway_minutes WHERE queue = $1",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(popped, 2);
}

/// The gateways' bootstrap lock (gateway/src/db.rs, "pgcursor" in ASCII).
const BOOTSTRAP_LOCK: i64 = 0x7067_6375_7273_6f72;

#[tokio::test]
async fn a_lock_timeout_for_requests_does_not_cut_the_bootstrap_short() {
    // Another gateway bootstrapping holds the lock for a second; this one's
    // requests give up on a lock after 300 ms, its bootstrap waits.
    let holder = db().await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&BOOTSTRAP_LOCK])
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        holder
            .execute("SELECT pg_advisory_unlock($1)", &[&BOOTSTRAP_LOCK])
            .await
            .unwrap();
    });
    let url = format!(
        "{}?options=-c%20lock_timeout%3D300",
        pgcursor_tests::database_url()
    );
    let gw = Gateway::start_with(&[("DATABASE_URL", url.as_str())]).await;
    release.await.unwrap();
    let (status, body) = get(&gw, "/health").await;
    assert_eq!(status, 200, "{body}");
}

/// Reads get at most half of a worker's connections at once (gateway
/// src/reads.rs): with every read stuck behind a lock, a push, a pop and
/// /health are still answered at once, and the reads finish once the lock
/// goes; reads that wait longer than PGCURSOR_DB_TIMEOUT_MS for their turn
/// answer 503, saying so. Before, slow reads took the whole pool, and a push waited
/// PGCURSOR_DB_TIMEOUT_MS for a connection, then answered 503.
#[tokio::test]
async fn slow_reads_leave_connections_for_pushes_pops_and_health() {
    let (database, url) = scratch_database(&[]).await;
    let gw = pgcursor_tests::GatewayConfig::new()
        .database_url(&url)
        .pool_size(2)
        .env("PGCURSOR_HTTP_WORKERS", "1")
        .env("PGCURSOR_DB_TIMEOUT_MS", "2000")
        .start()
        .await;
    let queue = fresh_queue("beside-reads");
    configure_queue(&gw, &queue).await;
    // The trace-name listing reads this table, and nothing pushes or pops use.
    let locker = lock_table(&url, "pgcursor.trace_names").await;
    let reads: Vec<_> = (0..3)
        .map(|_| tokio::spawn(send(client().get(gw.url("/api/v1/traces/names")))))
        .collect();
    // (Not looked at through `locker`: within its transaction
    // pg_stat_activity stays as it first read.)
    until_waiting_for_a_lock("a read waits for the lock", "%trace_names%").await;
    // Each within PGCURSOR_DB_TIMEOUT_MS: else its wait for a connection
    // would have ended in a 503.
    let body = json!({"items": [{"queue": queue, "payload": "beside the reads"}]});
    let (status, answer) = post(&gw, "/api/v1/push", &body).await;
    assert_eq!(status, 200, "push: {answer}");
    let (status, answer) = get(&gw, &format!("/api/v1/pop/queue/{queue}")).await;
    assert_eq!((status, messages(&answer).len()), (200, 1), "pop: {answer}");
    let (status, answer) = get(&gw, "/health").await;
    assert_eq!(status, 200, "health: {answer}");
    // The two reads waiting for the one read permit give up after
    // PGCURSOR_DB_TIMEOUT_MS, saying why; the one holding it answers once
    // the lock goes.
    eventually("two reads give up", Duration::from_secs(10), || async {
        reads.iter().filter(|r| r.is_finished()).count() == 2
    })
    .await;
    locker.batch_execute("COMMIT").await.unwrap();
    let mut answers = Vec::new();
    for read in reads {
        let (status, answer) = read.await.unwrap();
        answers.push((status, answer["error"].as_str().unwrap_or("").to_string()));
    }
    answers.sort();
    let busy = "too many reads at once: every read connection of this gateway was busy for 2000 ms; retry later";
    assert_eq!(
        answers,
        vec![
            (200, String::new()),
            (503, busy.to_string()),
            (503, busy.to_string())
        ]
    );
    drop(gw);
    drop_database(&database).await;
}

/// An 8 MB body of small numbers takes the gateway a second or more to
/// parse into a tree, and one of 250,000 small push items hundreds of
/// milliseconds to read into push's arrays. Both are read off the HTTP
/// worker's event loop, so /health keeps answering meanwhile: several
/// answers arrive before the big body's own (on the loop, every health
/// check would wait for the parse; the push was read there until
/// 2026-12-06).
#[tokio::test]
async fn health_answers_while_a_long_body_is_parsed() {
    let gw = Gateway::start().await;
    let numbers = format!(r#"{{"acknowledgments":[{}1]}}"#, "1,".repeat(4_000_000));
    let item = r#"{"queue":"q","payload":1},"#;
    let items = format!(
        r#"{{"items":[{}{}]}}"#,
        item.repeat(249_999),
        &item[..item.len() - 1]
    );
    for (path, body) in [("/api/v1/ack/batch", numbers), ("/api/v1/push", items)] {
        let big = tokio::spawn(send(
            client()
                .post(gw.url(path))
                .header("content-type", "application/json")
                .body(body),
        ));
        // Uploading 8 MB over loopback takes a few milliseconds.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut answered = 0;
        while !big.is_finished() && answered < 50 {
            let (status, body) = get(&gw, "/health").await;
            assert_eq!(status, 200, "{body}");
            if !big.is_finished() {
                answered += 1;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, answer) = big.await.unwrap();
        assert_eq!(status, 413, "{path}: more items than the limit: {answer}");
        assert!(
            answered >= 3,
            "{path}: {answered} health answers came while the body was parsed"
        );
    }
}

/// A body must arrive whole within PGCURSOR_BODY_TIMEOUT_MS of its head
/// (actix-web alone waits for ever). One that stalls (with a length, or
/// chunked), or one that drips a byte every 100 ms (never quiet for long,
/// yet late), is a 408 that closes the connection and writes nothing. A
/// slow body inside the deadline is served, and its connection serves the
/// next request.
#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_a_408() {
    let gw = Gateway::start_with(&[("PGCURSOR_BODY_TIMEOUT_MS", "2500")]).await;
    let address = gw.base.trim_start_matches("http://").to_string();
    let queue = fresh_queue("late-body");
    let body = format!(r#"{{"items":[{{"queue":"{queue}","payload":1}}]}}"#).into_bytes();
    let head = post_head("/api/v1/push", body.len(), None);
    let late = |answer: &str| {
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(
            answer.contains("did not arrive whole within 2500 ms (PGCURSOR_BODY_TIMEOUT_MS)"),
            "{answer}"
        );
    };

    let chunked = format!(
        "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        body.len() - 1
    );
    // The ack routes too (docs/ack-contract.md §14, the 408 row).
    let ack = post_head("/api/v1/ack/batch", body.len(), None);
    for (what, head) in [
        ("with a length", head.clone()),
        ("chunked", chunked.into_bytes()),
        ("an ack", ack),
    ] {
        let mut stalled = TcpStream::connect(&address).await.unwrap();
        stalled.write_all(&head).await.unwrap();
        stalled.write_all(&body[..body.len() - 1]).await.unwrap();
        let started = Instant::now();
        let answer = answer_within(&mut stalled, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{what}: no answer to a stalled body"));
        late(&answer);
        assert!(
            started.elapsed() >= Duration::from_millis(2000),
            "{what}: {:?}",
            started.elapsed()
        );
        let mut rest = [0u8; 64];
        let closed = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut rest)).await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "{what}: the connection stays open: {closed:?}"
        );
    }

    let mut dripping = TcpStream::connect(&address).await.unwrap();
    dripping.write_all(&head).await.unwrap();
    let started = Instant::now();
    let mut answer = None;
    for byte in &body[..body.len() - 1] {
        if dripping
            .write_all(std::slice::from_ref(byte))
            .await
            .is_err()
        {
            break;
        }
        answer = answer_within(&mut dripping, Duration::from_millis(100)).await;
        if answer.is_some() {
            break;
        }
    }
    late(&answer.expect("an answer while the body drips"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        stored_messages(&queue).await,
        0,
        "a late body wrote nothing"
    );

    let mut slow = TcpStream::connect(&address).await.unwrap();
    slow.write_all(&head).await.unwrap();
    for piece in body.chunks(body.len() / 3 + 1) {
        slow.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let answer = answer_within(&mut slow, Duration::from_secs(10))
        .await
        .expect("an answer to a slow body in time");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(stored_messages(&queue).await, 1);
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = answer_within(&mut slow, Duration::from_secs(10))
        .await
        .expect("the connection serves the next request");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A client that stops reading a long answer is dropped once it has taken
/// none of it for PGCURSOR_SEND_TIMEOUT_MS (before, the gateway kept the
/// connection, and the rest of the answer in its memory, for ever). A
/// client reading slowly, 64 KB every 300 ms, is not.
#[tokio::test]
async fn a_client_that_stops_reading_its_answer_is_dropped() {
    let gw = Gateway::start_with(&[("PGCURSOR_SEND_TIMEOUT_MS", "3000")]).await;
    let queue = fresh_queue("unread-answer");
    let text = "x".repeat(40_000);
    push_200_of(&gw, &queue, &text).await;
    // An answer of about 16 MB (data and payload), more than the sockets hold.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(256 * 1024).unwrap();
    let address = gw.base.trim_start_matches("http://").parse().unwrap();
    let mut client = socket.connect(address).await.unwrap();
    let pop = format!("GET /api/v1/pop/queue/{queue}?batch=200 HTTP/1.1\r\nHost: x\r\n\r\n");
    client.write_all(pop.as_bytes()).await.unwrap();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut received = 0;
    let reading_slowly = Instant::now();
    while reading_slowly.elapsed() < Duration::from_secs(6) {
        let read = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buffer)).await;
        let Ok(Ok(n @ 1..)) = read else {
            panic!("a slow reader was dropped after {received} bytes: {read:?}");
        };
        received += n;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let rest = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match client.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received += n,
            }
        }
    })
    .await;
    assert!(rest.is_ok(), "the connection is still open");
    let abandoned = crate::metrics::scrape(&gw).await;
    assert_eq!(
        abandoned.value("pgcursor_http_answers_abandoned_total", &[]),
        1.0
    );
    assert!(
        received < 8_000_000,
        "{received} bytes of the answer arrived: the connection was kept"
    );
}

/// Pop answers share PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT: a pop takes room
/// for what its maxBytes may fill (twice: data and payload), answers fewer
/// messages when less is left, and holds its answer's room until the answer
/// is sent. A pop that finds less than 1 MiB left waits for it, then is a
/// 503 that leases nothing. Before, answers were bounded only by the
/// connections: each stuck client held up to 32 MB.
#[tokio::test]
async fn pop_answers_share_the_gateways_budget() {
    let gw = Gateway::start_with(&[
        ("PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT", "8388608"),
        ("PGCURSOR_DB_TIMEOUT_MS", "2000"),
    ])
    .await;
    let queue = fresh_queue("answer-budget");
    let text = "x".repeat(40_000);
    push_200_of(&gw, &queue, &text).await;
    // A client that reads none of its answer, which is more than the sockets hold.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    let address = gw.base.trim_start_matches("http://").parse().unwrap();
    let mut stuck = socket.connect(address).await.unwrap();
    let request = format!(
        "GET /api/v1/pop/queue/{queue}?batch=200&consumerGroup=stuck HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    stuck.write_all(request.as_bytes()).await.unwrap();
    let held = |figures: &crate::metrics::Exposition| {
        figures.value("pgcursor_http_answer_bytes_held", &[])
    };
    // Its head (and the start of its body) arrive: the answer is written,
    // and its room is now the answer's length.
    let mut raw = Vec::new();
    let mut piece = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = tokio::time::timeout(Duration::from_secs(10), stuck.read(&mut piece)).await;
        let Ok(Ok(n @ 1..)) = read else {
            panic!("no answer to the stuck pop: {read:?}")
        };
        raw.extend_from_slice(&piece[..n]);
    }
    let figures = crate::metrics::scrape(&gw).await;
    let held_unread = held(&figures);
    assert!(
        (7_340_032.0..=8_388_608.0).contains(&held_unread),
        "the unread answer holds nearly all of the 8 MiB: {held_unread}"
    );
    assert_eq!(
        figures.value("pgcursor_http_answer_bytes_max", &[]),
        8_388_608.0
    );

    let started = Instant::now();
    let (status, answer) = get(
        &gw,
        &format!("/api/v1/pop/queue/{queue}?consumerGroup=other"),
    )
    .await;
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer.to_string().contains(
            "(PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT) and had no room for this one within 2000 ms"
        ),
        "{answer}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );

    // Read whole, the answer lets go of its room. It held what fitted in
    // 8 MiB: maxBytes 4 MiB, 104 payloads of 40,0xx bytes.
    tokio::time::timeout(Duration::from_secs(20), stuck.read_to_end(&mut raw))
        .await
        .expect("the answer, read")
        .unwrap();
    let body_at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let body = &raw[body_at..];
    assert_eq!(
        held_unread,
        (body.len().div_ceil(1024) * 1024) as f64,
        "it held its answer's length"
    );
    let answer: Value = serde_json::from_slice(body).expect("a JSON answer");
    assert_eq!(messages(&answer).len(), 104);
    eventually("the room is given back", Duration::from_secs(5), || async {
        held(&crate::metrics::scrape(&gw).await) == 0.0
    })
    .await;
    let answer = pop(&gw, &queue, "batch=200&consumerGroup=other").await;
    assert_eq!(
        messages(&answer).len(),
        104,
        "the refused pop leased nothing"
    );
}

/// Request bodies share PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT, each holding its
/// room (its Content-Length) until its request is answered: a body for
/// which there is no room waits unread until there is, and one that finds
/// none within PGCURSOR_BODY_TIMEOUT_MS is a 503 that changes nothing.
#[tokio::test]
async fn request_bodies_wait_for_room_in_the_gateways_budget() {
    let (database, url) = scratch_database(&[]).await;
    let gw = pgcursor_tests::GatewayConfig::new()
        .database_url(&url)
        .env("PGCURSOR_MAX_BODY_BYTES", "65536")
        .env("PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT", "100000")
        .env("PGCURSOR_BODY_TIMEOUT_MS", "3000")
        .start()
        .await;
    let address = gw.base.trim_start_matches("http://").to_string();
    let queue = fresh_queue("bodies-budget");
    // A request of `path` with `body` padded with spaces to `length` bytes.
    let send_padded = |path: &'static str, body: String, length: usize| {
        let address = address.clone();
        let mut body = body.into_bytes();
        body.resize(length, b' ');
        async move {
            let mut stream = TcpStream::connect(&address).await.unwrap();
            stream
                .write_all(&post_head(path, length, None))
                .await
                .unwrap();
            stream.write_all(&body).await.unwrap();
            stream
        }
    };
    let push = format!(r#"{{"items":[{{"queue":"{queue}","payload":1}}]}}"#);
    let configure = |name: &str| format!(r#"{{"queue":"{queue}-{name}"}}"#);
    let answered = |what: &'static str| {
        move |answer: Option<String>| answer.unwrap_or_else(|| panic!("no answer {what}"))
    };

    // 59 KiB held by a push whose body is read and that waits for a lock:
    // a configure of 49 KiB does not fit in the 98 left.
    let locker = lock_table(&url, "pgcursor.messages").await;
    let mut holding = send_padded("/api/v1/push", push.clone(), 60_000).await;
    until_waiting_for_a_lock("the push holding room waits", "%push_items%").await;
    let held = crate::metrics::scrape(&gw).await;
    assert_eq!(
        held.value("pgcursor_http_body_bytes_held", &[]),
        (59 * 1024) as f64
    );
    assert_eq!(
        held.value("pgcursor_http_body_bytes_max", &[]),
        (98 * 1024) as f64
    );
    let mut waiting = send_padded("/api/v1/configure", configure("waits"), 50_000).await;
    assert_eq!(
        answer_within(&mut waiting, Duration::from_secs(1)).await,
        None,
        "a body read while there is no room for it"
    );
    locker.batch_execute("ROLLBACK").await.unwrap();
    for stream in [&mut holding, &mut waiting] {
        let answer =
            answered("once there is room")(answer_within(stream, Duration::from_secs(10)).await);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    // No room within the deadline: a 503.
    let locker = lock_table(&url, "pgcursor.messages").await;
    let mut holding = send_padded("/api/v1/push", push, 60_000).await;
    until_waiting_for_a_lock("the push holding room waits", "%push_items%").await;
    // A configure, and an ack (docs/ack-contract.md §14, the 503 row).
    let ack = r#"{"acknowledgments":[{"transactionId":"t","partitionId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90","status":"completed"}]}"#;
    let mut refused = [
        send_padded("/api/v1/configure", configure("refused"), 50_000).await,
        send_padded("/api/v1/ack/batch", ack.to_string(), 50_000).await,
    ];
    for stream in &mut refused {
        let answer = answered("to a body that found no room")(
            answer_within(stream, Duration::from_secs(10)).await,
        );
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(
            answer.contains(
                "(PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT) and had no room for this one within 3000 ms"
            ),
            "{answer}"
        );
    }
    locker.batch_execute("ROLLBACK").await.unwrap();
    let answer =
        answered("to the holder")(answer_within(&mut holding, Duration::from_secs(10)).await);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let client = db_at(&url).await;
    assert_eq!(stored_messages_at(&client, &queue).await, 2);
    let held = crate::metrics::scrape(&gw).await;
    assert_eq!(held.value("pgcursor_http_body_bytes_held", &[]), 0.0);
    let configured: Vec<String> = crate::broker::column_of(
        &client,
        "SELECT name FROM pgcursor.queues WHERE name LIKE $1 || '-%' ORDER BY name",
        &[&queue],
    )
    .await;
    assert_eq!(
        configured,
        [format!("{queue}-waits")],
        "the refused configure changed nothing"
    );
    drop(gw);
    drop_database(&database).await;
}

/// A database set read-only (as during a failover, or by hand) refuses
/// writes with a 503 saying so, and /health says so too; once the setting is
/// reset, the gateway takes writes again by itself. Its pooled sessions
/// kept the read-only setting they started with: they answered 500 for ever
/// after the reset, until a restart.
#[tokio::test]
async fn a_read_only_database_is_a_503_and_the_gateway_takes_writes_again_after_it() {
    let (database, url) = scratch_database(&[]).await;
    let gw = pgcursor_tests::GatewayConfig::new()
        .database_url(&url)
        .pool_size(2)
        .env("PGCURSOR_HTTP_WORKERS", "1")
        .start()
        .await;
    let queue = fresh_queue("read-only");
    push_until_ok(&gw, &queue, "before", Duration::from_secs(10)).await;
    let admin = db().await;
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {database} SET default_transaction_read_only = on"
        ))
        .await
        .unwrap();
    // The gateway's sessions go; the new ones start read-only.
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&database],
        )
        .await
        .unwrap();
    eventually(
        "a push is refused as read-only",
        Duration::from_secs(10),
        || async {
            let (status, body) = post(&gw, "/api/v1/push", &push_body(&queue, "during")).await;
            assert_ne!(status, 500, "{body}");
            status == 503
                && body["error"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("database is read-only")
        },
    )
    .await;
    let (status, health) = get(&gw, "/health").await;
    assert_eq!(
        (status, &health["database"]),
        (503, &json!("read-only")),
        "{health}"
    );
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {database} RESET default_transaction_read_only"
        ))
        .await
        .unwrap();
    push_until_ok(&gw, &queue, "after", Duration::from_secs(10)).await;
    let (status, health) = get(&gw, "/health").await;
    assert_eq!(status, 200, "{health}");
    drop(gw);
    drop_database(&database).await;
}
