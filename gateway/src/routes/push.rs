//! POST /api/v1/push (read-write): `pgcursor.push_items` validates every
//! item (a 400 naming index and field, nothing written), assigns offsets
//! and reports duplicates. The gateway caps the number of items, reads the
//! body into push_items' arrays (payloads go as the text they came as) and
//! writes the answer from its rows. A body it cannot read that way (not an
//! object, an item missing a field, a field of the wrong type) goes to
//! `pgcursor.push` as sent, whose checks name the bad field: the gateway
//! writes no error message of its own. Pushes to queues known to be
//! encrypted go that way too, so their payloads are sealed
//! (gateway/src/encryption.rs). On a Citus coordinator (Deployment::
//! Delegating), a push whose items all go to one existing partition is
//! sent whole to the partition's worker (`pgcursor_citus.push`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Level;
use crate::body::{may_be_unstorable, parse_off_the_loop_if_long};
use crate::encryption::Items;
use crate::error::ApiError;
use crate::minutes::{item_queues, record, Target};
use crate::db::Deployment;
use crate::routes::call::{again_after_deadlock, body_text, call_sealing, object_body, RawJson};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/push").post(push));
}

async fn push(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    crate::metrics::counters().push_requests.increment(1);
    let arrays = parse_off_the_loop_if_long(body.len(), {
        let body = body.clone();
        move || push_arrays(&body)
    })
    .await?;
    if let Some(request) = arrays {
        check_item_count(request.items.len(), state.config.max_push_items)?;
        let queues: BTreeSet<&str> = request.items.iter().map(|i| i.queue.as_str()).collect();
        // (a body that may hold an envelope-shaped payload goes the sealing
        // way below, which first asks which of its queues are encrypted)
        if !state.encryption.asks_before_pushing(&body)
            && state.encryption.known_of(queues.iter().copied()).is_empty()
        {
            match push_items(&state, &request.items, &body).await {
                Err(ApiError::EncryptedQueues(refused)) if state.encryption.key().is_some() => {
                    // Sealed below, up front.
                    state.encryption.learn(&refused);
                }
                answer => {
                    let (answer, stored) = answer?;
                    record_pushes(queues.into_iter().map(str::to_owned), &stored);
                    return Ok(HttpResponse::Ok()
                        .content_type("application/json")
                        .body(answer));
                }
            }
        }
    }
    let request = object_body(&body).await?;
    if let Some(Value::Array(items)) = request.get("items") {
        check_item_count(items.len(), state.config.max_push_items)?;
    }
    let text = body_text(&body)?;
    let queues = item_queues(request.get("items"));
    let answer = call_sealing(
        &state,
        "SELECT pgcursor.push($1::text::jsonb)",
        text,
        request,
        Items::Push,
    )
    .await?;
    let stored = stored_per_queue(&answer.0);
    record_pushes(queues, &stored);
    Ok(answer.respond())
}

/// Messages a push stored, per queue.
type Stored = BTreeMap<String, u64>;

/// Counts a push once per queue its items name, and the messages it stored
/// in each (the per-minute figures), and those messages for this process.
fn record_pushes(queues: impl IntoIterator<Item = String>, stored: &Stored) {
    crate::metrics::count_stored(stored.values().sum());
    for queue in queues {
        let messages = stored.get(&queue).copied().unwrap_or(0);
        record(Target::Queue(Some(queue)), |f| {
            f.push_requests += 1;
            f.push_messages += messages;
        });
    }
}

/// What a push answer written by `pgcursor.push` (passed on unread) says
/// was stored: its `queued` items, per queue. An unreadable answer counts
/// nothing.
fn stored_per_queue(answer: &str) -> Stored {
    #[derive(Deserialize)]
    struct Item<'a> {
        #[serde(borrow)]
        queue: Option<Cow<'a, str>>,
        #[serde(borrow)]
        status: Option<Cow<'a, str>>,
    }
    let mut stored = Stored::new();
    for item in serde_json::from_str::<Vec<Item>>(answer).unwrap_or_default() {
        if let (Some(queue), Some("queued")) = (item.queue.as_deref(), item.status.as_deref()) {
            count_one(&mut stored, queue);
        }
    }
    stored
}

/// One more message stored in `queue` (its name copied only the first time).
fn count_one(stored: &mut Stored, queue: &str) {
    match stored.get_mut(queue) {
        Some(n) => *n += 1,
        None => {
            stored.insert(queue.to_owned(), 1);
        }
    }
}

/// `body` as push_items takes it, or `None` for a body to send to
/// `pgcursor.push`: one it cannot read so, or one that may hold what
/// PostgreSQL cannot store (U+0000, a lone surrogate, a number past numeric,
/// nesting past MAX_DEPTH), whose parse there names it.
fn push_arrays(body: &[u8]) -> Option<PushRequest> {
    match may_be_unstorable(body) {
        true => None,
        false => serde_json::from_slice(body).ok(),
    }
}

/// A push body as push_items takes it. Anything else (a missing field, a
/// wrong type, a traceId that is not a UUID as body::plain_uuid reads one)
/// fails to read and goes to `pgcursor.push`.
/// Owned, so a long body is read off the event loop (8 MB of small items
/// took 68 ms, release, on it).
#[derive(Deserialize)]
struct PushRequest {
    items: Vec<PushItem>,
}

#[derive(Deserialize)]
struct PushItem {
    queue: String,
    #[serde(default)]
    partition: Option<String>,
    payload: Box<RawValue>,
    #[serde(default, rename = "transactionId")]
    transaction_id: Option<String>,
    #[serde(default, rename = "traceId", deserialize_with = "plain_uuid")]
    trace_id: Option<Uuid>,
}

/// A UUID as `pgcursor.push` reads one (body::plain_uuid).
fn plain_uuid<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Uuid>, D::Error> {
    let text: Option<Cow<'de, str>> = Deserialize::deserialize(d)?;
    match text {
        None => Ok(None),
        Some(t) => crate::body::plain_uuid(&t)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("not a plain UUID")),
    }
}

/// JSON text sent as a jsonb parameter without being parsed again here.
#[derive(Debug)]
struct JsonbText<'a>(&'a str);

impl ToSql for JsonbText<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut web::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        // jsonb's binary form: version 1, then the text.
        out.extend_from_slice(&[1]);
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB
    }

    to_sql_checked!();
}

const PUSH_ITEMS_SQL: &str = "SELECT index, queue, partition, partition_id, transaction_id, \
     msg_offset, message_id, status, error \
     FROM pgcursor.push_items($1::text[], $2::jsonb[], $3::text[], $4::text[], $5::uuid[])";

/// One item of the push answer, as `pgcursor.push` writes it.
#[derive(Serialize)]
struct Pushed<'a> {
    index: i32,
    queue: &'a str,
    partition: &'a str,
    #[serde(rename = "partitionId")]
    partition_id: Uuid,
    #[serde(rename = "transactionId")]
    transaction_id: &'a str,
    offset: Option<i64>,
    message_id: Option<Uuid>,
    status: &'a str,
    error: Option<&'a str>,
}

/// Calls push_items with the items' arrays (an array whose elements are
/// all absent goes as NULL) and writes the answer, and says what it stored;
/// on Citus, a push to one partition goes to its worker instead (`body` is
/// the request as sent).
async fn push_items(state: &AppState, items: &[PushItem], body: &[u8]) -> Result<(String, Stored), ApiError> {
    if let Deployment::Delegating { lock_timeout } = &state.deployment {
        if let Some(answer) = push_on_partition_worker(state, items, body, lock_timeout.as_deref()).await? {
            let stored = stored_per_queue(&answer);
            return Ok((answer, stored));
        }
    }
    fn column<'a, T>(items: &'a [PushItem], f: impl Fn(&'a PushItem) -> Option<T>) -> Option<Vec<Option<T>>> {
        let values: Vec<Option<T>> = items.iter().map(f).collect();
        values.iter().any(Option::is_some).then_some(values)
    }
    let queues: Vec<&str> = items.iter().map(|i| i.queue.as_str()).collect();
    let payloads: Vec<JsonbText> = items.iter().map(|i| JsonbText(i.payload.get())).collect();
    let partitions = column(items, |i| i.partition.as_deref());
    let transaction_ids = column(items, |i| i.transaction_id.as_deref());
    let trace_ids = column(items, |i| i.trace_id);
    let client = state.pool.get().await?;
    let statement = client.prepare_cached(PUSH_ITEMS_SQL).await?;
    let params: [&(dyn ToSql + Sync); 5] = [&queues, &payloads, &partitions, &transaction_ids, &trace_ids];
    let rows = again_after_deadlock(PUSH_ITEMS_SQL, || client.query(&statement, &params)).await?;
    drop(client);
    let mut answer = Vec::with_capacity(rows.len());
    for row in &rows {
        answer.push(Pushed {
            index: row.try_get(0)?,
            queue: row.try_get(1)?,
            partition: row.try_get(2)?,
            partition_id: row.try_get(3)?,
            transaction_id: row.try_get(4)?,
            offset: row.try_get(5)?,
            message_id: row.try_get(6)?,
            status: row.try_get(7)?,
            error: row.try_get(8)?,
        });
    }
    let mut stored = Stored::new();
    for pushed in answer.iter().filter(|p| p.status == "queued") {
        count_one(&mut stored, pushed.queue);
    }
    let text = serde_json::to_string(&answer).map_err(|e| ApiError::Internal(format!("push answer: {e}")))?;
    Ok((text, stored))
}

/// The push through `pgcursor_citus.push`, run whole on the worker holding
/// the partition, when every item goes to one partition that
/// `pgcursor_citus.push_partition` accepts; `None` otherwise (then the push
/// goes the usual way). Its long-poll wake-up was sent on that worker,
/// where no gateway listens: it is sent again here, on the coordinator.
async fn push_on_partition_worker(
    state: &AppState,
    items: &[PushItem],
    body: &[u8],
    lock_timeout: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let Some((queue, partition)) = only_partition(items) else {
        return Ok(None);
    };
    let client = state.pool.get().await?;
    let find = client
        .prepare_cached("SELECT pgcursor_citus.push_partition($1, $2)")
        .await?;
    let Some(id): Option<Uuid> = client.query_one(&find, &[&queue, &partition]).await?.get(0) else {
        return Ok(None);
    };
    let push = client
        .prepare_cached("SELECT pgcursor_citus.push($1::uuid, $2::text::jsonb, $3::text)")
        .await?;
    let answer: RawJson = client
        .query_one(&push, &[&id, &body_text(body)?, &lock_timeout])
        .await?
        .try_get(0)?;
    // The push is committed: a failed wake-up costs waiting pops their
    // re-check, and must not turn a stored push into an error (a client
    // would push it again).
    if let Err(e) = crate::db::wake(&client, "SELECT pgcursor_citus.wake_queue($1)", &queue).await {
        tracing::warn!("push to {queue}: wake-up not sent: {}", crate::db::error_detail(&e));
    }
    Ok(Some(answer.0))
}

/// The (queue, partition) every item names, when they all name the same
/// (an absent partition and "Default" count as different: such a push
/// simply goes the usual way).
fn only_partition(items: &[PushItem]) -> Option<(&str, Option<&str>)> {
    let first = items.first()?;
    items
        .iter()
        .all(|i| i.queue == first.queue && i.partition == first.partition)
        .then_some((first.queue.as_str(), first.partition.as_deref()))
}

/// One push is one transaction: cap it so no request holds a partition lock
/// for long.
fn check_item_count(items: usize, max_items: usize) -> Result<(), ApiError> {
    if items > max_items {
        return Err(ApiError::PayloadTooLarge(format!(
            "items has {items} entries; the limit is {max_items}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_answer_counts_its_queued_items_per_queue() {
        let stored = stored_per_queue(
            r#"[{"error": null, "index": 0, "queue": "a", "status": "queued", "transactionId": "\"status\": \"queued\""},
               {"error": null, "index": 1, "queue": "a", "status": "duplicate", "transactionId": "x"},
               {"error": "queue is full", "index": 2, "queue": "b", "status": "failed", "transactionId": "y"},
               {"error": null, "index": 3, "queue": "b \"q\"", "status": "queued", "transactionId": "z"},
               {"error": null, "index": 4, "queue": "a", "status": "queued", "transactionId": "w"}]"#,
        );
        assert_eq!(stored, Stored::from([("a".into(), 2), ("b \"q\"".into(), 1)]));
        assert!(stored_per_queue("not json").is_empty());
    }

    #[test]
    fn more_items_than_the_limit_is_413() {
        assert!(matches!(
            check_item_count(3, 2),
            Err(ApiError::PayloadTooLarge(m)) if m == "items has 3 entries; the limit is 2"
        ));
        assert!(check_item_count(3, 3).is_ok());
    }

    #[test]
    fn a_push_goes_to_one_partition_only_when_every_item_names_it() {
        let read = |body: &'static str| serde_json::from_str::<PushRequest>(body).unwrap();
        let one = read(r#"{"items": [{"queue": "q", "partition": "p", "payload": 1},
                                     {"queue": "q", "partition": "p", "payload": 2}]}"#);
        assert_eq!(only_partition(&one.items), Some(("q", Some("p"))));
        let default = read(r#"{"items": [{"queue": "q", "payload": 1}]}"#);
        assert_eq!(only_partition(&default.items), Some(("q", None)));
        for body in [
            r#"{"items": [{"queue": "q", "partition": "p", "payload": 1}, {"queue": "q", "partition": "r", "payload": 2}]}"#,
            r#"{"items": [{"queue": "q", "payload": 1}, {"queue": "q2", "payload": 2}]}"#,
            r#"{"items": [{"queue": "q", "payload": 1}, {"queue": "q", "partition": "Default", "payload": 2}]}"#,
            r#"{"items": []}"#,
        ] {
            assert_eq!(only_partition(&read(body).items), None, "{body}");
        }
    }

    #[test]
    fn only_bodies_push_items_can_take_are_read_as_its_arrays() {
        let read = |body: &str| serde_json::from_str::<PushRequest>(body).is_ok();
        assert!(read(
            r#"{"items": [{"queue": "q", "payload": null, "partition": null, "transactionId": "t",
                "traceId": "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"}, {"queue": "q\n", "payload": {"a": 1}}]}"#
        ));
        assert!(read(r#"{"items": [{"queue": "q", "payload": 1, "traceId": "0198f2c19a7b7d208e314c5d6e7f8a90"}]}"#));
        for body in [
            r#"[]"#,
            r#"{"items": "x"}"#,
            r#"{"items": [5]}"#,
            r#"{"items": [{"payload": 1}]}"#,
            r#"{"items": [{"queue": 1, "payload": 1}]}"#,
            r#"{"items": [{"queue": "q"}]}"#,
            r#"{"items": [{"queue": "q", "payload": 1, "partition": 2}]}"#,
            r#"{"items": [{"queue": "q", "payload": 1, "transactionId": 2}]}"#,
            r#"{"items": [{"queue": "q", "payload": 1, "traceId": "{0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90}"}]}"#,
            r#"{"items": [{"queue": "q", "payload": 1, "traceId": "nope"}]}"#,
        ] {
            assert!(!read(body), "{body} should go to pgcursor.push");
        }
    }
}
