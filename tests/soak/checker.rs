//! The checker: reads the database after the drain and holds it against
//! what the workers recorded. Every rule only flags what is certain: a
//! request without an answer may or may not have happened, and a lease was
//! taken somewhere between its pop's send and receive times.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use uuid::Uuid;

use crate::log::{AckKind, AckRecord, Answer, Delivery, PushOutcome, Status, Time, WorkerLog};
use crate::world::{connect, GROUPS_A, GROUP_B, LEASE_A, LEASE_B, QUEUE_A, QUEUE_B};

/// Clock slack between this process and PostgreSQL's `now()` (one machine).
const SLACK: Duration = Duration::from_millis(100);
/// How long before its send a request may still be lingering (pool wait).
const LINGER: Duration = Duration::from_secs(15);

type Key = (Uuid, &'static str);

pub struct Report {
    pub totals: Vec<(String, String)>,
    pub violations: Vec<String>,
}

struct Db {
    /// (queue, name, head) by partition id.
    partitions: HashMap<Uuid, (String, String, i64)>,
    /// cursor by (partition, group); absent = 0.
    cursors: HashMap<(Uuid, String), i64>,
    /// transactionId by (partition, offset), both queues.
    messages: HashMap<(Uuid, i64), String>,
    /// (partition, group, offset, transactionId)
    dead_letters: Vec<(Uuid, String, i64, String)>,
    completed: i64,
    discarded_a: i64,
    discarded_b: i64,
}

pub async fn check(
    log: &WorkerLog,
    purges: &[(Time, Time)],
    server_errors: &[String],
    db_url: &str,
    run: Duration,
    until_drained: Duration,
    failover: Option<(&Snapshot, Time)>,
) -> Report {
    let mut v: Vec<String> = log.violations.clone();
    v.extend(server_errors.iter().map(|e| format!("server error: {e}")));
    let db = read(db_url, &mut v).await;
    let mut totals = Vec::new();
    let mut total = |name: &str, value: String| totals.push((name.to_string(), value));

    // Before the other checks, so its violations come near the top of the list.
    let before_crash = failover.map(|(snap, crashed)| {
        let already = v.len();
        let (pushes, items) = check_failover(log, &db, snap, crashed, &mut v);
        (pushes, items, v.len() - already)
    });
    let pending = check_cursors(&db, &mut v);
    let (pushed, in_doubt, vanished) = check_producers(log, &db, purges, &mut v);
    let copies = stored_twice(&db);
    let dead_letters = check_dead_letters(log, &db, &copies, &mut v);
    let (delivered, redelivered) = check_deliveries(log, &db, &copies, &mut v);
    check_pushed_to_b(log, &db, &mut v);

    let count = |queue: &str| {
        db.messages
            .keys()
            .filter(|(p, _)| db.partitions.get(p).is_some_and(|q| q.0 == queue))
            .count()
    };
    let fences = db
        .messages
        .values()
        .filter(|t| t.starts_with("fence-"))
        .count();
    total("pushed (answered queued/duplicate)", pushed.to_string());
    total("pushed, never answered (in doubt)", in_doubt.to_string());
    total("messages in queue A", count(QUEUE_A).to_string());
    total(
        "messages in queue B (handed over)",
        count(QUEUE_B).to_string(),
    );
    total("fence messages (after purges)", fences.to_string());
    total("delivered (messages, both stages)", delivered.to_string());
    total("redelivered", redelivered.to_string());
    total("completed", db.completed.to_string());
    total("dead-lettered", dead_letters.to_string());
    total("discarded (queue B)", db.discarded_b.to_string());
    total("lost", (pending + vanished).to_string());
    let acks: usize = log.acks.iter().map(|a| a.items.len()).sum();
    let unknown = log
        .acks
        .iter()
        .flat_map(|a| &a.items)
        .filter(|i| i.answer == Answer::Unknown)
        .count();
    total("ack items sent (unanswered)", format!("{acks} ({unknown})"));
    total("ack requests by kind", ack_kinds(log));
    total("ack item outcomes", ack_outcomes(log));
    total(
        "requests (dropped on purpose / unanswered)",
        format!("{} ({} / {})", log.requests, log.aborted, log.unanswered),
    );
    total("forced purges", purges.len().to_string());
    if let Some((pushes, items, missing)) = before_crash {
        total(
            "failover: answered before the crash (checked)",
            format!("{pushes} pushes, {items} ack items"),
        );
        total("failover: of those, missing after it", missing.to_string());
    }
    total(
        "throughput (while producing / until drained)",
        format!(
            "{:.0} / {:.0} messages/s",
            pushed as f64 / run.as_secs_f64(),
            pushed as f64 / until_drained.as_secs_f64()
        ),
    );
    Report {
        totals,
        violations: v,
    }
}

fn ack_kinds(log: &WorkerLog) -> String {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for a in &log.acks {
        *kinds.entry(format!("{:?}", a.kind)).or_default() += 1;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    kinds.join(", ")
}

fn ack_outcomes(log: &WorkerLog) -> String {
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for item in log.acks.iter().flat_map(|a| &a.items) {
        let outcome = match &item.answer {
            Answer::Item { dlq: true, .. } => "dlq:true".to_string(),
            Answer::Item { success: true, .. } => "success".to_string(),
            Answer::Item { error, .. } => error.clone().unwrap_or_default(),
            Answer::RolledBack(why) => format!("bundle rolled back ({why})"),
            Answer::Unknown => "no answer".to_string(),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    let outcomes: Vec<String> = outcomes.iter().map(|(k, n)| format!("{k} {n}")).collect();
    outcomes.join(", ")
}

async fn read(db_url: &str, v: &mut Vec<String>) -> Db {
    let db = connect(db_url).await.expect("connect for the check");
    let partitions: HashMap<Uuid, (String, String, i64)> = db
        .query(
            "SELECT id, queue, name, head FROM pgcursor.partitions JOIN pgcursor.partition_heads ON partition_id = id
              WHERE queue IN ($1, $2)",
            &[&QUEUE_A, &QUEUE_B],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3))))
        .collect();
    let mut cursors = HashMap::new();
    let (mut completed, mut discarded_a, mut discarded_b) = (0, 0, 0);
    for r in db
        .query(
            "SELECT c.partition_id, c.consumer_group, c.cursor, c.completed_total,
                    c.dead_lettered_total, c.discarded_total, p.queue
               FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id",
            &[],
        )
        .await
        .unwrap()
    {
        let (pid, group, cursor): (Uuid, String, i64) = (r.get(0), r.get(1), r.get(2));
        let (done, dead, discarded): (i64, i64, i64) = (r.get(3), r.get(4), r.get(5));
        if cursor != done + dead + discarded {
            v.push(format!(
                "cursor {pid}/{group}: cursor {cursor} != completed {done} + dead-lettered {dead} + discarded {discarded}"
            ));
        }
        completed += done;
        if r.get::<_, String>(6) == QUEUE_A {
            discarded_a += discarded;
        } else {
            discarded_b += discarded;
        }
        cursors.insert((pid, group), cursor);
    }
    let messages = db
        .query(
            "SELECT m.partition_id, m.msg_offset, m.transaction_id
               FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
              WHERE p.queue IN ($1, $2)",
            &[&QUEUE_A, &QUEUE_B],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| ((r.get(0), r.get(1)), r.get(2)))
        .collect();
    let dead_letters = db
        .query(
            "SELECT partition_id, consumer_group, msg_offset, transaction_id FROM pgcursor.dead_letters",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    // What the schema promises, checked in SQL: dense offsets, the index
    // and the dead letters agreeing with the messages, totals with rows.
    for (what, sql) in [
        (
            "partitions whose offsets are not exactly 1..head",
            "SELECT count(*) FROM pgcursor.partition_heads p
              WHERE (SELECT count(*) FROM pgcursor.messages m WHERE m.partition_id = p.partition_id) <> p.head
                 OR (SELECT coalesce(max(msg_offset), 0) FROM pgcursor.messages m
                      WHERE m.partition_id = p.partition_id) <> p.head",
        ),
        (
            "transaction index rows of a message still stored (it is its own entry)",
            "SELECT count(*) FROM pgcursor.transaction_index t
               JOIN pgcursor.messages m ON m.partition_id = t.partition_id AND m.msg_offset = t.msg_offset",
        ),
        (
            "dead letters not matching their message",
            "SELECT count(*) FROM pgcursor.dead_letters d
               LEFT JOIN pgcursor.messages m ON m.partition_id = d.partition_id AND m.msg_offset = d.msg_offset
              WHERE m.transaction_id IS DISTINCT FROM d.transaction_id OR m.payload IS DISTINCT FROM d.payload",
        ),
        (
            "cursors whose dead-lettered total is not their dead-letter rows",
            "SELECT count(*) FROM pgcursor.cursors c
              WHERE c.dead_lettered_total <> (SELECT count(*) FROM pgcursor.dead_letters d
                                               WHERE d.partition_id = c.partition_id
                                                 AND d.consumer_group = c.consumer_group)",
        ),
        (
            "cursors past their head",
            "SELECT count(*) FROM pgcursor.cursors c JOIN pgcursor.partition_heads h ON h.partition_id = c.partition_id
              WHERE c.cursor > h.head",
        ),
    ] {
        let n: i64 = db.query_one(sql, &[]).await.unwrap().get(0);
        if n != 0 {
            v.push(format!("{what}: {n}"));
        }
    }
    Db {
        partitions,
        cursors,
        messages,
        dead_letters,
        completed,
        discarded_a,
        discarded_b,
    }
}

/// What the promoted standby holds right after a failover.
pub struct Snapshot {
    /// transactionId by (partition, offset), both queues.
    messages: HashMap<(Uuid, i64), String>,
    /// cursor by (partition, group).
    cursors: HashMap<(Uuid, String), i64>,
    /// (partition, group, offset)
    dead_letters: HashSet<(Uuid, String, i64)>,
}

/// Reads the snapshot; an error means the database is not back yet.
pub async fn snapshot(db_url: &str) -> Result<Snapshot, tokio_postgres::Error> {
    let db = connect(db_url).await?;
    let messages = db
        .query(
            "SELECT m.partition_id, m.msg_offset, m.transaction_id
               FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
              WHERE p.queue IN ($1, $2)",
            &[&QUEUE_A, &QUEUE_B],
        )
        .await?
        .iter()
        .map(|r| ((r.get(0), r.get(1)), r.get(2)))
        .collect();
    let cursors = db
        .query(
            "SELECT partition_id, consumer_group, cursor FROM pgcursor.cursors",
            &[],
        )
        .await?
        .iter()
        .map(|r| ((r.get(0), r.get(1)), r.get(2)))
        .collect();
    let dead_letters = db
        .query(
            "SELECT partition_id, consumer_group, msg_offset FROM pgcursor.dead_letters",
            &[],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    Ok(Snapshot {
        messages,
        cursors,
        dead_letters,
    })
}

/// The failover lost nothing: everything answered before the crash (before
/// `pg_ctl stop -m immediate` returned) is in the promoted standby's
/// snapshot. A push answered queued/duplicate is at the place it was given;
/// an ack item answered success (completed) or dlq:true has the cursor at or
/// past it (past one of its copies, for a transactionId stored twice across
/// a purge; see `offsets_of`), a dlq:true its dead-letter row; what a
/// committed transaction pushed to B is in B. Answers (pushes, ack items)
/// checked.
fn check_failover(
    log: &WorkerLog,
    db: &Db,
    snap: &Snapshot,
    crashed: Time,
    v: &mut Vec<String>,
) -> (usize, usize) {
    let mut pushes = 0;
    for p in &log.pushed {
        let (PushOutcome::Stored { partition, offset }, Some(answered)) = (&p.outcome, p.answered)
        else {
            continue;
        };
        if answered >= crashed {
            continue;
        }
        pushes += 1;
        let txid = crate::producer::txid(p.producer, p.seq);
        let held = snap.messages.get(&(*partition, *offset));
        if held != Some(&txid) {
            v.push(format!(
                "failover lost a push: {txid} answered stored at {partition}/{offset} at {:.3}s, before the crash; after it the place holds {held:?}",
                answered.as_secs_f64()
            ));
        }
    }
    // The lowest offset of each transactionId stored more than once.
    let mut lowest: HashMap<(Uuid, &str), i64> = HashMap::new();
    let mut count: HashMap<(Uuid, &str), usize> = HashMap::new();
    for ((p, o), t) in &db.messages {
        let low = lowest.entry((*p, t.as_str())).or_insert(*o);
        *low = (*low).min(*o);
        *count.entry((*p, t.as_str())).or_default() += 1;
    }
    let in_b: HashSet<&str> = snap.messages.values().map(String::as_str).collect();
    let mut items = 0;
    for a in &log.acks {
        if a.received.is_none_or(|t| t >= crashed) {
            continue;
        }
        for item in &a.items {
            let completed = matches!(item.answer, Answer::Item { success: true, .. })
                && item.status == Status::Completed;
            let dead = matches!(item.answer, Answer::Item { dlq: true, .. });
            if !completed && !dead {
                continue;
            }
            items += 1;
            let key = (a.partition, item.txid.as_str());
            let at_least = match count.get(&key) {
                Some(n) if *n > 1 => lowest[&key].min(item.offset),
                _ => item.offset,
            };
            let cursor = snap
                .cursors
                .get(&(a.partition, a.group.to_string()))
                .copied()
                .unwrap_or(0);
            if cursor < at_least {
                v.push(format!(
                    "failover lost an ack: {} offset {} ({}) of group {} answered {} before the crash, the cursor after it is {cursor}",
                    a.partition,
                    item.offset,
                    item.txid,
                    a.group,
                    item.status.as_str()
                ));
            }
            if dead
                && !snap
                    .dead_letters
                    .contains(&(a.partition, a.group.to_string(), item.offset))
            {
                v.push(format!(
                    "failover lost a dead letter: {} offset {} of group {} answered dlq:true before the crash",
                    a.partition, item.offset, a.group
                ));
            }
        }
        for txid in &a.pushed {
            if !in_b.contains(txid.as_str()) {
                v.push(format!(
                    "failover lost a handed-over message: {txid} was pushed to B by a transaction committed before the crash"
                ));
            }
        }
    }
    (pushes, items)
}

fn cursor(db: &Db, partition: Uuid, group: &str) -> i64 {
    db.cursors
        .get(&(partition, group.to_string()))
        .copied()
        .unwrap_or(0)
}

/// Every (partition, group) completed up to its head; answers how many
/// messages some group did not complete (lost).
fn check_cursors(db: &Db, v: &mut Vec<String>) -> i64 {
    let mut pending = 0;
    for (pid, (queue, name, head)) in &db.partitions {
        let groups: &[&str] = if queue == QUEUE_A {
            &GROUPS_A
        } else {
            &[GROUP_B]
        };
        for group in groups {
            let at = cursor(db, *pid, group);
            if at != *head {
                pending += head - at;
                v.push(format!(
                    "{queue} {name} group {group}: cursor {at} short of head {head} after the drain"
                ));
            }
        }
    }
    if db.discarded_a != 0 {
        v.push(format!(
            "queue A dead-letters, yet {} messages were discarded",
            db.discarded_a
        ));
    }
    pending
}

fn overlaps(purges: &[(Time, Time)], from: Time, to: Time) -> bool {
    purges.iter().any(|&(start, end)| start < to && end > from)
}

/// None vanished: every message a producer saw answered is where the answer
/// said; nothing is stored that no producer sent; nothing is stored twice,
/// unless a purge let a retried push in again. Answers (pushed, in doubt,
/// vanished).
fn check_producers(
    log: &WorkerLog,
    db: &Db,
    purges: &[(Time, Time)],
    v: &mut Vec<String>,
) -> (usize, usize, i64) {
    let (mut pushed, mut in_doubt, mut vanished) = (0, 0, 0);
    let mut sent: HashMap<String, (Time, Time)> = HashMap::new();
    for p in &log.pushed {
        let txid = crate::producer::txid(p.producer, p.seq);
        match p.outcome {
            PushOutcome::Stored { partition, offset } => {
                pushed += 1;
                let stored = db.messages.get(&(partition, offset));
                if stored != Some(&txid) {
                    vanished += 1;
                    v.push(format!(
                        "{txid} was answered stored at {partition}/{offset}, which holds {stored:?}"
                    ));
                }
            }
            PushOutcome::InDoubt => in_doubt += 1,
        }
        let window = (p.first_sent, p.answered.unwrap_or(Duration::MAX));
        sent.insert(txid, window);
    }
    let mut copies: HashMap<&str, usize> = HashMap::new();
    for ((pid, _), txid) in &db.messages {
        if db.partitions.get(pid).is_some_and(|q| q.0 == QUEUE_A) {
            *copies.entry(txid).or_default() += 1;
        }
    }
    for (txid, n) in copies {
        if txid.starts_with("fence-") {
            continue;
        }
        match sent.get(txid) {
            None => v.push(format!("queue A holds {txid}, which no producer sent")),
            Some(&(from, to)) if n > 1 && !overlaps(purges, from, to) => v.push(format!(
                "{txid} is stored {n} times, and no purge ran while it was pushed"
            )),
            _ => {}
        }
    }
    (pushed, in_doubt, vanished)
}

/// Dead letters exist exactly for the nacks that said `dlq: true`, plus
/// perhaps for nacks that got no answer. A nack of a transactionId stored
/// twice may dead-letter either copy (see `stored_twice`). Answers how many
/// dead letters there are.
fn check_dead_letters(log: &WorkerLog, db: &Db, copies: &Copies, v: &mut Vec<String>) -> usize {
    // Every (partition, group, offset) some nack may have dead-lettered ...
    let mut explained: HashSet<(Uuid, &str, i64)> = HashSet::new();
    // ... and the nacks answered dlq:true, with the offsets each may name.
    let mut said: Vec<(Uuid, &str, i64, Vec<i64>)> = Vec::new();
    for ack in &log.acks {
        for item in &ack.items {
            let answered_dlq = matches!(item.answer, Answer::Item { dlq: true, .. });
            let nack = matches!(item.status, Status::Failed | Status::Dlq);
            if !nack || !(answered_dlq || matches!(item.answer, Answer::Unknown)) {
                continue;
            }
            let mut offsets = copies
                .get(&(ack.partition, item.txid.as_str()))
                .cloned()
                .unwrap_or_default();
            if !offsets.contains(&item.offset) {
                offsets.push(item.offset);
            }
            explained.extend(offsets.iter().map(|&o| (ack.partition, ack.group, o)));
            if answered_dlq {
                said.push((ack.partition, ack.group, item.offset, offsets));
            }
        }
    }
    let mut rows: HashSet<(Uuid, &str, i64)> = HashSet::new();
    for (pid, group, offset, txid) in &db.dead_letters {
        let key = (*pid, group.as_str(), *offset);
        if !rows.insert(key) {
            v.push(format!(
                "{pid}/{group} offset {offset}: dead-lettered twice"
            ));
        }
        if !explained.contains(&key) {
            v.push(format!(
                "{pid}/{group} offset {offset} ({txid}) is dead-lettered, yet no nack of it said dlq:true"
            ));
        }
    }
    for (pid, group, offset, offsets) in &said {
        if !offsets.iter().any(|o| rows.contains(&(*pid, *group, *o))) {
            v.push(format!(
                "{pid}/{group} offset {offset}: answered dlq:true, but no dead-letter row (at {offsets:?})"
            ));
        }
    }
    db.dead_letters.len()
}

/// Per (partition, group): leases never overlap, deliveries start at the
/// cursor, completed acks stay completed, what an ack after a purge left
/// comes back. Answers (delivered, redelivered).
fn check_deliveries(log: &WorkerLog, db: &Db, copies: &Copies, v: &mut Vec<String>) -> (u64, u64) {
    let mut deliveries: HashMap<Key, Vec<&Delivery>> = HashMap::new();
    for d in &log.deliveries {
        deliveries
            .entry((d.partition, d.group))
            .or_default()
            .push(d);
    }
    let mut acks: HashMap<Key, Vec<&AckRecord>> = HashMap::new();
    for a in &log.acks {
        acks.entry((a.partition, a.group)).or_default().push(a);
    }
    let (mut delivered, mut redelivered) = (0u64, 0u64);
    for (key, list) in deliveries.iter_mut() {
        list.sort_by_key(|d| d.sent);
        let acks = acks.get(key).map(Vec::as_slice).unwrap_or_default();
        let lease_time = if list[0].queue == QUEUE_A {
            LEASE_A
        } else {
            LEASE_B
        };
        let head = db.partitions.get(&key.0).map_or(0, |p| p.2);
        let mut seen = 0;
        for d in list.iter() {
            delivered += (d.last - d.first + 1) as u64;
            redelivered += (d.last.min(seen) - d.first + 1).max(0) as u64;
            seen = seen.max(d.last);
            if d.first < 1 || d.last > head {
                v.push(format!(
                    "{}: delivered {}..{} beyond 1..{head}",
                    name(db, key),
                    d.first,
                    d.last
                ));
            }
            if db.messages.get(&(d.partition, d.first)) != Some(&d.first_txid) {
                v.push(format!(
                    "{}: offset {} was delivered as {}, the table says {:?}",
                    name(db, key),
                    d.first,
                    d.first_txid,
                    db.messages.get(&(d.partition, d.first))
                ));
            }
        }
        check_leases(db, key, list, acks, lease_time, v);
        check_order(db, copies, key, list, acks, v);
        check_after_purge(db, key, list, acks, v);
    }
    (delivered, redelivered)
}

fn name(db: &Db, key: &Key) -> String {
    match db.partitions.get(&key.0) {
        Some((queue, name, _)) => format!("{queue} {name} group {}", key.1),
        None => format!("{} group {}", key.0, key.1),
    }
}

/// No two leases of one (partition, group) at once: of two deliveries with
/// different leases, one must have been claimed after the other ended
/// (expired: its lease time passed; or released: an ack with its lease, or
/// without any lease, was sent in time). Flagged only when neither order
/// allows that.
fn check_leases(
    db: &Db,
    key: &Key,
    list: &[&Delivery],
    acks: &[&AckRecord],
    lease_time: Duration,
    v: &mut Vec<String>,
) {
    // The earliest moment each delivery's lease may have been released.
    let mut with_lease: HashMap<Uuid, Time> = HashMap::new();
    let mut leaseless: Vec<Time> = Vec::new();
    for a in acks {
        match a.lease {
            Some(lease) => {
                let t = with_lease.entry(lease).or_insert(a.sent);
                *t = (*t).min(a.sent);
            }
            None => leaseless.push(a.sent),
        }
    }
    leaseless.sort();
    let released_from = |x: &Delivery| {
        let own = with_lease.get(&x.lease).copied().unwrap_or(Duration::MAX);
        let n = leaseless.partition_point(|&t| t + LINGER <= x.sent);
        own.min(leaseless.get(n).copied().unwrap_or(Duration::MAX))
    };
    let released: Vec<Time> = list.iter().map(|x| released_from(x)).collect();
    // x claimed first, then y: possible and explained?
    let explained = |x: usize, y: usize| {
        let (dx, dy) = (list[x], list[y]);
        dx.sent < dy.received
            && (dy.received + SLACK >= dx.sent + lease_time || released[x] < dy.received)
    };
    for x in 0..list.len() {
        for y in x + 1..list.len() {
            let (dx, dy) = (list[x], list[y]);
            if dy.sent > dx.sent + lease_time + SLACK {
                break;
            }
            if dx.lease != dy.lease && !explained(x, y) && !explained(y, x) {
                v.push(format!(
                    "{}: leases {} ({}..{}, popped {:.3}..{:.3}s) and {} ({}..{}, popped {:.3}..{:.3}s) held at once",
                    name(db, key),
                    dx.lease, dx.first, dx.last, dx.sent.as_secs_f64(), dx.received.as_secs_f64(),
                    dy.lease, dy.first, dy.last, dy.sent.as_secs_f64(), dy.received.as_secs_f64()
                ));
            }
        }
    }
}

/// Offsets by (partition, transactionId).
type Copies<'a> = HashMap<(Uuid, &'a str), Vec<i64>>;

/// The offsets of each transactionId stored more than once in a
/// partition. A push retried across a forced purge of the transaction
/// index stores its transactionId twice (nothing remembers it any more),
/// and an ack of it then resolves to one of the copies: the index entry's
/// (the newer) or, once that is purged too, the lowest
/// (docs/ack-contract.md §3 step 4).
fn stored_twice(db: &Db) -> Copies<'_> {
    let mut copies: Copies = HashMap::new();
    for ((p, o), t) in &db.messages {
        copies.entry((*p, t.as_str())).or_default().push(*o);
    }
    copies.retain(|_, offsets| offsets.len() > 1);
    copies
}

/// Deliveries start just past the cursor: never at or below an offset known
/// completed before the pop was sent (no going back), never past every
/// offset an ack could have moved the cursor to (no skipping forward). And
/// what was answered completed is completed in the end.
fn check_order(
    db: &Db,
    copies: &Copies,
    key: &Key,
    list: &[&Delivery],
    acks: &[&AckRecord],
    v: &mut Vec<String>,
) {
    // (time, offset): the cursor was at least `offset` from `time` on ...
    let mut known: Vec<(Time, i64)> = Vec::new();
    // ... and could have been at most the highest `offset` sent before `time`.
    let mut possible: Vec<(Time, i64)> = Vec::new();
    let end = cursor(db, key.0, key.1);
    for a in acks {
        for item in &a.items {
            // Where this ack may have completed up to: the delivered offset,
            // or anywhere between the copies of a transactionId stored twice.
            let stored = copies.get(&(key.0, item.txid.as_str()));
            let others = stored.into_iter().flatten().copied();
            let lowest = others.clone().fold(item.offset, i64::min);
            let highest = others.fold(item.offset, i64::max);
            let moves_to = item.status != Status::Retry;
            if let (Some(received), true) = (a.received, moves_to) {
                let done = match item.answer {
                    Answer::Item { success: true, .. } if item.status == Status::Completed => true,
                    Answer::Item { dlq: true, .. } => true,
                    _ => false,
                };
                if done {
                    known.push((received, lowest));
                    if end < lowest {
                        v.push(format!(
                            "{}: offset {} ({}) was answered {} at {:.3}s, the cursor ends at {end}",
                            name(db, key),
                            item.offset,
                            item.txid,
                            item.status.as_str(),
                            received.as_secs_f64()
                        ));
                    }
                }
            }
            if moves_to && item.answer.maybe_applied() {
                possible.push((a.sent, highest));
            }
        }
    }
    // Sorted by time, each offset raised to the highest so far.
    for events in [&mut known, &mut possible] {
        events.sort();
        for i in 1..events.len() {
            events[i].1 = events[i].1.max(events[i - 1].1);
        }
    }
    let highest_before = |events: &[(Time, i64)], t: Time| {
        let n = events.partition_point(|e| e.0 < t);
        if n == 0 {
            0
        } else {
            events[n - 1].1
        }
    };
    for d in list {
        let at_least = highest_before(&known, d.sent);
        let at_most = highest_before(&possible, d.received);
        if d.first <= at_least {
            v.push(format!(
                "{}: delivered {}..{} (popped at {:.3}s), but {at_least} was completed before",
                name(db, key),
                d.first,
                d.last,
                d.sent.as_secs_f64()
            ));
        }
        if d.first > at_most + 1 {
            v.push(format!(
                "{}: delivered {}..{} (answered at {:.3}s), skipping past {at_most}, the highest offset any ack could have completed",
                name(db, key),
                d.first,
                d.last,
                d.received.as_secs_f64()
            ));
        }
    }
}

/// An ack refused after a purge (its lease expired meanwhile) left its
/// message pending: it is delivered again (to whoever pops it next).
fn check_after_purge(
    db: &Db,
    key: &Key,
    list: &[&Delivery],
    acks: &[&AckRecord],
    v: &mut Vec<String>,
) {
    for a in acks.iter().filter(|a| a.kind == AckKind::AfterPurge) {
        let item = &a.items[0];
        if item.answer.maybe_applied() {
            continue;
        }
        let again = list
            .iter()
            .any(|d| d.sent > a.popped && d.first <= item.offset && item.offset <= d.last);
        if !again {
            v.push(format!(
                "{}: offset {} was not acked after the purge ({:?}) and never came back",
                name(db, key),
                item.offset,
                item.answer.error()
            ));
        }
    }
}

/// What a committed transaction pushed to B is in B; everything in B was
/// handed over from a message of A.
fn check_pushed_to_b(log: &WorkerLog, db: &Db, v: &mut Vec<String>) {
    let mut in_a: HashSet<&str> = HashSet::new();
    let mut in_b: HashSet<&str> = HashSet::new();
    for ((pid, _), txid) in &db.messages {
        match db.partitions.get(pid).map(|p| p.0.as_str()) {
            Some(QUEUE_A) => in_a.insert(txid),
            _ => in_b.insert(txid),
        };
    }
    for a in &log.acks {
        for txid in &a.pushed {
            if !in_b.contains(txid.as_str()) {
                v.push(format!(
                    "{txid} was pushed to B by a committed transaction, and is not there"
                ));
            }
        }
    }
    for txid in in_b {
        if txid.starts_with("fence-") {
            continue;
        }
        let source = GROUPS_A
            .iter()
            .find_map(|g| txid.strip_prefix(&format!("b-{g}-")));
        if !source.is_some_and(|s| in_a.contains(s)) {
            v.push(format!(
                "queue B holds {txid}, which no message of A explains"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{AckKind, AckedItem};

    const GROUP: &str = "g1";

    /// Partition `pid` with `stored` (offset, transactionId) messages and a
    /// dead letter at `dead_lettered`.
    fn db(pid: Uuid, stored: &[(i64, &str)], dead_lettered: i64) -> Db {
        Db {
            partitions: HashMap::new(),
            cursors: HashMap::new(),
            messages: stored
                .iter()
                .map(|&(o, t)| ((pid, o), t.to_string()))
                .collect(),
            dead_letters: vec![(pid, GROUP.to_string(), dead_lettered, "tx".to_string())],
            completed: 0,
            discarded_a: 0,
            discarded_b: 0,
        }
    }

    /// A nack of `txid`, delivered at `offset`, answered dlq:true.
    fn dlq_nack(pid: Uuid, offset: i64, txid: &str) -> WorkerLog {
        let answer = Answer::Item {
            success: true,
            error: None,
            lease_released: true,
            dlq: true,
            noop: false,
        };
        WorkerLog {
            acks: vec![AckRecord {
                kind: AckKind::Batch,
                group: GROUP,
                partition: pid,
                lease: None,
                popped: Duration::ZERO,
                sent: Duration::ZERO,
                received: Some(Duration::ZERO),
                items: vec![AckedItem {
                    offset,
                    txid: txid.to_string(),
                    status: Status::Dlq,
                    answer,
                }],
                pushed: Vec::new(),
            }],
            ..WorkerLog::default()
        }
    }

    fn dead_letter_violations(log: &WorkerLog, db: &Db) -> Vec<String> {
        let mut v = Vec::new();
        check_dead_letters(log, db, &stored_twice(db), &mut v);
        v
    }

    #[test]
    fn a_nack_of_a_transaction_id_stored_twice_may_dead_letter_either_copy() {
        let pid = Uuid::from_u128(1);
        let db = db(pid, &[(860, "tx"), (861, "other"), (882, "tx")], 882);
        assert_eq!(
            dead_letter_violations(&dlq_nack(pid, 860, "tx"), &db),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_dead_letter_at_another_offset_than_the_nack_is_flagged_both_ways() {
        let pid = Uuid::from_u128(1);
        let db = db(pid, &[(860, "tx"), (882, "other")], 882);
        let v = dead_letter_violations(&dlq_nack(pid, 860, "tx"), &db);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].contains("offset 882 (tx) is dead-lettered, yet no nack"),
            "{v:?}"
        );
        assert!(
            v[1].contains("offset 860: answered dlq:true, but no dead-letter row"),
            "{v:?}"
        );
    }
}
