//! (b) End to end: `producers` tasks push batches, `consumers` tasks pop a
//! batch and complete all of it (see brokers.rs), on one system at a time. Measured: messages
//! acked per second. Producers pause while more than `max_backlog` messages
//! are pushed but not yet acked, so every system is measured in a steady
//! state with a shallow queue rather than with an ever-growing one.
//! Consumers that find nothing sleep 2 ms (same rule for every system).
//!
//! (g) fan-out runs the same loops with other `Sides`: the producers' broker
//! feeds several consumer groups, each consumer reads for one of them, and a
//! message counts once per group that acked it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use crate::brokers::{Broker, System};
use crate::cpu::Probe;
use crate::load::{self, Counters, Measured, Percentiles, Window};
use crate::Result;

pub struct Setup {
    pub batch: usize,
    pub producers: usize,
    /// pgcursor partitions the producers spread over (pgmq: one queue).
    pub partitions: usize,
    pub payload: Value,
    /// Producers pause while a group has this many messages pushed but not acked.
    pub max_backlog: u64,
    /// Consumer groups that each get every message: 1 in (b).
    pub groups: u64,
    /// A failed push, pop or ack is counted in `errors` and the loop goes
    /// on, as a client would retry (bench-citus); otherwise it ends the run.
    pub count_errors: bool,
}

/// Who pushes and who pops. In (b) one broker both ways; in (g) the
/// producers' broker feeds every group and each consumer reads for one;
/// on Citus (bench-citus) producers and consumers take turns between
/// gateways. Producer i pushes through `producers[i % len]`.
#[derive(Clone)]
pub struct Sides {
    pub producers: Vec<Broker>,
    pub consumers: Vec<Broker>,
}

impl Sides {
    /// `consumers` tasks popping from the queue the producers push to.
    pub fn shared(broker: Broker, consumers: usize) -> Sides {
        Sides {
            consumers: vec![broker.clone(); consumers],
            producers: vec![broker],
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct E2eRun {
    pub system: System,
    pub name: &'static str,
    pub batch: usize,
    pub measured: Measured,
    pub push: Percentiles,
    pub pop: Percentiles,
    pub ack: Percentiles,
    /// Gateway VmHWM during this run (HTTP only), kB.
    pub gateway_peak_rss_kb: Option<u64>,
    /// msgs/s over pgmq's at the same batch size (set by report.rs).
    pub vs_pgmq_archive: Option<f64>,
    pub vs_pgmq_delete: Option<f64>,
}

impl E2eRun {
    /// msgs/s per core the broker used (PostgreSQL + gateway).
    pub fn per_broker_core(&self) -> f64 {
        self.measured.per_second / self.measured.cores.broker().max(1e-9)
    }
}

/// Measures every system in turns, `rounds` times, `duration / rounds`
/// each (after its own warm-up), so drift on a shared machine and the
/// growing tables hit all alike. A system keeps its queue across rounds.
pub async fn compare(
    systems: &[(System, Sides, Probe)],
    setup: &Setup,
    warmup: Duration,
    duration: Duration,
    rounds: u32,
) -> Result<Vec<E2eRun>> {
    let mut slices: Vec<(Vec<Measured>, [Histogram<u64>; 3])> = systems
        .iter()
        .map(|_| {
            (
                Vec::new(),
                [load::histogram(), load::histogram(), load::histogram()],
            )
        })
        .collect();
    for _ in 0..rounds {
        for (i, (_, sides, probe)) in systems.iter().enumerate() {
            let (measured, latencies) =
                slice(sides, setup, probe, warmup, duration / rounds).await?;
            slices[i].0.push(measured);
            for (all, one) in slices[i].1.iter_mut().zip(latencies) {
                all.add(one)?;
            }
        }
    }
    Ok(systems
        .iter()
        .zip(slices)
        .map(|((system, _, _), (measured, [push, pop, ack]))| E2eRun {
            system: *system,
            name: system.name(),
            batch: setup.batch,
            measured: Measured::merge(&measured),
            push: load::percentiles(&push),
            pop: load::percentiles(&pop),
            ack: load::percentiles(&ack),
            gateway_peak_rss_kb: None,
            vs_pgmq_archive: None,
            vs_pgmq_delete: None,
        })
        .collect())
}

/// One measured slice: latencies of push, pop (that delivered) and ack.
async fn slice(
    sides: &Sides,
    setup: &Setup,
    probe: &Probe,
    warmup: Duration,
    duration: Duration,
) -> Result<(Measured, [Histogram<u64>; 3])> {
    let (window, counters) = load::shared();
    let batch = Arc::new(vec![setup.payload.clone(); setup.batch]);
    let producers: Vec<_> = (0..setup.producers)
        .map(|i| {
            let (broker, window, counters) = (
                sides.producers[i % sides.producers.len()].clone(),
                window.clone(),
                counters.clone(),
            );
            let (batch, pace) = (batch.clone(), Pace::of(setup, i));
            let count_errors = setup.count_errors;
            tokio::spawn(async move {
                produce(&broker, &batch, pace, count_errors, &window, &counters).await
            })
        })
        .collect();
    let consumers: Vec<_> = sides
        .consumers
        .iter()
        .map(|broker| {
            let (broker, window, counters) = (broker.clone(), window.clone(), counters.clone());
            let (batch, count_errors) = (setup.batch, setup.count_errors);
            tokio::spawn(
                async move { consume(&broker, batch, count_errors, &window, &counters).await },
            )
        })
        .collect();
    let measured = load::measure(&window, &counters, probe, warmup, duration).await;
    let mut push = load::histogram();
    for producer in producers {
        push.add(producer.await??)?;
    }
    let (mut pop, mut ack) = (load::histogram(), load::histogram());
    for consumer in consumers {
        let (p, a) = consumer.await??;
        pop.add(p)?;
        ack.add(a)?;
    }
    Ok((measured, [push, pop, ack]))
}

/// Where one producer pushes, and when it waits.
#[derive(Clone, Copy)]
struct Pace {
    /// Partitions `first`, `first + step`, ... modulo `partitions`.
    first: usize,
    step: usize,
    partitions: usize,
    max_backlog: u64,
    groups: u64,
}

impl Pace {
    fn of(setup: &Setup, producer: usize) -> Pace {
        Pace {
            first: producer,
            step: setup.producers,
            partitions: setup.partitions,
            max_backlog: setup.max_backlog,
            groups: setup.groups.max(1),
        }
    }

    /// Messages pushed and not yet acked, per group (`done` counts a
    /// message once per group that acked it).
    fn backlog(&self, counters: &Counters) -> u64 {
        let pushed = counters.pushed.load(Ordering::Relaxed);
        pushed.saturating_sub(counters.done.load(Ordering::Relaxed) / self.groups)
    }
}

/// Pushes `batch` until told to stop, pausing while the backlog is over
/// `max_backlog`; push latencies during the measured window.
async fn produce(
    broker: &Broker,
    batch: &[Value],
    pace: Pace,
    count_errors: bool,
    window: &Window,
    counters: &Counters,
) -> Result<Histogram<u64>> {
    let mut latency = load::histogram();
    let mut partition = pace.first;
    while !window.stopped() {
        if pace.backlog(counters) > pace.max_backlog {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        let started = Instant::now();
        let pushed = broker.push(partition % pace.partitions, batch).await;
        partition += pace.step;
        if succeeded(pushed, count_errors, counters).await?.is_none() {
            continue;
        }
        if window.measuring() {
            load::record(&mut latency, started);
        }
        Counters::add(&counters.pushed, batch.len() as u64);
    }
    Ok(latency)
}

/// Whether a step succeeded; a failure is the run's error, or with
/// `count_errors` one more in `errors` (a short pause, then the loop goes on).
async fn succeeded<T>(
    outcome: Result<T>,
    count_errors: bool,
    counters: &Counters,
) -> Result<Option<T>> {
    match outcome {
        Ok(value) => Ok(Some(value)),
        Err(e) if !count_errors => Err(e),
        Err(_) => {
            Counters::add(&counters.errors, 1);
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(None)
        }
    }
}

/// Pops and acks until told to stop; latencies of pops that delivered
/// something, and of acks, during the measured window.
async fn consume(
    broker: &Broker,
    batch: usize,
    count_errors: bool,
    window: &Window,
    counters: &Counters,
) -> Result<(Histogram<u64>, Histogram<u64>)> {
    let (mut pop_latency, mut ack_latency) = (load::histogram(), load::histogram());
    while !window.stopped() {
        let started = Instant::now();
        let Some(popped) = succeeded(broker.pop(batch).await, count_errors, counters).await? else {
            continue;
        };
        let Some(delivery) = popped else {
            Counters::add(&counters.empty_pops, 1);
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        };
        if window.measuring() {
            load::record(&mut pop_latency, started);
        }
        let started = Instant::now();
        // A failed ack leaves the batch leased: it comes back when the lease expires.
        if succeeded(broker.ack(&delivery).await, count_errors, counters)
            .await?
            .is_none()
        {
            continue;
        }
        if window.measuring() {
            load::record(&mut ack_latency, started);
        }
        Counters::add(&counters.done, delivery.len() as u64);
    }
    Ok((pop_latency, ack_latency))
}
