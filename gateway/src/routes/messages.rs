//! The message browser (docs/http-api.md "Message browser"):
//! GET /api/v1/messages?queue=&partition=&ns=&task=&status=&from=&to=&fromOffset=&toOffset=&transactionId=&limit=&offset=
//! (read-only) through `pgcursor.list_messages`, which checks the parameters
//! (22023 → 400 naming the field);
//! DELETE /api/v1/messages/{partitionId}/{transactionId} (read-write) through
//! `pgcursor.delete_message` (nothing to delete: 200 with `success: false`);
//! POST /api/v1/messages/{partitionId}/{transactionId}/retry (read-write, as
//! the DLQ requeue) through `pgcursor.retry_message` (no dead letter: 404).
//! The detail (GET of one message) is in inspect.rs.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Level;
use crate::body::no_nul;
use crate::error::ApiError;
use crate::routes::call::{call_on_message, plaintext_refused, read_only_listing};

/// Query parameters handed to `pgcursor.list_messages` as strings.
const PARAMETERS: [&str; 12] = [
    "queue",
    "partition",
    "ns",
    "task",
    "status",
    "from",
    "to",
    "fromOffset",
    "toOffset",
    "transactionId",
    "limit",
    "offset",
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/messages").get(list))
        .service(
            web::resource("/api/v1/messages/{partitionId}/{transactionId}")
                .get(crate::routes::inspect::message)
                .delete(delete),
        )
        .service(web::resource("/api/v1/messages/{partitionId}/{transactionId}/retry").post(retry));
}

async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    read_only_listing(&req, &state, &query, &PARAMETERS, "SELECT pgcursor.list_messages($1::jsonb)").await
}

async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.delete_message($1, $2)";
    let answer = call_on_message(&req, &state, Level::ReadWrite, sql, path.into_inner())
        .await?;
    Ok(answer.respond())
}

async fn retry(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.retry_message($1, $2)";
    let answer = call_on_message(&req, &state, Level::ReadWrite, sql, path.into_inner())
        .await
        .map_err(|e| plaintext_refused(e, "retry"))?;
    Ok(answer.respond())
}

/// A `{partitionId}` path segment as a UUID; else a 400 naming it.
pub fn partition_id_of(raw: &str) -> Result<Uuid, ApiError> {
    crate::body::plain_uuid(raw)
        .ok_or_else(|| ApiError::BadRequest("partitionId must be a UUID string".into()))
}

/// (partitionId, transactionId) of a message path: the first a UUID, the
/// second without NUL (PostgreSQL cannot hold one); else a 400.
pub fn message_address((partition_id, transaction_id): (String, String)) -> Result<(Uuid, String), ApiError> {
    let partition_id = partition_id_of(&partition_id)?;
    no_nul("transactionId", &transaction_id)?;
    Ok((partition_id, transaction_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_address_needs_a_uuid_and_no_nul() {
        let id = Uuid::now_v7();
        assert_eq!(
            message_address((id.to_string(), "tx 1".into())).unwrap(),
            (id, "tx 1".to_string())
        );
        assert!(matches!(
            message_address(("nope".into(), "tx".into())),
            Err(ApiError::BadRequest(m)) if m == "partitionId must be a UUID string"
        ));
        assert!(matches!(
            message_address((id.to_string(), "a\0b".into())),
            Err(ApiError::BadRequest(m)) if m == "transactionId contains a NUL character"
        ));
    }
}
