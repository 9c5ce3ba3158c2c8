//! The faults of a run, on a fixed schedule: `kill -9` of one gateway then
//! its restart on the same port (its clients fail over to the other), and a
//! `pg_ctl stop -m immediate` + start of PostgreSQL (crash recovery). The
//! third fault, requests dropped mid-flight, is in `World::request`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcursor_tests::{Gateway, PrivateCluster};

use crate::world::World;

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillGateway(usize),
    CrashPostgres,
}

/// Gateway kills at a quarter, half and three quarters of the run (the two
/// gateways in turn), a PostgreSQL crash at 60 % (and at 35 % in runs of
/// five minutes or more).
fn schedule(seconds: u64) -> Vec<(Duration, Fault)> {
    let at = |fraction: f64| Duration::from_secs_f64(seconds as f64 * fraction);
    let mut faults = vec![
        (at(0.25), Fault::KillGateway(1)),
        (at(0.50), Fault::KillGateway(0)),
        (at(0.60), Fault::CrashPostgres),
        (at(0.75), Fault::KillGateway(1)),
    ];
    if seconds >= 300 {
        faults.push((at(0.35), Fault::CrashPostgres));
    }
    faults.sort_by_key(|(t, _)| *t);
    faults
}

/// Runs the schedule; hands the gateways back with a line per fault.
pub async fn run(
    world: Arc<World>,
    mut gateways: Vec<Gateway>,
    cluster: Arc<PrivateCluster>,
) -> (Vec<Gateway>, Vec<String>) {
    let mut report = Vec::new();
    for (at, fault) in schedule(world.settings.seconds) {
        if let Some(wait) = at.checked_sub(world.now()) {
            tokio::time::sleep(wait).await;
        }
        let started = Instant::now();
        let what = match fault {
            Fault::KillGateway(i) => {
                gateways[i].kill();
                // Long enough for its clients to notice and move over.
                tokio::time::sleep(Duration::from_secs(1)).await;
                gateways[i].restart().await;
                format!("kill -9 of gateway {i}, restarted and healthy")
            }
            Fault::CrashPostgres => {
                let cluster = cluster.clone();
                tokio::task::spawn_blocking(move || cluster.restart_immediate())
                    .await
                    .expect("restart PostgreSQL");
                "PostgreSQL stopped -m immediate and started (crash recovery)".to_string()
            }
        };
        let line = format!(
            "{:.1}s: {what} after {} ms",
            at.as_secs_f64(),
            started.elapsed().as_millis()
        );
        println!("soak: {line}");
        report.push(line);
    }
    (gateways, report)
}
