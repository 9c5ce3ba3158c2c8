//! GET /health, including a database that goes away and comes back.

use std::time::{Duration, Instant};

use pgcursor_tests::{
    client, database_url, db_at, gateway_bin, Gateway, GatewayConfig, PrivateCluster,
};
use serde_json::{json, Value};

use crate::broker::{
    configure_queue, drop_database, fresh_queue, lock_table, scratch_database,
    until_waiting_for_a_lock,
};

async fn health(gw: &Gateway) -> (u16, Value) {
    let response = client().get(gw.url("/health")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Polls /health until it answers `want`, for at most `within`.
async fn wait_for(gw: &Gateway, want: u16, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = health(gw).await;
        if status == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/health still {status} {body} after {within:?}, wanted {want}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn healthy_with_a_database() {
    let gw = Gateway::start().await;
    let (status, body) = health(&gw).await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"status": "healthy", "database": "connected"}));
}

/// A pool whose every connection waits on a lock is no outage: /health
/// reaches the database on a connection of its own and says the pool is
/// busy (a 503 would take every gateway out of a load balancer's rotation
/// during one slow lock).
#[tokio::test]
async fn healthy_while_every_pooled_connection_waits_on_a_lock() {
    let (database, url) = scratch_database(&[]).await;
    let gw = GatewayConfig::new()
        .database_url(&url)
        .pool_size(1)
        .start()
        .await;
    let queue = fresh_queue("health-busy");
    configure_queue(&gw, &queue).await;
    let locker = lock_table(&url, "pgcursor.queues").await;
    let pop = {
        let url = gw.url(&format!("/api/v1/pop/queue/{queue}"));
        tokio::spawn(async move { client().get(url).send().await.map(|r| r.status().as_u16()) })
    };
    until_waiting_for_a_lock("the pop holds the one connection", "%pop_messages%").await;
    let (status, body) = health(&gw).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "healthy", "database": "connected", "pool": "busy"})
        )
    );
    locker.batch_execute("COMMIT").await.unwrap();
    assert_eq!(pop.await.unwrap().unwrap(), 200);
    assert_eq!(
        health(&gw).await.1,
        json!({"status": "healthy", "database": "connected"})
    );
    drop(gw);
    drop_database(&database).await;
}

/// The bench's way of starting a gateway (explicit binary, database and pool
/// size, RUST_LOG removed) and its memory probe.
#[tokio::test]
async fn the_bench_harness_starts_a_gateway_and_reads_its_peak_rss() {
    let gw = GatewayConfig::new()
        .bin(gateway_bin())
        .database_url(&database_url())
        .pool_size(2)
        .env_remove("RUST_LOG")
        .try_start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(health(&gw).await.0, 200);
    let peak = gw.peak_rss_kb().expect("VmHWM in /proc/<pid>/status");
    assert!(peak > 0);
    if gw.reset_peak_rss() {
        // (The gateway may allocate a little between the two reads: its
        // housekeeping runs meanwhile. 18,120 -> 18,132 kB was seen.)
        let after = gw.peak_rss_kb().expect("VmHWM after clear_refs");
        assert!(
            after <= peak + 256,
            "reset raised the peak: {peak} -> {after} kB"
        );
    }
}

#[tokio::test]
async fn a_gateway_that_cannot_start_is_an_error_with_its_stderr() {
    let err = GatewayConfig::new()
        .env("PGCURSOR_POOL_SIZE", "zero")
        .try_start()
        .await
        .err()
        .expect("a bad setting stops the gateway");
    assert!(err.contains("PGCURSOR_POOL_SIZE"), "{err}");
}

#[tokio::test]
async fn unhealthy_while_the_database_is_down_then_recovers() {
    let cluster = PrivateCluster::start();
    let gw = Gateway::start_with(&[
        ("DATABASE_URL", cluster.url()),
        ("PGCURSOR_DB_TIMEOUT_MS", "1000"),
    ])
    .await;

    cluster.stop();
    let started = Instant::now();
    let body = wait_for(&gw, 503, Duration::from_secs(5)).await;
    assert_eq!(body["status"], "unhealthy");
    assert_eq!(body["database"], "disconnected");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
    // Each answer comes within the database timeout, not a TCP timeout.
    assert!(started.elapsed() < Duration::from_secs(5));

    cluster.start_again();
    let body = wait_for(&gw, 200, Duration::from_secs(10)).await;
    assert_eq!(body, json!({"status": "healthy", "database": "connected"}));
}

/// On a database whose encoding is not UTF8 the gateway does not start, and
/// says why and what to do, before it writes anything there.
#[tokio::test]
async fn a_database_not_in_utf8_is_refused_at_startup_naming_its_encoding() {
    let admin = pgcursor_tests::db().await;
    let name = format!("latin1_{}", uuid::Uuid::now_v7().simple());
    admin
        .batch_execute(&format!(
            "CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ))
        .await
        .unwrap();
    let url = database_url();
    let (base, options) = url.split_once('?').unwrap_or((&url, ""));
    let latin1 = format!("{}/{name}?{options}", base.rsplit_once('/').unwrap().0);
    let err = GatewayConfig::new()
        .database_url(&latin1)
        .try_start()
        .await
        .err()
        .expect("a LATIN1 database stops the gateway");
    assert!(
        err.contains("encoding is LATIN1; pgcursor needs UTF8"),
        "{err}"
    );
    let client = db_at(&latin1).await;
    let schemas: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pgcursor%' OR nspname = 'refinery'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        schemas, 0,
        "nothing is written to a database that is refused"
    );
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "not even refinery's history table");
    drop(client);
    admin
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();
}

/// docs/operations.md, Startup and upgrades: every start drops the functions
/// no file defines any more, in both schemas (a release's removed API
/// function must not stay callable), and leaves jit off on the API.
#[tokio::test]
async fn a_start_drops_the_functions_no_file_defines() {
    let (name, url) = scratch_database(&[]).await;
    drop(GatewayConfig::new().database_url(&url).start().await);
    let db = db_at(&url).await;
    db.batch_execute(
        "CREATE FUNCTION pgcursor.stale_api() RETURNS int LANGUAGE sql AS 'SELECT 1';
         CREATE FUNCTION pgcursor_internal.stale_helper() RETURNS int LANGUAGE sql AS 'SELECT 1';",
    )
    .await
    .unwrap();
    drop(GatewayConfig::new().database_url(&url).start().await);
    let stale: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('stale_api', 'stale_helper')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stale, 0, "a function no file defines outlived the start");
    let jit_on: Vec<String> = crate::broker::column_of(
        &db,
        "SELECT p.oid::regprocedure::text FROM pg_proc p
          WHERE p.pronamespace = 'pgcursor'::regnamespace AND p.prokind = 'f' AND p.provolatile <> 'i'
            AND NOT coalesce(p.proconfig @> '{jit=off}', false)",
        &[],
    )
    .await;
    assert!(jit_on.is_empty(), "jit left on: {jit_on:?}");
    drop(db);
    drop_database(&name).await;
}

/// Every function of both schemas with the xmin of its catalog row: what a
/// CREATE OR REPLACE rewrites, and what makes each session compile the
/// function again on its next call.
async fn function_rows(db: &tokio_postgres::Client) -> Vec<String> {
    crate::broker::column_of(
        db,
        "SELECT p.oid::regprocedure::text || ' ' || p.xmin FROM pg_proc p
          WHERE p.pronamespace IN ('pgcursor'::regnamespace, 'pgcursor_internal'::regnamespace)
          ORDER BY 1",
        &[],
    )
    .await
}

/// docs/operations.md, Startup and upgrades: a start whose files are the
/// ones applied last writes no function, so running sessions keep their
/// compiled functions; a start after a function or trigger was changed by
/// hand applies the files again, mending it; `gateway migrate` applies
/// them every time.
#[tokio::test]
async fn a_start_applies_the_function_files_only_when_something_changed() {
    let (name, url) = scratch_database(&[]).await;
    drop(GatewayConfig::new().database_url(&url).start().await);
    let db = db_at(&url).await;
    let applied = function_rows(&db).await;
    drop(GatewayConfig::new().database_url(&url).start().await);
    // (Not assert_eq!: it would print some 300 functions.)
    assert!(
        function_rows(&db).await == applied,
        "a start with the same files wrote functions"
    );

    db.batch_execute(
        "CREATE OR REPLACE FUNCTION pgcursor_internal.drop_version_without(fn text, name text)
         RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;
         DROP TRIGGER cursors_retire_totals ON pgcursor.cursors;",
    )
    .await
    .unwrap();
    drop(GatewayConfig::new().database_url(&url).start().await);
    let body: String = db
        .query_one(
            "SELECT prosrc FROM pg_proc WHERE oid = 'pgcursor_internal.drop_version_without(text, text)'::regprocedure",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        body.contains("DROP FUNCTION"),
        "the hand-made body stayed: {body}"
    );
    let trigger: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_trigger
              WHERE tgrelid = 'pgcursor.cursors'::regclass AND tgname = 'cursors_retire_totals'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(trigger, 1, "the dropped trigger was not made again");
    let mended = function_rows(&db).await;
    assert!(mended != applied);

    let migrate = tokio::process::Command::new(gateway_bin())
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .output()
        .await
        .unwrap();
    assert!(
        migrate.status.success(),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    assert!(
        function_rows(&db).await != mended,
        "gateway migrate left the functions as they were"
    );
    drop(db);
    drop_database(&name).await;
}
