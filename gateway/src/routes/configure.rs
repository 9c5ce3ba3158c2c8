//! POST /api/v1/configure (admin): create or update a queue through
//! `pgcursor.configure`, which checks every option and answers the
//! effective values. Unknown options are ignored there, not here.

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
    state.auth.require(&req, Level::Admin)?;
    let request = object_body(&body)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.configure($1::jsonb)",
        &[&request],
    )
    .await?;
    Ok(answer.respond())
}
