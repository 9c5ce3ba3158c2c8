//! The message browser (wire-admin.md §2):
//! GET /api/v1/messages?queue=&partition=&ns=&task=&status=&from=&to=&limit=&offset=
//! (read-only) through `pgcursor.list_messages`, which checks the parameters
//! (22023 → 400 naming the field);
//! DELETE /api/v1/messages/{partitionId}/{transactionId} (read-write) through
//! `pgcursor.delete_message` (nothing to delete: 200 with `success: false`);
//! POST /api/v1/messages/{partitionId}/{transactionId}/retry (read-write, as
//! the DLQ requeue) through `pgcursor.retry_message` (no dead letter: 404).
//! The detail (GET of one message) is in inspect.rs.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::call_json;

/// Query parameters handed to `pgcursor.list_messages` as strings.
const PARAMETERS: [&str; 9] = [
    "queue",
    "partition",
    "ns",
    "task",
    "status",
    "from",
    "to",
    "limit",
    "offset",
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/messages", web::get().to(list))
        .route(
            "/api/v1/messages/{partitionId}/{transactionId}",
            web::delete().to(delete),
        )
        .route(
            "/api/v1/messages/{partitionId}/{transactionId}/retry",
            web::post().to(retry),
        );
}

async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let filter = listing_filter(&query)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.list_messages($1::jsonb)",
        &[&filter],
    )
    .await?;
    Ok(answer.respond())
}

async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    let (partition_id, transaction_id) = message_address(path.into_inner())?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.delete_message($1, $2)",
        &[&partition_id, &transaction_id],
    )
    .await?;
    Ok(answer.respond())
}

async fn retry(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    let (partition_id, transaction_id) = message_address(path.into_inner())?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.retry_message($1, $2)",
        &[&partition_id, &transaction_id],
    )
    .await
    .map_err(|e| match e {
        // As the DLQ requeue: the payload goes back as stored.
        ApiError::EncryptedQueues(queues) => ApiError::Unavailable(format!(
            "cannot retry: the dead letter's payload is plaintext and {queues:?} now has encryptionEnabled"
        )),
        other => other,
    })?;
    Ok(answer.respond())
}

/// (partitionId, transactionId) of a message path: the first a UUID, the
/// second without NUL (PostgreSQL cannot hold one); else a 400.
pub fn message_address((partition_id, transaction_id): (String, String)) -> Result<(Uuid, String), ApiError> {
    let partition_id = Uuid::parse_str(&partition_id)
        .map_err(|_| ApiError::BadRequest("partitionId must be a UUID string".into()))?;
    if transaction_id.contains('\0') {
        return Err(ApiError::BadRequest(
            "transactionId contains a NUL character".into(),
        ));
    }
    Ok((partition_id, transaction_id))
}

/// The known parameters as a JSON object of strings; others (C's
/// `consumerGroup` among them) are ignored. A value with NUL is a 400.
fn listing_filter(query: &BTreeMap<String, String>) -> Result<Value, ApiError> {
    let mut fields = Map::new();
    for name in PARAMETERS {
        let Some(value) = query.get(name) else {
            continue;
        };
        if value.contains('\0') {
            return Err(ApiError::BadRequest(format!(
                "{name} contains a NUL character"
            )));
        }
        fields.insert(name.to_string(), Value::String(value.clone()));
    }
    Ok(Value::Object(fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_parameters_pass_as_strings() {
        let query: BTreeMap<String, String> = [
            ("queue", "orders"),
            ("ns", "shop"),
            ("status", "pending"),
            ("consumerGroup", "ignored"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            listing_filter(&query).unwrap(),
            json!({"queue": "orders", "ns": "shop", "status": "pending"})
        );
        let nul = BTreeMap::from([("task".to_string(), "a\0b".to_string())]);
        assert!(matches!(
            listing_filter(&nul),
            Err(ApiError::BadRequest(m)) if m == "task contains a NUL character"
        ));
    }

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
