//! Dead letters:
//! GET /api/v1/dlq?queue=&consumerGroup=&partition=&from=&to=&limit=&offset=&maxBytes=
//! (read-only) through `pgcursor.dead_letters`, which checks the parameters
//! (22023 → 400), and POST /api/v1/dlq/{id}/requeue (read-write) through
//! `pgcursor.requeue_dead_letter` (unknown id: P0002, a 404).

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::{call_json, call_listing, limit_bytes, plaintext_refused, query_fields};

/// Query parameters handed to `pgcursor.dead_letters` as strings.
const PARAMETERS: [&str; 8] = [
    "queue",
    "consumerGroup",
    "partition",
    "from",
    "to",
    "limit",
    "offset",
    "maxBytes",
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/dlq").get(list))
        .service(web::resource("/api/v1/dlq/{id}/requeue").post(requeue));
}

async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let mut filter = query_fields(&query, &PARAMETERS)?;
    limit_bytes(&mut filter, state.config.max_answer_bytes);
    let sql = "SELECT pgcursor.dead_letters($1::jsonb)";
    let answer = call_listing(&state.pool, sql, filter).await?;
    // Dead letters of encrypted queues are listed in plaintext (docs/http-api.md
    // "Encrypted queues").
    Ok(state.encryption.open_answer(answer).await?.respond())
}

async fn requeue(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    let id = crate::body::plain_uuid(&id)
        .ok_or_else(|| ApiError::BadRequest("id must be a UUID string".into()))?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.requeue_dead_letter($1)",
        &[&id],
    )
    .await
    .map_err(|e| plaintext_refused(e, "requeue"))?;
    Ok(answer.respond())
}
