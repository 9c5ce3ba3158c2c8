//! The HTTP application: shared state, route mounting, JSON errors, serving.

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use actix_web::body::MessageBody;
use actix_web::dev::Service;
use actix_web::dev::ServiceResponse;
use actix_web::error::JsonPayloadError;
use actix_web::http::header::{ALLOW, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers};
use actix_web::{web, App, HttpMessage, HttpRequest, HttpResponse, HttpServer};
use deadpool_postgres::Pool;
use futures::future::{ready, Either};
use serde_json::json;
use tracing::{info, warn};

use crate::auth::Auth;
use crate::config::{Command, Config};
use crate::db::{self, BootstrapError};
use crate::error::ApiError;
use crate::routes;

/// What every handler can reach through `web::Data<AppState>`: its HTTP
/// worker's connections, and (through `Deref`) what all workers share.
pub struct AppState {
    /// This worker's share of PGCURSOR_POOL_SIZE, driven on its own thread.
    pub pool: Pool,
    /// How many of its connections may serve reads at once (reads.rs).
    pub reads: Arc<tokio::sync::Semaphore>,
    shared: Arc<Shared>,
}

/// What every HTTP worker shares.
pub struct Shared {
    pub config: Config,
    pub auth: Auth,
    pub wakeups: crate::notify::PushWakeups,
    pub encryption: crate::encryption::Encryption,
    /// The process-wide metrics recorder (gateway/src/metrics.rs).
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// Whether pushes and acks go through Citus's delegated functions.
    pub deployment: db::Deployment,
    /// The most client connections the workers hold at once (connections.rs).
    pub max_connections: usize,
    /// Waiting pops of one kind look in turn (turns.rs).
    pub turns: crate::turns::Turns,
    /// Every worker's pool, by worker index.
    pools: Mutex<Vec<Option<Pool>>>,
    /// Room for request bodies, in KiB (PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT;
    /// body::guard_body).
    pub bodies: Arc<tokio::sync::Semaphore>,
    /// Room for pop answers (PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT; answers.rs).
    pub answers: crate::answers::AnswerBudget,
}

impl Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl AppState {
    /// Worker `index`'s state: a pool of its share of the connections, built
    /// here, on the worker's thread, so its connections are driven there.
    fn for_worker(shared: Arc<Shared>, index: usize) -> AppState {
        let connections = shared.config.pool_share(index);
        let pool = db::pool(&shared.config, connections);
        let reads = Arc::new(tokio::sync::Semaphore::new(crate::reads::read_share(
            connections,
        )));
        let mut pools = shared.pools.lock().unwrap_or_else(PoisonError::into_inner);
        // A worker actix restarts takes its index, and its place, again.
        pools[index] = Some(pool.clone());
        drop(pools);
        AppState {
            pool,
            reads,
            shared,
        }
    }
}

impl Shared {
    /// Every worker's pool added up: the gateway's request connections as
    /// one pool.
    pub fn pool_status(&self) -> deadpool_postgres::Status {
        let pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        let each = pools.iter().flatten().map(Pool::status);
        each.fold(
            deadpool_postgres::Status {
                max_size: 0,
                size: 0,
                available: 0,
                waiting: 0,
            },
            |sum, one| deadpool_postgres::Status {
                max_size: sum.max_size + one.max_size,
                size: sum.size + one.size,
                available: sum.available + one.available,
                waiting: sum.waiting + one.waiting,
            },
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    #[error("cannot listen on {bind}: {source}")]
    Bind {
        bind: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("server failed: {0}")]
    Serve(std::io::Error),
}

/// Mounts every route family, and the JSON 404 for everything else.
pub fn configure(cfg: &mut web::ServiceConfig) {
    routes::configure(cfg);
    cfg.default_service(web::to(no_such_route));
}

/// The JSON 404 of a path (or method) no route serves. It marks the
/// request, so the metrics label it `unmatched` without matching its path
/// against every route again.
pub(crate) async fn no_such_route(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    req.extensions_mut().insert(crate::metrics::NoRoute);
    Err(ApiError::NotFound("no such route".into()))
}

/// Bootstraps the schema, then serves (or stops there for `gateway migrate`).
pub async fn run(config: Config) -> Result<(), StartupError> {
    let mut client = db::connect_with_retry(&config.database_url, db::CONNECT_PATIENCE).await?;
    let migrate_only = config.command == Some(Command::Migrate);
    let apply = if migrate_only {
        db::Apply::Always
    } else {
        db::Apply::IfChanged
    };
    let deployment = db::bootstrap(&mut client, apply).await?;
    drop(client);
    if migrate_only {
        info!("schema is up to date");
        return Ok(());
    }
    serve(config, deployment).await
}

/// Serves until SIGTERM/SIGINT; actix then drains in-flight requests.
pub async fn serve(config: Config, deployment: db::Deployment) -> Result<(), StartupError> {
    let auth = config.tokens.clone().unwrap_or_default();
    if !auth.is_enabled() {
        warn!(
            "PGCURSOR_TOKENS is empty: authentication is OFF, the broker is open to anyone who can reach {}",
            config.bind
        );
    }
    let bind = config.bind;
    let limit = config.max_body_bytes;
    let metrics = crate::metrics::install();
    spawn_metrics_upkeep(metrics.clone());
    let workers = config.workers();
    // Before any connection is opened: the cap depends on it.
    let open_files = crate::connections::raise_open_files_limit();
    // The pool, the push listener and the background connection.
    let database_connections = config.pool_size + 2;
    let per_worker = crate::connections::per_worker_cap(open_files, database_connections, workers);
    let max_connections = per_worker * workers;
    log_connection_cap(open_files, max_connections);
    let shared = Arc::new(Shared {
        max_connections,
        turns: crate::turns::Turns::default(),
        pools: Mutex::new(vec![None; workers]),
        metrics,
        deployment,
        wakeups: crate::notify::PushWakeups::start(&config),
        encryption: crate::encryption::Encryption::new(config.encryption_key.clone()),
        bodies: Arc::new(tokio::sync::Semaphore::new(config.bodies_kib() as usize)),
        answers: crate::answers::AnswerBudget::new(config.answers_kib()),
        config,
        auth,
    });
    // The clocks' own connection, and the last flush's after the workers stop.
    let background = db::pool(&shared.config, 1);
    crate::housekeeping::spawn(
        background.clone(),
        shared.config.housekeeping_interval(),
        shared.config.partition_cleanup_days,
    );
    crate::minutes::spawn(background.clone(), shared.config.stats_flush_interval());
    crate::process::set_port(bind.port());
    let sampled = shared.clone();
    crate::process::spawn_sampler(move || {
        let pool = sampled.pool_status();
        (
            pool.size,
            pool.available,
            pool.size.saturating_sub(pool.available),
        )
    });
    let stopping = shared.clone();
    let next_worker = Arc::new(AtomicUsize::new(0));
    let server = HttpServer::new(move || {
        let index = next_worker.fetch_add(1, Ordering::Relaxed) % workers;
        let state = web::Data::new(AppState::for_worker(shared.clone(), index));
        App::new()
            .app_data(state)
            .app_data(web::PayloadConfig::new(limit))
            .app_data(
                web::JsonConfig::default()
                    .limit(limit)
                    .content_type_required(false)
                    .error_handler(json_payload_error),
            )
            // Innermost, so the 503s, 401s, 400s, 415s and 408s they answer
            // pass through the layers registered after them (error handlers,
            // CORS, request metrics); guard_body around the refusals, whose
            // answers leave a body unread.
            .wrap(actix_web::middleware::from_fn(crate::reads::limit_reads))
            .wrap(actix_web::middleware::from_fn(
                crate::body::refuse_before_reading,
            ))
            .wrap(actix_web::middleware::from_fn(crate::body::guard_body))
            .wrap(ErrorHandlers::new().default_handler(move |res| json_errors(res, limit)))
            // So every answer (errors, 404s) carries the CORS headers, but
            // the Prometheus exposition (docs/http-api.md "CORS").
            .wrap_fn(|req, srv| {
                let cors = crate::cors::applies_to(req.path());
                if crate::cors::is_preflight(req.method()) {
                    let answer = req.into_response(crate::cors::preflight(cors));
                    return Either::Left(ready(Ok(answer.map_into_right_body())));
                }
                let call = srv.call(req);
                Either::Right(async move {
                    let mut answer = call.await?;
                    if cors {
                        crate::cors::add_headers(answer.headers_mut());
                    }
                    Ok(answer.map_into_left_body())
                })
            })
            // Every request is counted and timed, by route pattern; one
            // actix drops unanswered (its client reset the connection) as
            // a 499 when dropped.
            .wrap_fn(|req, srv| {
                let started = std::time::Instant::now();
                let mut unanswered =
                    crate::metrics::Unanswered::new(req.match_pattern(), req.method(), started);
                let call = srv.call(req);
                async move {
                    let answer = call.await;
                    let route = unanswered.answered();
                    let answer = answer?;
                    let request = answer.request();
                    let routed = !request.extensions().contains::<crate::metrics::NoRoute>();
                    crate::metrics::record_request(
                        route.filter(|_| routed),
                        request.method(),
                        answer.status().as_u16(),
                        started.elapsed(),
                    );
                    Ok(answer)
                }
            })
            // Outermost: it watches the answer as it leaves.
            .wrap(actix_web::middleware::from_fn(
                crate::peer::watch_long_answers,
            ))
            .configure(configure)
    })
    .on_connect(move |connection, data| {
        crate::connections::opened(connection, data, max_connections)
    })
    .workers(workers)
    .max_connections(per_worker)
    .shutdown_timeout(10)
    .disable_signals() // stop_on_signal
    .bind(bind)
    .map_err(|source| StartupError::Bind { bind, source })?;
    info!("listening on http://{bind}");
    let server = server.run();
    tokio::spawn(stop_on_signal(server.handle(), stopping.wakeups.clone()));
    let served = server.await.map_err(StartupError::Serve);
    // What was counted since the last flush would otherwise die with the process.
    if let Err(why) = crate::minutes::flush(&background).await {
        warn!("flushing the gateway's per-minute figures at shutdown failed: {why}");
    }
    served
}

/// SIGTERM, and SIGINT (Ctrl-C under `make run`) alike, stop the gateway
/// gracefully: waiting pops answer at once, requests in progress finish
/// (10 s at most). SIGQUIT stops it at once.
async fn stop_on_signal(server: actix_web::dev::ServerHandle, wakeups: crate::notify::PushWakeups) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::quit()),
    ) else {
        warn!("cannot watch for stop signals: a signal ends the gateway without a graceful stop");
        return;
    };
    let graceful = tokio::select! {
        _ = term.recv() => true,
        _ = int.recv() => true,
        _ = quit.recv() => false,
    };
    info!("stopping: waiting pops answer now");
    wakeups.stop_waiting();
    server.stop(graceful).await;
}

/// What the open-files limit allows, at startup: an operator expecting
/// more waiting consumers than that learns it here, not from clients that
/// cannot connect.
fn log_connection_cap(open_files: Option<u64>, cap: usize) {
    match open_files {
        Some(limit) if cap < 1000 => warn!(
            "open files limit {limit}: serving at most {cap} HTTP connections at once, and a long-poll holds one; raise the limit (LimitNOFILE, ulimit -n) to serve more"
        ),
        Some(limit) => info!("open files limit {limit}: serving at most {cap} HTTP connections at once"),
        None => info!("serving at most {cap} HTTP connections at once"),
    }
}

/// Histogram samples wait in the recorder until a scrape folds them in;
/// without scrapes they would pile up, so fold them in every few seconds.
fn spawn_metrics_upkeep(handle: metrics_exporter_prometheus::PrometheusHandle) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            handle.run_upkeep();
        }
    });
}

fn json_payload_error(e: JsonPayloadError, _: &HttpRequest) -> actix_web::Error {
    match e {
        JsonPayloadError::Overflow { limit }
        | JsonPayloadError::OverflowKnownLength { limit, .. } => {
            ApiError::PayloadTooLarge(format!("request body exceeds {limit} bytes")).into()
        }
        other => ApiError::BadRequest(format!("invalid JSON body: {other}")).into(),
    }
}

/// Rewrites any error response actix made itself (405, 413 from a body
/// extractor, ...) into our `{"error": "..."}` shape.
fn json_errors<B: MessageBody + 'static>(
    res: ServiceResponse<B>,
    body_limit: usize,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let is_json = res
        .response()
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    // A 405's Allow header names the methods the path has: keep it.
    let allow = res.response().headers().get(ALLOW).cloned();
    let message = match (status, &allow) {
        (StatusCode::PAYLOAD_TOO_LARGE, _) => format!("request body exceeds {body_limit} bytes"),
        (StatusCode::METHOD_NOT_ALLOWED, Some(allow)) => format!(
            "method {} is not allowed here; allowed: {}",
            res.request().method(),
            allow.to_str().unwrap_or_default()
        ),
        _ => match res.response().error() {
            Some(e) => e.to_string(),
            None => status.canonical_reason().unwrap_or("error").to_lowercase(),
        },
    };
    let (req, _) = res.into_parts();
    let mut response = HttpResponse::build(status);
    if let Some(allow) = allow {
        response.insert_header((ALLOW, allow));
    }
    let response = response.json(json!({ "error": message }));
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, response).map_into_right_body(),
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use actix_web::test::{call_service, init_service, TestRequest};

    use super::*;

    /// What finding a request's route pattern costs (the metrics label)
    /// after routing, for the deepest, last-mounted and unmatched paths
    /// (before routing actix matches every pattern again: ~100 µs in a
    /// debug build; after, it follows the routed resource's index). Run by hand:
    /// `cargo test -p gateway cost_of_route_patterns -- --ignored --nocapture`.
    #[actix_web::test]
    #[ignore]
    async fn cost_of_route_patterns() {
        // As the metrics middleware asks: once routing has happened.
        let app = init_service(App::new().configure(configure).wrap_fn(|req, srv| {
            let call = srv.call(req);
            async move {
                let answer = call.await?;
                let req = answer.request();
                let rounds = 20_000u32;
                let started = Instant::now();
                for _ in 0..rounds {
                    std::hint::black_box(req.match_pattern());
                }
                println!(
                    "{}: {:?} per match_pattern ({:?})",
                    req.path(),
                    started.elapsed() / rounds,
                    req.match_pattern()
                );
                Ok(answer)
            }
        }))
        .await;
        for path in [
            "/api/v1/push",
            "/api/v1/pop/queue/orders/partition/p",
            "/api/v1/traces/names",
            "/no/such/route",
        ] {
            call_service(&app, TestRequest::get().uri(path).to_request()).await;
        }
    }
}
