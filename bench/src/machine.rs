//! What the numbers were measured on: the machine and PostgreSQL's settings.

use std::collections::BTreeMap;

use serde::Serialize;
use tokio_postgres::Client;

use crate::Result;

#[derive(Debug, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub memory_mb: u64,
    pub kernel: String,
    pub load_average_at_start: String,
}

#[derive(Debug, Serialize)]
pub struct Postgres {
    pub version: String,
    /// fsync, synchronous_commit, shared_buffers, ... as `SHOW` prints them.
    pub settings: BTreeMap<String, String>,
}

/// The settings that decide what a commit costs, reported with every run.
const SETTINGS: [&str; 10] = [
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_level",
    "shared_buffers",
    "max_connections",
    "checkpoint_timeout",
    "max_wal_size",
    "shared_preload_libraries",
    "jit",
];

pub fn machine() -> Machine {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let memory_mb = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024;
    Machine {
        nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model,
        memory_mb,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        load_average_at_start: read("/proc/loadavg")
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

pub async fn postgres(client: &Client) -> Result<Postgres> {
    let version: String = client.query_one("SELECT version()", &[]).await?.get(0);
    let mut settings = BTreeMap::new();
    for name in SETTINGS {
        let row = client
            .query_one("SELECT current_setting($1)", &[&name])
            .await?;
        settings.insert(name.to_string(), row.get(0));
    }
    Ok(Postgres { version, settings })
}
