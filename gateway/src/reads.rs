//! Reads never hold every connection. A read of the status, analytics or
//! listing routes can take seconds on a large database (status/analytics:
//! 2.3 s over 1.8 million messages), and a dashboard, or any read-only
//! token, can send many at once. They all drew on the pool the pushes,
//! pops and acks need: 48 of them at once made a push wait 5 s for a
//! connection and answer 503. So each HTTP worker serves at most half of
//! its connections' worth of reads at once; further reads wait their turn
//! (PGCURSOR_DB_TIMEOUT_MS at most, then a 503), and the other half stays
//! free for the broker's own work and for /health.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::web;

use crate::app::AppState;
use crate::error::ApiError;

/// Whether a request is such a read: a GET of the API but a pop. (The
/// Prometheus scrape takes a read permit for its database figures too, but
/// goes out without them rather than wait: routes/metrics.rs.)
pub fn is_read(method: &Method, path: &str) -> bool {
    let api_read =
        path.starts_with("/api/v1/") && path != "/api/v1/pop" && !path.starts_with("/api/v1/pop/");
    *method == Method::GET && api_read
}

/// How many of a worker's `connections` may serve reads at once: half, and
/// at least one. (A worker has two connections or more unless the whole
/// pool is one: Config::workers.)
pub fn read_share(connections: usize) -> usize {
    (connections / 2).max(1)
}

/// Middleware (`middleware::from_fn`): a read first takes one of its
/// worker's read permits (AppState::reads), waiting up to
/// PGCURSOR_DB_TIMEOUT_MS, and holds it until it has its answer.
pub async fn limit_reads(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let Some(state) = state.filter(|_| is_read(req.method(), req.path())) else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let timeout = state.config.db_timeout();
    let Ok(Ok(_permit)) = tokio::time::timeout(timeout, state.reads.clone().acquire_owned()).await
    else {
        let busy = ApiError::Unavailable(format!(
            "too many reads at once: every read connection of this gateway was busy for {} ms; retry later",
            timeout.as_millis()
        ));
        return Ok(req.error_response(busy).map_into_right_body());
    };
    Ok(next.call(req).await?.map_into_left_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_the_apis_gets_but_pops_and_the_scrape() {
        for path in [
            "/api/v1/status/analytics",
            "/api/v1/messages",
            "/api/v1/resources/queues",
            "/api/v1/consumer-groups/lagging",
            "/api/v1/popular",
        ] {
            assert!(is_read(&Method::GET, path), "{path}");
        }
        for (method, path) in [
            (Method::GET, "/api/v1/pop"),
            (Method::GET, "/api/v1/pop/queue/orders"),
            (Method::GET, "/health"),
            (Method::GET, "/metrics"),
            (Method::GET, "/metrics/prometheus"),
            (Method::GET, "/"),
            (Method::POST, "/api/v1/push"),
            (Method::DELETE, "/api/v1/consumer-groups/g"),
        ] {
            assert!(!is_read(&method, path), "{method} {path}");
        }
    }

    #[test]
    fn reads_get_half_the_connections_and_at_least_one() {
        assert_eq!(read_share(16), 8);
        assert_eq!(read_share(3), 1);
        assert_eq!(read_share(1), 1);
    }
}
