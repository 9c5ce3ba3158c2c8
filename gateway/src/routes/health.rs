//! GET /health: is the database reachable through the pool?

use actix_web::{web, HttpResponse};
use serde_json::json;

use crate::app::AppState;
use crate::db;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/health", web::get().to(health));
}

/// Open to everyone (load balancers probe it); answers within the DB timeout.
async fn health(state: web::Data<AppState>) -> HttpResponse {
    match tokio::time::timeout(state.config.db_timeout(), ping(&state)).await {
        Ok(Ok(())) => HttpResponse::Ok().json(json!({
            "status": "healthy",
            "database": "connected",
        })),
        Ok(Err(error)) => unhealthy(error),
        Err(_) => unhealthy("timed out waiting for the database".to_string()),
    }
}

async fn ping(state: &AppState) -> Result<(), String> {
    let client = state
        .pool
        .get()
        .await
        .map_err(|e| db::pool_error_detail(&e))?;
    client
        .simple_query("SELECT 1")
        .await
        .map_err(|e| db::error_detail(&e))?;
    Ok(())
}

fn unhealthy(error: String) -> HttpResponse {
    HttpResponse::ServiceUnavailable().json(json!({
        "status": "unhealthy",
        "database": "disconnected",
        "error": error,
    }))
}
