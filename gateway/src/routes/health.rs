//! GET /health: is the database reachable (through the pool, or past a busy one)?

use actix_web::{web, HttpResponse};
use deadpool_postgres::PoolError;
use serde_json::json;

use crate::app::AppState;
use crate::db;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/health").get(health));
}

/// Open to everyone (load balancers probe it); answers within the DB timeout.
async fn health(state: web::Data<AppState>) -> HttpResponse {
    match tokio::time::timeout(state.config.db_timeout(), ping(&state)).await {
        Ok(Ok(Reached::ThroughThePool)) => HttpResponse::Ok().json(json!({
            "status": "healthy",
            "database": "connected",
        })),
        Ok(Ok(Reached::PoolBusy)) => HttpResponse::Ok().json(json!({
            "status": "healthy",
            "database": "connected",
            "pool": "busy",
        })),
        Ok(Err(error)) => unhealthy(error),
        Err(_) => unhealthy("timed out waiting for the database".to_string()),
    }
}

enum Reached {
    ThroughThePool,
    /// Every pooled connection stayed busy (say, waiting on a lock), and a
    /// connection of its own reached the database.
    PoolBusy,
}

/// Whether this gateway reaches the database: through the pool, or, when no
/// pooled connection frees up within half the DB timeout, on a connection of
/// its own. A busy pool is no outage: read as one, a slow lock would take
/// every gateway out of a load balancer's rotation at once.
async fn ping(state: &AppState) -> Result<Reached, String> {
    let pooled = tokio::time::timeout(state.config.db_timeout() / 2, state.pool.get()).await;
    match pooled {
        Ok(Ok(client)) => select_one(&client).await.map(|()| Reached::ThroughThePool),
        Ok(Err(PoolError::Timeout(_))) | Err(_) => {
            let own = db::connect(&state.config.database_url)
                .await
                .map_err(|e| db::error_detail(&e))?;
            select_one(&own).await.map(|()| Reached::PoolBusy)
        }
        Ok(Err(e)) => Err(db::pool_error_detail(&e)),
    }
}

async fn select_one(client: &tokio_postgres::Client) -> Result<(), String> {
    client
        .simple_query("SELECT 1")
        .await
        .map(|_| ())
        .map_err(|e| db::error_detail(&e))
}

fn unhealthy(error: String) -> HttpResponse {
    HttpResponse::ServiceUnavailable().json(json!({
        "status": "unhealthy",
        "database": "disconnected",
        "error": error,
    }))
}
