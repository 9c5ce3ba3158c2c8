//! The faults of a run, on a fixed schedule: `kill -9` of one gateway then
//! its restart on the same port (its clients fail over to the other), and a
//! `pg_ctl stop -m immediate` + start of PostgreSQL (crash recovery). The
//! third fault, requests dropped mid-flight, is in `World::request`.
//!
//! In failover mode (scripts/failover.sh) the only fault is the failover:
//! the primary is stopped `-m immediate` and its synchronous standby
//! promoted, by the commands the script gives; the gateways keep running.
//! Right after, what the promoted standby holds is read (a snapshot), so the
//! checker can hold everything answered before the crash against it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcursor_tests::{Gateway, PrivateCluster};

use crate::checker::{self, Snapshot};
use crate::world::World;

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillGateway(usize),
    CrashPostgres,
    Failover,
}

/// Gateway kills at a quarter, half and three quarters of the run (the two
/// gateways in turn), a PostgreSQL crash at 60 % (and at 35 % in runs of
/// five minutes or more).
/// A failover run: the failover at 40 %, nothing else. A run on a database
/// it did not start cannot crash it: the gateway kills only.
fn schedule(seconds: u64, failover: bool, own_cluster: bool) -> Vec<(Duration, Fault)> {
    let at = |fraction: f64| Duration::from_secs_f64(seconds as f64 * fraction);
    if failover {
        return vec![(at(0.40), Fault::Failover)];
    }
    let mut faults = vec![
        (at(0.25), Fault::KillGateway(1)),
        (at(0.50), Fault::KillGateway(0)),
        (at(0.60), Fault::CrashPostgres),
        (at(0.75), Fault::KillGateway(1)),
    ];
    if seconds >= 300 {
        faults.push((at(0.35), Fault::CrashPostgres));
    }
    if !own_cluster {
        faults.retain(|(_, f)| !matches!(f, Fault::CrashPostgres));
    }
    faults.sort_by_key(|(t, _)| *t);
    faults
}

/// What the fault schedule hands back: the gateways, a line per fault, and
/// in failover mode the snapshot taken right after the promotion.
pub struct Done {
    pub gateways: Vec<Gateway>,
    pub report: Vec<String>,
    pub snapshot: Option<Snapshot>,
}

/// Runs the schedule.
pub async fn run(
    world: Arc<World>,
    mut gateways: Vec<Gateway>,
    cluster: Option<Arc<PrivateCluster>>,
) -> Done {
    let mut report = Vec::new();
    let mut snapshot = None;
    let settings = &world.settings;
    for (at, fault) in schedule(settings.seconds, settings.failover(), cluster.is_some()) {
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
                let cluster = cluster
                    .clone()
                    .expect("a crash needs the soak's own cluster");
                tokio::task::spawn_blocking(move || cluster.restart_immediate())
                    .await
                    .expect("restart PostgreSQL");
                "PostgreSQL stopped -m immediate and started (crash recovery)".to_string()
            }
            Fault::Failover => {
                let (line, taken) = failover(&world).await;
                snapshot = Some(taken);
                line
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
    Done {
        gateways,
        report,
        snapshot,
    }
}

/// Crashes the primary, notes the moment it is gone, promotes the standby,
/// then reads what the promoted standby holds.
async fn failover(world: &World) -> (String, Snapshot) {
    let settings = &world.settings;
    let began = world.now();
    shell(settings.crash_command.as_deref().unwrap()).await;
    let crashed = world.now();
    world.crashed(crashed);
    println!(
        "soak: {:.1}s: primary stopped -m immediate (took {} ms); promoting the standby",
        crashed.as_secs_f64(),
        (crashed - began).as_millis()
    );
    let promote = settings
        .promote_command
        .as_deref()
        .expect("PGCURSOR_SOAK_PROMOTE_COMMAND must come with the crash command");
    shell(promote).await;
    let promoted = world.now();
    world.failover.lock().unwrap().promoted = Some(promoted);
    // The promoted standby, through the same two-host URL as the gateways.
    let deadline = promoted + Duration::from_secs(settings.resume_seconds);
    let taken = loop {
        match checker::snapshot(&world.db_url).await {
            Ok(taken) => break taken,
            Err(e) if world.now() < deadline => {
                println!("soak: no snapshot yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("the promoted standby cannot be read: {e}"),
        }
    };
    let line = format!(
        "failover (primary gone at {:.1}s; standby promoted {} ms later; its snapshot read {} ms after that)",
        crashed.as_secs_f64(),
        (promoted - crashed).as_millis(),
        (world.now() - promoted).as_millis()
    );
    (line, taken)
}

/// Runs `command` with bash; it must succeed.
async fn shell(command: &str) {
    let status = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .status()
        .await
        .unwrap_or_else(|e| panic!("run {command}: {e}"));
    assert!(status.success(), "{command} failed: {status}");
}
