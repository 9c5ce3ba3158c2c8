//! CPU time used by each side of a run, from /proc: the PostgreSQL cluster
//! (postmaster, its live children, and what it reaped from exited ones),
//! the gateway, the load generator itself, and the whole machine (other
//! work on a shared machine shows up there, not in the first three).

use std::time::Instant;

use serde::Serialize;

/// Clock ticks per second of /proc's times (USER_HZ; 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Clone, Copy)]
pub struct Sample {
    at: Instant,
    postgres: u64,
    gateway: u64,
    bench: u64,
    machine_busy: u64,
}

/// Cores used on average between two samples.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CoresUsed {
    pub postgres: f64,
    pub gateway: f64,
    pub bench: f64,
    /// Every process on the machine (includes other work).
    pub machine: f64,
}

impl CoresUsed {
    /// The system under test: PostgreSQL plus the gateway.
    pub fn broker(&self) -> f64 {
        self.postgres + self.gateway
    }
}

#[derive(Clone, Copy)]
pub struct Probe {
    postmaster: u32,
    gateway: Option<u32>,
}

impl Probe {
    pub fn new(postmaster: u32, gateway: Option<u32>) -> Probe {
        Probe {
            postmaster,
            gateway,
        }
    }

    pub fn sample(&self) -> Sample {
        let postgres = stat_ticks(self.postmaster, true).unwrap_or(0)
            + children(self.postmaster)
                .into_iter()
                .filter_map(|pid| stat_ticks(pid, false))
                .sum::<u64>();
        Sample {
            at: Instant::now(),
            postgres,
            gateway: self
                .gateway
                .and_then(|pid| stat_ticks(pid, false))
                .unwrap_or(0),
            bench: stat_ticks(std::process::id(), false).unwrap_or(0),
            machine_busy: machine_busy_ticks().unwrap_or(0),
        }
    }
}

pub fn cores_between(a: &Sample, b: &Sample) -> CoresUsed {
    let seconds = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let cores = |x: u64, y: u64| y.saturating_sub(x) as f64 / TICKS_PER_SECOND / seconds;
    CoresUsed {
        postgres: cores(a.postgres, b.postgres),
        gateway: cores(a.gateway, b.gateway),
        bench: cores(a.bench, b.bench),
        machine: cores(a.machine_busy, b.machine_busy),
    }
}

/// The fields of /proc/<pid>/stat after the command name.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(
        rest.split_whitespace()
            .skip(1) // state
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// utime + stime (+ cutime + cstime: reaped children) of one process.
fn stat_ticks(pid: u32, with_reaped: bool) -> Option<u64> {
    let f = stat_fields(pid)?;
    // After `state`: ppid is [0], utime [10], stime [11], cutime [12], cstime [13].
    let own = f.get(10)? + f.get(11)?;
    Some(if with_reaped {
        own + f.get(12)? + f.get(13)?
    } else {
        own
    })
}

fn children(ppid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat_fields(pid).and_then(|f| f.first().copied()) == Some(ppid as u64))
        .collect()
}

/// Busy ticks of the whole machine (/proc/stat: everything but idle and iowait).
fn machine_busy_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let total: u64 = cpu.iter().take(8).sum();
    Some(total - cpu.get(3)? - cpu.get(4)?)
}
