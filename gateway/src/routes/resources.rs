//! The queue views (read-only) and queue deletion (admin):
//! GET /api/v1/resources/queues?search=&namespace=&task=&limit=&offset=,
//! GET|DELETE /api/v1/resources/queues/{queue}, GET /api/v1/resources/overview,
//! GET /api/v1/resources/namespaces, GET /api/v1/resources/tasks
//! (docs/http-api.md "Queue views and deletion"). The list's filters are
//! checked by the SQL (22023 → 400).

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::{call_json, call_on_name, read_only_listing};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/resources/queues").get(list_queues))
        .service(
            web::resource("/api/v1/resources/queues/{queue}")
                .get(queue_detail)
                .delete(delete_queue),
        )
        .service(web::resource("/api/v1/resources/overview").get(overview))
        .service(web::resource("/api/v1/resources/namespaces").get(namespaces))
        .service(web::resource("/api/v1/resources/tasks").get(tasks));
}

/// Query parameters of the queue list handed to `pgcursor.queues_overview`.
const LIST_PARAMETERS: [&str; 5] = ["search", "namespace", "task", "limit", "offset"];

async fn list_queues(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.queues_overview($1::jsonb)";
    read_only_listing(&req, &state, &query, &LIST_PARAMETERS, sql).await
}

/// Unknown queue: the SQL raises P0002, a 404.
async fn queue_detail(
    req: HttpRequest,
    state: web::Data<AppState>,
    queue: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.queue_detail($1)";
    let answer = call_on_name(&req, &state, Level::ReadOnly, sql, &queue).await?;
    Ok(answer.respond())
}

/// Idempotent: an unknown queue answers `{"deleted": false}` with a 200.
async fn delete_queue(
    req: HttpRequest,
    state: web::Data<AppState>,
    queue: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.delete_queue($1)";
    let answer = call_on_name(&req, &state, Level::Admin, sql, &queue).await?;
    Ok(answer.respond())
}

async fn overview(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let answer = call_json(&state.pool, "SELECT pgcursor.overview()", &[]).await?;
    Ok(answer.respond())
}

async fn namespaces(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let answer = call_json(&state.pool, "SELECT pgcursor.namespaces()", &[]).await?;
    Ok(answer.respond())
}

async fn tasks(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let answer = call_json(&state.pool, "SELECT pgcursor.tasks()", &[]).await?;
    Ok(answer.respond())
}
