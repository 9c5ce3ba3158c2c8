//! (h) Does a pop+ack cost the same whatever waits behind it? Two queues of
//! `PARTITIONS` partitions, one with `SMALL` messages waiting and one with
//! `large` (1,000,000; 100,000 with --quick), seeded through `pgcursor.push`
//! (`SEED_PER_CALL` items a call), then vacuumed and checkpointed so that
//! neither autovacuum nor the seeding's checkpoint lands in the timed part
//! (seeding and settling are timed apart, not judged). Then, on one
//! connection, alternately on each queue: `pgcursor.pop` of a batch and
//! `pgcursor.ack_group` of its last message, timed; then, untimed, as many
//! messages pushed back into the partition the pop served, so the backlog
//! stays exactly what it was. Both queues live in the same tables, so the
//! ratio isolates what the popped queue's backlog costs, not the tables'
//! size (index depth), which any store pays.

use std::time::Instant;

use deadpool_postgres::Pool;
use serde::Serialize;
use serde_json::Value;

use crate::brokers::{self, Broker, Delivery, System};
use crate::load::{self, Percentiles};
use crate::Result;

pub const PARTITIONS: usize = 10;
/// Messages waiting in the small queue.
pub const SMALL: u64 = 1000;
/// Items per seeding push: large calls are the fastest way in through the API.
const SEED_PER_CALL: u64 = 5000;
/// Untimed cycles per queue before the timed ones (plans, caches).
const WARMUP_CYCLES: usize = 5;

pub struct Setup {
    /// Messages waiting in the large queue.
    pub large: u64,
    pub batch: usize,
    /// Timed cycles per queue.
    pub cycles: usize,
    pub payload: Value,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Backlogs {
    pub partitions: usize,
    pub batch: usize,
    /// Seeding the large queue through `pgcursor.push` (not judged).
    pub seed_messages: u64,
    pub seed_seconds: f64,
    /// VACUUM (ANALYZE) and CHECKPOINT after seeding both queues.
    pub settle_seconds: f64,
    /// The small queue's, then the large one's.
    pub runs: Vec<BacklogRun>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BacklogRun {
    pub waiting: u64,
    /// pop + ack, round trips.
    pub cycle: Percentiles,
    pub pop: Percentiles,
    pub ack: Percentiles,
}

fn queue(waiting: u64) -> String {
    format!("bench-backlog-{waiting}")
}

/// Both queues, seeded and settled, and their brokers (small, large).
pub struct Seeded {
    brokers: [Broker; 2],
    report: Backlogs,
}

/// Seeds and settles both queues through `seed_pool`; their brokers pop on
/// `timed`, a pool of one connection.
pub async fn seed_both(seed_pool: &Pool, timed: &Pool, setup: &Setup) -> Result<Seeded> {
    let mut brokers = Vec::new();
    for waiting in [SMALL, setup.large] {
        brokers.push(Broker::new(System::PgcursorSql, timed, None, queue(waiting)).await?);
    }
    let mut report = Backlogs {
        partitions: PARTITIONS,
        batch: setup.batch,
        seed_messages: setup.large,
        ..Backlogs::default()
    };
    report.seed_seconds = seed(seed_pool, setup.large, &setup.payload).await?;
    seed(seed_pool, SMALL, &setup.payload).await?;
    report.settle_seconds = settle(seed_pool).await?;
    let brokers = brokers.try_into().map_err(|_| "(h): two queues")?;
    Ok(Seeded { brokers, report })
}

/// Warms up, then times `setup.cycles` cycles per queue, the queues
/// alternating, nothing else running.
pub async fn time(seeded: Seeded, setup: &Setup) -> Result<Backlogs> {
    let Seeded {
        brokers,
        mut report,
    } = seeded;
    let refill = vec![setup.payload.clone(); setup.batch];
    for _ in 0..WARMUP_CYCLES {
        for broker in &brokers {
            cycle(broker, &refill).await?;
        }
    }
    let mut latencies = [Latencies::new(), Latencies::new()];
    for i in 0..setup.cycles {
        // Alternate which queue goes first, so neither always follows the other.
        for q in [i % 2, 1 - i % 2] {
            latencies[q].add(cycle(&brokers[q], &refill).await?);
        }
    }
    report.runs = [SMALL, setup.large]
        .into_iter()
        .zip(latencies)
        .map(|(waiting, l)| l.run(waiting))
        .collect();
    Ok(report)
}

/// Seeds `waiting` messages over the partitions of its queue; seconds taken.
async fn seed(pool: &Pool, waiting: u64, payload: &Value) -> Result<f64> {
    let started = Instant::now();
    let per_partition = waiting / PARTITIONS as u64;
    load::seed(
        pool,
        &queue(waiting),
        PARTITIONS,
        per_partition,
        SEED_PER_CALL,
        payload,
    )
    .await?;
    Ok(started.elapsed().as_secs_f64())
}

/// Vacuums what seeding filled and checkpoints; seconds taken. (VACUUM
/// cannot share a transaction: one statement per call.)
async fn settle(pool: &Pool) -> Result<f64> {
    let started = Instant::now();
    let client = pool.get().await?;
    for statement in [
        "VACUUM (ANALYZE) pgcursor.messages",
        "VACUUM (ANALYZE) pgcursor.transaction_index",
        "VACUUM (ANALYZE) pgcursor.cursors",
        "CHECKPOINT",
    ] {
        client.batch_execute(statement).await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// One timed pop and ack of a full batch, then the batch pushed back
/// (untimed) into the partition it came from. Microseconds of pop and ack.
async fn cycle(broker: &Broker, refill: &[Value]) -> Result<(u64, u64)> {
    let started = Instant::now();
    let delivery = broker.pop(refill.len()).await?;
    let popped = Instant::now();
    let delivery = full_batch(delivery, refill.len())?;
    broker.ack(&delivery).await?;
    let acked = Instant::now();
    let partition = delivery.partition().ok_or("(h): not a pgcursor delivery")?;
    broker
        .push(brokers::partition_number(partition)?, refill)
        .await?;
    Ok((load::micros(popped - started), load::micros(acked - popped)))
}

fn full_batch(delivery: Option<Delivery>, batch: usize) -> Result<Delivery> {
    match delivery {
        Some(d) if d.len() == batch => Ok(d),
        Some(d) => Err(format!("(h): a pop delivered {} of {batch}", d.len()).into()),
        None => Err("(h): a pop found nothing".into()),
    }
}

/// One queue's pop, ack and pop+ack latencies.
struct Latencies {
    cycle: hdrhistogram::Histogram<u64>,
    pop: hdrhistogram::Histogram<u64>,
    ack: hdrhistogram::Histogram<u64>,
}

impl Latencies {
    fn new() -> Latencies {
        Latencies {
            cycle: load::histogram(),
            pop: load::histogram(),
            ack: load::histogram(),
        }
    }

    fn add(&mut self, (pop, ack): (u64, u64)) {
        self.cycle.saturating_record(pop + ack);
        self.pop.saturating_record(pop);
        self.ack.saturating_record(ack);
    }

    fn run(&self, waiting: u64) -> BacklogRun {
        BacklogRun {
            waiting,
            cycle: load::percentiles(&self.cycle),
            pop: load::percentiles(&self.pop),
            ack: load::percentiles(&self.ack),
        }
    }
}
