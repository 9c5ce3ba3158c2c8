//! POST /api/v1/configure (read-write, as Queen): create or update a queue
//! through `pgcursor.configure`, which checks every option (an unknown one is
//! a 400 naming it) and answers the effective values. The one check made
//! here: `encryptionEnabled: true` needs the gateway's key (docs/http-api.md
//! "Encrypted queues"), else a 400 and nothing changes.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::app::AppState;
use crate::auth::Level;
use crate::error::ApiError;
use crate::routes::call::{call_json, object_body};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/configure").post(configure_queue));
}

async fn configure_queue(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    let request = object_body(&body).await?;
    if state.encryption.key().is_none() && enables_encryption(&request) {
        return Err(ApiError::BadRequest(
            "options.encryptionEnabled requires PGCURSOR_ENCRYPTION_KEY on the gateway".into(),
        ));
    }
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.configure($1::jsonb)",
        &[&request],
    )
    .await?;
    Ok(answer.respond())
}

/// `options.encryptionEnabled` is `true` (pgcursor.configure takes only
/// booleans and null there).
fn enables_encryption(request: &Value) -> bool {
    request
        .get("options")
        .and_then(|o| o.get("encryptionEnabled"))
        == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_true_encryption_enabled_needs_the_key() {
        assert!(enables_encryption(
            &json!({"queue": "q", "options": {"encryptionEnabled": true}})
        ));
        for request in [
            json!({"queue": "q"}),
            json!({"queue": "q", "options": null}),
            json!({"queue": "q", "options": {"encryptionEnabled": false}}),
            json!({"queue": "q", "options": {"encryptionEnabled": null}}),
            json!({"queue": "q", "encryptionEnabled": true}),
        ] {
            assert!(!enables_encryption(&request), "{request}");
        }
    }
}
