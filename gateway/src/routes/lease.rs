//! POST /api/v1/lease/{leaseId}/extend (read-write) through
//! `pgcursor.extend_lease`. The body is optional: the queen client sends
//! none at all, which means 60 s (as Queen); `{"seconds": n}` otherwise.
//! GET /api/v1/leases?queue=&consumerGroup=&limit= (read-only) through
//! `pgcursor.leases`, which checks the parameters (22023 → 400).

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::app::AppState;
use crate::auth::Level;
use crate::body::path_without_nul;
use crate::error::ApiError;
use crate::routes::call::{call_json, optional_object_body, read_only_listing};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/lease/{leaseId}/extend").post(extend))
        .service(web::resource("/api/v1/leases").get(list));
}

/// The live leases, longest held first.
async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BTreeMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let names = ["queue", "consumerGroup", "limit"];
    read_only_listing(&req, &state, &query, &names, "SELECT pgcursor.leases($1::jsonb)").await
}

async fn extend(
    req: HttpRequest,
    state: web::Data<AppState>,
    lease_id: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    path_without_nul(&req)?;
    let request = extend_request(&body, lease_id.into_inner()).await?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.extend_lease($1::jsonb)",
        &[&request],
    )
    .await?;
    Ok(answer.respond())
}

/// The body (empty = `{}`) with the path's leaseId, which the SQL checks.
async fn extend_request(body: &web::Bytes, lease_id: String) -> Result<Value, ApiError> {
    let mut request = optional_object_body(body).await?;
    request["leaseId"] = Value::String(lease_id);
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[actix_web::test]
    async fn an_empty_body_means_the_default_and_the_path_names_the_lease() {
        async fn request(body: &'static [u8]) -> Result<Value, ApiError> {
            extend_request(&web::Bytes::from_static(body), "L".into()).await
        }
        assert_eq!(request(b"").await.unwrap(), json!({"leaseId": "L"}));
        assert_eq!(request(b" \n").await.unwrap(), json!({"leaseId": "L"}));
        assert_eq!(
            request(br#"{"seconds": 5, "leaseId": "other"}"#).await.unwrap(),
            json!({"leaseId": "L", "seconds": 5})
        );
        assert!(matches!(request(b"[]").await, Err(ApiError::BadRequest(_))));
    }
}
