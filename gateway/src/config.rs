//! Startup configuration: every setting is a flag and an environment
//! variable. A bad value stops the gateway with one line naming the variable.

use std::error::Error as _;
use std::net::SocketAddr;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand};

use crate::auth::Auth;
use crate::encryption::{Key, KEY_ALIAS};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "gateway",
    version,
    about = "pgcursor HTTP gateway: validates JSON, checks bearer tokens, calls the pgcursor SQL functions"
)]
pub struct Config {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// PostgreSQL connection URL, e.g. postgres://postgres@127.0.0.1:5432/pgcursor
    #[arg(
        long,
        env = "DATABASE_URL",
        value_name = "DATABASE_URL",
        hide_env_values = true,
        value_parser = database_url,
    )]
    pub database_url: tokio_postgres::Config,

    /// Address and port the HTTP server listens on
    #[arg(
        long,
        env = "PGCURSOR_BIND",
        value_name = "PGCURSOR_BIND",
        default_value = "0.0.0.0:6632"
    )]
    pub bind: SocketAddr,

    /// Maximum number of pooled PostgreSQL connections
    #[arg(
        long,
        env = "PGCURSOR_POOL_SIZE",
        value_name = "PGCURSOR_POOL_SIZE",
        default_value = "16",
        value_parser = pool_size,
    )]
    pub pool_size: usize,

    /// HTTP worker threads (default: one per 4 CPUs, at least one; at most
    /// half of PGCURSOR_POOL_SIZE). Each serves its requests on connections
    /// of its own, an equal share of PGCURSOR_POOL_SIZE
    #[arg(
        long,
        env = "PGCURSOR_HTTP_WORKERS",
        value_name = "PGCURSOR_HTTP_WORKERS",
        value_parser = positive_int4,
    )]
    pub http_workers: Option<usize>,

    /// Bearer tokens as token:level,token:level (level: read-only, read-write
    /// or admin); empty turns authentication off
    #[arg(
        long,
        env = "PGCURSOR_TOKENS",
        value_name = "PGCURSOR_TOKENS",
        hide_env_values = true,
        value_parser = Auth::parse,
    )]
    pub tokens: Option<Auth>,

    /// Largest accepted request body, in bytes (larger gives 413)
    #[arg(
        long,
        env = "PGCURSOR_MAX_BODY_BYTES",
        value_name = "PGCURSOR_MAX_BODY_BYTES",
        default_value = "8388608",
        value_parser = positive_int4,
    )]
    pub max_body_bytes: usize,

    /// Most acknowledgements accepted in one ack batch request
    #[arg(
        long,
        env = "PGCURSOR_MAX_ACK_ITEMS",
        value_name = "PGCURSOR_MAX_ACK_ITEMS",
        default_value = "10000",
        value_parser = positive_int4,
    )]
    pub max_ack_items: usize,

    /// Most messages accepted in one push request (more gives 413)
    #[arg(
        long,
        env = "PGCURSOR_MAX_PUSH_ITEMS",
        value_name = "PGCURSOR_MAX_PUSH_ITEMS",
        default_value = "10000",
        value_parser = positive_int4,
    )]
    pub max_push_items: usize,

    /// Most messages one pop answers: a larger batch is capped to it (the gateway holds a pop's answer in memory)
    #[arg(
        long,
        env = "PGCURSOR_MAX_POP_BATCH",
        value_name = "PGCURSOR_MAX_POP_BATCH",
        default_value = "10000",
        value_parser = positive_int4,
    )]
    pub max_pop_batch: usize,

    /// Most payload bytes one answer carries: a pop stops adding messages there (the first aside), a page of dead letters or a listing of trace events lists the rest without their data
    #[arg(
        long,
        env = "PGCURSOR_MAX_ANSWER_BYTES",
        value_name = "PGCURSOR_MAX_ANSWER_BYTES",
        default_value = "16777216",
        value_parser = positive_int4,
    )]
    pub max_answer_bytes: usize,

    /// How long a request waits for a database connection, in milliseconds, before a 503
    #[arg(
        long,
        env = "PGCURSOR_DB_TIMEOUT_MS",
        value_name = "PGCURSOR_DB_TIMEOUT_MS",
        default_value = "5000",
        value_parser = positive_u64,
    )]
    pub db_timeout_ms: u64,

    /// How long a request's body may take to arrive whole, in milliseconds from its head, before a 408 (a stalled upload would otherwise hold its connection and what it sent for ever)
    #[arg(
        long,
        env = "PGCURSOR_BODY_TIMEOUT_MS",
        value_name = "PGCURSOR_BODY_TIMEOUT_MS",
        default_value = "60000",
        value_parser = positive_u64,
    )]
    pub body_timeout_ms: u64,

    /// Most request-body bytes the gateway holds at once, over all requests: a body waits, unread, for room (at most PGCURSOR_BODY_TIMEOUT_MS, then a 503)
    #[arg(
        long,
        env = "PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT",
        value_name = "PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT",
        default_value = "268435456",
        value_parser = positive_int4,
    )]
    pub max_body_bytes_in_flight: usize,

    /// Most bytes of pop answers the gateway holds at once, over all pops: a pop takes room for what its maxBytes may fill (payloads written twice) or answers fewer messages to fit what is left, and waits for at least 1 MiB (at most PGCURSOR_DB_TIMEOUT_MS, then a 503)
    #[arg(
        long,
        env = "PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT",
        value_name = "PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT",
        default_value = "268435456",
        value_parser = positive_int4,
    )]
    pub max_answer_bytes_in_flight: usize,

    /// How long a long answer (1 MiB or more) may make no progress toward its client, in milliseconds, before the connection is shut down: a client that stopped reading it, or vanished
    #[arg(
        long,
        env = "PGCURSOR_SEND_TIMEOUT_MS",
        value_name = "PGCURSOR_SEND_TIMEOUT_MS",
        default_value = "60000",
        value_parser = positive_u64,
    )]
    pub send_timeout_ms: u64,

    /// Seconds between housekeeping runs (transaction index purge, retention)
    #[arg(
        long,
        env = "PGCURSOR_HOUSEKEEPING_SECONDS",
        value_name = "PGCURSOR_HOUSEKEEPING_SECONDS",
        default_value = "60",
        value_parser = positive_u64,
    )]
    pub housekeeping_seconds: u64,

    /// Days an idle partition stays before housekeeping deletes it (one
    /// with no message, dead letter or remembered transactionId that saw no
    /// push, ack or live lease for that long): Queen's
    /// PARTITION_CLEANUP_DAYS. 0 keeps every partition
    #[arg(
        long,
        env = "PGCURSOR_PARTITION_CLEANUP_DAYS",
        value_name = "PGCURSOR_PARTITION_CLEANUP_DAYS",
        default_value = "30",
        value_parser = cleanup_days,
    )]
    pub partition_cleanup_days: i32,

    /// Seconds between flushes of the gateway's per-minute figures (pops,
    /// requests, failed acks, message age at pop) into the database, where
    /// status and analytics read them
    #[arg(
        long,
        env = "PGCURSOR_STATS_FLUSH_SECONDS",
        value_name = "PGCURSOR_STATS_FLUSH_SECONDS",
        default_value = "60",
        value_parser = positive_u64,
    )]
    pub stats_flush_seconds: u64,

    /// AES-256 key (64 hex characters) for queues with encryptionEnabled;
    /// QUEEN_ENCRYPTION_KEY is read when this is unset or empty. Without a
    /// key, configuring encryptionEnabled and pushing to encrypted queues are
    /// refused
    #[arg(
        long = "encryption-key",
        env = "PGCURSOR_ENCRYPTION_KEY",
        value_name = "PGCURSOR_ENCRYPTION_KEY",
        hide_env_values = true,
        value_parser = given_key,
    )]
    given_key: Option<GivenKey>,

    /// The key in use: PGCURSOR_ENCRYPTION_KEY's, else QUEEN_ENCRYPTION_KEY's
    /// (key_from_alias).
    #[arg(skip)]
    pub encryption_key: Option<Key>,
}

/// PGCURSOR_ENCRYPTION_KEY as given: empty is no key (its documented
/// default), so that QUEEN_ENCRYPTION_KEY is read then.
#[derive(Debug, Clone)]
struct GivenKey(Option<Key>);

fn given_key(s: &str) -> Result<GivenKey, String> {
    match s.is_empty() {
        true => Ok(GivenKey(None)),
        false => Key::parse(s).map(|key| GivenKey(Some(key))),
    }
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Apply the migrations and the SQL functions, then exit
    Migrate,
}

impl Config {
    /// Parses flags and environment; on a bad value prints one line and
    /// exits with code 2 (help and version exit 0 as usual).
    pub fn parse_or_exit() -> Config {
        match Config::try_parse() {
            Ok(mut config) => {
                let alias = std::env::var(KEY_ALIAS).ok();
                if let Err(line) = config.key_from_alias(alias.as_deref()) {
                    eprintln!("gateway: {line}");
                    std::process::exit(2);
                }
                config
            }
            Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
                e.exit()
            }
            Err(e) => {
                eprintln!("gateway: {}", one_line(&e));
                std::process::exit(2);
            }
        }
    }

    /// The key in use: PGCURSOR_ENCRYPTION_KEY's, else that of Queen's
    /// variable, `QUEEN_ENCRYPTION_KEY` (`alias`); an empty value of either
    /// is no key. A bad value is one line naming it.
    pub fn key_from_alias(&mut self, alias: Option<&str>) -> Result<(), String> {
        self.encryption_key = self.given_key.clone().and_then(|given| given.0);
        match alias {
            Some(value) if self.encryption_key.is_none() && !value.is_empty() => {
                let key = Key::parse(value).map_err(|why| format!("invalid {KEY_ALIAS}: {why}"))?;
                self.encryption_key = Some(key);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// HTTP workers: as asked, never more than half the pool's connections,
    /// so that each has two or more, one of them out of reach of reads
    /// (reads.rs). By default one per 4 CPUs: PostgreSQL needs the CPUs
    /// more, and a thread with more to do per wake-up spends less on
    /// waking (on 2 cores, one worker took 28% less gateway CPU per message
    /// than two, and served 10% more; see `bench --only b`).
    pub fn workers(&self) -> usize {
        let asked = self.http_workers.unwrap_or_else(|| {
            let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            (cpus / 4).max(1)
        });
        asked.min((self.pool_size / 2).max(1))
    }

    /// Worker `index`'s connections: PGCURSOR_POOL_SIZE shared out as evenly
    /// as it goes.
    pub fn pool_share(&self, index: usize) -> usize {
        let workers = self.workers();
        self.pool_size / workers + usize::from(index % workers < self.pool_size % workers)
    }

    pub fn db_timeout(&self) -> Duration {
        Duration::from_millis(self.db_timeout_ms)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }

    /// PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT in KiB, as body::guard_body counts
    /// it.
    pub fn bodies_kib(&self) -> u32 {
        semaphore_kib(self.max_body_bytes_in_flight)
    }

    /// PGCURSOR_MAX_ANSWER_BYTES_IN_FLIGHT in KiB, as answers.rs counts it.
    pub fn answers_kib(&self) -> u32 {
        semaphore_kib(self.max_answer_bytes_in_flight)
    }

    pub fn send_timeout(&self) -> Duration {
        Duration::from_millis(self.send_timeout_ms)
    }

    pub fn housekeeping_interval(&self) -> Duration {
        Duration::from_secs(self.housekeeping_seconds)
    }

    pub fn stats_flush_interval(&self) -> Duration {
        Duration::from_secs(self.stats_flush_seconds)
    }
}

/// A clap error as one line. Invalid values are described without echoing
/// the value itself, which may be a secret (a token, a password).
pub fn one_line(e: &clap::Error) -> String {
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => Some(arg.clone()),
        _ => None,
    };
    match (e.kind(), arg) {
        (ErrorKind::ValueValidation | ErrorKind::InvalidValue, Some(arg)) => {
            let why = e.source().map(|s| s.to_string());
            format!("invalid {}: {}", arg, why.as_deref().unwrap_or("bad value"))
        }
        _ => {
            // First paragraph of clap's message, folded onto one line.
            let text = e.to_string();
            let first = text.split("\n\n").next().unwrap_or_default();
            let line = first.split_whitespace().collect::<Vec<_>>().join(" ");
            line.trim_start_matches("error: ").to_string()
        }
    }
}

/// `bytes` in KiB for a semaphore's permits: at least 1, at most what a
/// semaphore holds.
fn semaphore_kib(bytes: usize) -> u32 {
    let most = tokio::sync::Semaphore::MAX_PERMITS.min(u32::MAX as usize) as u64;
    crate::answers::kib(bytes).clamp(1, most) as u32
}

fn database_url(s: &str) -> Result<tokio_postgres::Config, String> {
    s.parse().map_err(|e| crate::db::error_detail(&e))
}

/// A positive number SQL's integer holds: every count, size and time of the
/// options. (PGCURSOR_MAX_ANSWER_BYTES goes to `pgcursor.pop` as its
/// maxBytes; a larger time overflowed the clocks' arithmetic.)
fn positive_int4(s: &str) -> Result<usize, String> {
    let n: usize = positive(s)?;
    if n > i32::MAX as usize {
        return Err(format!("must be at most {}", i32::MAX));
    }
    Ok(n)
}

fn positive_u64(s: &str) -> Result<u64, String> {
    positive_int4(s).map(|n| n as u64)
}

/// Most days PGCURSOR_PARTITION_CLEANUP_DAYS takes: a century (far more
/// would reach back past the first year a timestamp holds).
const MAX_CLEANUP_DAYS: i32 = 36_500;

fn cleanup_days(s: &str) -> Result<i32, String> {
    match s.trim().parse::<i32>() {
        Ok(n) if (0..=MAX_CLEANUP_DAYS).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number of days from 0 (never) to {MAX_CLEANUP_DAYS}, got {s:?}"
        )),
    }
}

/// Most pooled connections: far past what a PostgreSQL serves, and the pool
/// sets room for every one aside at start.
const MAX_POOL_SIZE: usize = 10_000;

fn pool_size(s: &str) -> Result<usize, String> {
    let n: usize = positive(s)?;
    if n > MAX_POOL_SIZE {
        return Err(format!("must be at most {MAX_POOL_SIZE}"));
    }
    Ok(n)
}

fn positive<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    match s.trim().parse::<T>() {
        Ok(n) if n > T::default() => Ok(n),
        _ => Err(format!("must be a positive integer, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "postgres://postgres@127.0.0.1:5432/pgcursor";

    fn parse(args: &[&str]) -> Result<Config, clap::Error> {
        let mut argv = vec!["gateway", "--database-url", URL];
        argv.extend_from_slice(args);
        Config::try_parse_from(argv)
    }

    #[test]
    fn defaults() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.bind.to_string(), "0.0.0.0:6632");
        assert_eq!(c.pool_size, 16);
        assert_eq!(c.http_workers, None);
        assert_eq!(c.max_body_bytes, 8_388_608);
        assert_eq!(c.max_ack_items, 10_000);
        assert_eq!(c.max_push_items, 10_000);
        assert_eq!(c.max_pop_batch, 10_000);
        assert_eq!(c.max_answer_bytes, 16 << 20);
        assert_eq!(c.max_answer_bytes_in_flight, 256 << 20);
        assert_eq!(c.db_timeout(), Duration::from_millis(5000));
        assert_eq!(c.housekeeping_seconds, 60);
        assert_eq!(c.partition_cleanup_days, 30);
        assert_eq!(c.stats_flush_interval(), Duration::from_secs(60));
        assert!(c.tokens.is_none());
        assert!(c.encryption_key.is_none());
        assert_eq!(c.command, None);
    }

    #[test]
    fn the_workers_share_out_the_pool() {
        for (pool, workers, shares) in [
            ("16", "2", &[8, 8][..]),
            ("5", "2", &[3, 2]),
            ("3", "2", &[3]),
            ("4", "4", &[2, 2]),
            ("2", "4", &[2]),
            ("1", "3", &[1]),
        ] {
            let c = parse(&["--pool-size", pool, "--http-workers", workers]).unwrap();
            assert_eq!(c.workers(), shares.len(), "pool {pool}, workers {workers}");
            let got: Vec<usize> = (0..c.workers()).map(|i| c.pool_share(i)).collect();
            assert_eq!(got, shares, "pool {pool}, workers {workers}");
        }
    }

    #[test]
    fn bad_values_give_one_line_naming_the_variable() {
        let not_hex = "g".repeat(64);
        for (args, var) in [
            (&["--pool-size", "abc"][..], "PGCURSOR_POOL_SIZE"),
            (&["--pool-size", "0"][..], "PGCURSOR_POOL_SIZE"),
            (&["--pool-size", "10001"][..], "PGCURSOR_POOL_SIZE"),
            (
                &["--pool-size", "18446744073709551615"][..],
                "PGCURSOR_POOL_SIZE",
            ),
            (
                &["--housekeeping-seconds", "9223372036854775807"][..],
                "PGCURSOR_HOUSEKEEPING_SECONDS",
            ),
            (
                &["--stats-flush-seconds", "2147483648"][..],
                "PGCURSOR_STATS_FLUSH_SECONDS",
            ),
            (
                &["--max-pop-batch", "2147483648"][..],
                "PGCURSOR_MAX_POP_BATCH",
            ),
            (&["--http-workers", "0"][..], "PGCURSOR_HTTP_WORKERS"),
            (
                &["--partition-cleanup-days=-1"][..],
                "PGCURSOR_PARTITION_CLEANUP_DAYS",
            ),
            (
                &["--partition-cleanup-days", "36501"][..],
                "PGCURSOR_PARTITION_CLEANUP_DAYS",
            ),
            (&["--body-timeout-ms", "0"][..], "PGCURSOR_BODY_TIMEOUT_MS"),
            (&["--send-timeout-ms", "0"][..], "PGCURSOR_SEND_TIMEOUT_MS"),
            (
                &["--max-body-bytes-in-flight", "0"][..],
                "PGCURSOR_MAX_BODY_BYTES_IN_FLIGHT",
            ),
            (
                &["--stats-flush-seconds", "0"][..],
                "PGCURSOR_STATS_FLUSH_SECONDS",
            ),
            (&["--tokens", "x:superuser"][..], "PGCURSOR_TOKENS"),
            (&["--bind", "nowhere"][..], "PGCURSOR_BIND"),
            (&["--encryption-key", "abc"][..], "PGCURSOR_ENCRYPTION_KEY"),
            (
                &["--encryption-key", not_hex.as_str()][..],
                "PGCURSOR_ENCRYPTION_KEY",
            ),
        ] {
            let line = one_line(&parse(args).unwrap_err());
            assert!(line.contains(var), "{line}");
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn partition_cleanup_days_run_from_never_to_a_century() {
        for (given, days) in [("0", 0), ("1", 1), ("36500", 36_500)] {
            let c = parse(&["--partition-cleanup-days", given]).unwrap();
            assert_eq!(c.partition_cleanup_days, days);
        }
    }

    #[test]
    fn a_bad_token_is_not_echoed() {
        let line = one_line(&parse(&["--tokens", "s3cret:superuser"]).unwrap_err());
        assert!(!line.contains("s3cret"), "{line}");
    }

    #[test]
    fn a_bad_key_is_not_echoed() {
        let line = one_line(&parse(&["--encryption-key", "s3cretkey"]).unwrap_err());
        assert!(line.contains("64 hex characters"), "{line}");
        assert!(!line.contains("s3cret"), "{line}");
    }

    #[test]
    fn queen_key_variable_is_an_alias() {
        let key = "0f".repeat(32);
        let mut c = parse(&[]).unwrap();
        c.key_from_alias(None).unwrap();
        assert!(c.encryption_key.is_none());
        c.key_from_alias(Some("")).unwrap();
        assert!(c.encryption_key.is_none());
        c.key_from_alias(Some(&key)).unwrap();
        assert!(c.encryption_key.is_some());
        let line = parse(&[])
            .unwrap()
            .key_from_alias(Some("s3cret"))
            .unwrap_err();
        assert!(line.starts_with("invalid QUEEN_ENCRYPTION_KEY: "), "{line}");
        assert!(!line.contains("s3cret"), "{line}");
        // The pgcursor variable wins; the alias is then not even read.
        let mut c = parse(&["--encryption-key", &key]).unwrap();
        c.key_from_alias(Some("junk")).unwrap();
        assert!(c.encryption_key.is_some());
        // An empty pgcursor variable is none: the alias is read.
        let mut c = parse(&["--encryption-key", ""]).unwrap();
        c.key_from_alias(None).unwrap();
        assert!(c.encryption_key.is_none());
        c.key_from_alias(Some(&key)).unwrap();
        assert!(c.encryption_key.is_some());
    }

    #[test]
    fn migrate_subcommand() {
        assert_eq!(parse(&["migrate"]).unwrap().command, Some(Command::Migrate));
    }
}
