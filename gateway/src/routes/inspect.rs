//! Inspection (read-only):
//! GET /api/v1/partitions/{partitionId}/cursors through `pgcursor.cursors`
//! (unknown partition: P0002, a 404) and
//! GET /api/v1/messages/{partitionId}/{transactionId} through
//! `pgcursor.message` (unknown message: P0002, a 404), its payload
//! decrypted when it is an envelope (gateway/src/encryption.rs).

use actix_web::{web, HttpRequest, HttpResponse};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::call_json;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/api/v1/partitions/{partitionId}/cursors",
        web::get().to(cursors),
    )
    .route(
        "/api/v1/messages/{partitionId}/{transactionId}",
        web::get().to(message),
    );
}

async fn cursors(
    req: HttpRequest,
    state: web::Data<AppState>,
    partition_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let partition_id = parse_partition_id(&partition_id)?;
    let answer = call_json(&state.pool, "SELECT pgcursor.cursors($1)", &[&partition_id]).await?;
    Ok(answer.respond())
}

async fn message(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let (partition_id, transaction_id) = path.into_inner();
    let partition_id = parse_partition_id(&partition_id)?;
    if transaction_id.contains('\0') {
        return Err(ApiError::BadRequest(
            "transactionId contains a NUL character".into(),
        ));
    }
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.message($1, $2)",
        &[&partition_id, &transaction_id],
    )
    .await?;
    // `payload` and `data` in plaintext when the message is an envelope.
    Ok(state.encryption.open_answer(answer).respond())
}

fn parse_partition_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw)
        .map_err(|_| ApiError::BadRequest("partitionId must be a UUID string".into()))
}
