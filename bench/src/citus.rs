//! bench-citus (`bench --citus`, `make bench-citus`): push → pop → ack
//! over HTTP through two gateways against a Citus coordinator, first with
//! one worker, then with two (each a new cluster made by scripts/citus.sh).
//! Reported: msgs/s, the two-worker / one-worker ratio, latencies, and the
//! CPU each node and the gateways used, so the reader sees how the work
//! split by partition. Writes `<out>/citus.{md,json}`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use pgcursor_tests::GatewayConfig;
use serde::Serialize;

use crate::brokers::{Broker, System};
use crate::cpu::{cores_between, Probe};
use crate::scenario::end_to_end::{self, E2eRun, Sides};
use crate::{load, machine, say, workspace, Args, Result};

/// Cores one node (or the gateways) used on average during a run.
#[derive(Debug, Clone, Serialize)]
pub struct NodeCores {
    pub node: String,
    pub cores: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CitusRun {
    pub workers: usize,
    /// Shards per distributed table (CITUS_SHARD_COUNT at distribute).
    pub shard_count: i32,
    pub run: E2eRun,
    /// coordinator, worker1[, worker2]: the postmaster and its children.
    pub nodes: Vec<NodeCores>,
    /// Both gateways together.
    pub gateways_cores: f64,
}

#[derive(Serialize)]
struct CitusReport {
    date_utc: String,
    machine: machine::Machine,
    batch: usize,
    producers: usize,
    consumers: usize,
    partitions: usize,
    seconds_per_run: f64,
    runs: Vec<CitusRun>,
    /// msgs/s with two workers over msgs/s with one.
    ratio: Option<f64>,
}

pub async fn run(args: &Args) -> Result<()> {
    let started = Instant::now();
    let mut runs = Vec::new();
    for workers in [1, 2] {
        let outcome = run_with(args, workers).await;
        citus_sh(&["stop"], workers)?;
        runs.push(outcome?);
    }
    let ratio = match (runs.first(), runs.get(1)) {
        (Some(one), Some(two)) => {
            Some(two.run.measured.per_second / one.run.measured.per_second.max(1e-9))
        }
        _ => None,
    };
    let report = CitusReport {
        date_utc: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        machine: machine::machine(),
        batch: args.batch,
        producers: args.producers,
        consumers: args.consumers,
        partitions: args.partitions,
        seconds_per_run: args.duration,
        runs,
        ratio,
    };
    write(&report, &args.out)?;
    say(&format!(
        "bench-citus done in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// A new cluster of `workers` workers, schema distributed, two gateways,
/// one measured end-to-end run.
async fn run_with(args: &Args, workers: usize) -> Result<CitusRun> {
    say(&format!("citus: a new coordinator and {workers} worker(s)"));
    citus_sh(&["destroy"], workers)?;
    let url = citus_sh(&["start"], workers)?
        .lines()
        .last()
        .ok_or("scripts/citus.sh start printed no URL")?
        .to_string();
    let gateway_bin = workspace().join(&args.gateway);
    let migrated = Command::new(&gateway_bin)
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .env("RUST_LOG", "warn")
        .status()?;
    if !migrated.success() {
        return Err(format!("gateway migrate on {url} failed").into());
    }
    citus_sh(&["distribute"], workers)?;
    // Each gateway's bootstrap applies sql/citus/functions.sql (the tables are distributed now).
    let mut gateways = Vec::new();
    for _ in 0..2 {
        gateways.push(
            GatewayConfig::new()
                .bin(&gateway_bin)
                .database_url(&url)
                .pool_size(args.pool_size)
                .env("RUST_LOG", "warn")
                .try_start()
                .await?,
        );
    }
    let pool = load::pool(&url, 2)?;
    let shard_count: i32 = pool
        .get()
        .await?
        .query_one(
            "SELECT shard_count::int FROM citus_tables WHERE table_name = 'pgcursor.messages'::regclass",
            &[],
        )
        .await?
        .try_get(0)?;
    let queue = format!("bench_citus_{workers}");
    let mut brokers = Vec::new();
    for gateway in &gateways {
        brokers.push(
            Broker::new(
                System::PgcursorHttp,
                &pool,
                Some(&gateway.base),
                queue.clone(),
            )
            .await?,
        );
    }
    let sides = Sides {
        producers: brokers.clone(),
        consumers: (0..args.consumers)
            .map(|i| brokers[i % brokers.len()].clone())
            .collect(),
    };
    let setup = end_to_end::Setup {
        batch: args.batch,
        producers: args.producers,
        partitions: args.partitions,
        payload: load::payload(args.payload_bytes),
        max_backlog: (args.batch * args.consumers * 8) as u64,
        groups: 1,
        count_errors: true,
    };
    let nodes = node_names(workers);
    let probes = nodes
        .iter()
        .map(|node| Ok(Probe::new(postmaster_pid(node)?, None)))
        .collect::<Result<Vec<_>>>()?;
    let gateway_probes: Vec<_> = gateways
        .iter()
        .map(|g| Probe::new(0, Some(g.pid())))
        .collect();
    say(&format!(
        "citus: {workers} worker(s), two gateways, batch {}, {} s",
        args.batch, args.duration
    ));
    let warmup = Duration::from_secs_f64(args.warmup);
    let duration = Duration::from_secs_f64(args.duration);
    // The run's measured window is only part of compare() (warm-up first):
    // the node probes span all of it, which the shares do not mind.
    let before: Vec<_> = probes
        .iter()
        .chain(&gateway_probes)
        .map(Probe::sample)
        .collect();
    let coordinator = probes[0]; // nodes start with the coordinator
    let run = end_to_end::compare(
        &[(System::PgcursorHttp, sides, coordinator)],
        &setup,
        warmup,
        duration,
        1,
    )
    .await?
    .pop()
    .ok_or("no run")?;
    let after: Vec<_> = probes
        .iter()
        .chain(&gateway_probes)
        .map(Probe::sample)
        .collect();
    let used: Vec<_> = before
        .iter()
        .zip(&after)
        .map(|(a, b)| cores_between(a, b))
        .collect();
    drop(gateways); // before their cluster goes
    Ok(CitusRun {
        workers,
        shard_count,
        run,
        nodes: nodes
            .iter()
            .zip(&used)
            .map(|(node, c)| NodeCores {
                node: node.clone(),
                cores: c.postgres,
            })
            .collect(),
        gateways_cores: used[nodes.len()..].iter().map(|c| c.gateway).sum(),
    })
}

fn node_names(workers: usize) -> Vec<String> {
    std::iter::once("coordinator".to_string())
        .chain((1..=workers).map(|w| format!("worker{w}")))
        .collect()
}

/// A node's postmaster pid, from the postmaster.pid scripts/citus.sh's cluster left.
fn postmaster_pid(node: &str) -> Result<u32> {
    let file = workspace().join(format!(".data/citus/{node}/pg/postmaster.pid"));
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(text.lines().next().unwrap_or("").trim().parse()?)
}

/// Runs scripts/citus.sh with CITUS_WORKERS set; its stdout.
fn citus_sh(action: &[&str], workers: usize) -> Result<String> {
    let out = Command::new(workspace().join("scripts/citus.sh"))
        .args(action)
        .env("CITUS_WORKERS", workers.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("scripts/citus.sh {} failed", action.join(" ")).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

fn write(report: &CitusReport, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)?;
    let markdown = markdown(report);
    println!("{markdown}");
    std::fs::write(
        out.join("citus.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    std::fs::write(out.join("citus.md"), markdown)?;
    eprintln!("bench: wrote {}/citus.{{json,md}}", out.display());
    Ok(())
}

fn markdown(r: &CitusReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# pgcursor on Citus — bench-citus, {}\n", r.date_utc);
    let _ = writeln!(
        md,
        "Machine: {} ({} cores). Push → pop → ack over HTTP through two gateways \
         against a Citus 12.1 coordinator; batch {}, {} producers and {} consumers \
         taking turns between the gateways, {} partitions, {:.0} s measured per run. \
         Each run is a new cluster (`scripts/citus.sh`, CITUS_WORKERS=1 then 2) on this \
         one machine: every node, both gateways and the load share its cores, so the \
         ratio shows how the work splits, not real scale-out.\n",
        r.machine.cpu_model,
        r.machine.nproc,
        r.batch,
        r.producers,
        r.consumers,
        r.partitions,
        r.seconds_per_run
    );
    let _ = writeln!(
        md,
        "| workers | shards | msgs/s | errors | push p50 / p99 ms | pop p50 / p99 ms | ack p50 / p99 ms | coordinator cores | worker cores | gateway cores | workers' share of PostgreSQL CPU |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for c in &r.runs {
        let m = &c.run.measured;
        let ms = |p: &load::Percentiles| {
            format!(
                "{:.1} / {:.1}",
                p.p50_us as f64 / 1000.0,
                p.p99_us as f64 / 1000.0
            )
        };
        let coordinator = c.nodes.first().map_or(0.0, |n| n.cores);
        let workers: Vec<_> = c.nodes.iter().skip(1).collect();
        let postgres: f64 = c.nodes.iter().map(|n| n.cores).sum();
        let worker_cores = workers
            .iter()
            .map(|n| format!("{} {:.2}", n.node, n.cores))
            .collect::<Vec<_>>()
            .join(", ");
        let share = workers
            .iter()
            .map(|n| format!("{} {:.0}%", n.node, 100.0 * n.cores / postgres.max(1e-9)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {} | {} | {} | {} | {:.2} | {} | {:.2} | {} |",
            c.workers,
            c.shard_count,
            m.per_second,
            m.errors,
            ms(&c.run.push),
            ms(&c.run.pop),
            ms(&c.run.ack),
            coordinator,
            worker_cores,
            c.gateways_cores,
            share
        );
    }
    if let Some(ratio) = r.ratio {
        let _ = writeln!(md, "\nTwo workers over one: **{ratio:.2}×** msgs/s.");
    }
    md
}
