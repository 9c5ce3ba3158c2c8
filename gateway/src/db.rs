//! The connection pool and the schema bootstrap.
//!
//! Bootstrap = refinery's migrations (tables, indexes), then every `sql/*.sql`
//! file (the stored functions) in the order their number prefixes give
//! (sql/00_namespace.sql explains it), in one transaction, unless those
//! files are applied already and unchanged since (applied_already). Both steps are
//! serialised by an advisory lock so several gateways starting together
//! against one database are safe. On a Citus coordinator whose tables are
//! distributed, `sql/citus/functions.sql` follows in the same transaction:
//! it replaces the functions Citus cannot run (docs/operations.md).

use std::error::Error as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use deadpool_postgres::{
    Connect, Hook, HookError, Manager, ManagerConfig, Metrics, Pool, PoolError, RecyclingMethod,
    Runtime,
};
use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};
use tracing::{info, warn};

use crate::config::Config;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

// `SQL_FILES: &[(&str, &str)]`: (file name, contents), sorted by name, and
// `CITUS_FUNCTIONS: &str` (build.rs).
include!(concat!(env!("OUT_DIR"), "/sql_files.rs"));

/// Advisory lock key for the bootstrap ("pgcursor" in ASCII).
const BOOTSTRAP_LOCK: i64 = 0x7067_6375_7273_6f72;

/// How long startup keeps trying to reach PostgreSQL.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(String),
    #[error("migrations failed: {0}")]
    Migrate(String),
    #[error("{file} failed: {detail}")]
    Function { file: String, detail: String },
    #[error("bootstrap failed: {0}")]
    Database(String),
    #[error(
        "the database's encoding is {0}; pgcursor needs UTF8, the encoding of JSON text: \
         create one with CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0"
    )]
    Encoding(String),
}

impl BootstrapError {
    /// A statement of the bootstrap's own failed (not a function file's).
    fn database(e: tokio_postgres::Error) -> BootstrapError {
        BootstrapError::Database(error_detail(&e))
    }
}

/// A pool of at most `size` connections, opened lazily (so building it
/// never fails because PostgreSQL is down) and driven on the runtime this is
/// called on. Each HTTP worker builds its own on its own thread: a request's
/// queries then never hand off to another thread and back (with one worker,
/// that took 15% of the gateway's CPU per message). The main runtime builds
/// the background one.
pub fn pool(config: &Config, size: usize) -> Pool {
    let mut pg = config.database_url.clone();
    pg.connect_timeout(config.db_timeout());
    // So pg_stat_activity tells the gateway's sessions apart, unless the
    // URL names them itself.
    if pg.get_application_name().is_none() {
        pg.application_name("pgcursor-gateway");
    }
    // A timestamp in a request without an offset (`subscriptionFrom`, the
    // `from`/`to` filters) is read as UTC, as every answer is written,
    // whatever the server's default zone.
    set_unless_given(&mut pg, "TimeZone", "UTC");
    // A statement whose gateway went away mid-wait (a stop's 10 s ran out
    // while it waited on a lock; the process killed) is ended within a
    // second, rolled back: else it committed later, a push stored that no
    // client was answered, a pop's lease taken for nobody.
    set_unless_given(&mut pg, "client_connection_check_interval", "1000");
    // Fast recycling: a connection PostgreSQL closed is noticed and replaced.
    let manager = Manager::from_connect(
        pg,
        ConnectOn {
            runtime: tokio::runtime::Handle::current(),
        },
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let timeout = Some(config.db_timeout());
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(timeout)
        .create_timeout(timeout)
        .recycle_timeout(timeout)
        .pre_recycle(Hook::sync_fn(|_, metrics| match is_stale(metrics) {
            true => Err(HookError::Message("a stale session: replaced".into())),
            false => Ok(()),
        }))
        .build()
        .expect("a pool with a runtime always builds")
}

/// A session keeps the settings it started with: one opened while the
/// database was read-only (`ALTER DATABASE ... SET
/// default_transaction_read_only`, or a standby) or had a statement_timeout
/// stays so after the setting is reset, and a pooled one lives for ever. So a
/// pooled connection is replaced at its checkout once it is older than
/// `MAX_SESSION_AGE`, or than the last error such a setting caused
/// (`note_if_session_setting_error`): those errors then end with the setting.
pub const MAX_SESSION_AGE: Duration = Duration::from_secs(30 * 60);

/// When a session setting last refused a statement, in milliseconds after
/// `process_start()` (0: never).
static SETTING_ERROR_AT_MS: AtomicU64 = AtomicU64::new(0);

fn process_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Whether PostgreSQL refused a statement for what a session setting says:
/// SQLSTATE 25006 (a read-only transaction) or 57014 (a statement timeout,
/// or a cancel).
fn is_session_setting_error(e: &tokio_postgres::Error) -> bool {
    matches!(e.code().map(|c| c.code()), Some("25006" | "57014"))
}

/// After such an error (is_session_setting_error), the pooled sessions are
/// replaced (mark_sessions_stale).
pub fn note_if_session_setting_error(e: &tokio_postgres::Error) {
    if is_session_setting_error(e) {
        mark_sessions_stale();
    }
}

/// Every pooled session opened before now is replaced at its next checkout.
pub fn mark_sessions_stale() {
    let at = process_start().elapsed().as_millis() as u64;
    SETTING_ERROR_AT_MS.fetch_max(at.max(1), Ordering::Relaxed);
}

fn is_stale(metrics: &Metrics) -> bool {
    let at = SETTING_ERROR_AT_MS.load(Ordering::Relaxed);
    let refused = at > 0 && metrics.created <= process_start() + Duration::from_millis(at);
    refused || metrics.created.elapsed() > MAX_SESSION_AGE
}

/// Opens a pool's connections on the runtime that built it, and drives
/// them there, whichever task first asks for one.
struct ConnectOn {
    runtime: tokio::runtime::Handle,
}

impl Connect for ConnectOn {
    fn connect(
        &self,
        pg: &tokio_postgres::Config,
    ) -> BoxFuture<'_, Result<(Client, JoinHandle<()>), tokio_postgres::Error>> {
        let pg = pg.clone();
        let opened = self.runtime.spawn(async move {
            let (client, connection) = pg.connect(NoTls).await?;
            let driver = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    warn!("pooled connection ended: {}", error_detail(&e));
                }
            });
            Ok((client, driver))
        });
        Box::pin(async move {
            match opened.await {
                Ok(opened) => opened,
                // The runtime is going away (exit): the pool's create
                // timeout answers the request.
                Err(_) => std::future::pending().await,
            }
        })
    }
}

/// Connects, retrying for up to `patience` while PostgreSQL is not
/// reachable yet (e.g. starting next to the gateway).
pub async fn connect_with_retry(
    pg: &tokio_postgres::Config,
    patience: Duration,
) -> Result<Client, BootstrapError> {
    let deadline = Instant::now() + patience;
    let mut attempts = 0u32;
    loop {
        match connect(pg).await {
            Ok(client) => return Ok(client),
            Err(e) if Instant::now() < deadline && is_connection_error(&e) => {
                // One line every 5 s is enough to see what startup waits for.
                if attempts.is_multiple_of(5) {
                    warn!(
                        "PostgreSQL not reachable yet ({}); retrying for up to {patience:?}",
                        error_detail(&e)
                    );
                }
                attempts += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(BootstrapError::Connect(error_detail(&e))),
        }
    }
}

/// One connection outside the pool, its driver task spawned.
pub async fn connect(pg: &tokio_postgres::Config) -> Result<Client, tokio_postgres::Error> {
    let mut pg = pg.clone();
    if pg.get_connect_timeout().is_none() {
        pg.connect_timeout(Duration::from_secs(5));
    }
    let (client, connection) = pg.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            warn!("connection outside the pool ended: {}", error_detail(&e));
        }
    });
    Ok(client)
}

/// Sessions start with setting `name` at `value`, unless DATABASE_URL's
/// options set it themselves (theirs wins).
fn set_unless_given(pg: &mut tokio_postgres::Config, name: &str, value: &str) {
    let options = pg.get_options().unwrap_or_default();
    if !options
        .to_ascii_lowercase()
        .contains(&name.to_ascii_lowercase())
    {
        pg.options(format!("{options} -c {name}={value}").trim_start());
    }
}

/// When the bootstrap applies the function files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apply {
    /// Unless they are the files applied last and no function or trigger
    /// changed since (a gateway's start).
    IfChanged,
    /// Every time (`gateway migrate`: also mends functions changed by hand).
    Always,
}

impl Apply {
    /// Whether this bootstrap may skip the files when the record says they
    /// are applied and unchanged: only a start after which no migration ran,
    /// since a migration may change what the functions are made against.
    fn may_skip(self, migrations_run: usize) -> bool {
        self == Apply::IfChanged && migrations_run == 0
    }
}

/// Applies the migrations, then the SQL functions, under the bootstrap lock.
pub async fn bootstrap(client: &mut Client, apply: Apply) -> Result<Deployment, BootstrapError> {
    // Payloads, names and errors are JSON text, which is Unicode; in another
    // encoding the functions' own text fails to load with a riddle
    // ("character with byte sequence 0xe2 0x80 0xa6 ... has no equivalent").
    let encoding: String = client
        .query_one("SELECT current_setting('server_encoding')", &[])
        .await
        .map_err(BootstrapError::database)?
        .get(0);
    if encoding != "UTF8" {
        return Err(BootstrapError::Encoding(encoding));
    }
    // A lock_timeout in DATABASE_URL's options is meant for requests: the
    // bootstrap waits for another gateway's bootstrap however long it takes.
    client
        .batch_execute("SET lock_timeout = 0")
        .await
        .map_err(BootstrapError::database)?;
    // Session lock: refinery runs its own transactions.
    client
        .execute("SELECT pg_advisory_lock($1)", &[&BOOTSTRAP_LOCK])
        .await
        .map_err(BootstrapError::database)?;
    let result = migrate_and_apply(client, apply).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&BOOTSTRAP_LOCK])
        .await;
    let distributed = result?; // the bootstrap's own error matters more than the unlock's
    unlocked.map_err(BootstrapError::database)?;
    let deployment = Deployment::of(client, distributed)
        .await
        .map_err(BootstrapError::database)?;
    if let Deployment::Delegating { lock_timeout } = &deployment {
        info!(
            "calling the delegated functions of sql/citus/delegate.sql for pushes to one partition and acks \
             (lock_timeout on the workers: {})",
            lock_timeout.as_deref().unwrap_or("theirs")
        );
    }
    Ok(deployment)
}

/// How the gateway calls pushes and acks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deployment {
    /// Through pgcursor's functions, as a psql user would.
    Direct,
    /// On a Citus coordinator with sql/citus/delegate.sql applied: a push
    /// whose items go to one partition, and every ack group, through the
    /// functions Citus runs whole on the partition's worker. Such a call
    /// runs in a worker's session, without the settings of the gateway's
    /// own: each is given `lock_timeout`, the gateway's sessions' setting
    /// (DATABASE_URL's options; None when it is 0), to set there.
    Delegating { lock_timeout: Option<String> },
}

/// The functions of sql/citus/delegate.sql the gateway calls.
const DELEGATED: [&str; 5] = [
    "pgcursor_citus.push(uuid,jsonb,text)",
    "pgcursor_citus.push_partition(text,text)",
    "pgcursor_citus.ack_group(uuid,jsonb,text)",
    "pgcursor_citus.wake_queue(text)",
    "pgcursor_citus.wake_partition(uuid)",
];

impl Deployment {
    /// `distributed`: whether Citus distributes pgcursor.messages (the
    /// bootstrap's answer, apply_functions).
    async fn of(client: &Client, distributed: bool) -> Result<Deployment, tokio_postgres::Error> {
        if !distributed {
            return Ok(Deployment::Direct);
        }
        let all: bool = client
            .query_one(
                "SELECT bool_and(to_regprocedure(f) IS NOT NULL) FROM unnest($1::text[]) f",
                &[&DELEGATED.as_slice()],
            )
            .await?
            .get(0);
        if !all {
            return Ok(Deployment::Direct);
        }
        // reset_val: the session's value as it connected, before the
        // bootstrap's own SET lock_timeout = 0.
        let lock_timeout: Option<String> = client
            .query_one(
                "SELECT nullif(reset_val, '0') FROM pg_settings WHERE name = 'lock_timeout'",
                &[],
            )
            .await?
            .get(0);
        Ok(Deployment::Delegating { lock_timeout })
    }
}

/// Sends a long-poll wake-up from the coordinator: `sql` is one of the
/// wake functions of sql/citus/delegate.sql, `target` its argument.
pub async fn wake(
    client: &deadpool_postgres::Client,
    sql: &str,
    target: &(dyn tokio_postgres::types::ToSql + Sync),
) -> Result<(), tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.execute(&statement, &[target]).await.map(drop)
}

/// Whether Citus distributes pgcursor.messages.
async fn migrate_and_apply(client: &mut Client, apply: Apply) -> Result<bool, BootstrapError> {
    let report = embedded::migrations::runner()
        .run_async(client)
        .await
        .map_err(|e| BootstrapError::Migrate(e.to_string()))?;
    for m in report.applied_migrations() {
        info!("applied migration {}", m);
    }
    let distributed = is_distributed(client)
        .await
        .map_err(BootstrapError::database)?;
    let files = function_files(distributed);
    let text = files_text(&files);
    if apply.may_skip(report.applied_migrations().len())
        && applied_already(client, &text)
            .await
            .map_err(BootstrapError::database)?
    {
        info!("the SQL function files are applied already and unchanged since");
        return Ok(distributed);
    }
    apply_functions(client, &files, &text).await?;
    if distributed {
        info!("applied sql/citus/functions.sql too: pgcursor.messages is distributed by Citus");
    }
    info!("applied {} SQL function files", files.len());
    Ok(distributed)
}

/// The function files to apply, in order, as (path, contents): sql/*.sql,
/// then, when Citus distributes pgcursor.messages, sql/citus/functions.sql
/// (it replaces the functions Citus cannot run).
fn function_files(distributed: bool) -> Vec<(String, &'static str)> {
    let mut files: Vec<(String, &str)> = SQL_FILES
        .iter()
        .map(|(file, sql)| (format!("sql/{file}"), *sql))
        .collect();
    if distributed {
        files.push(("sql/citus/functions.sql".to_string(), CITUS_FUNCTIONS));
    }
    files
}

/// The catalog rows the function files write, each as (oid, xmin): every
/// function of both schemas and every trigger on pgcursor's tables. A
/// CREATE (OR REPLACE), ALTER or DROP of any of them changes its md5.
const CATALOG_FINGERPRINT: &str = "SELECT md5(string_agg(r, ',' ORDER BY r)) FROM (
        SELECT 'f' || p.oid || ':' || p.xmin FROM pg_proc p
         WHERE p.pronamespace IN ('pgcursor'::regnamespace, 'pgcursor_internal'::regnamespace)
        UNION ALL
        SELECT 't' || t.oid || ':' || t.xmin FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE c.relnamespace = 'pgcursor'::regnamespace AND NOT t.tgisinternal) x(r)";

/// All the files' paths and contents as one text, whose md5 is recorded.
fn files_text(files: &[(String, &str)]) -> String {
    files
        .iter()
        .map(|(path, sql)| format!("{path}\n{sql}\n"))
        .collect()
}

/// True when the files (their files_text) are the ones applied last and no
/// function or trigger changed since (migrations/V21__applied_functions.sql).
async fn applied_already(client: &Client, text: &str) -> Result<bool, tokio_postgres::Error> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM pgcursor_internal.applied_functions a
                         WHERE a.files = md5($1) AND a.catalog = ({CATALOG_FINGERPRINT}))"
    );
    Ok(client.query_one(&sql, &[&text]).await?.get(0))
}

/// All function files in one transaction: a broken file changes nothing.
/// The transaction ends by recording what it applied (`text`, the files'
/// files_text) and the catalog rows it left (applied_already).
async fn apply_functions(
    client: &mut Client,
    files: &[(String, &str)],
    text: &str,
) -> Result<(), BootstrapError> {
    let tx = client
        .transaction()
        .await
        .map_err(BootstrapError::database)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&BOOTSTRAP_LOCK])
        .await
        .map_err(BootstrapError::database)?;
    for (file, sql) in files {
        tx.batch_execute(sql)
            .await
            .map_err(|e| BootstrapError::Function {
                file: file.clone(),
                detail: error_detail(&e),
            })?;
    }
    let record = format!(
        "INSERT INTO pgcursor_internal.applied_functions AS a (files, catalog)
         VALUES (md5($1), ({CATALOG_FINGERPRINT}))
         ON CONFLICT (one) DO UPDATE SET files = excluded.files, catalog = excluded.catalog, applied_at = now()"
    );
    tx.execute(&record, &[&text])
        .await
        .map_err(BootstrapError::database)?;
    tx.commit().await.map_err(BootstrapError::database)
}

/// True when Citus distributes pgcursor.messages (scripts/citus.sh
/// distribute did its work); false on plain PostgreSQL.
async fn is_distributed(
    client: &impl tokio_postgres::GenericClient,
) -> Result<bool, tokio_postgres::Error> {
    // pg_dist_partition exists only with the citus extension: ask whether it does first.
    let citus = client
        .query_one(
            "SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL",
            &[],
        )
        .await?
        .get::<_, bool>(0);
    if !citus {
        return Ok(false);
    }
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                             WHERE logicalrelid = 'pgcursor.messages'::regclass)",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// A readable one-line description: PostgreSQL's own message for SQL
/// errors, the underlying cause for connection errors.
pub fn error_detail(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_string(),
        };
    }
    match e.source() {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// True when the error is about reaching the server, not about the SQL.
/// (Class 57P: the server is shutting down or still starting up.)
pub fn is_connection_error(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        Some(db) => db.code().code().starts_with("57P"),
        None => e.is_closed() || e.source().is_some_and(|s| s.is::<std::io::Error>()),
    }
}

/// Why no pooled connection could be had, in one line.
pub fn pool_error_detail(e: &PoolError) -> String {
    match e {
        PoolError::Backend(e) => error_detail(e),
        PoolError::Timeout(_) => "timed out waiting for a connection".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{embedded, Apply};

    /// A start may skip the files; a start that ran a migration, and
    /// `gateway migrate`, may not.
    #[test]
    fn only_a_start_that_ran_no_migration_may_skip_the_function_files() {
        assert!(Apply::IfChanged.may_skip(0));
        assert!(!Apply::IfChanged.may_skip(1));
        assert!(!Apply::Always.may_skip(0));
        assert!(!Apply::Always.may_skip(2));
    }

    /// V13 drops messages' time index, so lookups by time rely on createdAt
    /// never decreasing with the offset. A database at V12 may hold rows
    /// out of that order (concurrent pushes stamped their transaction's
    /// start): V13 raises each to the latest createdAt below it.
    #[tokio::test]
    async fn v13_puts_created_at_in_offset_order_and_drops_the_time_index() {
        let admin = pgcursor_tests::db().await;
        let name = format!("pgcursor_v13_{}", std::process::id());
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .await
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        let mut url: tokio_postgres::Config = pgcursor_tests::database_url().parse().unwrap();
        url.dbname(&name);
        let (mut client, connection) = url.connect(tokio_postgres::NoTls).await.unwrap();
        let driver = tokio::spawn(connection);

        embedded::migrations::runner()
            .set_target(refinery::Target::Version(12))
            .run_async(&mut client)
            .await
            .unwrap();
        client
            .batch_execute(
                "INSERT INTO pgcursor.queues (name) VALUES ('q');
                 INSERT INTO pgcursor.partitions (id, queue, name)
                 VALUES ('00000000-0000-0000-0000-000000000013', 'q', 'Default');
                 INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, created_at)
                 SELECT '00000000-0000-0000-0000-000000000013', o, 't' || o, '1',
                        '2026-01-01 00:00:00Z'::timestamptz + s * interval '1 second'
                   FROM unnest(ARRAY[1, 2, 3, 4], ARRAY[0, 3, 1, 5]) AS x(o, s);",
            )
            .await
            .unwrap();
        embedded::migrations::runner()
            .run_async(&mut client)
            .await
            .unwrap();

        // The query's one column, as Strings (each row's first value as text).
        let column = |sql: &'static str| {
            let client = &client;
            async move {
                let rows = client.simple_query(sql).await.unwrap();
                rows.iter()
                    .filter_map(|m| match m {
                        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                        _ => None,
                    })
                    .collect::<Vec<String>>()
            }
        };
        assert_eq!(
            column(
                "SELECT extract(epoch FROM created_at - '2026-01-01 00:00:00Z')::int
                   FROM pgcursor.messages ORDER BY msg_offset"
            )
            .await,
            ["0", "3", "3", "5"],
            "offset 3 raised to offset 2's createdAt"
        );
        assert_eq!(
            column(
                "SELECT indexrelid::regclass::text FROM pg_index
                  WHERE indrelid = 'pgcursor.messages'::regclass ORDER BY 1"
            )
            .await,
            ["pgcursor.messages_pkey", "pgcursor.messages_transaction_id"]
        );

        drop(client);
        let _ = driver.await;
        admin
            .batch_execute(&format!("DROP DATABASE {name}"))
            .await
            .unwrap();
    }
}
