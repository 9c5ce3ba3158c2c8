//! The soak: two gateways on one private PostgreSQL, producers and consumers
//! doing everything the API allows, faults (gateway `kill -9`, PostgreSQL
//! crash, requests dropped mid-flight), then a drain and a checker that
//! proves nothing was lost, duplicated into a lease, reordered or
//! dead-lettered without cause.
//!
//! `PGCURSOR_SOAK_SECONDS` (default 30) is the producing time; `make test`
//! runs the default, `make soak` ten minutes (`SOAK_SECONDS`). More knobs in
//! world.rs (`PGCURSOR_SOAK_*`). A failed run prints its seed.
//!
//! `make test-failover` (scripts/failover.sh) runs it in failover mode: on
//! the script's primary and synchronous standby, with the failover as the
//! only fault; the checker then also proves that what was answered before
//! the crash survived it, and the run fails unless push, pop and ack
//! succeed again through the same gateway processes within
//! `PGCURSOR_SOAK_RESUME_SECONDS` (60).

mod checker;
mod consumer;
mod faults;
mod log;
mod producer;
mod world;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcursor_tests::{Gateway, PrivateCluster};
use tokio::task::JoinHandle;

use crate::log::WorkerLog;
use crate::world::{FailoverClock, Settings, World, GROUPS_A};

/// How often a line of progress is printed while producing.
const PROGRESS: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak() {
    let settings = Settings::from_env();
    println!("soak: {settings:?}");
    // Failover mode brings its database; otherwise a private cluster.
    let cluster = match settings.database_url {
        Some(_) => None,
        None => Some(Arc::new(PrivateCluster::start())),
    };
    let url = match (&settings.database_url, &cluster) {
        (Some(url), _) => url.clone(),
        (None, Some(cluster)) => cluster.url().to_string(),
        (None, None) => unreachable!(),
    };
    durability_is_on(&url).await;
    let env = [
        ("DATABASE_URL", url.as_str()),
        ("PGCURSOR_DB_TIMEOUT_MS", "3000"),
        ("RUST_LOG", "warn"),
    ];
    let gateways = vec![
        Gateway::start_with(&env).await,
        Gateway::start_with(&env).await,
    ];
    let bases = [gateways[0].base.clone(), gateways[1].base.clone()];
    let pids: Vec<u32> = gateways.iter().map(Gateway::pid).collect();
    let world = Arc::new(World::new(settings.clone(), url.clone(), bases));
    world.configure().await;

    let monitor = tokio::spawn({
        let world = world.clone();
        async move { world.monitor().await }
    });
    let producers: Vec<JoinHandle<WorkerLog>> = (0..settings.producers)
        .map(|id| tokio::spawn(producer::produce(world.clone(), id)))
        .collect();
    let mut consumers: Vec<JoinHandle<WorkerLog>> = (0..settings.consumers)
        .map(|id| {
            let group = GROUPS_A[id % GROUPS_A.len()];
            tokio::spawn(consumer::consume_a(world.clone(), id, group))
        })
        .collect();
    consumers.extend(
        (0..settings.b_consumers).map(|id| tokio::spawn(consumer::consume_b(world.clone(), id))),
    );
    let faults = tokio::spawn(faults::run(world.clone(), gateways, cluster.clone()));

    let run = Duration::from_secs(settings.seconds);
    let mut report_at = PROGRESS;
    while world.now() < run {
        tokio::time::sleep(Duration::from_secs(1).min(run.saturating_sub(world.now()))).await;
        if world.now() >= report_at {
            progress(&world, "producing");
            report_at += PROGRESS;
        }
    }
    world.stop_producing();
    let mut log = WorkerLog::default();
    for p in producers {
        log.merge(p.await.expect("a producer panicked"));
    }
    let faults::Done {
        mut gateways,
        report: fault_report,
        snapshot,
    } = faults.await.expect("the fault schedule failed");

    let drained = drain(&world).await;
    world.stop_consuming();
    for c in consumers {
        log.merge(c.await.expect("a consumer panicked"));
    }
    monitor.await.expect("the monitor panicked");

    let purges = world.purges.lock().unwrap().clone();
    let server_errors = world.server_errors.lock().unwrap().clone();
    let until_drained = world.now();
    let clock = world.failover.lock().unwrap().clone();
    let failover = snapshot.as_ref().zip(clock.crashed);
    let mut report = checker::check(
        &log,
        &purges,
        &server_errors,
        &url,
        run,
        until_drained,
        failover,
    )
    .await;
    if settings.failover() {
        resumed(&settings, &clock, &mut gateways, &pids, &mut report).await;
    }
    println!(
        "\nsoak: {} s producing, seed {}",
        settings.seconds, settings.seed
    );
    for line in &fault_report {
        println!("soak: fault at {line}");
    }
    match drained {
        Some(took) => println!("soak: drained in {:.1} s", took.as_secs_f64()),
        None => println!("soak: NOT drained within {} s", settings.drain_seconds),
    }
    for (name, value) in &report.totals {
        println!("soak: {name:<45} {value}");
    }
    if !report.violations.is_empty() {
        for (i, gw) in gateways.iter().enumerate() {
            let stderr = gw.stderr();
            let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
            println!(
                "--- gateway {i} stderr (last lines, newest first):\n{}",
                tail.join("\n")
            );
        }
        let shown: Vec<&String> = report.violations.iter().take(50).collect();
        panic!(
            "soak (seed {}): {} violations, the first {}:\n{}",
            settings.seed,
            report.violations.len(),
            shown.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Failover mode: push, pop and ack succeeded again within the bound after
/// the crash, through the gateway processes started at the beginning.
async fn resumed(
    settings: &Settings,
    clock: &FailoverClock,
    gateways: &mut [Gateway],
    pids: &[u32],
    report: &mut checker::Report,
) {
    let Some(crashed) = clock.crashed else {
        report
            .violations
            .push("failover mode, but the failover never happened".to_string());
        return;
    };
    let bound = Duration::from_secs(settings.resume_seconds);
    if let Some(promoted) = clock.promoted {
        report.totals.push((
            "failover: crash to standby promoted".to_string(),
            format!("{:.2} s", (promoted - crashed).as_secs_f64()),
        ));
    }
    for (what, first) in [
        ("push", clock.first_push),
        ("pop", clock.first_pop),
        ("ack", clock.first_ack),
    ] {
        let after = first.map(|t| t - crashed);
        let shown = match after {
            Some(after) => format!("{:.2} s", after.as_secs_f64()),
            None => "never".to_string(),
        };
        // main.rs prints the totals: scripts/failover.sh keeps these lines.
        report.totals.push((
            format!("failover: crash to first successful {what}"),
            shown.clone(),
        ));
        if after.is_none_or(|after| after > bound) {
            report.violations.push(format!(
                "failover: no successful {what} within {bound:?} of the crash ({shown})"
            ));
        }
    }
    for (i, gw) in gateways.iter_mut().enumerate() {
        if gw.pid() != pids[i] || gw.wait_exit(Duration::ZERO).await.is_some() {
            report.violations.push(format!(
                "failover: gateway {i} (pid {}) did not keep running",
                pids[i]
            ));
        }
    }
    report.totals.push((
        "failover: gateway pids, same process all along".to_string(),
        format!("{pids:?}"),
    ));
}

/// A soak about what survives a crash means nothing without fsync.
async fn durability_is_on(url: &str) {
    let db = world::connect(url)
        .await
        .expect("connect to the soak cluster");
    for setting in ["fsync", "synchronous_commit", "full_page_writes"] {
        let row = db.query_one(&format!("SHOW {setting}"), &[]).await.unwrap();
        let value: String = row.get(0);
        assert_eq!(value, "on", "{setting} must be on for the soak");
    }
}

/// Consumers go on until every group has completed everything (two fresh
/// readings in a row say nothing is pending) or the drain time is up.
async fn drain(world: &World) -> Option<Duration> {
    let started = Instant::now();
    let limit = Duration::from_secs(world.settings.drain_seconds);
    let mut quiet = 0;
    let mut last_read = world.monitor_reads();
    let mut report_at = Duration::from_secs(10);
    while started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let read = world.monitor_reads();
        if read == last_read {
            continue;
        }
        last_read = read;
        quiet = if world.pending() == 0 { quiet + 1 } else { 0 };
        if quiet >= 2 {
            return Some(started.elapsed());
        }
        if started.elapsed() >= report_at {
            progress(world, "draining");
            report_at += Duration::from_secs(10);
        }
    }
    None
}

fn progress(world: &World, phase: &str) {
    println!(
        "soak: {:>6.1}s {phase}: {} messages pending, highest lag {}",
        world.now().as_secs_f64(),
        world.pending(),
        world.max_lag()
    );
}
