//! Dead letters:
//! GET /api/v1/dlq?queue=&consumerGroup=&partition=&from=&to=&limit=&offset=
//! (read-only) through `pgcursor.dead_letters`, which checks the parameters
//! (22023 → 400), and POST /api/v1/dlq/{id}/requeue (read-write) through
//! `pgcursor.requeue_dead_letter` (unknown id: P0002, a 404).

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::call_json;

/// Query parameters handed to `pgcursor.dead_letters` as strings.
const PARAMETERS: [&str; 7] = [
    "queue",
    "consumerGroup",
    "partition",
    "from",
    "to",
    "limit",
    "offset",
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/dlq", web::get().to(list))
        .route("/api/v1/dlq/{id}/requeue", web::post().to(requeue));
}

async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let request = listing_request(&query)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.dead_letters($1::jsonb)",
        &[&request],
    )
    .await?;
    // Dead letters of encrypted queues are listed in plaintext (decision 17).
    Ok(state.encryption.open_answer(answer).respond())
}

async fn requeue(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    let id = Uuid::parse_str(&id)
        .map_err(|_| ApiError::BadRequest("id must be a UUID string".into()))?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.requeue_dead_letter($1)",
        &[&id],
    )
    .await
    .map_err(|e| match e {
        // The payload goes back as stored (the SQL moves it): an envelope
        // is fine, plaintext cannot enter a queue encrypted since.
        ApiError::EncryptedQueues(queues) => ApiError::Unavailable(format!(
            "cannot requeue: the dead letter's payload is plaintext and {queues:?} now has encryptionEnabled"
        )),
        other => other,
    })?;
    Ok(answer.respond())
}

/// The known parameters as a JSON object of strings; others are ignored.
/// PostgreSQL cannot hold U+0000, so a value with one is a 400 here.
fn listing_request(query: &BTreeMap<String, String>) -> Result<Value, ApiError> {
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
            ("limit", "5"),
            ("from", "2025-01-01T00:00:00Z"),
            ("junk", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            listing_request(&query).unwrap(),
            json!({"queue": "orders", "limit": "5", "from": "2025-01-01T00:00:00Z"})
        );
        let nul = BTreeMap::from([("queue".to_string(), "a\0b".to_string())]);
        assert!(matches!(
            listing_request(&nul),
            Err(ApiError::BadRequest(m)) if m == "queue contains a NUL character"
        ));
    }
}
