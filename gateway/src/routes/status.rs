//! Status and analytics (read-only, docs/http-api.md "Status and analytics"),
//! each route one SQL function that checks its parameters (22023 → 400 naming
//! the field):
//! GET /api/v1/status?from=&to=&queue=&namespace=&task= (`pgcursor.status`),
//! GET /api/v1/status/queues?namespace=&task=&limit=&offset= (`pgcursor.status_queues`),
//! GET /api/v1/status/queues/{queue} (`pgcursor.status_queue`, unknown → 404),
//! GET /api/v1/status/queues/{queue}/messages?limit=&offset= (`pgcursor.status_queue_messages`),
//! GET /api/v1/status/analytics?interval=&from=&to=&queue=&namespace=&task=
//! (`pgcursor.status_analytics`), and GET /api/v1/analytics/{kind}?from=&to=&queue=
//! &hostname=&workerId= for queue-ops, queue-lag, retention, system-metrics, worker-metrics,
//! queue-parked-replicas and postgres-stats (`pgcursor.analytics`).

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::app::AppState;
use crate::auth::Level;
use crate::body::path_without_nul;
use crate::error::ApiError;
use crate::routes::call::{call_json, call_on_name, query_fields, read_only_listing};

/// The /api/v1/analytics/* routes, each answered by `pgcursor.analytics(kind)`.
const ANALYTICS: [&str; 7] = [
    "queue-ops",
    "queue-lag",
    "retention",
    "system-metrics",
    "worker-metrics",
    "queue-parked-replicas",
    "postgres-stats",
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/status").get(status))
        .service(web::resource("/api/v1/status/queues").get(queues))
        .service(web::resource("/api/v1/status/analytics").get(analytics_overview))
        .service(web::resource("/api/v1/status/queues/{queue}").get(queue))
        .service(web::resource("/api/v1/status/queues/{queue}/messages").get(queue_messages));
    for kind in ANALYTICS {
        cfg.service(web::resource(format!("/api/v1/analytics/{kind}")).get(
            move |req: HttpRequest, state: web::Data<AppState>, query: Query| {
                analytics(req, state, query, kind)
            },
        ));
    }
}

type Query = web::Query<BTreeMap<String, String>>;

async fn status(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: Query,
) -> Result<HttpResponse, ApiError> {
    let names = ["from", "to", "queue", "namespace", "task"];
    read_only_listing(&req, &state, &query, &names, "SELECT pgcursor.status($1::jsonb)").await
}

async fn queues(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: Query,
) -> Result<HttpResponse, ApiError> {
    let names = ["namespace", "task", "limit", "offset"];
    let sql = "SELECT pgcursor.status_queues($1::jsonb)";
    read_only_listing(&req, &state, &query, &names, sql).await
}

async fn analytics_overview(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: Query,
) -> Result<HttpResponse, ApiError> {
    let names = ["interval", "from", "to", "queue", "namespace", "task"];
    let sql = "SELECT pgcursor.status_analytics($1::jsonb)";
    read_only_listing(&req, &state, &query, &names, sql).await
}

/// Unknown queue: the SQL raises P0002, a 404.
async fn queue(
    req: HttpRequest,
    state: web::Data<AppState>,
    queue: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.status_queue($1)";
    let answer = call_on_name(&req, &state, Level::ReadOnly, sql, &queue).await?;
    Ok(answer.respond())
}

/// Unknown queue: `[]`.
async fn queue_messages(
    req: HttpRequest,
    state: web::Data<AppState>,
    queue: web::Path<String>,
    query: Query,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    path_without_nul(&req)?;
    let queue = queue.into_inner();
    let filter = query_fields(&query, &["limit", "offset"])?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.status_queue_messages($1, $2::jsonb)",
        &[&queue, &Value::Object(filter)],
    )
    .await?;
    Ok(answer.respond())
}

async fn analytics(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: Query,
    kind: &'static str,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let filter = query_fields(&query, &["from", "to", "queue", "hostname", "workerId"])?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.analytics($1, $2::jsonb)",
        &[&kind, &Value::Object(filter)],
    )
    .await?;
    Ok(answer.respond())
}
