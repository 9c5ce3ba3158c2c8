//! (g) Fan-out: one stream of messages, consumed in full by each of `GROUPS`
//! consumer groups. pgcursor: the producers push to one queue (spread over
//! `--partitions`) and each group's consumer pops and acks with its own
//! consumerGroup. pgmq has no consumer groups, so each group gets a queue of
//! its own: a producer sends every batch to all of them in one statement
//! (`Broker::PgmqFanOut`) and each group's consumer reads→deletes its queue.
//! The producer and consumer loops are (b)'s (end_to_end.rs); measured:
//! deliveries/s (messages acked, summed over the groups) and the producers'
//! msgs/s (each message once).

use deadpool_postgres::Pool;

use crate::brokers::{Broker, System};
use crate::scenario::end_to_end::Sides;
use crate::Result;

/// Consumer groups, each consuming everything.
pub const GROUPS: usize = 10;
/// Consumers per group: one, so a group's deliveries are one task's pops.
pub const CONSUMERS_PER_GROUP: usize = 1;
/// pgmq reads→deletes: its cheaper way to complete a message.
pub const SYSTEMS: [System; 2] = [System::PgcursorSql, System::PgmqDelete];

/// Connections the scenario keeps busy: one per producer and per consumer,
/// so no task waits for another's connection.
pub fn connections(producers: usize) -> usize {
    producers + GROUPS * CONSUMERS_PER_GROUP
}

/// The producers' broker and every group's consumers, on fresh queues.
pub async fn sides(system: System, pool: &Pool) -> Result<Sides> {
    match system {
        System::PgcursorSql => pgcursor(pool).await,
        System::PgmqDelete => pgmq(pool).await,
        _ => Err(format!("fan-out: {} is not compared", system.name()).into()),
    }
}

/// One queue, one consumerGroup per group.
async fn pgcursor(pool: &Pool) -> Result<Sides> {
    let queue = "bench-fan-out".to_string();
    let producer = Broker::new(System::PgcursorSql, pool, None, queue).await?;
    let mut consumers = Vec::new();
    for g in 0..GROUPS {
        let group = producer.in_group(format!("group-{g}"))?;
        consumers.extend(std::iter::repeat_n(group, CONSUMERS_PER_GROUP));
    }
    Ok(Sides {
        producers: vec![producer],
        consumers,
    })
}

/// One queue per group, and a producer sending to them all.
async fn pgmq(pool: &Pool) -> Result<Sides> {
    let mut queues = Vec::new();
    let mut consumers = Vec::new();
    for g in 0..GROUPS {
        let queue = format!("bench_fan_out_g{g}");
        let group = Broker::new(System::PgmqDelete, pool, None, queue.clone()).await?;
        consumers.extend(std::iter::repeat_n(group, CONSUMERS_PER_GROUP));
        queues.push(queue);
    }
    Ok(Sides {
        producers: vec![Broker::PgmqFanOut {
            pool: pool.clone(),
            queues,
        }],
        consumers,
    })
}
