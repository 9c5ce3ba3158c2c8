//! POST /api/v1/push (read-write): `pgcursor.push` validates every item
//! (a 400 naming index and field, nothing written), assigns offsets and
//! reports duplicates. The gateway only caps the number of items, and seals
//! the payloads of encrypted queues (gateway/src/encryption.rs).

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::app::AppState;
use crate::auth::Level;
use crate::encryption::Items;
use crate::error::ApiError;
use crate::minutes::{item_queues, record_each, Target};
use crate::routes::call::{body_text, call_sealing, object_body};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/push", web::post().to(push));
}

async fn push(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    crate::metrics::counters().push_requests.increment(1);
    let request = object_body(&body)?;
    check_item_count(&request, state.config.max_push_items)?;
    let text = body_text(&body)?;
    let queues = item_queues(request.get("items"));
    let answer = call_sealing(
        &state,
        "SELECT pgcursor.push($1::text::jsonb)",
        text,
        request,
        Items::Push,
    )
    .await?;
    crate::metrics::count_pushed(&answer.0);
    record_each(queues.into_iter().map(|q| Target::Queue(Some(q))), |f| {
        f.push_requests += 1
    });
    Ok(answer.respond())
}

/// One push is one transaction: cap it so no request holds a partition lock
/// for long. (Whether `items` is an array is for the SQL to say.)
fn check_item_count(request: &Value, max_items: usize) -> Result<(), ApiError> {
    match request.get("items") {
        Some(Value::Array(items)) if items.len() > max_items => {
            Err(ApiError::PayloadTooLarge(format!(
                "items has {} entries; the limit is {max_items}",
                items.len()
            )))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn more_items_than_the_limit_is_413() {
        let body = json!({"items": [{}, {}, {}]});
        assert!(matches!(
            check_item_count(&body, 2),
            Err(ApiError::PayloadTooLarge(m)) if m == "items has 3 entries; the limit is 2"
        ));
        assert!(check_item_count(&body, 3).is_ok());
        assert!(check_item_count(&json!({"items": "x"}), 1).is_ok());
    }
}
