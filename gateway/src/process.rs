//! This gateway process's own per-minute figures (docs/sql-api.md
//! "record_process_minutes"): what it counted summed over the queues, the
//! messages its acks dead-lettered, and samples of its CPU, memory and pool
//! taken every SAMPLE_EVERY. minutes::flush writes them with the per-queue
//! figures, in the same statement. The system-metrics and worker-metrics
//! analytics, /status's workers and the scrape's queen_worker_* gauges read
//! them.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::minutes::{Figures, Pending, Target};

/// How often the process is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// This machine's name, as the traces' workerId and the process figures
/// carry it.
pub fn hostname() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into())
    })
}

static PORT: OnceLock<u16> = OnceLock::new();

/// The port this process serves on (set once, when it starts serving).
pub fn set_port(port: u16) {
    let _ = PORT.set(port);
}

/// record_process_minutes' `gateway` argument: who this process is.
pub fn identity() -> Value {
    json!({"hostname": hostname(), "pid": std::process::id(), "port": PORT.get().copied().unwrap_or(0)})
}

/// One gauge's samples in a minute.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Gauge {
    samples: u32,
    sum: f64,
    min: f64,
    max: f64,
    last: f64,
}

impl Gauge {
    fn new(value: f64) -> Gauge {
        Gauge {
            samples: 1,
            sum: value,
            min: value,
            max: value,
            last: value,
        }
    }

    fn add(&mut self, value: f64) {
        self.samples += 1;
        self.sum += value;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.last = value;
    }

    fn json(&self) -> Value {
        // Rounded to 2 decimals, but never outside [min, max].
        let avg = ((self.sum / f64::from(self.samples)) * 100.0).round() / 100.0;
        json!({"samples": self.samples, "avg": avg.clamp(self.min, self.max), "min": self.min,
               "max": self.max, "last": self.last})
    }
}

/// What a minute holds besides the per-queue figures.
#[derive(Clone, Debug, Default)]
struct Minute {
    /// Messages dead-lettered by this process's acks, not flushed yet.
    dead_lettered: u64,
    /// The minute's samples so far (written whole at each flush).
    gauges: BTreeMap<&'static str, Gauge>,
}

fn minutes() -> &'static Mutex<BTreeMap<u64, Minute>> {
    static MINUTES: OnceLock<Mutex<BTreeMap<u64, Minute>>> = OnceLock::new();
    MINUTES.get_or_init(Mutex::default)
}

fn this_minute() -> u64 {
    crate::minutes::now_secs() / 60 * 60
}

/// Counts messages this process's acks dead-lettered.
pub fn record_dead_lettered(n: u64) {
    if n > 0 {
        let mut minutes = minutes().lock().unwrap_or_else(|e| e.into_inner());
        minutes.entry(this_minute()).or_default().dead_lettered += n;
    }
}

/// Adds one sample of each gauge to this minute.
fn record_sample(values: &[(&'static str, f64)]) {
    let mut minutes = minutes().lock().unwrap_or_else(|e| e.into_inner());
    let minute = minutes.entry(this_minute()).or_default();
    for (name, value) in values {
        minute
            .gauges
            .entry(name)
            .and_modify(|g| g.add(*value))
            .or_insert_with(|| Gauge::new(*value));
    }
}

/// CPU percent x 100 (Queen's unit for system-metrics' cpu leaves) in user
/// mode and in the kernel since the previous call; None at the first.
fn cpu_since_last() -> Option<(f64, f64)> {
    static LAST: Mutex<Option<(Instant, u64, u64)>> = Mutex::new(None);
    let (user, system) = crate::metrics::cpu_times()?;
    let now = Instant::now();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let before = last.replace((now, user, system));
    let (then, user_before, system_before) = before?;
    let wall_us = now.duration_since(then).as_micros() as f64;
    (wall_us > 0.0).then(|| {
        let share = |used: u64| (used as f64 / wall_us * 10_000.0).round();
        (
            share(user.saturating_sub(user_before)),
            share(system.saturating_sub(system_before)),
        )
    })
}

/// Samples CPU, memory and the pool (`pool`: size, idle, active).
pub fn sample(pool: (usize, usize, usize)) {
    let mut values = Vec::with_capacity(7);
    if let Some((user, system)) = cpu_since_last() {
        values.push(("cpu.user_us", user));
        values.push(("cpu.system_us", system));
    }
    if let Some((rss, virt)) = crate::metrics::memory() {
        values.push(("memory.rss_bytes", rss as f64));
        values.push(("memory.virtual_bytes", virt as f64));
    }
    values.push(("database.pool_size", pool.0 as f64));
    values.push(("database.pool_idle", pool.1 as f64));
    values.push(("database.pool_active", pool.2 as f64));
    record_sample(&values);
}

/// What a flush takes: the dead-lettered counts, and the minutes that are
/// over (put back if the flush fails).
pub struct Taken(BTreeMap<u64, Minute>);

/// record_process_minutes' rows for the per-queue figures `pending` (summed
/// per minute, and the long-poll waits per queue), the dead-lettered counts
/// and the samples. Takes the counts and every minute that is over; the
/// current minute's samples stay, as the next flush writes them whole again.
pub fn take_rows(pending: &Pending) -> (Value, Taken) {
    let current = this_minute();
    let mut sums: BTreeMap<u64, Figures> = BTreeMap::new();
    let mut parked: BTreeMap<u64, Map<String, Value>> = BTreeMap::new();
    for ((minute, target), figures) in pending {
        sums.entry(*minute).or_default().absorb(figures);
        if let (Target::Queue(Some(queue)), ms @ 1..) = (target, figures.parked_ms) {
            parked
                .entry(*minute)
                .or_default()
                .insert(queue.clone(), json!(ms));
        }
    }
    let mut taken = {
        let mut minutes = minutes().lock().unwrap_or_else(|e| e.into_inner());
        // The minutes that are over go; the current one is copied and its
        // counts zeroed.
        let current_on = minutes.split_off(&current);
        let mut taken = std::mem::replace(&mut *minutes, current_on);
        for (key, minute) in minutes.iter_mut() {
            taken.insert(*key, minute.clone());
            minute.dead_lettered = 0;
        }
        taken
    };
    let mut keys: Vec<u64> = sums.keys().chain(taken.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let rows = keys
        .into_iter()
        .map(|minute| {
            let mut row = Map::new();
            row.insert("minute".into(), json!(minute));
            let figures = sums.get(&minute).copied().unwrap_or_default();
            for (key, n) in figures.process_fields().filter(|(_, n)| *n > 0) {
                row.insert(key.into(), json!(n));
            }
            if let Some(waits) = parked.remove(&minute) {
                row.insert("parked".into(), Value::Object(waits));
            }
            if let Some(m) = taken.get(&minute) {
                if m.dead_lettered > 0 {
                    row.insert("deadLettered".into(), json!(m.dead_lettered));
                }
                if !m.gauges.is_empty() {
                    let samples: Map<String, Value> = m
                        .gauges
                        .iter()
                        .map(|(name, g)| (name.to_string(), g.json()))
                        .collect();
                    row.insert("samples".into(), Value::Object(samples));
                }
            }
            Value::Object(row)
        })
        .collect();
    // Only the current minute's counts were zeroed: keep just those to restore.
    taken.retain(|_, m| m.dead_lettered > 0 || !m.gauges.is_empty());
    (Value::Array(rows), Taken(taken))
}

/// Puts back what a failed flush took: dead-lettered counts add up again,
/// and a minute that is over gets its samples back unless newer ones exist;
/// none older than minutes::KEEP (the database would not keep them).
pub fn restore(taken: Taken) {
    let current = this_minute();
    let oldest = current.saturating_sub(crate::minutes::KEEP.as_secs());
    let mut minutes = minutes().lock().unwrap_or_else(|e| e.into_inner());
    for (key, m) in taken.0.into_iter().filter(|(key, _)| *key >= oldest) {
        let slot = minutes.entry(key).or_default();
        slot.dead_lettered += m.dead_lettered;
        if key < current && slot.gauges.is_empty() {
            slot.gauges = m.gauges;
        }
    }
}

/// Samples the process every SAMPLE_EVERY; `pool` reads the pool's
/// (size, idle, active).
pub fn spawn_sampler(
    pool: impl Fn() -> (usize, usize, usize) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    cpu_since_last(); // the first reading, for the first sample's delta
    crate::clock::every(SAMPLE_EVERY, move || {
        sample(pool());
        std::future::ready(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the tests that take or give back minutes: they share the
    /// process-wide map.
    static MAP: Mutex<()> = Mutex::new(());

    #[test]
    fn a_gauge_keeps_count_sum_extremes_and_the_last_value() {
        let mut g = Gauge::new(4.0);
        g.add(1.0);
        g.add(2.5);
        assert_eq!(
            g.json(),
            json!({"samples": 3, "avg": 2.5, "min": 1.0, "max": 4.0, "last": 2.5})
        );
        let one = Gauge::new(1.0 / 3.0);
        assert_eq!(
            one.json()["avg"],
            one.json()["min"],
            "rounding stays inside [min, max]"
        );
    }

    #[test]
    fn a_process_row_sums_the_minute_over_its_queues_and_keeps_waits_per_queue() {
        let figures = |f: fn(&mut Figures)| {
            let mut one = Figures::default();
            f(&mut one);
            one
        };
        let pending: Pending = [
            (
                (60, Target::Queue(Some("a".into()))),
                figures(|f| {
                    f.pop_requests = 2;
                    f.parked_ms = 500;
                    f.pop_empty = 1;
                }),
            ),
            (
                (60, Target::Queue(Some("b".into()))),
                figures(|f| f.pop_requests = 1),
            ),
            ((60, Target::Queue(None)), figures(|f| f.parked_ms = 70)),
            (
                (60, Target::Partition(uuid::Uuid::nil())),
                figures(|f| f.ack_messages = 3),
            ),
        ]
        .into_iter()
        .collect();
        let _map = MAP.lock().unwrap_or_else(|e| e.into_inner());
        let (rows, _) = take_rows(&pending);
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["minute"] == 60)
            .unwrap();
        assert_eq!(
            row,
            &json!({"minute": 60, "popRequests": 3, "ackMessages": 3, "parked": {"a": 500}}),
            "empty pops and waits are not process figures; a wait without a queue has no row"
        );
    }

    #[test]
    fn a_failed_flush_gives_back_what_it_took_but_not_past_a_day() {
        let day_old = this_minute() - 25 * 3600;
        let minute = this_minute() - 3600;
        let taken = |key: u64| {
            let mut m = Minute::default();
            m.gauges.insert("cpu.user_us", Gauge::new(5.0));
            m.dead_lettered = 2;
            Taken(BTreeMap::from([(key, m)]))
        };
        let _map = MAP.lock().unwrap_or_else(|e| e.into_inner());
        restore(taken(minute));
        restore(taken(day_old));
        let minutes = minutes().lock().unwrap();
        let back = minutes.get(&minute).expect("an hour-old minute comes back");
        assert_eq!((back.dead_lettered, back.gauges.len()), (2, 1));
        assert!(!minutes.contains_key(&day_old), "a day-old one does not");
    }

    #[test]
    fn cpu_is_read_as_percent_times_100() {
        cpu_since_last();
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let (user, system) = cpu_since_last().expect("a second reading");
        // One thread spinning: about 10000 (100 %), more with other tests'.
        assert!(user + system > 1_000.0, "{user} + {system}");
    }
}
