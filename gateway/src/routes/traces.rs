//! Traces (docs/http-api.md "Traces"):
//! POST /api/v1/traces (read-write) through `pgcursor.record_trace`, 201,
//! the gateway's identifier (`<hostname>:<pid>`) recorded as the workerId;
//! GET /api/v1/traces/names (read-only) through `pgcursor.trace_names`;
//! GET /api/v1/traces/by-name/{traceName} (read-only) through
//! `pgcursor.traces_by_name`, each message's payload in plaintext;
//! GET /api/v1/traces/{partitionId}/{transactionId} (read-only) through
//! `pgcursor.message_traces`. The two listings carry at most
//! PGCURSOR_MAX_ANSWER_BYTES of data and payloads (the rest listed without).
//! The literal segments are registered before `{partitionId}`, so they win.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::app::AppState;
use crate::auth::Level;
use crate::body::path_without_nul;
use crate::error::ApiError;
use crate::routes::call::{call_json, int_query, object_body};
use crate::routes::messages::message_address;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/traces").post(record))
        .service(web::resource("/api/v1/traces/names").get(names))
        .service(web::resource("/api/v1/traces/by-name/{traceName}").get(by_name))
        .service(web::resource("/api/v1/traces/{partitionId}/{transactionId}").get(of_message));
}

/// Who records a trace: this gateway, `<hostname>:<pid>`.
fn worker_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("{}:{}", crate::process::hostname(), std::process::id()))
}

async fn record(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    // An empty body counts as {}: the SQL then names what is missing.
    let mut request = if body.is_empty() {
        Value::Object(Default::default())
    } else {
        object_body(&body).await?
    };
    request["workerId"] = Value::String(worker_id().to_string());
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.record_trace($1::jsonb)",
        &[&request],
    )
    .await?;
    Ok(HttpResponse::Created()
        .content_type("application/json")
        .body(answer.0))
}

async fn of_message(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let (partition_id, transaction_id) = message_address(path.into_inner())?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.message_traces($1, $2, $3)",
        &[&partition_id, &transaction_id, &max_bytes(&state)],
    )
    .await?;
    Ok(answer.respond())
}

async fn by_name(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    path_without_nul(&req)?;
    let limit = int_query(&query, "limit", 100)?;
    let offset = int_query(&query, "offset", 0)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.traces_by_name($1, $2, $3, $4)",
        &[&name.as_str(), &limit, &offset, &max_bytes(&state)],
    )
    .await?;
    // Each message_payload in plaintext when the message is an envelope.
    Ok(state
        .encryption
        .open_in_list(answer, "traces", "message_payload")
        .respond())
}

async fn names(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let limit = int_query(&query, "limit", 50)?;
    let offset = int_query(&query, "offset", 0)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.trace_names($1, $2)",
        &[&limit, &offset],
    )
    .await?;
    Ok(answer.respond())
}

/// An integer query parameter; absent or empty: `default`. Its range is
/// the SQL function's to check (22023 → 400).
/// The most data (and message payloads) a listing of trace events carries:
/// PGCURSOR_MAX_ANSWER_BYTES, as for a pop (its events past it are listed
/// without).
fn max_bytes(state: &AppState) -> i32 {
    i32::try_from(state.config.max_answer_bytes).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_parameters_default_when_absent_or_empty() {
        let q = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(int_query(&q(&[]), "limit", 100).unwrap(), 100);
        assert_eq!(int_query(&q(&[("limit", "")]), "limit", 100).unwrap(), 100);
        assert_eq!(int_query(&q(&[("limit", "7")]), "limit", 100).unwrap(), 7);
        assert_eq!(int_query(&q(&[("offset", "-1")]), "offset", 0).unwrap(), -1);
        for bad in ["x", "1.5", "", "-"] {
            let refused = int_query(&q(&[("limit", bad)]), "limit", 100);
            assert!(
                bad.is_empty() || matches!(&refused, Err(ApiError::BadRequest(m)) if m == "limit must be an integer"),
                "{bad}: {refused:?}"
            );
        }
        assert!(matches!(
            int_query(&q(&[("offset", "2147483648")]), "offset", 0),
            Err(ApiError::BadRequest(m)) if m == "offset must be at most 2147483647"
        ));
        assert!(matches!(
            int_query(&q(&[("offset", "-99999999999")]), "offset", 0),
            Err(ApiError::BadRequest(m)) if m == "offset must be at least -2147483648"
        ));
    }

    #[test]
    fn the_worker_id_is_host_and_process() {
        let id = worker_id();
        assert!(id.ends_with(&format!(":{}", std::process::id())), "{id}");
        assert!(id.len() > 2, "{id}");
    }
}
