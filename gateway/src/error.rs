//! The one error type of the HTTP layer: every failure answers
//! `{"error": "..."}` with the status of its variant.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The request is well formed but the state refuses it (a dead letter's
    /// requeue into a queue at its maxSize: SQLSTATE PC409): 409.
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A body in a Content-Encoding the gateway does not decode: 415.
    #[error("{0}")]
    UnsupportedEncoding(String),
    /// The body did not arrive whole in time (body::guard_body): 408.
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{0}")]
    Unavailable(String),
    /// Maintenance mode refuses the request for now: 503 with Retry-After.
    #[error("{0}")]
    Maintenance(String),
    /// `pgcursor.push` refused plaintext payloads for these queues, which
    /// have encryptionEnabled (SQLSTATE PCENC, gateway/src/encryption.rs).
    /// A gateway with the key seals them and tries again; otherwise a 503.
    #[error(
        "{} encryptionEnabled: this gateway has no PGCURSOR_ENCRYPTION_KEY, and payloads for encrypted queues are never stored in plaintext",
        encrypted_queues(.0)
    )]
    EncryptedQueues(Vec<String>),
    /// The client hung up before it was answered (routes/pop.rs): 499, as
    /// nginx logs it. Nobody reads the answer; the request metrics count it.
    #[error("the client closed the connection before it was answered")]
    ClientClosed,
    /// A failure that is nobody's input: a bug or an unexpected SQL error.
    #[error("{0}")]
    Internal(String),
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedEncoding(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Unavailable(_) | ApiError::Maintenance(_) | ApiError::EncryptedQueues(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            // nginx's "client closed request": no standard code says it.
            ApiError::ClientClosed => StatusCode::from_u16(499).expect("499 is in 100..=999"),
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        match self {
            ApiError::Maintenance(_) => {
                response.insert_header(("Retry-After", MAINTENANCE_RETRY_AFTER));
            }
            // RFC 9110 §11.6.1: a 401 names the scheme it takes.
            ApiError::Unauthorized(_) => {
                response.insert_header(("WWW-Authenticate", "Bearer"));
            }
            _ => {}
        }
        response.json(json!({ "error": self.to_string() }))
    }
}

/// Seconds a client refused by maintenance mode is told to wait.
const MAINTENANCE_RETRY_AFTER: &str = "30";

/// `queue "a" has` / `queues "a", "b" have`.
fn encrypted_queues(queues: &[String]) -> String {
    let names: Vec<String> = queues.iter().map(|q| format!("{q:?}")).collect();
    match names.len() {
        1 => format!("queue {} has", names[0]),
        _ => format!("queues {} have", names.join(", ")),
    }
}

/// No pooled connection (PostgreSQL down, pool exhausted past the timeout):
/// a database error (minutes::record_db_error). A server that refused the
/// connection for want of resources (class 53: too many clients) says so,
/// as when it refuses a statement.
impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        crate::minutes::record_db_error();
        let detail = crate::db::pool_error_detail(&e);
        match &e {
            deadpool_postgres::PoolError::Backend(e) if out_of_resources(e) => {
                ApiError::Unavailable(format!("database out of resources: {detail}"))
            }
            _ => ApiError::Unavailable(format!("database unavailable: {detail}")),
        }
    }
}

/// SQLSTATE class 53, insufficient resources (memory, disk, connections):
/// whether PostgreSQL refused a statement or a connection for want of them.
fn out_of_resources(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| c.code().starts_with("53"))
}

/// SQL functions signal bad input with SQLSTATE 22023 (invalid_parameter_value)
/// and a missing thing with P0002 (no_data_found); a lost connection is a 503.
/// Two more are the client's input, refused before anything is written:
/// a NUL character in a path or query value (22021 as text, 22P05 inside
/// jsonb; PostgreSQL cannot store it) and a value too long for an index
/// (54000; names are refused at 1024 bytes where they are created, so this
/// is the fallback). PC503 and PC409 are pgcursor's own: maintenance
/// mode refused a push before it wrote anything; the state refused a
/// well-formed request (a queue too full to take a dead letter back). Class 53 (insufficient
/// resources: out of memory or shared memory, disk full, too many
/// connections) is the server's state, not a bug or the input: a 503 to
/// retry later, as for a lost connection. So are a deadlock's victim or a
/// serialization failure (40P01, 40001: rolled back whole), a read-only database
/// (25006: a standby, or default_transaction_read_only, as during a
/// failover) and a canceled statement (57014: a statement_timeout or an
/// administrator's cancel); both may come from a session's settings, so the
/// pool then replaces its sessions (db::note_if_session_setting_error). Those, a lost connection and any
/// other unexpected error count as database errors (minutes::record_db_error);
/// the refusals of the input or the state do not.
impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        crate::db::note_if_session_setting_error(&e);
        let detail = crate::db::error_detail(&e);
        let error = match e.code().map(|c| c.code()) {
            Some("22023") => ApiError::BadRequest(detail),
            Some("22021" | "22P05") => {
                ApiError::BadRequest(format!("a value contains a NUL character: {detail}"))
            }
            Some("54000") => ApiError::BadRequest(format!("a value is too long: {detail}")),
            Some("P0002") => ApiError::NotFound(detail),
            Some("PC503") => ApiError::Maintenance(detail),
            Some("PC409") => ApiError::Conflict(detail),
            Some("PCENC") => ApiError::EncryptedQueues(crate::encryption::refused_queues(
                e.as_db_error().and_then(|db| db.detail()),
            )),
            _ if out_of_resources(&e) => {
                ApiError::Unavailable(format!("database out of resources: {detail}"))
            }
            Some("25006") => ApiError::Unavailable(format!("database is read-only: {detail}")),
            Some("57014") => {
                ApiError::Unavailable(format!("database canceled the statement: {detail}"))
            }
            // A deadlock's victim (made again first: again_after_deadlock)
            // or a serialization failure: rolled back whole, contention
            // rather than a fault, so safe and worth retrying.
            Some("40P01" | "40001") => ApiError::Unavailable(format!(
                "database busy: the request was rolled back in a conflict with others, retry: {detail}"
            )),
            _ if crate::db::is_connection_error(&e) => {
                ApiError::Unavailable(format!("database unavailable: {detail}"))
            }
            _ => ApiError::Internal(format!("database error: {detail}")),
        };
        if matches!(error, ApiError::Unavailable(_) | ApiError::Internal(_)) {
            crate::minutes::record_db_error();
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::body::to_bytes;

    #[actix_web::test]
    async fn renders_json_with_the_status() {
        let response = ApiError::Forbidden("no".into()).error_response();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let body = to_bytes(response.into_body()).await.unwrap();
        assert_eq!(body.as_ref(), br#"{"error":"no"}"#);
    }

    #[actix_web::test]
    async fn maintenance_is_503_with_retry_after() {
        let response = ApiError::Maintenance("paused".into()).error_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers().get("Retry-After").unwrap(), "30");
    }

    /// SQLSTATEs raised by a real server, as the routes see them.
    #[tokio::test]
    async fn resources_read_only_and_cancels_are_503_and_other_errors_500() {
        let db = pgcursor_tests::db().await;
        let raised = |code: &'static str| {
            let db = &db;
            async move {
                let sql =
                    format!("DO $$ BEGIN RAISE EXCEPTION 'boom' USING ERRCODE = '{code}'; END $$");
                ApiError::from(db.batch_execute(&sql).await.unwrap_err())
            }
        };
        for code in ["53200", "53100", "53300"] {
            let error = raised(code).await;
            assert_eq!(
                error.status_code(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{code}: {error}"
            );
            assert!(
                error.to_string().starts_with("database out of resources: "),
                "{error}"
            );
        }
        for (code, said) in [
            ("25006", "database is read-only: "),
            ("57014", "database canceled the statement: "),
            ("40P01", "database busy: "),
            ("40001", "database busy: "),
        ] {
            let error = raised(code).await;
            assert_eq!(
                error.status_code(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{code}: {error}"
            );
            assert!(error.to_string().starts_with(said), "{error}");
        }
        assert_eq!(
            raised("XX000").await.status_code(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(raised("22023").await.status_code(), StatusCode::BAD_REQUEST);
        assert_eq!(raised("PC409").await.status_code(), StatusCode::CONFLICT);
    }

    /// A connection refused for want of resources (a role at its
    /// connection limit: SQLSTATE 53300, as for max_connections).
    #[tokio::test]
    async fn a_connection_refused_for_want_of_resources_says_so() {
        let db = pgcursor_tests::db().await;
        let role = format!("pgcursor_limit0_{}", std::process::id());
        db.batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN CONNECTION LIMIT 0"
        ))
        .await
        .unwrap();
        let mut config: tokio_postgres::Config = pgcursor_tests::database_url().parse().unwrap();
        config.user(&role);
        let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(1)
            .build()
            .unwrap();
        let Err(refused) = pool.get().await else {
            panic!("a role with CONNECTION LIMIT 0 connected");
        };
        let error = ApiError::from(refused);
        db.batch_execute(&format!("DROP ROLE {role}"))
            .await
            .unwrap();
        assert_eq!(error.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            error.to_string().starts_with("database out of resources: "),
            "{error}"
        );
    }

    #[test]
    fn encrypted_queue_refusals_name_the_queues() {
        let one = ApiError::EncryptedQueues(vec!["orders".into()]);
        assert_eq!(one.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(one.to_string().starts_with(
            r#"queue "orders" has encryptionEnabled: this gateway has no PGCURSOR_ENCRYPTION_KEY"#
        ));
        let two = ApiError::EncryptedQueues(vec!["a".into(), "b".into()]);
        assert!(two
            .to_string()
            .starts_with(r#"queues "a", "b" have encryptionEnabled"#));
    }
}
