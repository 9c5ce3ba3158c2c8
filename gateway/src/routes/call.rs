//! What every thin route does: read a JSON object body, call one `pgcursor`
//! SQL function on a pooled connection, answer its jsonb as it is.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use deadpool_postgres::Pool;
use serde_json::Value;
use tokio_postgres::types::{FromSql, ToSql, Type};

use crate::app::AppState;
use crate::auth::Level;
use crate::body::{no_nul, path_without_nul, read_json};
use crate::encryption::Items;
use crate::error::ApiError;
use crate::routes::messages::message_address;

/// A request body that must be a JSON object (the SQL functions read fields).
pub async fn object_body(bytes: &web::Bytes) -> Result<Value, ApiError> {
    let value = read_json(bytes).await?;
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "request body must be a JSON object".into(),
        ));
    }
    Ok(value)
}

/// The fields of a JSON object, as a listing function's filter is built.
pub type Fields = serde_json::Map<String, Value>;

/// The query parameters a listing function reads, as the fields of a JSON
/// object of strings (the SQL checks each value and names the bad one); an
/// empty value counts as absent and others are ignored. PostgreSQL cannot
/// hold U+0000, so a value with one is a 400.
pub fn query_fields(query: &BTreeMap<String, String>, names: &[&str]) -> Result<Fields, ApiError> {
    let mut fields = serde_json::Map::new();
    for &name in names {
        let Some(value) = query.get(name).filter(|v| !v.is_empty()) else {
            continue;
        };
        no_nul(name, value)?;
        fields.insert(name.to_string(), Value::String(value.clone()));
    }
    Ok(fields)
}

/// Caps the argument `key` at `max` when it is a number the SQL functions
/// accept (a positive int4) and more than that; anything else is left for
/// them to check.
pub fn cap(arguments: &mut Fields, key: &str, max: usize) {
    let asked = arguments
        .get(key)
        .and_then(Value::as_str)
        .and_then(digits_only);
    if asked.is_some_and(|n| n > max && n <= i32::MAX as usize) {
        arguments.insert(key.into(), Value::String(max.to_string()));
    }
}

/// `maxBytes`, the most payload bytes an answer carries (a pop's messages,
/// a page of dead letters): PGCURSOR_MAX_ANSWER_BYTES when absent, and at
/// most that. The gateway holds an answer in memory.
pub fn limit_bytes(arguments: &mut Fields, max: usize) {
    cap(arguments, "maxBytes", max);
    arguments
        .entry("maxBytes")
        .or_insert_with(|| Value::String(max.to_string()));
}

/// An integer query parameter (`int4`, as the SQL takes it); absent or
/// empty is `default`. One that is no integer, or one past `int4`, is a 400
/// naming it, the latter with the bound (`limit must be at most
/// 2147483647`), as the SQL functions word it.
pub fn int_query(
    query: &BTreeMap<String, String>,
    name: &str,
    default: i32,
) -> Result<i32, ApiError> {
    let Some(raw) = query.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) else {
        return Ok(default);
    };
    raw.parse().map_err(|_| {
        let digits = raw.strip_prefix('-').unwrap_or(raw);
        let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        ApiError::BadRequest(match integer {
            true if raw.starts_with('-') => format!("{name} must be at least {}", i32::MIN),
            true => format!("{name} must be at most {}", i32::MAX),
            false => format!("{name} must be an integer"),
        })
    })
}

/// A number as the SQL functions read a digit string: ASCII digits, maybe
/// between ASCII spaces (no sign).
pub fn digits_only(value: &str) -> Option<usize> {
    let digits = value.trim_matches(|c: char| c.is_ascii_whitespace());
    let all_digits = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    all_digits.then(|| digits.parse().ok()).flatten()
}

/// Runs `sql`, one listing function taking `$1::jsonb`, with its filter
/// (`query_fields`).
pub async fn call_listing(pool: &Pool, sql: &str, filter: Fields) -> Result<RawJson, ApiError> {
    call_json(pool, sql, &[&Value::Object(filter)]).await
}

/// A read-only route that is one listing function: `sql` with the query
/// parameters `names`, its answer as it is.
pub async fn read_only_listing(
    req: &HttpRequest,
    state: &AppState,
    query: &BTreeMap<String, String>,
    names: &[&str],
    sql: &str,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(req, Level::ReadOnly)?;
    let answer = call_listing(&state.pool, sql, query_fields(query, names)?).await?;
    Ok(answer.respond())
}

/// A route on one named thing (`{queue}`, `{group}`): `sql` taking its
/// name as `$1`, called by a client of `level`, with no U+0000 in the path.
pub async fn call_on_name(
    req: &HttpRequest,
    state: &AppState,
    level: Level,
    sql: &str,
    name: &str,
) -> Result<RawJson, ApiError> {
    state.auth.require(req, level)?;
    path_without_nul(req)?;
    call_json(&state.pool, sql, &[&name]).await
}

/// A route on one message (`{partitionId}/{transactionId}`): `sql` taking
/// the two as `$1` and `$2`, called by a client of `level`.
pub async fn call_on_message(
    req: &HttpRequest,
    state: &AppState,
    level: Level,
    sql: &str,
    path: (String, String),
) -> Result<RawJson, ApiError> {
    state.auth.require(req, level)?;
    let (partition_id, transaction_id) = message_address(path)?;
    call_json(&state.pool, sql, &[&partition_id, &transaction_id]).await
}

/// A dead letter goes back onto its partition as stored: when its queue
/// switched encryption on since, the SQL refuses the plaintext payload, and
/// `action` (requeue, retry) says why it cannot be done.
pub fn plaintext_refused(error: ApiError, action: &str) -> ApiError {
    match error {
        ApiError::EncryptedQueues(queues) => ApiError::Unavailable(format!(
            "cannot {action}: the dead letter's payload is plaintext and {queues:?} now has encryptionEnabled"
        )),
        other => other,
    }
}

/// A body that may be absent: empty (or only whitespace) reads as `{}`, as
/// the queen client sends no body when it has no options.
pub async fn optional_object_body(bytes: &web::Bytes) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        Ok(Value::Object(serde_json::Map::new()))
    } else {
        object_body(bytes).await
    }
}

/// The body as the text it came as, for PostgreSQL to parse: large bodies
/// go to the database as sent, not re-serialised from a tree the gateway
/// would also keep across the call (with 1,000-item pushes that tree was
/// most of the gateway's memory). Numbers reach PostgreSQL exactly. Call it
/// after `object_body` accepted the body (so it is JSON, and UTF-8).
pub fn body_text(bytes: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(bytes)
        .map_err(|e| ApiError::BadRequest(format!("request body is not valid UTF-8: {e}")))
}

/// A json/jsonb value kept as the text PostgreSQL sent. Answers are passed
/// on byte for byte: parsing a pop of 100 messages into a tree only to print
/// it again was most of the gateway's work (allocation alone, a third).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawJson(pub String);

impl RawJson {
    pub fn is_null(&self) -> bool {
        self.0 == "null"
    }

    /// 200 with this JSON as the body.
    pub fn respond(self) -> HttpResponse {
        HttpResponse::Ok()
            .content_type("application/json")
            .body(self.0)
    }
}

impl<'a> FromSql<'a> for RawJson {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<RawJson, Box<dyn std::error::Error + Sync + Send>> {
        RawJsonRef::from_sql(ty, raw).map(|json| RawJson(json.0.to_owned()))
    }

    fn accepts(ty: &Type) -> bool {
        RawJsonRef::accepts(ty)
    }
}

/// A json/jsonb value as text borrowed from the row it came in: for
/// answers written from many values (a pop's payloads), without a copy each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawJsonRef<'a>(pub &'a str);

impl<'a> FromSql<'a> for RawJsonRef<'a> {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<RawJsonRef<'a>, Box<dyn std::error::Error + Sync + Send>> {
        // jsonb's binary form is a version byte (1) and then the text.
        let text = match *ty {
            Type::JSONB => match raw.split_first() {
                Some((1, text)) => text,
                _ => return Err("unsupported jsonb binary version".into()),
            },
            _ => raw,
        };
        Ok(RawJsonRef(std::str::from_utf8(text)?))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSON | Type::JSONB)
    }
}

/// How many more times a call is made after the database cancelled it to
/// break a deadlock. PostgreSQL's own schema takes its locks in one order,
/// but a Citus coordinator also cancels a call caught in a distributed
/// deadlock across nodes (docs/operations.md).
const DEADLOCK_RETRIES: u32 = 3;

/// Runs `sql` (one SQL function call returning one value) on a pooled
/// connection. No connection: 503; SQLSTATE 22023: 400; P0002: 404. A call
/// cancelled as a deadlock's victim is made again (`again_after_deadlock`).
pub async fn call_json(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<RawJson, ApiError> {
    let client = pool.get().await?;
    let statement = client.prepare_cached(sql).await?;
    let row = again_after_deadlock(sql, || client.query_one(&statement, params)).await?;
    Ok(row.try_get(0)?)
}

/// Makes `call` (one statement in a transaction of its own) again, after a
/// short pause, when the database cancelled it as a deadlock's victim: the
/// cancellation rolled its transaction back whole, so nothing of it stays.
pub async fn again_after_deadlock<T, F, Fut>(
    what: &str,
    mut call: F,
) -> Result<T, tokio_postgres::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
{
    let mut retries = 0;
    loop {
        match call().await {
            Err(e) if is_deadlock(&e) && retries < DEADLOCK_RETRIES => {
                retries += 1;
                tracing::warn!(
                    "{what}: cancelled as a deadlock's victim, trying again ({retries})"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20 * u64::from(retries))).await;
            }
            answer => return answer,
        }
    }
}

fn is_deadlock(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED)
}

/// How many times a push is tried again after the database named more
/// encrypted queues than the gateway had sealed (each try seals more; a
/// queue only needs a second try when its encryption was switched on
/// between two tries).
const SEALING_RETRIES: usize = 3;

/// Runs a push-like call, `sql` taking the request as `$1` text, so that no
/// payload for an encrypted queue goes to the database in plaintext
/// (gateway/src/encryption.rs has the design). `text` is the body as sent,
/// `request` the same parsed: unless some item's queue is encrypted, `text`
/// is what is sent, unread. Otherwise the items of the encrypted queues get
/// their payload sealed and the request goes re-serialised.
pub async fn call_sealing(
    state: &AppState,
    sql: &str,
    text: &str,
    mut request: Value,
    items: Items,
) -> Result<RawJson, ApiError> {
    let encryption = &state.encryption;
    let encrypted = encryption
        .encrypted_if_envelope_shaped(&state.pool, text.as_bytes(), &request, items)
        .await?;
    if encryption.key().is_none() {
        // Nothing can be sealed without a key: an envelope-shaped payload
        // for an encrypted queue is refused here (the push's guard would
        // take it for sealed), others by the push itself; the parsed
        // request (several MB for a push of 1,000 items) is freed first.
        if !encrypted.is_empty() {
            return Err(ApiError::EncryptedQueues(encrypted));
        }
        drop(request);
        return call_json(&state.pool, sql, &[&text]).await;
    }
    encryption.learn(&encrypted);
    let mut sealed = encryption.known_among(&request, items);
    encryption.seal_items(&mut request, items, &sealed);
    let mut retries = 0;
    loop {
        let resealed;
        let argument = if sealed.is_empty() {
            text
        } else {
            resealed = request.to_string();
            resealed.as_str()
        };
        match call_json(&state.pool, sql, &[&argument]).await {
            Err(ApiError::EncryptedQueues(queues))
                if encryption.key().is_some() && retries < SEALING_RETRIES =>
            {
                retries += 1;
                encryption.learn(&queues);
                let fresh: std::collections::HashSet<String> =
                    queues.into_iter().filter(|q| !sealed.contains(q)).collect();
                if fresh.is_empty() {
                    // Refused although sealed: only a bug can say this.
                    return Err(ApiError::Internal(
                        "the database refused sealed payloads".into(),
                    ));
                }
                encryption.seal_items(&mut request, items, &fresh);
                sealed.extend(fresh);
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_parameters_pass_as_strings_and_nul_is_refused() {
        let query: BTreeMap<String, String> = [
            ("queue", "orders"),
            ("limit", "5"),
            ("offset", ""),
            ("junk", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            Value::Object(query_fields(&query, &["queue", "limit", "offset"]).unwrap()),
            serde_json::json!({"queue": "orders", "limit": "5"})
        );
        let nul = BTreeMap::from([("queue".to_string(), "a\0b".to_string())]);
        assert!(matches!(
            query_fields(&nul, &["queue"]),
            Err(ApiError::BadRequest(m)) if m == "queue contains a NUL character"
        ));
    }

    #[test]
    fn jsonb_binary_is_its_text_after_the_version_byte() {
        let raw = b"\x01{\"a\": 1}";
        let json = RawJson::from_sql(&Type::JSONB, raw).unwrap();
        assert_eq!(json, RawJson("{\"a\": 1}".into()));
        assert!(RawJson::from_sql(&Type::JSONB, b"\x02{}").is_err());
        assert_eq!(
            RawJson::from_sql(&Type::JSON, b"null").unwrap(),
            RawJson("null".into())
        );
        assert!(RawJson::from_sql(&Type::JSON, b"null").unwrap().is_null());
    }
}
