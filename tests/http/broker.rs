//! Small HTTP helpers for the produce/consume tests: every call goes through
//! the gateway, answers come back as (status, JSON).

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use pgcursor_tests::{client, db, db_at, Gateway};
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

/// A queue name no other test uses.
pub fn fresh_queue(prefix: &str) -> String {
    format!("{prefix}-{}", Uuid::now_v7())
}

/// Sends, and reads the answer as JSON (`Null` when empty or not JSON).
pub async fn send(request: RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("the gateway answers");
    let status = response.status().as_u16();
    let body = response.bytes().await.expect("read the body");
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

pub async fn get(gw: &Gateway, path: &str) -> (u16, Value) {
    send(client().get(gw.url(path))).await
}

/// Creates `queue` with its default options, asserting the 200.
pub async fn configure_queue(gw: &Gateway, queue: &str) {
    let (status, body) = post(gw, "/api/v1/configure", &json!({ "queue": queue })).await;
    assert_eq!(status, 200, "configure {queue}: {body}");
}

pub async fn post(gw: &Gateway, path: &str, body: &Value) -> (u16, Value) {
    send(client().post(gw.url(path)).json(body)).await
}

/// A request with an optional bearer token.
pub fn request(gw: &Gateway, method: Method, path: &str, token: Option<&str>) -> RequestBuilder {
    let builder = client().request(method, gw.url(path));
    match token {
        Some(t) => builder.bearer_auth(t),
        None => builder,
    }
}

/// Pushes `n` messages `{"i": 1..n}` to (queue, partition), transactionIds
/// `<partition>-<i>`; asserts 200 and answers the push array.
pub async fn push_n(gw: &Gateway, queue: &str, partition: &str, n: usize) -> Value {
    let items: Vec<Value> = (1..=n)
        .map(|i| {
            json!({"queue": queue, "partition": partition, "payload": {"i": i},
                   "transactionId": format!("{partition}-{i}")})
        })
        .collect();
    let (status, body) = post(gw, "/api/v1/push", &json!({ "items": items })).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// `GET /api/v1/pop/queue/{queue}?{query}`; asserts 200.
pub async fn pop(gw: &Gateway, queue: &str, query: &str) -> Value {
    let (status, body) = get(gw, &format!("/api/v1/pop/queue/{queue}?{query}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The offsets of a pop answer's messages, in answer order.
pub fn offsets(answer: &Value) -> Vec<i64> {
    messages(answer)
        .iter()
        .map(|m| m["offset"].as_i64().expect("an offset"))
        .collect()
}

pub fn messages(answer: &Value) -> &Vec<Value> {
    answer["messages"].as_array().expect("a messages array")
}

/// Acks every message of a pop answer `completed` in one batch; asserts success.
pub async fn ack_all(gw: &Gateway, answer: &Value) {
    ack_all_as(gw, answer, "completed").await;
}

/// Acks every message of a pop answer with `status` in one batch; asserts
/// each item's success and answers the result array.
pub async fn ack_all_as(gw: &Gateway, answer: &Value, status: &str) -> Value {
    let acks: Vec<Value> = messages(answer)
        .iter()
        .map(|m| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                   "leaseId": m["leaseId"], "status": status})
        })
        .collect();
    let body = json!({"consumerGroup": answer["consumerGroup"], "acknowledgments": acks});
    let (code, results) = post(gw, "/api/v1/ack/batch", &body).await;
    assert_eq!(code, 200, "{results}");
    for r in results.as_array().unwrap() {
        assert_eq!(r["success"], true, "{results}");
    }
    results
}

/// A database of its own on the tests' server, for a test that changes
/// what every session of its database sees (a setting, a table lock):
/// created with `settings` (`ALTER DATABASE ... SET` clauses, e.g.
/// `TimeZone = 'UTC'`); answers its name and URL. `drop_database` removes it.
pub async fn scratch_database(settings: &[&str]) -> (String, String) {
    let name = format!("pgcursor_scratch_{}", Uuid::now_v7().simple());
    let admin = db().await;
    // One statement a call: CREATE DATABASE cannot run in a multi-statement batch.
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    for setting in settings {
        admin
            .batch_execute(&format!("ALTER DATABASE {name} SET {setting}"))
            .await
            .unwrap();
    }
    let server = pgcursor_tests::database_url();
    let url = format!("{}/{name}", server.rsplit_once('/').unwrap().0);
    (name, url)
}

/// Drops a `scratch_database`, closing its sessions.
pub async fn drop_database(name: &str) {
    db().await
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();
}

/// A session of its own on `url` that holds `table` locked ACCESS
/// EXCLUSIVE in an open transaction: whatever reads the table waits until
/// the caller runs COMMIT on it (or drops it).
pub async fn lock_table(url: &str, table: &str) -> tokio_postgres::Client {
    let locker = db_at(url).await;
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
        ))
        .await
        .unwrap();
    locker
}

/// Polls `done` every 200 ms until it holds; fails naming `what` after `within`.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !done().await {
        assert!(Instant::now() < deadline, "{what}: not after {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Until a statement `LIKE` `query` waits for a lock in the database's
/// pg_stat_activity (10 s at most): a test holding a lock lets the call
/// reach it before taking its second lock. (Each look on a new session:
/// within one transaction pg_stat_activity stays as it first read.)
pub async fn until_waiting_for_a_lock(what: &str, query: &str) {
    eventually(what, Duration::from_secs(10), || async {
        let waiting: i64 = db()
            .await
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND wait_event_type = 'Lock'",
                &[&query],
            )
            .await
            .unwrap()
            .get(0);
        waiting > 0
    })
    .await;
}

/// Sends `call` into a deadlock with the test's own transaction, which
/// runs `lock` with `first`, lets the call wait for that (until a statement
/// `LIKE` `call_query` waits for the transaction's backend; `what` names
/// the wait), then runs `lock` with `second`, which the call holds by then,
/// and commits. The call waited first, so PostgreSQL cancels it as the
/// victim. Answers the call's status and body. (Waiting for the call to
/// wait for any lock was not enough: a lock another test or a housekeeping
/// run held a moment made it look there before it held `second`, and the
/// test's own transaction was the victim.) The transaction checks for a
/// deadlock only after a minute, so the call's own check (after
/// deadlock_timeout, 1 s) finds it first however late a loaded machine
/// runs it: on a 2-core run the test's transaction was once the victim.
pub async fn sent_into_a_deadlock(
    call: RequestBuilder,
    lock: &str,
    [first, second]: [&(dyn ToSql + Sync); 2],
    what: &str,
    call_query: &str,
) -> (u16, Value) {
    let mut holder = db().await;
    let tx = holder.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL deadlock_timeout = '60s'")
        .await
        .unwrap();
    tx.execute(lock, &[first]).await.unwrap();
    let holder_pid: i32 = tx
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let sent = tokio::spawn(send(call));
    eventually(what, Duration::from_secs(10), || async {
        db().await
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                                 WHERE query LIKE $1 AND $2 = ANY (pg_blocking_pids(pid)))",
                &[&call_query, &holder_pid],
            )
            .await
            .unwrap()
            .get(0)
    })
    .await;
    tx.execute(lock, &[second]).await.unwrap();
    tx.commit().await.unwrap();
    sent.await.unwrap()
}

/// The keys of a JSON object.
pub fn keys(value: &Value) -> BTreeSet<&str> {
    value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

/// How many messages a queue stores (straight from the database).
pub async fn stored_messages(queue: &str) -> i64 {
    stored_messages_at(&db().await, queue).await
}

/// 200 messages of `text` (and their index `i`) pushed to `queue`, 50 a
/// push: an answer of all of them is about 16 MB when `text` is 40 kB.
pub async fn push_200_of(gw: &Gateway, queue: &str, text: &str) {
    for _ in 0..4 {
        let items: Vec<Value> = (0..50)
            .map(|i| json!({"queue": queue, "payload": {"i": i, "text": text}}))
            .collect();
        let (status, answer) = post(gw, "/api/v1/push", &json!({ "items": items })).await;
        assert_eq!(status, 200, "{answer}");
    }
}

/// `stored_messages`, in the database `client` is connected to.
pub async fn stored_messages_at(client: &tokio_postgres::Client, queue: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pgcursor.messages m
               JOIN pgcursor.partitions p ON p.id = m.partition_id WHERE p.queue = $1",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0)
}

/// The first column of every row `sql` answers on `client`, in order.
pub async fn column_of<T: tokio_postgres::types::FromSqlOwned>(
    client: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Vec<T> {
    client
        .query(sql, params)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// One column of every stored message of `queue` (`column` is an
/// expression over `messages m` and `partitions p`), in partition then
/// offset order, straight from the database.
pub async fn stored_column<T: tokio_postgres::types::FromSqlOwned>(
    queue: &str,
    column: &str,
) -> Vec<T> {
    let sql = format!(
        "SELECT {column} FROM pgcursor.messages m
           JOIN pgcursor.partitions p ON p.id = m.partition_id
          WHERE p.queue = $1 ORDER BY p.name, m.msg_offset"
    );
    column_of(&db().await, &sql, &[&queue]).await
}

/// `column` (a timestamptz) moved back by the seconds in parameter `param`.
/// Through UTC because Citus refuses a STABLE function of a column in an
/// UPDATE of a distributed table, and timestamptz - interval is STABLE;
/// the conversions and timestamp - interval are IMMUTABLE.
pub fn seconds_before(column: &str, param: &str) -> String {
    format!(
        "(({column} AT TIME ZONE 'UTC') - {param}::int * interval '1 second') AT TIME ZONE 'UTC'"
    )
}

/// Ages every message of `queue` by `seconds`, moving created_at back.
pub async fn age_messages(queue: &str, seconds: i32) {
    db().await
        .execute(
            &format!(
                "UPDATE pgcursor.messages m SET created_at = {}
                   FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = $1",
                seconds_before("m.created_at", "$2")
            ),
            &[&queue, &seconds],
        )
        .await
        .expect("age the messages");
}

/// The head of a POST whose body is `length` bytes, with `token` if any.
pub fn post_head(path: &str, length: usize, token: Option<&str>) -> Vec<u8> {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}Content-Length: {length}\r\n\r\n"
    )
    .into_bytes()
}

/// What arrives on `stream` within `wait`, if anything.
pub async fn answer_within(stream: &mut tokio::net::TcpStream, wait: Duration) -> Option<String> {
    let mut buffer = vec![0u8; 4096];
    match tokio::time::timeout(wait, tokio::io::AsyncReadExt::read(stream, &mut buffer)).await {
        Ok(Ok(n)) if n > 0 => Some(String::from_utf8_lossy(&buffer[..n]).into_owned()),
        _ => None,
    }
}
