//! GET /health: is the database reachable (through the pool, or past a busy
//! one), and does it take writes?

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
        Ok(Err(down)) => unhealthy(down),
        Err(_) => unhealthy(Down::disconnected(
            "timed out waiting for the database".to_string(),
        )),
    }
}

/// Why the gateway cannot serve: `database` says how the database stands.
struct Down {
    database: &'static str,
    error: String,
}

impl Down {
    fn disconnected(error: String) -> Down {
        Down {
            database: "disconnected",
            error,
        }
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
async fn ping(state: &AppState) -> Result<Reached, Down> {
    let pooled = tokio::time::timeout(state.config.db_timeout() / 2, state.pool.get()).await;
    match pooled {
        Ok(Ok(client)) => takes_writes(&client).await.map(|()| Reached::ThroughThePool),
        Ok(Err(PoolError::Timeout(_))) | Err(_) => {
            let own = db::connect(&state.config.database_url)
                .await
                .map_err(|e| Down::disconnected(db::error_detail(&e)))?;
            takes_writes(&own).await.map(|()| Reached::PoolBusy)
        }
        Ok(Err(e)) => Err(Down::disconnected(db::pool_error_detail(&e))),
    }
}

/// Whether the session answers and may write: a standby, or a database set
/// read-only, refuses every push, pop and ack (503s). A session that says
/// read-only may only be stale (it started before the setting was
/// reset): the pool replaces its sessions, so the next check asks a new one.
async fn takes_writes(client: &tokio_postgres::Client) -> Result<(), Down> {
    let rows = client
        .simple_query("SELECT current_setting('transaction_read_only')")
        .await
        .map_err(|e| Down::disconnected(db::error_detail(&e)))?;
    let read_only = rows.iter().any(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("on"),
        _ => false,
    });
    if read_only {
        db::mark_sessions_stale();
        return Err(Down {
            database: "read-only",
            error: "the database takes no writes (transaction_read_only is on)".to_string(),
        });
    }
    Ok(())
}

fn unhealthy(down: Down) -> HttpResponse {
    HttpResponse::ServiceUnavailable().json(json!({
        "status": "unhealthy",
        "database": down.database,
        "error": down.error,
    }))
}
