//! pgcursor's HTTP gateway: validates JSON, checks bearer tokens and calls
//! the `pgcursor` SQL functions, which hold every rule.

pub mod answers;
pub mod app;
pub mod auth;
pub mod body;
pub mod clock;
pub mod config;
pub mod connections;
pub mod cors;
pub mod db;
pub mod encryption;
pub mod error;
pub mod housekeeping;
pub mod metrics;
pub mod minutes;
pub mod notify;
pub mod peer;
pub mod process;
pub mod reads;
pub mod routes;
pub mod turns;

use std::io::IsTerminal;

/// Logs to stderr; RUST_LOG overrides the default (info, minus the
/// NOTICEs tokio_postgres relays from idempotent DDL).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tokio_postgres=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
