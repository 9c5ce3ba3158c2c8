//! Inspection (read-only):
//! GET /api/v1/partitions/{partitionId}/cursors through `pgcursor.cursors`
//! (unknown partition: P0002, a 404) and
//! GET /api/v1/messages/{partitionId}/{transactionId} through
//! `pgcursor.message` (unknown message: P0002, a 404), its payload
//! decrypted when it is an envelope (gateway/src/encryption.rs). The
//! message's path is mounted by messages.rs, with its DELETE: one resource
//! a path, so another method there is a 405 naming both.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::{call_json, call_on_message};
use crate::routes::messages::partition_id_of;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/partitions/{partitionId}/cursors").get(cursors));
}

async fn cursors(
    req: HttpRequest,
    state: web::Data<AppState>,
    partition_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let partition_id = partition_id_of(&partition_id)?;
    let answer = call_json(&state.pool, "SELECT pgcursor.cursors($1)", &[&partition_id]).await?;
    Ok(answer.respond())
}

pub(crate) async fn message(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.message($1, $2)";
    let answer = call_on_message(&req, &state, Level::ReadOnly, sql, path.into_inner())
        .await?;
    // `payload` and `data` in plaintext when the message is an envelope.
    Ok(state.encryption.open_answer(answer).await?.respond())
}
