//! `bench`: pgcursor's load generator. Starts its own throwaway PostgreSQL
//! cluster (fsync on) and the real gateway binary, installs pgmq's SQL into
//! schema `pgmq` of the same cluster, runs the scenarios, and writes
//! `latest.json`, `latest.md` and `throughput.svg` (see bench/README.md).

mod brokers;
mod chart;
mod citus;
mod cluster;
mod cpu;
mod load;
mod machine;
mod profile;
mod report;
mod scenario;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use pgcursor_tests::{Gateway, GatewayConfig};
use serde::Serialize;

use crate::brokers::{Broker, System};
use crate::cluster::Cluster;
use crate::cpu::Probe;
use crate::scenario::{
    ack_cost, ack_throughput, backlog, end_to_end, fan_out, first_pop, step_cost,
};

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

#[derive(Parser, Debug, Clone, Serialize)]
#[command(
    name = "bench",
    about = "pgcursor benchmarks: ack throughput, end to end vs pgmq, ack cost, \
             a new group's first pop, backlog independence, fan-out vs pgmq"
)]
pub struct Args {
    /// Measured seconds per system, split over the rounds
    #[arg(long, default_value_t = 12.0)]
    pub duration: f64,
    /// Warm-up seconds before every measured slice, not measured
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Batch size of the targets: ack requests (a), push/pop (b)
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// More batch sizes for the end-to-end chart, half the duration each ("" = none)
    #[arg(long, default_value = "10,1000", value_parser = batch_list)]
    pub extra_batches: BatchList,
    /// Producer tasks (b)
    #[arg(long, default_value_t = 4)]
    pub producers: usize,
    /// Consumer tasks (b), and concurrent ack workers (a)
    #[arg(long, default_value_t = 4)]
    pub consumers: usize,
    /// pgcursor partitions per queue
    #[arg(long, default_value_t = 16)]
    pub partitions: usize,
    /// Bytes of JSON per message
    #[arg(long, default_value_t = 256)]
    pub payload_bytes: usize,
    /// Connections: the bench's SQL pool and the gateway's PGCURSOR_POOL_SIZE
    #[arg(long, default_value_t = 8)]
    pub pool_size: usize,
    /// Messages seeded per partition for (a); workers start over with a new group
    #[arg(long, default_value_t = 5000)]
    pub ack_seed: u64,
    /// Timed calls per batch size for (c), cycles per system for (f), and
    /// pop+ack cycles per queue for (h)
    #[arg(long, default_value_t = 300)]
    pub cost_iterations: usize,
    /// Timed fresh consumer groups per partition count and subscription variant (i)
    #[arg(long, default_value_t = 15)]
    pub first_pop_groups: usize,
    /// Messages waiting in (h)'s large queue (the small one has 1,000)
    #[arg(long, default_value_t = 1_000_000)]
    pub backlog: u64,
    /// ≈40 s development run: short windows, no extra batch sizes, (h) at 100,000 messages, writes to <out>/quick
    #[arg(long)]
    pub quick: bool,
    /// Load pg_stat_statements (top statements of every run, in latest.md) and
    /// auto_explain (plans slower than 50 ms, in <out>/postgres.log)
    #[arg(long)]
    pub profile: bool,
    /// Systems compared end to end (b), in this order
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "pgcursor-sql,pgcursor-http,pgmq-archive,pgmq-delete"
    )]
    pub systems: Vec<System>,
    /// Measure the compared systems in turns, this many times each (with --profile: 1)
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Only these scenarios (a = ack throughput, b = end to end, c = ack cost,
    /// f = cost per step against the floor, g = fan-out to 10 consumer groups,
    /// h = backlog independence, i = a new group's first pop)
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,f,g,h,i")]
    pub only: Vec<String>,
    /// SQL files run after the gateway's bootstrap, to measure a proposed
    /// change to a function without editing sql/ (e.g. --apply /tmp/fix.sql)
    #[arg(long, value_delimiter = ',')]
    pub apply: Vec<PathBuf>,
    /// bench-citus instead of the scenarios: two gateways against a Citus
    /// coordinator with one worker, then two (scripts/citus.sh; writes <out>/citus.{md,json})
    #[arg(long)]
    pub citus: bool,
    /// Where results go
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// The gateway binary
    #[arg(long, default_value = "target/release/gateway")]
    pub gateway: PathBuf,
}

/// Comma-separated batch sizes; empty is none.
#[derive(Debug, Clone, Serialize)]
pub struct BatchList(pub Vec<usize>);

fn batch_list(s: &str) -> std::result::Result<BatchList, String> {
    s.split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(|b| match b.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("not a batch size: {b:?}")),
        })
        .collect::<std::result::Result<_, _>>()
        .map(BatchList)
}

impl Args {
    fn effective(mut self) -> Args {
        self.out = workspace().join(&self.out); // relative to the workspace, not the cwd
        if self.quick {
            self.duration = self.duration.min(2.0);
            self.warmup = self.warmup.min(0.5);
            self.extra_batches.0.clear();
            self.ack_seed = self.ack_seed.min(1000);
            self.cost_iterations = self.cost_iterations.min(40);
            self.first_pop_groups = self.first_pop_groups.min(5);
            self.backlog = self.backlog.min(100_000);
            self.rounds = 1;
            self.out = self.out.join("quick");
        }
        self
    }

    fn runs(&self, scenario: &str) -> bool {
        self.only.iter().any(|s| s == scenario)
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse().effective();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = runtime.block_on(async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("SIGTERM handler");
        tokio::select! {
            result = run(&args) => result,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
            _ = terminate.recv() => Err("terminated".into()),
        }
    });
    // Dropping the run future above already stopped the cluster and gateway.
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {}", describe(e.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line (tokio-postgres says only "db error").
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        line.push_str(&format!(": {c}"));
        cause = c.source();
    }
    line
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

async fn run(args: &Args) -> Result<()> {
    if args.citus {
        return citus::run(args).await;
    }
    let started = std::time::Instant::now();
    let machine = machine::machine();
    say("starting a throwaway PostgreSQL cluster");
    let cluster = Cluster::start(&workspace(), args.profile)?;
    say("starting the gateway (applies pgcursor's schema)");
    // RUST_LOG left out: the gateway logs at its default level, whatever
    // the shell running the bench has set.
    let gateway = GatewayConfig::new()
        .bin(workspace().join(&args.gateway))
        .database_url(&cluster.url)
        .pool_size(args.pool_size)
        .env_remove("RUST_LOG")
        .try_start()
        .await?;
    say("installing pgmq's embedded SQL into schema pgmq");
    install_pgmq(&cluster.url).await?;
    let admin = load::connect(&cluster.url).await?;
    for file in &args.apply {
        say(&format!("applying {}", file.display()));
        admin.batch_execute(&std::fs::read_to_string(file)?).await?;
    }
    let mut report = report::Report::new(args, machine, machine::postgres(&admin).await?);
    let bench = Bench {
        args,
        warmup: Duration::from_secs_f64(args.warmup),
        duration: Duration::from_secs_f64(args.duration),
        url: &cluster.url,
        pool: load::pool(&cluster.url, args.pool_size)?,
        gateway: &gateway,
        postmaster: cluster.postmaster_pid().ok_or("no postmaster.pid")?,
        payload: load::payload(args.payload_bytes),
        profiler: profile::Profiler::new(&admin, args.profile).await?,
    };
    if args.runs("a") {
        bench.ack_throughput(&mut report).await?;
    }
    if args.runs("b") {
        bench.end_to_end(&mut report).await?;
    }
    if args.runs("c") {
        bench.ack_cost(&admin, &mut report).await?;
    }
    if args.runs("f") {
        bench.step_cost(&admin, &mut report).await?;
    }
    if args.runs("i") {
        bench.first_pop(&admin, &mut report).await?;
    }
    if args.runs("g") {
        bench.fan_out(&mut report).await?;
    }
    // Last: its million messages stay in the tables every scenario shares.
    if args.runs("h") {
        bench.backlog(&mut report).await?;
    }
    report.finish(started.elapsed());
    drop(bench);
    drop(gateway);
    if args.profile {
        std::fs::create_dir_all(&args.out)?;
        cluster.save_log(&args.out.join("postgres.log"))?;
    }
    drop(cluster);
    report.write(&args.out)
}

/// What every scenario runs against.
struct Bench<'a> {
    args: &'a Args,
    warmup: Duration,
    duration: Duration,
    /// The cluster, for scenarios that need pools of their own size.
    url: &'a str,
    /// The bench's own SQL pool (same size as the gateway's).
    pool: deadpool_postgres::Pool,
    gateway: &'a Gateway,
    postmaster: u32,
    payload: serde_json::Value,
    profiler: profile::Profiler<'a>,
}

impl Bench<'_> {
    /// (a), and the gateway's peak RSS during it (d).
    async fn ack_throughput(&self, report: &mut report::Report) -> Result<()> {
        let args = self.args;
        say(&format!(
            "(a) seeding {} partitions × {} messages",
            args.partitions, args.ack_seed
        ));
        let ids = load::seed(
            &self.pool,
            "bench-ack",
            args.partitions,
            args.ack_seed,
            1000,
            &self.payload,
        )
        .await?;
        let setup = ack_throughput::Setup {
            partitions: Arc::new(ids),
            per_partition: args.ack_seed,
            batch: args.batch as u64,
            workers: args.consumers,
        };
        let http = reqwest::Client::new();
        let vias = vec![
            (
                ack_throughput::Via::Sql(self.pool.clone()),
                Probe::new(self.postmaster, None),
            ),
            (
                ack_throughput::Via::Http(http, self.gateway.base.clone()),
                Probe::new(self.postmaster, Some(self.gateway.pid())),
            ),
        ];
        say("(a) ack_group over deadpool vs POST /api/v1/ack/batch");
        self.gateway.reset_peak_rss();
        let mut runs = Vec::new();
        if args.profile {
            for via in vias {
                self.profiler.reset().await?;
                runs.extend(
                    ack_throughput::compare(&[via], &setup, self.warmup, self.duration, 1).await?,
                );
                let via = runs.last().map_or("?", |r| r.via);
                self.profiler
                    .collect(&format!("a: ack via {via}"), report)
                    .await?;
            }
        } else {
            runs = ack_throughput::compare(&vias, &setup, self.warmup, self.duration, args.rounds)
                .await?;
        }
        let [sql, http]: [_; 2] = runs.try_into().map_err(|_| "expected two ack runs")?;
        report.ack_throughput(sql, http, self.gateway.peak_rss_kb());
        Ok(())
    }

    /// (b) at the target batch size, then at the extra ones (one round,
    /// half as long: they are for the chart).
    async fn end_to_end(&self, report: &mut report::Report) -> Result<()> {
        let args = self.args;
        let mut batches = vec![args.batch];
        batches.extend(args.extra_batches.0.iter().filter(|&&b| b != args.batch));
        for (i, &batch) in batches.iter().enumerate() {
            let (duration, rounds) = match i {
                0 => (self.duration, args.rounds),
                _ => (self.duration / 2, 1),
            };
            let mut systems = Vec::new();
            for &system in &args.systems {
                let queue = format!("e2e_{}_{batch}", format!("{system:?}").to_lowercase());
                let broker =
                    Broker::new(system, &self.pool, Some(&self.gateway.base), queue).await?;
                let gateway = (system == System::PgcursorHttp).then(|| self.gateway.pid());
                let sides = end_to_end::Sides::shared(broker, args.consumers);
                systems.push((system, sides, Probe::new(self.postmaster, gateway)));
            }
            let setup = end_to_end::Setup {
                batch,
                producers: args.producers,
                partitions: args.partitions,
                payload: self.payload.clone(),
                max_backlog: (batch * args.consumers * 8) as u64,
                groups: 1,
                count_errors: false,
            };
            let names: Vec<_> = args.systems.iter().map(|s| s.name()).collect();
            say(&format!(
                "(b) batch {batch}: {} in turns, {rounds} round(s)",
                names.join(", ")
            ));
            self.gateway.reset_peak_rss();
            let label = format!("b batch {batch}");
            let runs = self
                .compare(systems, &setup, (duration, rounds), &label, report)
                .await?;
            // Only the HTTP system's slices make the gateway work.
            let peak = self.gateway.peak_rss_kb();
            for mut run in runs {
                if run.system == System::PgcursorHttp {
                    run.gateway_peak_rss_kb = peak;
                }
                report.end_to_end(run);
            }
        }
        Ok(())
    }

    /// (b)'s loops on `systems` in turns; with --profile one system at a
    /// time, each profiled apart (as `<label>: <system>`).
    async fn compare(
        &self,
        systems: Vec<(System, end_to_end::Sides, Probe)>,
        setup: &end_to_end::Setup,
        (duration, rounds): (Duration, u32),
        label: &str,
        report: &mut report::Report,
    ) -> Result<Vec<end_to_end::E2eRun>> {
        if !self.args.profile {
            return end_to_end::compare(&systems, setup, self.warmup, duration, rounds).await;
        }
        let mut runs = Vec::new();
        for system in systems {
            self.profiler.reset().await?;
            let name = system.0.name();
            runs.extend(end_to_end::compare(&[system], setup, self.warmup, duration, 1).await?);
            self.profiler
                .collect(&format!("{label}: {name}"), report)
                .await?;
        }
        Ok(runs)
    }

    /// (g) on a pool of its own: a connection per producer and consumer.
    async fn fan_out(&self, report: &mut report::Report) -> Result<()> {
        let args = self.args;
        let pool = load::pool(self.url, fan_out::connections(args.producers))?;
        let mut systems = Vec::new();
        for system in fan_out::SYSTEMS {
            let sides = fan_out::sides(system, &pool).await?;
            systems.push((system, sides, Probe::new(self.postmaster, None)));
        }
        let setup = end_to_end::Setup {
            batch: args.batch,
            producers: args.producers,
            partitions: args.partitions,
            payload: self.payload.clone(),
            max_backlog: (args.batch * args.consumers * 8) as u64,
            groups: fan_out::GROUPS as u64,
            count_errors: false,
        };
        say(&format!(
            "(g) fan-out to {} consumer groups, batch {}: pgcursor vs pgmq, {} round(s)",
            fan_out::GROUPS,
            args.batch,
            args.rounds
        ));
        let runs = self
            .compare(systems, &setup, (self.duration, args.rounds), "g", report)
            .await?;
        report.fan_out(runs);
        Ok(())
    }

    /// (h): seeded through the bench's pool, timed on one connection of its own.
    async fn backlog(&self, report: &mut report::Report) -> Result<()> {
        let args = self.args;
        say(&format!(
            "(h) backlog: seeding {} and {} messages over {} partitions, then pop+ack",
            args.backlog,
            backlog::SMALL,
            backlog::PARTITIONS
        ));
        let setup = backlog::Setup {
            large: args.backlog,
            batch: args.batch,
            cycles: args.cost_iterations,
            payload: self.payload.clone(),
        };
        let timed = load::pool(self.url, 1)?;
        let seeded = backlog::seed_both(&self.pool, &timed, &setup).await?;
        self.profiler.reset().await?;
        report.backlog(backlog::time(seeded, &setup).await?);
        self.profiler.collect("h: backlog", report).await
    }

    /// (c) on one connection of its own.
    async fn ack_cost(
        &self,
        client: &tokio_postgres::Client,
        report: &mut report::Report,
    ) -> Result<()> {
        let batches = [10, 100, 1000];
        say("(c) ack cost: the last offset of a batch of 10, 100, 1000");
        load::seed(&self.pool, ack_cost::queue(), 1, 1000, 1000, &self.payload).await?;
        self.profiler.reset().await?;
        report.ack_cost(ack_cost::run(client, &batches, self.args.cost_iterations).await?);
        self.profiler.collect("c: ack cost", report).await
    }

    /// (f) on one connection of its own.
    async fn step_cost(
        &self,
        client: &tokio_postgres::Client,
        report: &mut report::Report,
    ) -> Result<()> {
        say("(f) cost per step, one connection: pgcursor, pgmq and the floor");
        self.profiler.reset().await?;
        let costs = step_cost::run(
            client,
            self.args.batch,
            &self.payload,
            self.args.cost_iterations,
        )
        .await?;
        report.step_cost(costs);
        self.profiler.collect("f: cost per step", report).await
    }

    /// (i) on one connection of its own.
    async fn first_pop(
        &self,
        client: &tokio_postgres::Client,
        report: &mut report::Report,
    ) -> Result<()> {
        let counts = first_pop::PARTITION_COUNTS;
        say(&format!(
            "(i) a new group's first pop, {counts:?} partitions, {} groups per variant",
            self.args.first_pop_groups
        ));
        self.profiler.reset().await?;
        report.first_pop(first_pop::run(client, &counts, self.args.first_pop_groups).await?);
        self.profiler.collect("i: first pop", report).await
    }
}

async fn install_pgmq(url: &str) -> Result<()> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await?;
    pgmq::install::install_sql_from_embedded(&pool).await?;
    pool.close().await;
    Ok(())
}

fn say(what: &str) {
    eprintln!("bench: {what}");
}
