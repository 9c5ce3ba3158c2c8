//! Consumer groups as a whole (docs/http-api.md, Consumer groups), each
//! route one `pgcursor` function of sql/65_consumer_groups.sql:
//! GET /api/v1/consumer-groups, GET /api/v1/consumer-groups/lagging and
//! GET /api/v1/consumer-groups/{group} (read-only);
//! DELETE /api/v1/consumer-groups/{group}[/queues/{queue}] (admin);
//! POST /api/v1/consumer-groups/{group}/subscription and the two seeks
//! (read-write); POST /api/v1/stats/refresh (admin: figures are live, there
//! is nothing to refresh).

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::app::AppState;
use crate::auth::Level;
use crate::body::path_without_nul;
use crate::error::ApiError;
use crate::routes::call::{call_json, call_on_name, optional_object_body};

pub fn configure(cfg: &mut web::ServiceConfig) {
    // `lagging` is a literal segment that wins over `{group}` (as in Queen),
    // for every method: a DELETE of it is no route, not a group's deletion.
    cfg.service(web::resource("/api/v1/consumer-groups").get(list))
        .service(web::resource("/api/v1/consumer-groups/lagging").get(lagging))
        .service(
            web::resource("/api/v1/consumer-groups/{group}")
                .get(describe)
                .delete(delete),
        )
        .service(
            web::resource("/api/v1/consumer-groups/{group}/queues/{queue}").delete(delete_on_queue),
        )
        .service(
            web::resource("/api/v1/consumer-groups/{group}/subscription").post(update_subscription),
        )
        .service(web::resource("/api/v1/consumer-groups/{group}/queues/{queue}/seek").post(seek))
        .service(
            web::resource(
                "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
            )
            .post(seek_partition),
        )
        .service(web::resource("/api/v1/stats/refresh").post(refresh_stats));
}

type Query = web::Query<BTreeMap<String, String>>;

async fn list(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let answer = call_json(&state.pool, "SELECT pgcursor.consumer_groups()", &[]).await?;
    Ok(answer.respond())
}

async fn lagging(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: Query,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadOnly)?;
    let min_lag = min_lag_seconds(&query)?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.lagging_partitions($1)",
        &[&min_lag],
    )
    .await?;
    Ok(answer.respond())
}

async fn describe(
    req: HttpRequest,
    state: web::Data<AppState>,
    group: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let sql = "SELECT pgcursor.consumer_group($1)";
    let answer = call_on_name(&req, &state, Level::ReadOnly, sql, &group).await?;
    Ok(answer.respond())
}

async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    group: web::Path<String>,
    query: Query,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::Admin)?;
    path_without_nul(&req)?;
    let group = group.into_inner();
    let metadata = delete_metadata(&query);
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.delete_consumer_group($1, NULL, $2)",
        &[&group, &metadata],
    )
    .await?;
    Ok(answer.respond())
}

async fn delete_on_queue(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: Query,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::Admin)?;
    path_without_nul(&req)?;
    let (group, queue) = path.into_inner();
    let metadata = delete_metadata(&query);
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.delete_consumer_group($1, $2, $3)",
        &[&group, &queue, &metadata],
    )
    .await?;
    Ok(answer.respond())
}

/// Body `{"subscriptionTimestamp": "<ISO>"}`; the SQL words every refusal
/// (missing, not a string, not a timestamp) as a 400 naming the field.
async fn update_subscription(
    req: HttpRequest,
    state: web::Data<AppState>,
    group: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    path_without_nul(&req)?;
    let group = group.into_inner();
    let request = optional_object_body(&body).await?;
    // newTimestamp echoes the string sent, as Queen does.
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.update_subscription($1, \
                pgcursor_internal.timestamp_arg($2::jsonb, 'subscriptionTimestamp')) \
                || jsonb_build_object('newTimestamp', $2::jsonb -> 'subscriptionTimestamp')",
        &[&group, &request],
    )
    .await?;
    Ok(answer.respond())
}

/// Body `{"toEnd": true}` or `{"timestamp": "<ISO>"}` (toEnd wins); an
/// empty body reads as `{}` and is refused by the SQL like any body naming
/// neither.
async fn seek(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    path_without_nul(&req)?;
    let (group, queue) = path.into_inner();
    let request = optional_object_body(&body).await?;
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.seek_consumer_group($1, $2, \
                pgcursor_internal.timestamp_arg($3::jsonb, 'timestamp'), \
                pgcursor_internal.bool_arg($3::jsonb, 'toEnd', false))",
        &[&group, &queue, &request],
    )
    .await?;
    Ok(answer.respond())
}

/// The body is ignored: the target is always the partition's end.
async fn seek_partition(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::ReadWrite)?;
    path_without_nul(&req)?;
    let (group, queue, partition) = path.into_inner();
    let answer = call_json(
        &state.pool,
        "SELECT pgcursor.seek_partition($1, $2, $3)",
        &[&group, &queue, &partition],
    )
    .await?;
    Ok(answer.respond())
}

/// pgcursor computes every figure when asked; nothing is cached to refresh.
async fn refresh_stats(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    state.auth.require(&req, Level::Admin)?;
    Ok(HttpResponse::Ok().json(json!({"success": true})))
}

/// `minLagSeconds`: an integer, default 3600; empty counts as absent.
fn min_lag_seconds(query: &BTreeMap<String, String>) -> Result<i32, ApiError> {
    crate::routes::call::int_query(query, "minLagSeconds", 3600)
}

/// `deleteMetadata`: `true` or `1` is true, any other given value false;
/// absent (or empty) is the default, true.
fn delete_metadata(query: &BTreeMap<String, String>) -> bool {
    match query.get("deleteMetadata").map(String::as_str) {
        None | Some("") => true,
        Some(value) => value == "true" || value == "1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn min_lag_defaults_to_an_hour_and_must_be_an_integer() {
        assert_eq!(min_lag_seconds(&query(&[])).unwrap(), 3600);
        assert_eq!(min_lag_seconds(&query(&[("minLagSeconds", "")])).unwrap(), 3600);
        assert_eq!(min_lag_seconds(&query(&[("minLagSeconds", "60")])).unwrap(), 60);
        assert!(matches!(
            min_lag_seconds(&query(&[("minLagSeconds", "1h")])),
            Err(ApiError::BadRequest(m)) if m == "minLagSeconds must be an integer"
        ));
    }

    #[test]
    fn delete_metadata_is_true_unless_given_otherwise() {
        assert!(delete_metadata(&query(&[])));
        assert!(delete_metadata(&query(&[("deleteMetadata", "")])));
        assert!(delete_metadata(&query(&[("deleteMetadata", "true")])));
        assert!(delete_metadata(&query(&[("deleteMetadata", "1")])));
        assert!(!delete_metadata(&query(&[("deleteMetadata", "false")])));
        assert!(!delete_metadata(&query(&[("deleteMetadata", "TRUE")])));
        assert!(!delete_metadata(&query(&[("deleteMetadata", "yes")])));
    }
}
