//! POST /api/v1/transaction (read-write): acks and pushes in one PostgreSQL
//! transaction, through `pgcursor.transaction`, which validates the bundle
//! (22023 → 400), runs it and answers `success: false` with everything
//! rolled back when an ack is refused. The gateway only bounds its size, and
//! seals the pushed payloads of encrypted queues (gateway/src/encryption.rs).

use std::collections::BTreeSet;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use crate::app::AppState;
use crate::auth::Level;
use crate::encryption::Items;
use crate::error::ApiError;
use crate::minutes::{item_queues, record_each, Target};
use crate::routes::call::{body_text, call_sealing, object_body};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/api/v1/transaction").post(transaction));
}

async fn transaction(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    crate::metrics::counters().transactions.increment(1);
    let request = object_body(&body).await?;
    check_size(
        &request,
        state.config.max_ack_items,
        state.config.max_push_items,
    )?;
    let text = body_text(&body)?;
    let touched = touched(&request);
    let answer = call_sealing(
        &state,
        "SELECT pgcursor.transaction($1::text::jsonb)",
        text,
        request,
        Items::Transaction,
    )
    .await?;
    record_each(touched, |f| f.transactions += 1);
    Ok(answer.respond())
}

/// What a bundle touches, for the per-minute figures: the queues of its
/// push items and the partitions of its acks, each once.
fn touched(request: &Value) -> BTreeSet<Target> {
    let operations = request.get("operations").and_then(Value::as_array);
    let mut targets = BTreeSet::new();
    for op in operations.into_iter().flatten() {
        match op["type"].as_str() {
            Some("push") => targets.extend(item_queues(op.get("items")).into_iter().map(|q| Target::Queue(Some(q)))),
            Some("ack") => targets.extend(
                op["partitionId"].as_str().and_then(crate::body::plain_uuid).map(Target::Partition),
            ),
            _ => {}
        }
    }
    targets
}

/// 413 when the bundle holds more ack operations, or more push items in
/// all, than one ack batch or one push may. Shape errors are left to SQL.
fn check_size(request: &Value, max_acks: usize, max_pushes: usize) -> Result<(), ApiError> {
    let Some(operations) = request.get("operations").and_then(Value::as_array) else {
        return Ok(());
    };
    let acks = operations.iter().filter(|op| op["type"] == "ack").count();
    let pushes: usize = operations
        .iter()
        .filter(|op| op["type"] == "push")
        .filter_map(|op| op["items"].as_array())
        .map(Vec::len)
        .sum();
    if acks > max_acks {
        return Err(ApiError::PayloadTooLarge(format!(
            "operations has {acks} acks; the limit is {max_acks}"
        )));
    }
    if pushes > max_pushes {
        return Err(ApiError::PayloadTooLarge(format!(
            "operations push {pushes} items; the limit is {max_pushes}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bundles_are_bounded_like_acks_and_pushes() {
        let body = json!({"operations": [
            {"type": "ack"}, {"type": "ack"},
            {"type": "push", "items": [1, 2]}, {"type": "push", "items": [3]},
            {"type": "push"}, "not an object"]});
        assert!(check_size(&body, 2, 3).is_ok());
        assert!(matches!(
            check_size(&body, 1, 3),
            Err(ApiError::PayloadTooLarge(m)) if m == "operations has 2 acks; the limit is 1"
        ));
        assert!(matches!(
            check_size(&body, 2, 2),
            Err(ApiError::PayloadTooLarge(m)) if m == "operations push 3 items; the limit is 2"
        ));
        assert!(check_size(&json!({"operations": 5}), 0, 0).is_ok());
    }
}
