//! `--profile`: pg_stat_statements (track = all, so the statements inside
//! the PL/pgSQL functions show up too), reset before each run and read after.

use serde::Serialize;
use tokio_postgres::Client;

use crate::report::Report;
use crate::Result;

#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    pub query: String,
    pub calls: i64,
    pub total_ms: f64,
    pub mean_ms: f64,
    pub rows: i64,
    pub shared_blks_hit: i64,
    pub shared_blks_read: i64,
}

pub struct Profiler<'a> {
    client: Option<&'a Client>,
}

impl<'a> Profiler<'a> {
    pub async fn new(client: &'a Client, enabled: bool) -> Result<Profiler<'a>> {
        if enabled {
            client
                .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .await?;
        }
        Ok(Profiler {
            client: enabled.then_some(client),
        })
    }

    pub async fn reset(&self) -> Result<()> {
        if let Some(client) = self.client {
            client
                .batch_execute("SELECT pg_stat_statements_reset()")
                .await?;
        }
        Ok(())
    }

    /// The run's ten most expensive statements, into the report (latest.md).
    pub async fn collect(&self, run: &str, report: &mut Report) -> Result<()> {
        let Some(client) = self.client else {
            return Ok(());
        };
        let rows = client
            .query(
                "SELECT regexp_replace(query, '\\s+', ' ', 'g'), calls, total_exec_time, mean_exec_time, \
                        rows, shared_blks_hit, shared_blks_read
                   FROM pg_stat_statements
                  WHERE query NOT LIKE '%pg_stat_statements%'
                  ORDER BY total_exec_time DESC LIMIT 25",
                &[],
            )
            .await?;
        let top = rows
            .iter()
            .map(|r| Statement {
                query: r.get::<_, String>(0).chars().take(160).collect(),
                calls: r.get(1),
                total_ms: r.get(2),
                mean_ms: r.get(3),
                rows: r.get(4),
                shared_blks_hit: r.get(5),
                shared_blks_read: r.get(6),
            })
            .collect();
        report.profile(run, top);
        Ok(())
    }
}
