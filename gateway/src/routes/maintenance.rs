//! Maintenance mode (admin): GET/POST /api/v1/system/maintenance (pushes)
//! and /api/v1/system/maintenance/pop (pops), through `pgcursor.maintenance`
//! and `pgcursor.set_maintenance`. The flags live in the database, so every
//! gateway obeys a change at once; push and pop check them in SQL.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::{call_json, optional_object_body};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/api/v1/system/maintenance")
            .get(get_push)
            .post(set_push),
    )
    .service(
        web::resource("/api/v1/system/maintenance/pop")
            .get(get_pop)
            .post(set_pop),
    );
}

async fn get_push(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::Admin)?;
    let answer = call_json(&state.pool, "SELECT pgcursor.maintenance()", &[]).await?;
    Ok(answer.respond())
}

async fn get_pop(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::Admin)?;
    let answer = call_json(
        &state.pool,
        "SELECT jsonb_build_object('popMaintenanceMode', m -> 'popMaintenanceMode',
                                   'message', CASE WHEN (m ->> 'popMaintenanceMode')::boolean
                                                   THEN 'Pop maintenance mode is enabled'
                                                   ELSE 'Pop maintenance mode is disabled' END)
           FROM pgcursor.maintenance() AS m",
        &[],
    )
    .await?;
    Ok(answer.respond())
}

async fn set_push(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    set(&req, &state, &body, "push").await
}

async fn set_pop(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    set(&req, &state, &body, "pop").await
}

async fn set(
    req: &HttpRequest,
    state: &AppState,
    body: &web::Bytes,
    mode: &str,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(req, Level::Admin)?;
    // An empty body reads as {}: it lacks `enabled` like any other.
    let enabled = enabled_field(&optional_object_body(body).await?)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.set_maintenance($1, $2)",
        &[&mode, &enabled],
    )
    .await?;
    Ok(answer.respond())
}

/// `{"enabled": true|false}`; anything else is Queen's 400.
fn enabled_field(body: &Value) -> Result<bool, ApiError> {
    body.get("enabled")
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::BadRequest("enabled (boolean) is required".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn enabled_must_be_a_boolean() {
        assert!(enabled_field(&json!({"enabled": true})).unwrap());
        assert!(!enabled_field(&json!({"enabled": false})).unwrap());
        for body in [json!({}), json!({"enabled": "true"}), json!({"enabled": 1})] {
            assert!(matches!(enabled_field(&body), Err(ApiError::BadRequest(m)) if m == "enabled (boolean) is required"));
        }
    }
}
