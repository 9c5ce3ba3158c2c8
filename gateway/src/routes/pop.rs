//! GET /api/v1/pop/queue/{queue}, /api/v1/pop/queue/{queue}/partition/{partition}
//! and /api/v1/pop?namespace=&task= (read-write) through `pgcursor.pop_messages`,
//! which validates its arguments and does all the leasing; the answer, the
//! one `pgcursor.pop` gives, is written here (pop_answer.rs).
//!
//! The gateway owns only the long-poll (`wait=true`): look, and when nothing
//! is there wait for a push notification (notify.rs) without holding a
//! pooled connection, then look again, until `timeout`. Every look first
//! checks that the client is still connected (peer.rs): a pop whose client
//! hung up leases nothing and answers 499 to nobody.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};
use tokio::time::Instant;
use tracing::{debug, warn};

use deadpool_postgres::Client;

use crate::answers::AnswerRoom;
use crate::app::AppState;
use crate::auth::Level;
use crate::body::{no_nul, path_without_nul};
use crate::error::ApiError;
use crate::minutes::{record, Target};
use crate::routes::call::{again_after_deadlock, cap, digits_only, limit_bytes, RawJson};
use crate::routes::pop_answer::{micros_since_1970, Delivered, PopBatch, POP_MESSAGES_SQL};
use crate::turns::{Empty, Kind};

/// The longest a pop may wait; a larger `timeout` is capped to it (the queen
/// client's HTTP timeout is its pop timeout + 5 s, so capping is safe).
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// The default `timeout`, as in Queen MQ.
const DEFAULT_WAIT: Duration = Duration::from_millis(30_000);
/// A waiting pop looks again at the latest this long after an empty look:
/// messages become claimable without a push when a lease expires or a delay
/// passes (POP_DUE_SQL says when, where it can), and when pops are let
/// through again after maintenance.
pub const RECHECK: Duration = Duration::from_secs(5);

/// How long a waiting pop waits for a look past its deadline: a look
/// takes milliseconds, so one begun at (or near) the deadline, as with
/// `timeout=0`, still answers what it found; one that waits on a lock or a
/// stalled server is answered without, this long after the deadline at
/// most.
const LOOK_GRACE: Duration = Duration::from_secs(1);
/// When a waiting pop that claimed nothing could claim without a push.
const POP_DUE_SQL: &str = "SELECT pgcursor_internal.pop_due_in($1::jsonb)";
/// Query parameters handed to `pgcursor.pop` as they are (it checks them).
const SQL_PARAMETERS: [&str; 9] = [
    "batch",
    "maxBytes",
    "partitions",
    "consumerGroup",
    "autoAck",
    "subscriptionMode",
    "subscriptionFrom",
    "namespace",
    "task",
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/pop/queue/{queue}").get(pop_queue))
        .service(web::resource("/api/v1/pop/queue/{queue}/partition/{partition}").get(pop_partition))
        .service(web::resource("/api/v1/pop").get(pop_selected));
}

async fn pop_queue(
    req: HttpRequest,
    state: web::Data<AppState>,
    queue: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    path_without_nul(&req)?;
    let mut selection = Map::new();
    selection.insert("queue".into(), Value::String(queue.into_inner()));
    respond(&state, &req, selection).await
}

async fn pop_partition(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    path_without_nul(&req)?;
    let (queue, partition) = path.into_inner();
    let mut selection = Map::new();
    selection.insert("queue".into(), Value::String(queue));
    selection.insert("partition".into(), Value::String(partition));
    respond(&state, &req, selection).await
}

/// Every queue matching `namespace` and/or `task` (from the query).
async fn pop_selected(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    respond(&state, &req, Map::new()).await
}

async fn respond(
    state: &AppState,
    req: &HttpRequest,
    selection: Map<String, Value>,
) -> Result<HttpResponse, ApiError> {
    let limits = PopLimits {
        batch: state.config.max_pop_batch,
        bytes: state.config.max_answer_bytes,
    };
    let pop = PopRequest::parse(req.query_string(), selection, limits)?;
    let counters = crate::metrics::counters();
    counters.pop_requests.increment(1);
    let look = pop_or_wait(state, req, &pop).await?;
    counters.pop_messages.increment(look.messages);
    // A paused pop looked at no queue (its path's may not exist): counted
    // for the broker only, so it makes no queue's figures or series.
    record_minute(pop.queue().filter(|_| !look.paused), &look.delivered);
    let mut room = look.room;
    // Envelopes of encrypted queues are opened here; other answers go out as written.
    let answer = state.encryption.open_answer(look.answer).await?;
    room.fit(answer.0.len());
    Ok(room.hold(answer.respond()))
}

/// The most one pop answers (PGCURSOR_MAX_POP_BATCH, PGCURSOR_MAX_ANSWER_BYTES):
/// the gateway holds an answer in memory.
#[derive(Debug, Clone, Copy)]
pub struct PopLimits {
    /// Messages (`batch`).
    pub batch: usize,
    /// Payload bytes (`maxBytes`).
    pub bytes: usize,
}

/// A validated pop: the `pgcursor.pop` argument and how long to wait.
#[derive(Debug, Clone, PartialEq)]
pub struct PopRequest {
    pub arguments: Value,
    /// `None`: look once (`wait=false`).
    pub wait: Option<Duration>,
}

impl PopRequest {
    /// Empty query values count as absent (`?namespace=&task=x`). A valid
    /// `batch` or `maxBytes` over its limit is capped to it, and an absent
    /// `maxBytes` is the limit: an answer may always hold fewer messages
    /// than asked, and the gateway holds it in memory (a pop of 100,000
    /// messages of 1 kB took 670 MB, one of 2,000 of 100 kB 870 MB).
    /// Invalid ones are left for `pgcursor.pop` to refuse.
    pub fn parse(
        query: &str,
        selection: Map<String, Value>,
        limits: PopLimits,
    ) -> Result<PopRequest, ApiError> {
        let query = web::Query::<HashMap<String, String>>::from_query(query)
            .map_err(|e| ApiError::BadRequest(format!("invalid query string: {e}")))?
            .into_inner();
        let given = |key: &str| query.get(key).map(String::as_str).filter(|v| !v.is_empty());
        if flag(given("conflation"), "conflation")? {
            return Err(ApiError::BadRequest("conflation is not supported".into()));
        }
        let mut arguments = selection;
        for key in SQL_PARAMETERS {
            if let Some(value) = given(key) {
                no_nul(key, value)?;
                arguments
                    .entry(key)
                    .or_insert_with(|| Value::String(value.into()));
            }
        }
        cap(&mut arguments, "batch", limits.batch);
        limit_bytes(&mut arguments, limits.bytes);
        let timeout = wait_timeout(given("timeout"))?;
        Ok(PopRequest {
            arguments: Value::Object(arguments),
            wait: flag(given("wait"), "wait")?.then_some(timeout),
        })
    }

    /// The payload bytes the answer may carry (`maxBytes`, which `parse`
    /// always sets); `None` when it is not a number (pgcursor.pop refuses it).
    fn max_bytes(&self) -> Option<usize> {
        self.arguments.get("maxBytes").and_then(Value::as_str).and_then(digits_only)
    }

    /// The arguments of a look with `room`: `maxBytes` lowered to what
    /// fits in it.
    fn arguments_within(&self, room: &AnswerRoom) -> Cow<'_, Value> {
        match self.max_bytes() {
            Some(asked) if asked > room.max_bytes() => {
                let mut arguments = self.arguments.clone();
                if let Some(fields) = arguments.as_object_mut() {
                    cap(fields, "maxBytes", room.max_bytes().max(1));
                }
                Cow::Owned(arguments)
            }
            _ => Cow::Borrowed(&self.arguments),
        }
    }

    /// The queue a push must name to be worth a new look (`None`: any).
    fn queue(&self) -> Option<&str> {
        self.arguments.get("queue").and_then(Value::as_str)
    }
}

/// `true` / `false`; absent is false.
fn flag(value: Option<&str>, name: &str) -> Result<bool, ApiError> {
    match value {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ApiError::BadRequest(format!(
            "{name} must be true or false"
        ))),
    }
}

/// `timeout` in milliseconds, default 30000, capped at MAX_WAIT.
fn wait_timeout(value: Option<&str>) -> Result<Duration, ApiError> {
    let Some(value) = value else {
        return Ok(DEFAULT_WAIT);
    };
    let ms: u64 = value.parse().map_err(|_| {
        ApiError::BadRequest("timeout must be a non-negative integer (milliseconds)".into())
    })?;
    Ok(Duration::from_millis(ms).min(MAX_WAIT))
}

/// One pop's answer, and what the metrics and the per-minute figures need.
struct Look {
    answer: RawJson,
    /// Its room in PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT (answers.rs).
    room: AnswerRoom,
    /// Claimed something, or paused: no reason to wait.
    settled: bool,
    /// Answered `paused` (pop maintenance), before any queue lookup.
    paused: bool,
    /// Messages in the answer.
    messages: u64,
    delivered: Vec<Delivered>,
    /// A waiting pop that claimed nothing: when time alone frees messages
    /// it could claim (a lease expiring, a delay passing), if it knows.
    due: Option<Instant>,
    /// What it leased, to give back if nobody takes the answer.
    leased: Option<Leased>,
}

impl Look {
    /// The answer of a waiting pop whose look did not end in time.
    fn nothing(room: AnswerRoom) -> Look {
        Look {
            answer: RawJson(crate::routes::pop_answer::NOTHING.into()),
            room,
            settled: false,
            paused: false,
            messages: 0,
            delivered: Vec::new(),
            due: None,
            leased: None,
        }
    }
}

/// The lease a look took: its id, group and partitions.
struct Leased {
    lease: uuid::Uuid,
    group: String,
    partitions: Vec<uuid::Uuid>,
}

/// Room for the answer of one look of `pop`, taken before its connection.
async fn room_for(state: &AppState, pop: &PopRequest) -> Result<AnswerRoom, ApiError> {
    let bytes = pop.max_bytes().unwrap_or(state.config.max_answer_bytes);
    state.answers.take(bytes, state.config.db_timeout()).await
}

/// A look with room for its answer, then a connection, each waited for as
/// long as its timeout allows (a 503 past it). A waiting pop's look is
/// waited for until its `deadline` at most: then it answers nothing, as a
/// long-poll that found nothing (its statement may wait on a lock, or on a
/// stalled server, for longer than the client's `timeout`).
async fn look_now(
    state: &AppState,
    req: &HttpRequest,
    pop: &PopRequest,
    deadline: Option<Instant>,
) -> Result<Look, ApiError> {
    let room = room_for(state, pop).await?;
    let client = state.pool.get().await?;
    match look_to_the_end(client, req, pop, room, deadline).await? {
        Some(look) => Ok(look),
        None => Ok(Look::nothing(state.answers.take(0, state.config.db_timeout()).await?)),
    }
}

/// `look`, run to its end even when the request is dropped meanwhile:
/// actix drops the handler of a client that resets its connection (RST) at
/// once, and a pop cut off after its statement was sent still leases, in
/// the database, messages nobody will receive (they waited out the lease).
/// Run apart, the look finds its answer untaken and gives the lease back.
/// (A client that closes its end (FIN) is found by `look` itself.) So does
/// a look still running at `deadline`, when the pop answers without it
/// (`None`).
async fn look_to_the_end(
    client: Client,
    req: &HttpRequest,
    pop: &PopRequest,
    room: AnswerRoom,
    deadline: Option<Instant>,
) -> Result<Option<Look>, ApiError> {
    let (answer, taken) = tokio::sync::oneshot::channel();
    let (req, pop) = (req.clone(), pop.clone());
    actix_web::rt::spawn(async move {
        let outcome = look(&client, &req, &pop, room).await;
        if let Err(Ok(Look { leased: Some(leased), .. })) = answer.send(outcome) {
            give_back(&client, &leased, "was answered or gone before its look ended").await;
        }
    });
    let ended = |_| ApiError::Internal("a pop's look ended without an answer".into());
    match deadline {
        None => taken.await.map_err(ended)?.map(Some),
        Some(deadline) => match tokio::time::timeout_at(deadline.max(Instant::now() + LOOK_GRACE), taken).await {
            Ok(outcome) => outcome.map_err(ended)?.map(Some),
            Err(_) => {
                debug!("a waiting pop's look outlived its timeout: answered without it");
                Ok(None)
            }
        },
    }
}

async fn look(client: &Client, req: &HttpRequest, pop: &PopRequest, mut room: AnswerRoom) -> Result<Look, ApiError> {
    let statement = client.prepare_cached(POP_MESSAGES_SQL).await?;
    if crate::peer::has_hung_up(req) {
        debug!("a pop's client hung up before its look: nothing leased");
        return Err(ApiError::ClientClosed);
    }
    // (A group's first pop writes its subscription: on Citus such writers
    // of the reference tables can be cancelled as a distributed deadlock.)
    let arguments = pop.arguments_within(&room);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&*arguments];
    crate::metrics::counters().pop_looks.increment(1);
    let rows = again_after_deadlock(POP_MESSAGES_SQL, || client.query(&statement, &params)).await?;
    let batch = PopBatch::from_rows(&rows)?;
    let leased = match batch.lease() {
        Some((lease, group)) => Some(Leased {
            lease,
            group: group.to_string(),
            partitions: PopBatch::claimed_partitions(&rows)?,
        }),
        None => None,
    };
    if let Some(leased) = leased.as_ref().filter(|_| crate::peer::has_hung_up(req)) {
        give_back(client, leased, "hung up").await;
        return Err(ApiError::ClientClosed);
    }
    let settled = batch.paused || batch.partitions_claimed > 0;
    let due = match pop.wait {
        Some(_) if !settled => due(client, &params).await,
        _ => None,
    };
    let answer = batch.to_json();
    room.fit(answer.0.len());
    Ok(Look {
        room,
        settled,
        paused: batch.paused,
        messages: batch.message_count() as u64,
        delivered: batch.delivered(now_us()),
        answer,
        due,
        leased,
    })
}

/// When a pop that claimed nothing could claim without a push
/// (`pgcursor_internal.pop_due_in`), if ever. Best effort: without an
/// answer the pop looks again at its periodic re-look, as it always did.
async fn due(client: &Client, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> Option<Instant> {
    let seconds: Option<f64> = match client.query_one(POP_DUE_SQL, params).await {
        Ok(row) => row.get(0),
        Err(e) => {
            debug!("a waiting pop could not learn when messages are due: {}", crate::db::error_detail(&e));
            None
        }
    };
    let wait = Duration::try_from_secs_f64(seconds?).ok()?;
    Some(Instant::now() + wait.min(MAX_WAIT))
}

/// The client went (`how`) while its pop ran: the partitions it leased are
/// given back, as if never claimed, so the messages go to the next pop and
/// do not wait out a lease nobody holds. Best effort: on an error they do
/// wait it out, as before.
async fn give_back(client: &Client, leased: &Leased, how: &str) {
    let Leased { lease, group, partitions } = leased;
    let sql = "SELECT pgcursor_internal.give_back_lease($1, $2, $3)";
    match client.query_one(sql, &[lease, group, partitions]).await {
        Ok(_) => debug!("a pop's client {how} while it ran: its lease {lease} is given back"),
        Err(e) => warn!(
            "a pop's client {how} while it ran, and its lease {lease} could not be given back: {}",
            crate::db::error_detail(&e)
        ),
    }
}

fn now_us() -> i64 {
    micros_since_1970(std::time::SystemTime::now())
}

/// Counts the request into the per-minute figures: for the queue of its
/// path, else each queue it delivered from, else no queue; with the
/// messages delivered and their age, or as an empty pop.
fn record_minute(path_queue: Option<&str>, delivered: &[Delivered]) {
    let as_u64 = |n: i64| u64::try_from(n).unwrap_or(0);
    if delivered.is_empty() {
        record(Target::Queue(path_queue.map(str::to_string)), |f| {
            f.pop_requests += 1;
            f.pop_empty += 1;
        });
    } else if let Some(queue) = path_queue {
        record(Target::Queue(Some(queue.to_string())), |f| f.pop_requests += 1);
    }
    for (queue, n, sum, max) in delivered {
        record(Target::Queue(Some(queue.clone())), |f| {
            f.pop_requests += u64::from(path_queue.is_none());
            f.pop_messages += as_u64(*n);
            f.age_sum_ms += as_u64(*sum);
            f.age_max_ms = f.age_max_ms.max(as_u64(*max));
        });
    }
}

/// Looks once; with `wait`, looks again on every relevant push, and when
/// the kind's last empty look said messages would be due without one (at
/// the latest RECHECK after it), until something is claimed, the deadline
/// passes or the server stops, holding no pooled connection in between.
/// Waiting pops of one kind look in turn, and skip a look another one's
/// empty look answers (turns.rs).
async fn pop_or_wait(
    state: &AppState,
    req: &HttpRequest,
    pop: &PopRequest,
) -> Result<Look, ApiError> {
    let Some(wait) = pop.wait else {
        return look_now(state, req, pop, None).await;
    };
    let deadline = Instant::now() + wait; // from arrival
    let mut waiter = state.wakeups.subscribe(pop.queue()); // before the look: no lost wake-up
    let kind = state.turns.kind_of(&pop.arguments);
    let began = Instant::now();
    let mut answer = look_now(state, req, pop, Some(deadline)).await?;
    let mut next = note(&kind, &answer, began);
    let _parked = (!answer.settled).then(|| Parked::since_now(pop.queue()));
    while !answer.settled && Instant::now() < deadline && !waiter.is_stopping() {
        let pushed = waiter.wait_for(deadline.min(next)).await;
        let woken = Instant::now();
        if waiter.is_stopping() {
            break; // the server is shutting down: answer what we have
        }
        let Ok(_turn) = tokio::time::timeout_at(deadline, kind.turn()).await else {
            break;
        };
        match kind.last_empty() {
            // a look begun since the push found nothing: nor would this one
            Some(empty) if pushed && empty.began > woken => {
                next = empty.next;
                continue;
            }
            // not due yet, says the kind's last empty look, whoever made it
            Some(empty) if !pushed && empty.next > Instant::now() => {
                next = empty.next;
                continue;
            }
            _ => {}
        }
        let began = Instant::now();
        match look_again(state, req, pop, deadline).await? {
            Some(again) => {
                next = note(&kind, &again, began);
                answer = again;
            }
            None if Instant::now() >= deadline => break,
            None => next = Instant::now() + RECHECK, // database unreachable right now: keep waiting
        }
    }
    Ok(answer)
}

/// A long-poll waiting after its first look found nothing: when it ends
/// (answered, timed out or dropped with its client), the time it waited is
/// added to its queue's parked time (minutes::record_parked).
struct Parked {
    queue: Option<String>,
    since: std::time::SystemTime,
}

impl Parked {
    fn since_now(queue: Option<&str>) -> Parked {
        Parked {
            queue: queue.map(str::to_string),
            since: std::time::SystemTime::now(),
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        crate::minutes::record_parked(Target::Queue(self.queue.take()), self.since);
    }
}

/// When to look again without a push after a look that began at `began`:
/// when it said messages are due, at the latest RECHECK after it. Tells the
/// pop's kind when that look claimed nothing.
fn note(kind: &Kind, look: &Look, began: Instant) -> Instant {
    let periodic = began + RECHECK;
    let next = look.due.map_or(periodic, |due| due.min(periodic));
    if !look.settled {
        kind.found_nothing(Empty { began, next });
    }
    next
}

/// One more look, unless no connection can be had before the deadline.
/// The waits for a connection and for the look's answer may be cut short;
/// the look itself never is (a pop cancelled mid-flight could lease
/// messages nobody receives): run apart, it gives back what it leased.
async fn look_again(
    state: &AppState,
    req: &HttpRequest,
    pop: &PopRequest,
    deadline: Instant,
) -> Result<Option<Look>, ApiError> {
    if Instant::now() >= deadline {
        return Ok(None);
    }
    let room = match tokio::time::timeout_at(deadline, room_for(state, pop)).await {
        Ok(Ok(room)) => room,
        Ok(Err(e)) => {
            debug!("long-poll re-check found no room for its answer: {e}");
            return Ok(None);
        }
        Err(_) => return Ok(None),
    };
    let client = match tokio::time::timeout_at(deadline, state.pool.get()).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => {
            debug!("long-poll re-check found no connection: {e}");
            return Ok(None);
        }
        Err(_) => return Ok(None),
    };
    match look_to_the_end(client, req, pop, room, Some(deadline)).await {
        Ok(answer) => Ok(answer),
        Err(ApiError::Unavailable(why)) => {
            debug!("long-poll re-check failed: {why}");
            Ok(None)
        }
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(query: &str) -> Result<PopRequest, ApiError> {
        let mut selection = Map::new();
        selection.insert("queue".into(), json!("orders"));
        let limits = PopLimits {
            batch: 10_000,
            bytes: 1 << 20,
        };
        PopRequest::parse(query, selection, limits)
    }

    /// The `key` argument `pgcursor.pop` gets for `query`.
    fn argument(query: &str, key: &str) -> Value {
        parse(query).unwrap().arguments[key].clone()
    }

    fn bad(query: &str) -> String {
        match parse(query) {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("{query}: expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn defaults_look_once() {
        let pop = parse("").unwrap();
        assert_eq!(pop.arguments, json!({"queue": "orders", "maxBytes": "1048576"}));
        assert_eq!(pop.wait, None);
    }

    #[test]
    fn queen_client_query_is_passed_through() {
        let pop = parse(
            "autopilot=true&wait=true&timeout=2500&consumerGroup=billing&partitions=3\
             &subscriptionMode=new&subscriptionFrom=2025-01-01T00%3A00%3A00Z&autoAck=true\
             &namespace=&task=ship&conflation=false&unknown=1",
        )
        .unwrap();
        assert_eq!(
            pop.arguments,
            json!({"queue": "orders", "consumerGroup": "billing", "partitions": "3",
                   "subscriptionMode": "new", "subscriptionFrom": "2025-01-01T00:00:00Z",
                   "autoAck": "true", "task": "ship", "maxBytes": "1048576"})
        );
        assert_eq!(pop.wait, Some(Duration::from_millis(2500)));
    }

    #[test]
    fn the_path_wins_over_the_query() {
        let pop = parse("queue=other&batch=7").unwrap();
        assert_eq!(
            pop.arguments,
            json!({"queue": "orders", "batch": "7", "maxBytes": "1048576"})
        );
    }

    #[test]
    fn batch_is_capped_and_invalid_ones_are_left_for_sql() {
        let batch = |query: &str| argument(query, "batch");
        assert_eq!(batch("batch=10000"), json!("10000"));
        assert_eq!(batch("batch=10001"), json!("10000"));
        assert_eq!(batch("batch=%2010001%20"), json!("10000"));
        assert_eq!(batch("batch=2147483647"), json!("10000"));
        // pgcursor.pop's own 400s: not a positive int4.
        for left in ["2147483648", "0", "-5", "+20000", "\u{a0}20000", "abc", "1e6", "12.5"] {
            let query = format!("batch={}", left.replace('+', "%2B").replace('\u{a0}', "%C2%A0"));
            assert_eq!(batch(&query), json!(left));
        }
    }

    #[test]
    fn max_bytes_is_the_limit_unless_a_valid_smaller_one_is_asked() {
        let bytes = |query: &str| argument(query, "maxBytes");
        assert_eq!(bytes(""), json!("1048576"));
        assert_eq!(bytes("maxBytes="), json!("1048576"));
        assert_eq!(bytes("maxBytes=5000"), json!("5000"));
        assert_eq!(bytes("maxBytes=1048577"), json!("1048576"));
        assert_eq!(bytes("maxBytes=2147483647"), json!("1048576"));
        for left in ["2147483648", "0", "-5", "abc"] {
            assert_eq!(bytes(&format!("maxBytes={left}")), json!(left));
        }
    }

    #[test]
    fn wait_defaults_to_30_s_and_is_capped() {
        // (wire.md's numbers, not the constants: they are what is checked)
        assert_eq!(
            parse("wait=true").unwrap().wait,
            Some(Duration::from_millis(30_000))
        );
        assert_eq!(
            parse("wait=true&timeout=600000").unwrap().wait,
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse("wait=true&timeout=0").unwrap().wait,
            Some(Duration::ZERO)
        );
        assert_eq!(parse("wait=false&timeout=10").unwrap().wait, None);
    }

    #[test]
    fn gateway_parameters_are_checked_here() {
        assert_eq!(bad("conflation=true"), "conflation is not supported");
        assert_eq!(bad("conflation=yes"), "conflation must be true or false");
        assert_eq!(bad("wait=1"), "wait must be true or false");
        assert_eq!(
            bad("timeout=-1"),
            "timeout must be a non-negative integer (milliseconds)"
        );
        assert_eq!(
            bad("timeout=1.5"),
            "timeout must be a non-negative integer (milliseconds)"
        );
    }
}
