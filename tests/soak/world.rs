//! What every worker shares: the settings, the clock, the two gateways
//! behind one HTTP client (requests that time out, fail over, and are now
//! and then dropped on purpose), the run's phase flags, and the little
//! client-side coordination the workers need (flow control, the forced
//! transaction-index purges and the catch-up after them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::log::{Time, WorkerLog};

pub const QUEUE_A: &str = "soak-a";
pub const QUEUE_B: &str = "soak-b";
/// The two consumer groups of queue A; queue B is consumed in queue mode.
pub const GROUPS_A: [&str; 2] = ["g1", "g2"];
pub const GROUP_B: &str = "__QUEUE_MODE__";
/// Short leases, so expiries happen often.
pub const LEASE_A: Duration = Duration::from_secs(2);
pub const LEASE_B: Duration = Duration::from_secs(3);
/// Every request gives up after this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A catch-up pop takes this many messages: more than a partition's backlog
/// can be (flow control), so it reaches past everything a purge orphaned.
pub const CATCH_UP_BATCH: u32 = 5000;

/// The run's knobs, from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    pub seconds: u64,
    pub producers: usize,
    pub consumers: usize,
    pub b_consumers: usize,
    pub partitions: usize,
    pub seed: u64,
    /// Producers pause while the groups have more than this many messages
    /// to complete in all ...
    pub max_pending: i64,
    /// ... or one (partition, group) lags more than this (below
    /// CATCH_UP_BATCH, so that a catch-up reaches past what a purge orphaned).
    pub max_lag: i64,
    /// Percent of requests dropped by the client after a short random delay.
    pub abort_percent: f64,
    pub drain_seconds: u64,
    /// An existing database (`PGCURSOR_SOAK_DATABASE_URL`, already migrated)
    /// instead of a private cluster: scripts/failover.sh gives the two hosts
    /// of a primary and its synchronous standby.
    pub database_url: Option<String>,
    /// Failover mode (scripts/failover.sh): shell commands that crash the
    /// primary and promote the standby. The run then has no other fault, and
    /// no gateway is ever restarted.
    pub crash_command: Option<String>,
    pub promote_command: Option<String>,
    /// How soon after the crash push, pop and ack must succeed again.
    pub resume_seconds: u64,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not valid")),
        _ => default,
    }
}

fn env_opt(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Settings {
    pub fn from_env() -> Settings {
        let seconds = env_or("PGCURSOR_SOAK_SECONDS", 30u64);
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        Settings {
            seconds,
            producers: env_or("PGCURSOR_SOAK_PRODUCERS", 4),
            consumers: env_or("PGCURSOR_SOAK_CONSUMERS", 6),
            b_consumers: env_or("PGCURSOR_SOAK_B_CONSUMERS", 2),
            partitions: env_or("PGCURSOR_SOAK_PARTITIONS", 16),
            seed: env_or("PGCURSOR_SOAK_SEED", now.as_nanos() as u64),
            max_pending: env_or("PGCURSOR_SOAK_MAX_PENDING", 20_000),
            max_lag: env_or("PGCURSOR_SOAK_MAX_LAG", 4_000).min(CATCH_UP_BATCH as i64 - 1_000),
            abort_percent: env_or("PGCURSOR_SOAK_ABORT_PERCENT", 1.0),
            drain_seconds: env_or("PGCURSOR_SOAK_DRAIN_SECONDS", 90 + seconds / 10),
            database_url: env_opt("PGCURSOR_SOAK_DATABASE_URL"),
            crash_command: env_opt("PGCURSOR_SOAK_CRASH_COMMAND"),
            promote_command: env_opt("PGCURSOR_SOAK_PROMOTE_COMMAND"),
            resume_seconds: env_or("PGCURSOR_SOAK_RESUME_SECONDS", 60),
        }
    }

    pub fn failover(&self) -> bool {
        self.crash_command.is_some()
    }

    pub fn partition_name(&self, n: usize) -> String {
        format!("p{n:02}")
    }
}

/// A small deterministic generator (xorshift64*): a run is reproducible
/// from its seed as far as the workers' own choices go.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = Rng((seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
        rng.next();
        rng
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn percent(&mut self, p: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 10_000.0 < p
    }
}

/// What a request came back with.
#[derive(Debug)]
pub enum Reply {
    /// 200, its JSON body.
    Ok(Value),
    /// No answer, or a 5xx: it may or may not have taken effect.
    Unknown,
    /// Any other status: the harness or the broker is wrong.
    Bad(u16, Value),
}

/// What a failover run measures: when the old primary was certainly gone
/// (`pg_ctl stop -m immediate` returned), when `pg_ctl promote -w` returned,
/// and when the first push, pop (with messages) and ack sent after the crash
/// succeeded, all on the run's clock.
#[derive(Debug, Default, Clone)]
pub struct FailoverClock {
    pub crashed: Option<Time>,
    pub promoted: Option<Time>,
    pub first_push: Option<Time>,
    pub first_pop: Option<Time>,
    pub first_ack: Option<Time>,
}

#[derive(Debug, Clone, Copy)]
pub enum Op {
    Push,
    Pop,
    Ack,
}

/// Orphaned by a purge: (partition, group) whose next messages no longer
/// resolve, to be completed past with one big batch.
#[derive(Debug, Clone)]
pub struct CatchUp {
    pub queue: &'static str,
    pub partition_name: String,
    pub not_before: Time,
}

pub struct World {
    pub settings: Settings,
    started: Instant,
    http: reqwest::Client,
    pub gateways: [String; 2],
    pub db_url: String,
    producing: AtomicBool,
    consuming: AtomicBool,
    purges_allowed: AtomicBool,
    /// Highest head - cursor over every (partition, group), and their sum.
    max_lag: AtomicI64,
    pending: AtomicI64,
    monitor_fresh: AtomicU64,
    last_purge: Mutex<Option<Time>>,
    /// (sent, answered) of every forced purge, answered or not
    /// (`Duration::MAX` while it runs).
    pub purges: Mutex<Vec<(Time, Time)>>,
    catch_up: Mutex<HashMap<(Uuid, &'static str), CatchUp>>,
    /// Every 5xx answer (with what it said), for the summary main.rs prints.
    pub server_errors: Mutex<Vec<String>>,
    fences: AtomicU64,
    pub failover: Mutex<FailoverClock>,
}

impl World {
    pub fn new(settings: Settings, db_url: String, gateways: [String; 2]) -> World {
        World {
            settings,
            started: Instant::now(),
            http: reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .build()
                .expect("HTTP client"),
            gateways,
            db_url,
            producing: AtomicBool::new(true),
            consuming: AtomicBool::new(true),
            purges_allowed: AtomicBool::new(true),
            max_lag: AtomicI64::new(0),
            pending: AtomicI64::new(i64::MAX),
            monitor_fresh: AtomicU64::new(0),
            last_purge: Mutex::new(None),
            purges: Mutex::new(Vec::new()),
            catch_up: Mutex::new(HashMap::new()),
            server_errors: Mutex::new(Vec::new()),
            fences: AtomicU64::new(0),
            failover: Mutex::new(FailoverClock::default()),
        }
    }

    pub fn now(&self) -> Time {
        self.started.elapsed()
    }

    pub fn producing(&self) -> bool {
        self.producing.load(Ordering::Relaxed)
    }

    pub fn stop_producing(&self) {
        self.producing.store(false, Ordering::Relaxed);
        self.purges_allowed.store(false, Ordering::Relaxed);
    }

    pub fn consuming(&self) -> bool {
        self.consuming.load(Ordering::Relaxed)
    }

    pub fn stop_consuming(&self) {
        self.consuming.store(false, Ordering::Relaxed);
    }

    pub fn max_lag(&self) -> i64 {
        self.max_lag.load(Ordering::Relaxed)
    }

    /// Flow control: the consumers are too far behind for more messages.
    pub fn backlogged(&self) -> bool {
        self.pending() > self.settings.max_pending || self.max_lag() > self.settings.max_lag
    }

    /// Messages some group has not completed yet (i64::MAX: not known yet).
    pub fn pending(&self) -> i64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// How many times the monitor has read the database.
    pub fn monitor_reads(&self) -> u64 {
        self.monitor_fresh.load(Ordering::Relaxed)
    }

    /// One request to gateway `*gw`; a request that cannot reach it moves
    /// this worker to the other gateway. Now and then the request is dropped
    /// after a short random delay, the way a client that crashes or times out
    /// drops it: the broker must stay consistent whether it landed or not.
    pub async fn request(
        &self,
        log: &mut WorkerLog,
        rng: &mut Rng,
        gw: &mut usize,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Reply {
        log.requests += 1;
        let url = format!("{}{path}", self.gateways[*gw]);
        let mut request = self.http.request(method, url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let call = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let bytes = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, bytes))
        };
        let result = if rng.percent(self.settings.abort_percent) {
            let delay = Duration::from_millis(rng.range(0, 20));
            match tokio::time::timeout(delay, call).await {
                Ok(result) => result,
                Err(_) => {
                    log.aborted += 1;
                    return Reply::Unknown;
                }
            }
        } else {
            call.await
        };
        match result {
            Err(e) => {
                log.unanswered += 1;
                if !e.is_timeout() {
                    *gw = 1 - *gw; // that gateway is gone: use the other
                }
                Reply::Unknown
            }
            Ok((200, bytes)) => match serde_json::from_slice(&bytes) {
                Ok(value) => Reply::Ok(value),
                Err(e) => Reply::Bad(200, json!(format!("not JSON: {e}"))),
            },
            Ok((status, bytes)) => {
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                if status >= 500 {
                    log.unanswered += 1;
                    if status != 503 {
                        let at = self.now().as_secs_f64();
                        let mut errors = self.server_errors.lock().unwrap();
                        errors.push(format!("{at:.1}s {path}: {status} {body}"));
                    }
                    Reply::Unknown
                } else {
                    Reply::Bad(status, body)
                }
            }
        }
    }

    /// Creates both queues with the soak's options.
    pub async fn configure(&self) {
        let mut log = WorkerLog::default();
        let mut rng = Rng::new(0, 0);
        let lease_a = LEASE_A.as_secs();
        let lease_b = LEASE_B.as_secs();
        for body in [
            json!({"queue": QUEUE_A, "options": {"leaseTime": lease_a, "retryLimit": 3}}),
            // B discards instead of dead-lettering, after one charged retry.
            json!({"queue": QUEUE_B, "options": {"leaseTime": lease_b, "retryLimit": 1,
                   "deadLetterQueue": false, "dlqAfterMaxRetries": false}}),
        ] {
            let mut gw = 0;
            let reply = self
                .request(
                    &mut log,
                    &mut rng,
                    &mut gw,
                    Method::POST,
                    "/api/v1/configure",
                    Some(&body),
                )
                .await;
            assert!(matches!(reply, Reply::Ok(_)), "configure: {reply:?}");
        }
    }

    /// Keeps `max_lag` and `pending` fresh from the database until the run ends.
    pub async fn monitor(&self) {
        const LAG: &str = "
            WITH wanted AS (
                SELECT p.id, h.head, g.grp
                  FROM pgcursor.partitions p
                  JOIN pgcursor.partition_heads h ON h.partition_id = p.id
                  JOIN (VALUES ($1::text, $3::text), ($1, $4), ($2, $5)) AS g(queue, grp)
                    ON g.queue = p.queue)
            SELECT coalesce(max(w.head - coalesce(c.cursor, 0)), 0)::bigint,
                   coalesce(sum(w.head - coalesce(c.cursor, 0)), 0)::bigint
              FROM wanted w
              LEFT JOIN pgcursor.cursors c ON c.partition_id = w.id AND c.consumer_group = w.grp";
        while self.consuming() {
            let Ok(db) = connect(&self.db_url).await else {
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            };
            while self.consuming() {
                let row = db
                    .query_one(
                        LAG,
                        &[&QUEUE_A, &QUEUE_B, &GROUPS_A[0], &GROUPS_A[1], &GROUP_B],
                    )
                    .await;
                let Ok(row) = row else { break };
                self.max_lag.store(row.get(0), Ordering::Relaxed);
                self.pending.store(row.get(1), Ordering::Relaxed);
                self.monitor_fresh.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    /// Marks the moment the primary is gone (failover mode).
    pub fn crashed(&self, at: Time) {
        self.failover.lock().unwrap().crashed = Some(at);
    }

    /// A request of kind `op` sent at `sent` succeeded: the first one sent
    /// after the crash says when the broker was back for it.
    pub fn succeeded(&self, op: Op, sent: Time) {
        let mut clock = self.failover.lock().unwrap();
        if clock.crashed.is_none_or(|crashed| sent < crashed) {
            return;
        }
        let first = match op {
            Op::Push => &mut clock.first_push,
            Op::Pop => &mut clock.first_pop,
            Op::Ack => &mut clock.first_ack,
        };
        if first.is_none() {
            *first = Some(self.now());
        }
    }

    /// Claims the right to force a purge now: only a few per run, none in
    /// its last third (what a purge orphans must be caught up before the end).
    pub fn may_purge(&self) -> bool {
        if !self.purges_allowed.load(Ordering::Relaxed) {
            return false;
        }
        let now = self.now();
        let run = Duration::from_secs(self.settings.seconds);
        let every = (run / 4).max(Duration::from_secs(10));
        if now < run / 8 || now > run * 2 / 3 {
            return false;
        }
        let mut last = self.last_purge.lock().unwrap();
        if last.is_some_and(|t| now < t + every) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// `pgcursor.purge_transaction_index(now())`: every message stored so far
    /// stops resolving. Then one fence message per partition of both queues,
    /// so that something resolvable follows what was orphaned. Answers
    /// whether the purge is known to have happened.
    pub async fn purge_and_fence(
        &self,
        log: &mut WorkerLog,
        rng: &mut Rng,
        gw: &mut usize,
    ) -> bool {
        let sent = self.now();
        // Noted before it runs: an ack answered `transaction not found` is
        // then always preceded by a noted purge. The end is filled in after.
        let n = {
            let mut purges = self.purges.lock().unwrap();
            purges.push((sent, Duration::MAX));
            purges.len() - 1
        };
        let purged = match connect(&self.db_url).await {
            Ok(db) => db
                .query_one("SELECT pgcursor.purge_transaction_index(now())", &[])
                .await
                .is_ok(),
            Err(_) => false,
        };
        self.purges.lock().unwrap()[n].1 = self.now();
        let n = self.fences.fetch_add(1, Ordering::Relaxed);
        let mut items = Vec::new();
        for queue in [QUEUE_A, QUEUE_B] {
            for p in 0..self.settings.partitions {
                let name = self.settings.partition_name(p);
                items.push(json!({"queue": queue, "partition": name,
                                  "transactionId": format!("fence-{n}-{queue}-{name}"),
                                  "payload": {"fence": n}}));
            }
        }
        let body = json!({ "items": items });
        let deadline = self.now() + Duration::from_secs(60);
        while self.now() < deadline {
            let reply = self
                .request(log, rng, gw, Method::POST, "/api/v1/push", Some(&body))
                .await;
            match reply {
                Reply::Ok(_) => break,
                Reply::Unknown => tokio::time::sleep(Duration::from_millis(100)).await,
                Reply::Bad(status, body) => {
                    log.violations.push(format!("fence push: {status} {body}"));
                    break;
                }
            }
        }
        purged
    }

    /// Notes that (partition, group) is stuck behind a purge.
    pub fn needs_catch_up(&self, partition: Uuid, group: &'static str, job: CatchUp) {
        self.catch_up
            .lock()
            .unwrap()
            .entry((partition, group))
            .or_insert(job);
    }

    /// Takes a catch-up job of `group` that is due, if any.
    pub fn take_catch_up(&self, group: &'static str) -> Option<(Uuid, CatchUp)> {
        let now = self.now();
        let mut jobs = self.catch_up.lock().unwrap();
        let key = jobs
            .iter()
            .find(|((_, g), job)| *g == group && job.not_before <= now)
            .map(|(key, _)| *key)?;
        jobs.remove(&key).map(|job| (key.0, job))
    }
}

/// A direct database connection, its driver spawned.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    config.connect_timeout(Duration::from_secs(3));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}
