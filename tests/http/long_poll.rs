//! `wait=true`: a push wakes a waiting pop through LISTEN/NOTIFY, a waiting
//! pop holds no pooled connection, long-polls outlive a database outage,
//! and one whose client hung up leases nothing, or gives its lease back
//! when the client went while it ran.

use std::time::{Duration, Instant};

use futures::future::join_all;
use pgcursor_tests::{client, db, Gateway, GatewayConfig, PrivateCluster};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::broker::{
    configure_queue, drop_database, eventually, fresh_queue, get, lock_table, messages, offsets,
    post, push_n, scratch_database, send, until_waiting_for_a_lock,
};
use crate::metrics::scrape;

/// Starts `GET path` now; the answer and how long it took.
fn start_pop(gw: &Gateway, path: String) -> tokio::task::JoinHandle<(u16, Value, Duration)> {
    let url = gw.url(&path);
    tokio::spawn(async move {
        let started = Instant::now();
        let (status, body) = send(client().get(url)).await;
        (status, body, started.elapsed())
    })
}

/// The path of a pop on `queue` that waits up to 10 s for a message.
fn long_poll(queue: &str) -> String {
    format!("/api/v1/pop/queue/{queue}?wait=true&timeout=10000")
}

async fn push_one(gw: &Gateway, queue: &str) -> Instant {
    let body = json!({"items": [{"queue": queue, "payload": "wake up"}]});
    let (status, answer) = post(gw, "/api/v1/push", &body).await;
    assert_eq!(status, 200, "{answer}");
    Instant::now()
}

/// A fresh queue whose Default partition holds message 1, consumed
/// (autoAck) by the queue-mode group.
async fn queue_with_one_message_consumed(gw: &Gateway, prefix: &str) -> String {
    let queue = fresh_queue(prefix);
    configure_queue(gw, &queue).await;
    push_one(gw, &queue).await;
    let (status, first) = get(gw, &format!("/api/v1/pop/queue/{queue}?autoAck=true")).await;
    assert_eq!((status, offsets(&first)), (200, vec![1]), "{first}");
    queue
}

/// Pushes while a pop waits; answers the pop and the push→answer latency.
async fn wake_latency(gw: &Gateway, queue: &str, pop_path: String) -> (Value, Duration) {
    let waiting = start_pop(gw, pop_path);
    tokio::time::sleep(Duration::from_millis(400)).await; // let it start waiting
    assert!(!waiting.is_finished(), "the pop did not wait");
    let pushed = push_one(gw, queue).await;
    let (status, answer, _) = waiting.await.unwrap();
    let latency = pushed.elapsed();
    assert_eq!(status, 200, "{answer}");
    (answer, latency)
}

#[tokio::test]
async fn a_push_wakes_a_waiting_pop_at_once() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("wake");
    configure_queue(&gw, &queue).await;
    let (answer, latency) = wake_latency(&gw, &queue, long_poll(&queue)).await;
    println!("push -> waiting pop answered in {} ms", latency.as_millis());
    assert_eq!(offsets(&answer), vec![1]);
    assert!(latency < Duration::from_secs(1), "{latency:?}");
}

/// The push into a partition that already exists: on Citus this one runs
/// on the partition's worker (pgcursor_citus.push), where no gateway
/// listens, and the gateway sends the wake-up itself.
#[tokio::test]
async fn a_push_into_an_existing_partition_wakes_a_waiting_pop_at_once() {
    let gw = Gateway::start().await;
    let queue = queue_with_one_message_consumed(&gw, "wake-again").await;
    let (answer, latency) = wake_latency(&gw, &queue, long_poll(&queue)).await;
    assert_eq!(offsets(&answer), vec![2]);
    assert!(latency < Duration::from_secs(1), "{latency:?}");
}

#[tokio::test]
async fn a_push_wakes_a_namespace_pop() {
    let gw = Gateway::start().await;
    let (ns, queue) = (fresh_queue("ns"), fresh_queue("nsq"));
    let body = json!({"queue": queue, "namespace": ns});
    assert_eq!(post(&gw, "/api/v1/configure", &body).await.0, 200);
    let path = format!("/api/v1/pop?namespace={ns}&wait=true&timeout=10000");
    let (answer, latency) = wake_latency(&gw, &queue, path).await;
    assert_eq!(answer["queue"], json!(queue));
    assert!(latency < Duration::from_secs(1), "{latency:?}");
}

/// A fresh queue configured with `options`.
async fn queue_with_options(gw: &Gateway, prefix: &str, options: Value) -> String {
    let queue = fresh_queue(prefix);
    let body = json!({"queue": queue, "options": options});
    assert_eq!(post(gw, "/api/v1/configure", &body).await.0, 200);
    queue
}

/// A message time alone frees 2 s after `what` reached the waiting pop
/// then: not before, and not at its periodic re-look, 5 s after its last
/// empty look.
fn delivered_when_due(latency: Duration, what: &str) {
    assert!(
        latency > Duration::from_millis(1500) && latency < Duration::from_secs(4),
        "delivered {latency:?} after {what}"
    );
}

#[tokio::test]
async fn a_delayed_message_reaches_a_waiting_pop_when_its_delay_has_passed() {
    let gw = Gateway::start().await;
    let queue = queue_with_options(&gw, "due-delay", json!({"delayedProcessing": 2})).await;
    let (answer, latency) = wake_latency(&gw, &queue, long_poll(&queue)).await;
    assert_eq!(offsets(&answer), vec![1], "{answer}");
    delivered_when_due(latency, "its push, delayed 2 s");
}

#[tokio::test]
async fn a_lease_s_messages_reach_a_waiting_pop_when_it_expires() {
    let gw = Gateway::start().await;
    let queue = queue_with_options(&gw, "due-lease", json!({"leaseTime": 2})).await;
    push_one(&gw, &queue).await;
    let (status, first) = get(&gw, &format!("/api/v1/pop/queue/{queue}")).await;
    assert_eq!((status, offsets(&first)), (200, vec![1]), "{first}");
    let leased = Instant::now(); // and never acked
    let (status, again, _) = start_pop(&gw, long_poll(&queue)).await.unwrap();
    assert_eq!((status, offsets(&again)), (200, vec![1]), "{again}");
    delivered_when_due(leased.elapsed(), "its 2 s lease was taken");
}

#[tokio::test]
async fn a_waiting_pop_answers_empty_at_its_timeout() {
    let gw = Gateway::start().await;
    let (queue, other) = (fresh_queue("idle"), fresh_queue("other"));
    configure_queue(&gw, &queue).await;
    let waiting = start_pop(
        &gw,
        format!("/api/v1/pop/queue/{queue}?wait=true&timeout=1200"),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    push_one(&gw, &other).await; // another queue's push does not end the wait
    let (status, body, took) = waiting.await.unwrap();
    assert_eq!(
        (status, body),
        (200, json!({"success": true, "messages": []}))
    );
    assert!(
        took >= Duration::from_millis(1200) && took < Duration::from_millis(2500),
        "{took:?}"
    );
}

/// A long-poll whose client hung up leases nothing: the push that would
/// have woken it stays for the next pop. (actix-web runs a handler on after
/// its client has gone, so the pop looks at the socket before it pops.) The
/// abandoned pop answers 499 to nobody, and the request metrics count it.
#[tokio::test]
async fn a_long_poll_whose_client_hung_up_leases_nothing() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("hung-up");
    configure_queue(&gw, &queue).await;
    let waits = || async { scrape(&gw).await.value("pgcursor_push_waits", &[]) };
    let address = gw.url("").trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {address}\r\n\r\n",
        long_poll(&queue)
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    eventually("the pop waits", Duration::from_secs(5), || async {
        waits().await == 1.0
    })
    .await;
    drop(socket);
    push_one(&gw, &queue).await;
    eventually(
        "the abandoned pop is over",
        Duration::from_secs(5),
        || async { waits().await == 0.0 },
    )
    .await;
    let (status, answer) = get(&gw, &format!("/api/v1/pop/queue/{queue}")).await;
    assert_eq!((status, offsets(&answer)), (200, vec![1]), "{answer}");
    let closed = [("route", "/api/v1/pop/queue/{queue}"), ("status", "499")];
    assert_eq!(
        scrape(&gw)
            .await
            .value("pgcursor_http_requests_total", &closed),
        1.0
    );
}

/// A pop whose client hangs up while its statement runs gives its lease
/// back: the message goes to the next pop at once instead of waiting out a
/// lease nobody holds. (Here the statement waits on a lock of the queues
/// table, in a database of its own, while the client goes.) A client that
/// closes its end (FIN) leaves the handler running; one that resets the
/// connection (RST, a client or proxy with SO_LINGER 0) has it dropped,
/// which left the lease taken and the request uncounted.
#[tokio::test]
async fn a_pop_whose_client_hung_up_while_it_ran_gives_its_lease_back() {
    pop_given_up_while_it_ran(false).await;
}

#[tokio::test]
async fn a_pop_whose_client_reset_its_connection_while_it_ran_gives_its_lease_back() {
    pop_given_up_while_it_ran(true).await;
}

/// A waiting pop whose timeout has passed when its look begins (`timeout=0`)
/// still answers what that look found: only a look that outlives its
/// deadline by a second (a lock, a stalled server) is answered without.
#[tokio::test]
async fn a_waiting_pop_with_timeout_0_answers_what_its_look_found() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("timeout-0");
    push_n(&gw, &queue, "m", 3).await;
    let (status, answer) = get(
        &gw,
        &format!("/api/v1/pop/queue/{queue}?wait=true&timeout=0&batch=3&consumerGroup=g"),
    )
    .await;
    assert_eq!((status, offsets(&answer)), (200, vec![1, 2, 3]), "{answer}");
}

/// A waiting pop answers when its `timeout` passes even while its look
/// waits on a lock: it answered only when the lock went (14.5 s for a
/// 2 s timeout). The look goes on apart, and gives back what it leases
/// when it ends: the message goes to the next pop, not to a lease nobody
/// holds.
#[tokio::test]
async fn a_waiting_pop_answers_at_its_timeout_while_its_look_waits_on_a_lock() {
    let (database, url) = scratch_database(&[]).await;
    let gw = GatewayConfig::new().database_url(&url).start().await;
    let queue = fresh_queue("locked-look");
    configure_queue(&gw, &queue).await;
    push_one(&gw, &queue).await;
    let locker = lock_table(&url, "pgcursor.queues").await;
    let (status, answer, took) = start_pop(
        &gw,
        format!("/api/v1/pop/queue/{queue}?wait=true&timeout=1000"),
    )
    .await
    .unwrap();
    assert_eq!((status, messages(&answer).len()), (200, 0), "{answer}");
    assert!(
        took < Duration::from_millis(3000),
        "answered after {took:?}"
    );
    locker.batch_execute("COMMIT").await.unwrap();
    the_message_goes_to_the_next_pop(&gw, &queue).await;
    drop(gw);
    drop_database(&database).await;
}

/// Message 1 of `queue`, leased by a look nobody answered, was given back:
/// the next pop gets it, not after a lease nobody holds.
async fn the_message_goes_to_the_next_pop(gw: &Gateway, queue: &str) {
    eventually(
        "the message goes to the next pop, not to a lease nobody holds",
        Duration::from_secs(10),
        || async {
            let (status, answer) = get(gw, &format!("/api/v1/pop/queue/{queue}")).await;
            assert_eq!(status, 200, "{answer}");
            offsets(&answer) == vec![1]
        },
    )
    .await;
}

async fn pop_given_up_while_it_ran(reset: bool) {
    let (database, url) = scratch_database(&[]).await;
    let gw = GatewayConfig::new().database_url(&url).start().await;
    let queue = fresh_queue("hung-up-during");
    configure_queue(&gw, &queue).await;
    push_one(&gw, &queue).await;
    let locker = lock_table(&url, "pgcursor.queues").await;
    let address = gw.url("").trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!("GET /api/v1/pop/queue/{queue} HTTP/1.1\r\nHost: {address}\r\n\r\n");
    socket.write_all(request.as_bytes()).await.unwrap();
    until_waiting_for_a_lock("the pop waits for the lock", "%pop_messages%").await;
    if reset {
        linger_zero(&socket);
    }
    drop(socket);
    locker.batch_execute("COMMIT").await.unwrap();
    let closed = [("route", "/api/v1/pop/queue/{queue}"), ("status", "499")];
    eventually(
        "the abandoned pop is counted as a 499",
        Duration::from_secs(10),
        || async {
            scrape(&gw)
                .await
                .value("pgcursor_http_requests_total", &closed)
                == 1.0
        },
    )
    .await;
    // (After a reset the 499 is counted when actix drops the handler; the
    // statement goes on, and gives its lease back after.)
    eventually(
        "the abandoned pop's statement is over",
        Duration::from_secs(10),
        || async {
            let running: i64 = db()
                .await
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                      WHERE datname = $1 AND query LIKE '%pop_messages%' AND state <> 'idle'",
                    &[&database],
                )
                .await
                .unwrap()
                .get(0);
            running == 0
        },
    )
    .await;
    the_message_goes_to_the_next_pop(&gw, &queue).await;
    drop(gw);
    drop_database(&database).await;
}

/// SO_LINGER 0: closing the socket then resets the connection (RST).
fn linger_zero(socket: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket, and a linger struct of the size given.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::addr_of!(linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "setsockopt SO_LINGER");
}

#[tokio::test]
async fn a_thousand_long_polls_do_not_exhaust_a_pool_of_four() {
    // Long enough that /health is asked well before it, even on a loaded machine.
    const TIMEOUT: Duration = Duration::from_secs(6);
    let gw = Gateway::start_with(&[("PGCURSOR_POOL_SIZE", "4")]).await;
    let queue = fresh_queue("crowd");
    configure_queue(&gw, &queue).await;
    let started = Instant::now();
    let pops: Vec<_> = (0..1000)
        .map(|_| {
            start_pop(
                &gw,
                format!(
                    "/api/v1/pop/queue/{queue}?wait=true&timeout={}",
                    TIMEOUT.as_millis()
                ),
            )
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(1000)).await;
    let asked = Instant::now();
    let (status, health) = get(&gw, "/health").await;
    let health_took = asked.elapsed();
    let waiting = pops.iter().filter(|p| !p.is_finished()).count();
    println!(
        "1000 long-polls, pool 4: /health answered {status} in {} ms while {waiting} pops waited",
        health_took.as_millis()
    );
    assert_eq!(status, 200, "{health}");
    // Before the pops' timeout, on a pool they all use: a liveness bound, not
    // a speed target (a loaded 2-core machine took 1.7 s).
    assert!(
        health_took < TIMEOUT - Duration::from_secs(2),
        "{health_took:?}"
    );
    assert!(waiting > 900, "the pops should still be waiting: {waiting}");

    let answers = join_all(pops).await;
    let empty = json!({"success": true, "messages": []});
    for answer in &answers {
        let (status, body, _) = answer.as_ref().unwrap();
        assert_eq!((*status, body), (200, &empty));
    }
    let slowest = answers.iter().map(|a| a.as_ref().unwrap().2).max().unwrap();
    println!(
        "1000 long-polls all answered 200 empty; slowest {} ms, all done after {} ms",
        slowest.as_millis(),
        started.elapsed().as_millis()
    );
    // Answered at their timeout, not long after.
    assert!(slowest < TIMEOUT + Duration::from_secs(4), "{slowest:?}");
}

#[tokio::test]
async fn long_polls_outlive_a_database_outage_and_wake_again_after_it() {
    let cluster = PrivateCluster::start();
    let gw = Gateway::start_with(&[
        ("DATABASE_URL", cluster.url()),
        ("PGCURSOR_DB_TIMEOUT_MS", "1000"),
    ])
    .await;
    let queue = fresh_queue("outage");
    configure_queue(&gw, &queue).await;

    let waiting = start_pop(
        &gw,
        format!("/api/v1/pop/queue/{queue}?wait=true&timeout=2500"),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.stop();
    let (status, body, took) = waiting.await.unwrap();
    assert_eq!(
        (status, body),
        (200, json!({"success": true, "messages": []}))
    );
    assert!(
        took < Duration::from_secs(4),
        "answered at its timeout: {took:?}"
    );

    cluster.start_again();
    wait_for_listener(&cluster).await;
    let (answer, latency) = wake_latency(&gw, &queue, long_poll(&queue)).await;
    assert_eq!(messages(&answer).len(), 1);
    assert!(latency < Duration::from_secs(1), "{latency:?}");
}

/// Until the gateway's listener connection is back (it reconnects with backoff).
async fn wait_for_listener(cluster: &PrivateCluster) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok((db, connection)) =
            tokio_postgres::connect(cluster.url(), tokio_postgres::NoTls).await
        {
            tokio::spawn(connection);
            let listening: i64 = db
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                      WHERE application_name = 'pgcursor-push-listener'
                        AND (query LIKE 'LISTEN%' OR query LIKE '%_for_pushes(%')",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if listening > 0 {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the push listener did not come back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn waiting_pops_of_one_group_share_pushes_without_double_delivery() {
    let gw = Gateway::start().await;
    let queue = fresh_queue("share");
    configure_queue(&gw, &queue).await;
    let pops: Vec<_> = (0..5)
        .map(|_| {
            start_pop(
                &gw,
                format!("/api/v1/pop/queue/{queue}?wait=true&timeout=3000&batch=10"),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    push_n(&gw, &queue, "Default", 3).await;
    let mut delivered = Vec::new();
    for p in join_all(pops).await {
        let (status, body, _) = p.unwrap();
        assert_eq!(status, 200, "{body}\n{}", gw.stderr());
        delivered.extend(offsets(&body));
    }
    delivered.sort();
    assert_eq!(delivered, vec![1, 2, 3], "each message once");
}

/// `n` long-polls of one group on a fresh queue, waiting `timeout_ms`,
/// each past its first look (and the look after the wait is put in place,
/// notify.rs), through a gateway on a database of its own, so that no other
/// test's pushes wake them.
struct WaitingGroup {
    database: String,
    gw: Gateway,
    queue: String,
    pops: Vec<tokio::task::JoinHandle<(u16, Value, Duration)>>,
}

impl WaitingGroup {
    async fn start(n: usize, timeout_ms: u64) -> WaitingGroup {
        let (database, url) = scratch_database(&[]).await;
        let gw = GatewayConfig::new().database_url(&url).start().await;
        let queue = fresh_queue("turns");
        configure_queue(&gw, &queue).await;
        let before = pop_looks(&gw).await;
        let path =
            format!("/api/v1/pop/queue/{queue}?wait=true&timeout={timeout_ms}&consumerGroup=g");
        let pops = (0..n).map(|_| start_pop(&gw, path.clone())).collect();
        eventually("the first looks", Duration::from_secs(10), || async {
            pop_looks(&gw).await - before >= n as f64
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        WaitingGroup {
            database,
            gw,
            queue,
            pops,
        }
    }

    /// The offsets each pop answered, sorted, once all have answered.
    async fn answers(&mut self) -> Vec<Vec<i64>> {
        let mut answers = Vec::new();
        for p in join_all(std::mem::take(&mut self.pops)).await {
            let (status, body, _) = p.unwrap();
            assert_eq!(status, 200, "{body}\n{}", self.gw.stderr());
            answers.push(offsets(&body));
        }
        answers.sort();
        answers
    }

    async fn end(self) {
        drop(self.gw);
        drop_database(&self.database).await;
    }
}

/// Pop statements the gateway has run.
async fn pop_looks(gw: &Gateway) -> f64 {
    scrape(gw).await.value("pgcursor_pop_looks_total", &[])
}

/// A push wakes every pop waiting on its queue; those of one group can
/// claim only the same messages, so they look in turn, and once a look
/// begun after the push has found nothing the others go back to waiting
/// (gateway/src/turns.rs). Before, each of the 12 looked: 12 looks for one
/// message.
#[tokio::test]
async fn waiting_pops_of_one_group_do_not_all_look_for_one_pushed_message() {
    let mut group = WaitingGroup::start(12, 4000).await;
    let waiting = pop_looks(&group.gw).await;
    push_one(&group.gw, &group.queue).await;
    let mut expected = vec![vec![]; 11];
    expected.push(vec![1]);
    assert_eq!(group.answers().await, expected, "one pop got the message");
    // The claim and one empty look; a pop woken late, after that look
    // began, looks once more. (The pops time out before their re-look.)
    let after_push = pop_looks(&group.gw).await - waiting;
    assert!(after_push < 6.0, "{after_push} looks for one message");
    group.end().await;
}

/// The periodic re-look (every 5 s, for messages no push announces) is
/// made once per group and queue, not once per waiting pop: an empty look
/// puts off the others' next one. 6 pops waiting 11 s made 12 re-looks
/// before (2 each).
#[tokio::test]
async fn waiting_pops_of_one_group_share_their_periodic_re_look() {
    let mut group = WaitingGroup::start(6, 11000).await;
    let waiting = pop_looks(&group.gw).await;
    assert_eq!(group.answers().await, vec![Vec::<i64>::new(); 6]);
    // one re-look at about 5 s and one at about 10 s
    let re_looks = pop_looks(&group.gw).await - waiting;
    assert!(re_looks < 6.0, "{re_looks} re-looks");
    group.end().await;
}

/// A push nobody waits for notifies nobody (sql/03_wakeups.sql). A push
/// that looked for waiters before a pop started waiting, and commits after
/// the pop's first look, sent no notification and was not seen: the pop
/// must still be woken when it commits, not at its periodic re-check
/// (RECHECK, 5 s). The push is held open in a transaction across the
/// pop's start to make that order certain.
#[tokio::test]
async fn a_push_committed_after_a_pops_first_look_still_wakes_it() {
    let gw = Gateway::start().await;
    // The partition and the group's subscription exist already: a first
    // pop would wait for the push creating them, and see its message.
    let queue = queue_with_one_message_consumed(&gw, "late-commit").await;
    let mut db = db().await;
    let push = push_left_open(&mut db, &queue).await;
    let waiting = start_pop(&gw, long_poll(&queue));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "the pop did not wait");
    commit_and_expect_wake(push, waiting).await;
}

/// The listener's session delivers no notification while it waits for a
/// lock. A transaction left open after a push holds up a new wait (it may
/// have missed that push), but not the wake-ups of queues already waited
/// on: the listener gives up waiting at its lock timeout and tries again.
#[tokio::test]
async fn a_push_left_open_holds_up_no_other_queues_wake_up() {
    let gw = Gateway::start().await;
    let other = fresh_queue("not-held-up");
    configure_queue(&gw, &other).await;
    let other_pop = start_pop(&gw, long_poll(&other));
    let held = queue_with_one_message_consumed(&gw, "held-open").await;
    let mut db = db().await;
    let push = push_left_open(&mut db, &held).await;
    let held_pop = start_pop(&gw, long_poll(&held));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !other_pop.is_finished() && !held_pop.is_finished(),
        "the pops did not wait"
    );

    let pushed = push_one(&gw, &other).await;
    answers_within_a_second(other_pop, pushed, vec![1], "the push").await;
    commit_and_expect_wake(push, held_pop).await;
}

/// Pushes message 2 to `queue` in a transaction left open.
async fn push_left_open<'a>(
    db: &'a mut tokio_postgres::Client,
    queue: &str,
) -> tokio_postgres::Transaction<'a> {
    let push = db.transaction().await.unwrap();
    let sql = "SELECT count(*) FROM pgcursor.push_items(ARRAY[$1::text], ARRAY['\"late\"'::jsonb])";
    push.execute(sql, &[&queue]).await.unwrap();
    push
}

/// Commits `push`; the waiting `pop` must answer its message 2 within a
/// second of the commit, not at its 5 s re-check.
async fn commit_and_expect_wake(
    push: tokio_postgres::Transaction<'_>,
    pop: tokio::task::JoinHandle<(u16, Value, Duration)>,
) {
    push.commit().await.unwrap();
    answers_within_a_second(pop, Instant::now(), vec![2], "the commit").await;
}

/// The waiting `pop` answers 200 with messages `expected` (offsets) within
/// a second of `since`, the moment of `event`.
async fn answers_within_a_second(
    pop: tokio::task::JoinHandle<(u16, Value, Duration)>,
    since: Instant,
    expected: Vec<i64>,
    event: &str,
) {
    let (status, answer, _) = pop.await.unwrap();
    assert_eq!((status, offsets(&answer)), (200, expected), "{answer}");
    let latency = since.elapsed();
    assert!(
        latency < Duration::from_secs(1),
        "woken {latency:?} after {event}"
    );
}
