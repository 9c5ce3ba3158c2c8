//! POST /api/v1/configure (read-write, as Queen): create or update a queue
//! through `pgcursor.configure`, which checks every option (an unknown one is
//! a 400 naming it) and answers the effective values.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::{call_json, object_body};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/configure", web::post().to(configure_queue));
}

async fn configure_queue(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    let request = object_body(&body)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.configure($1::jsonb)",
        &[&request],
    )
    .await?;
    Ok(answer.respond())
}
