//! Push wake-ups for long-polling pops.
//!
//! A push runs `pg_notify('pgcursor_push', <queue>)` for the queues some
//! session waits on (sql/03_wakeups.sql). One dedicated connection (not
//! from the pool) LISTENs on that channel and hands each notification, in
//! the gateway, to the pops waiting on its queue and to those waiting on
//! every queue (`Wakes`): a waiting pop holds no database connection at all,
//! and a push wakes no pop of another queue. (With one channel for all,
//! every waiting pop woke at every push only to find it was not its queue's:
//! 2,000 pops waiting on their own queues and 112 pushes a second took half
//! a core of the gateway.) The same connection tells PostgreSQL
//! which queues this gateway's pops wait on (`pgcursor.wait_for_pushes`
//! when a queue gets its first waiter, `stop_waiting_for_pushes` after its
//! last), and once a queue's wait is in place wakes that queue's waiters:
//! a push that looked for waiters just before, and committed after their
//! look, is then not missed. (Such a push may stay open: the session
//! waits for it at most 100 ms at a time, and delivers notifications in
//! between.) The connection comes back by itself, with
//! backoff, when PostgreSQL goes away; meanwhile waiters simply reach
//! their timeout. After every (re)connect the waits are put in place again
//! and everyone is woken once, since pushes made meanwhile were not heard.
//!
//! Each wait is an advisory lock, an entry of PostgreSQL's shared lock
//! table, which every session of the database needs. So the listener waits
//! on at most OWN_WAITS_MAX queues of its own; pops on more queues than
//! that are covered by its wait on every queue (4,000 queues of their own
//! filled the table of a small cluster: "out of shared memory" for all).
//!
//! On SIGTERM/SIGINT/SIGQUIT (app.rs: stop_on_signal) every waiter stops
//! waiting for good, so the
//! server's graceful shutdown (10 s) is not held up, and then cut short, by
//! long-polls waiting for a 30 s timeout: they answer what they have.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, NoTls};
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::db::error_detail;

/// The channel `pgcursor.push` notifies.
const CHANNEL: &str = "pgcursor_push";
const LISTEN: &str = "LISTEN pgcursor_push";
/// How many wake-ups a slow waiter may fall behind before it just re-checks:
/// those waiting on every queue hear every push, a queue's own waiters only
/// its pushes (a channel is made for each queue waited on).
const CAPACITY: usize = 1024;
const QUEUE_CAPACITY: usize = 16;
/// Most queues the listener waits on with a lock of their own; pops on
/// more queues wait through its wait on every queue (one lock for all,
/// but then every push notifies).
const OWN_WAITS_MAX: usize = 1000;
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What a notification says.
#[derive(Clone, Debug)]
pub enum Wake {
    /// A push committed to this queue.
    Queue(Arc<str>),
    /// Anything may have changed (the listener has just (re)connected).
    Everything,
}

/// The queue a pop waits on; `None`: every queue (a namespace or task pop).
type Interest = Option<Arc<str>>;

/// What the listener connection is asked to tell PostgreSQL, in order.
enum Registration {
    /// One more pop waits on this.
    Wait(Interest),
    /// One pop less.
    Stop(Interest),
    /// The listener (re)connected and listens on this client.
    Connected(Arc<Client>),
}

/// Wake-ups, by what waits for them: a channel per queue with waiting pops,
/// and one for the pops waiting on every queue (namespace and task pops).
#[derive(Clone, Default)]
struct Wakes {
    channels: Arc<std::sync::Mutex<HashMap<Interest, broadcast::Sender<Wake>>>>,
}

impl Wakes {
    fn channels(&self) -> std::sync::MutexGuard<'_, HashMap<Interest, broadcast::Sender<Wake>>> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn subscribe(&self, interest: &Interest) -> broadcast::Receiver<Wake> {
        let capacity = if interest.is_some() {
            QUEUE_CAPACITY
        } else {
            CAPACITY
        };
        self.channels()
            .entry(interest.clone())
            .or_insert_with(|| broadcast::channel(capacity).0)
            .subscribe()
    }

    /// A push to a queue wakes its waiters and those on every queue;
    /// Everything wakes all.
    fn send(&self, wake: Wake) {
        let channels = self.channels();
        // (A channel whose last waiter just went has no receivers: not an error.)
        match &wake {
            Wake::Queue(queue) => {
                for interest in [Some(queue.clone()), None] {
                    if let Some(channel) = channels.get(&interest) {
                        let _ = channel.send(wake.clone());
                    }
                }
            }
            Wake::Everything => {
                for channel in channels.values() {
                    let _ = channel.send(wake.clone());
                }
            }
        }
    }

    /// A waiter on `interest` goes: the channel goes with its last one.
    /// (Under the lock, the channel there is the leaving waiter's own: a
    /// channel is only removed when its one receiver leaves.)
    fn leave(&self, interest: &Interest) {
        let mut channels = self.channels();
        if channels
            .get(interest)
            .is_some_and(|c| c.receiver_count() <= 1)
        {
            channels.remove(interest);
        }
    }
}

/// The fan-out end every request subscribes to.
#[derive(Clone)]
pub struct PushWakeups {
    wakes: Wakes,
    registrations: mpsc::UnboundedSender<Registration>,
    /// Becomes true once, when the server is asked to stop.
    stopping: watch::Sender<bool>,
    /// True while the listener's LISTEN is in effect (a metrics gauge).
    listening: Arc<AtomicBool>,
    /// How many queues (every queue counting as one) this gateway's pops
    /// wait on right now (a metrics gauge).
    waits: Arc<AtomicUsize>,
}

impl PushWakeups {
    /// Starts the listener task on the current runtime (app.rs's
    /// stop_on_signal ends every wait on a stop signal).
    pub fn start(config: &Config) -> PushWakeups {
        let wakes = Wakes::default();
        let (registrations, requests) = mpsc::unbounded_channel();
        let listening = Arc::new(AtomicBool::new(false));
        tokio::spawn(listen_forever(
            listener_config(config),
            wakes.clone(),
            registrations.clone(),
            listening.clone(),
        ));
        let waits = Arc::new(AtomicUsize::new(0));
        tokio::spawn(register_waits(requests, wakes.clone(), waits.clone()));
        PushWakeups {
            wakes,
            registrations,
            stopping: watch::Sender::new(false),
            listening,
            waits,
        }
    }

    /// Subscribe BEFORE looking for messages: a push to `queue` (to any
    /// queue when `None`) committed after the look is then never missed.
    /// The wait is put in place in PostgreSQL at the Waiter's first wait
    /// (a pop that finds messages at once costs the listener nothing), and
    /// taken away when it is dropped.
    pub fn subscribe(&self, queue: Option<&str>) -> Waiter {
        let interest: Interest = queue.map(Arc::from);
        Waiter {
            receiver: self.wakes.subscribe(&interest),
            wakes: self.wakes.clone(),
            stopping: self.stopping.subscribe(),
            interest,
            registrations: self.registrations.clone(),
            registered: false,
        }
    }

    /// Whether the listener is connected and listening right now.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    /// How many queues this gateway's waiting pops wait on (a namespace or
    /// task pop's "every queue" counting as one): pushes to those notify.
    pub fn queues_waited_on(&self) -> usize {
        self.waits.load(Ordering::Relaxed)
    }

    /// Ends every wait, now and later.
    pub fn stop_waiting(&self) {
        self.stopping.send_replace(true);
    }
}

/// One request's subscription.
pub struct Waiter {
    receiver: broadcast::Receiver<Wake>,
    wakes: Wakes,
    stopping: watch::Receiver<bool>,
    interest: Interest,
    registrations: mpsc::UnboundedSender<Registration>,
    /// Whether its wait was asked for (at the first wait_for).
    registered: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.wakes.leave(&self.interest);
        if self.registered {
            let _ = self
                .registrations
                .send(Registration::Stop(self.interest.take()));
        }
    }
}

impl Waiter {
    /// Waits for a push to its queue (to any queue when it has none) or
    /// until `until`, or until the server stops. True when woken by a push
    /// worth a new look.
    /// The first wait puts the wait in place: a push that committed after
    /// the first look, without seeing it, then wakes this waiter once the
    /// wait is in place (register_waits).
    pub async fn wait_for(&mut self, until: Instant) -> bool {
        if !self.registered {
            self.registered = true;
            // (Fails only when the registering task is gone: shutdown.)
            let _ = self
                .registrations
                .send(Registration::Wait(self.interest.clone()));
        }
        let (receiver, stopping) = (&mut self.receiver, &mut self.stopping);
        tokio::select! {
            woken = tokio::time::timeout_at(until, next_wake(receiver)) => woken.unwrap_or(false),
            _ = stopping.wait_for(|stop| *stop) => false,
        }
    }

    /// The server is stopping: do not wait any more.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }
}

/// The next wake-up on a waiter's channel, which carries only the pushes
/// it waits for (`Wakes`); falling behind counts as one.
async fn next_wake(receiver: &mut broadcast::Receiver<Wake>) -> bool {
    match receiver.recv().await {
        Ok(_) | Err(RecvError::Lagged(_)) => true,
        // (Not while the waiter lives: Wakes keeps its channel's sender.)
        Err(RecvError::Closed) => std::future::pending().await,
    }
}

/// The listener's own connection settings: bounded connect, TCP keepalive so
/// a silently dead server is noticed, a name that shows in pg_stat_activity.
fn listener_config(config: &Config) -> tokio_postgres::Config {
    let mut pg = config.database_url.clone();
    pg.connect_timeout(config.db_timeout())
        .keepalives_idle(Duration::from_secs(30))
        .application_name("pgcursor-push-listener");
    pg
}

/// How long the listener's session waits at most for pushes in flight
/// (`pgcursor.await_pushes_in_flight`) before it gives up for now: a
/// backend waiting for a lock delivers no notification, and a transaction
/// left open after a push would otherwise hold up every wake-up.
const LISTENER_LOCK_TIMEOUT: &str = "SET lock_timeout = '100ms'";
/// Then it tries again this much later, until those pushes are done.
const DRAIN_RETRY: Duration = Duration::from_millis(100);

/// What a call on the listener's session came to.
enum Outcome {
    Done,
    /// 55P03: a push in flight outlasted the lock timeout.
    PushesInFlight,
    Failed,
}

/// Keeps PostgreSQL told which queues this gateway's pops wait on, on the
/// listener's session, one request at a time: a queue's wait is put in
/// place when its first waiter comes and taken away after its last. Once
/// a wait is in place and the pushes in flight before it have committed,
/// the queue's waiters are woken to look again. On each (re)connect every
/// wait is put in place on the new session and everyone is woken.
struct Registrar {
    /// How many waiting pops each interest has.
    waiting: HashMap<Interest, usize>,
    /// The queues among them waited on through the wait on every queue,
    /// taken once more for each (waits nest), not with a lock of their own.
    through_every_queue: HashSet<Arc<str>>,
    /// Most queues waited on with a lock of their own (OWN_WAITS_MAX).
    own_waits_max: usize,
    /// waiting.len(), for the metrics.
    waits: Arc<AtomicUsize>,
    /// Waits in place whose pushes in flight have not all committed yet.
    undrained: Vec<Interest>,
    /// When to ask again whether they have.
    next_drain: Instant,
    client: Option<Arc<Client>>,
    wakes: Wakes,
}

impl Registrar {
    /// No session yet: waits asked for meanwhile are put in place at connect.
    fn new(wakes: Wakes, waits: Arc<AtomicUsize>, own_waits_max: usize) -> Self {
        Registrar {
            waiting: HashMap::new(),
            through_every_queue: HashSet::new(),
            own_waits_max,
            waits,
            undrained: Vec::new(),
            next_drain: Instant::now(),
            client: None,
            wakes,
        }
    }

    async fn wait(&mut self, interest: Interest) {
        let count = self.waiting.entry(interest.clone()).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.waits.store(self.waiting.len(), Ordering::Relaxed);
            if let Some(queue) = &interest {
                let own = self.waiting.len() - 1 - self.through_every_queue.len();
                if own >= self.own_waits_max {
                    self.through_every_queue.insert(queue.clone());
                }
            }
            self.put_in_place(interest).await;
        }
    }

    async fn stop(&mut self, interest: Interest) {
        let Some(count) = self.waiting.get_mut(&interest) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.waiting.remove(&interest);
            self.waits.store(self.waiting.len(), Ordering::Relaxed);
            let lock = self.lock_of(&interest);
            if let Some(queue) = &interest {
                self.through_every_queue.remove(queue);
            }
            let sql = "SELECT pgcursor.stop_waiting_for_pushes($1::text)";
            self.call(sql, &[(&lock.as_deref(), Type::TEXT)]).await;
        }
    }

    /// The wait that stands for `interest` in PostgreSQL: its own, or the
    /// wait on every queue (None).
    fn lock_of(&self, interest: &Interest) -> Interest {
        match interest {
            Some(queue) if self.through_every_queue.contains(queue) => None,
            other => other.clone(),
        }
    }

    async fn connected(&mut self, listener: Arc<Client>) {
        self.client = Some(listener);
        self.undrained.clear();
        let interests: Vec<Interest> = self.waiting.keys().cloned().collect();
        for interest in interests {
            self.put_in_place(interest).await;
        }
        self.wakes.send(Wake::Everything);
    }

    /// `pgcursor.wait_for_pushes`: the wait is taken; its waiters are woken
    /// now, or once the pushes still in flight are done (drain).
    async fn put_in_place(&mut self, interest: Interest) {
        let sql = "SELECT pgcursor.wait_for_pushes($1::text)";
        let lock = self.lock_of(&interest);
        match self.call(sql, &[(&lock.as_deref(), Type::TEXT)]).await {
            Outcome::Done => self.wake(interest),
            Outcome::PushesInFlight => {
                if self.undrained.is_empty() {
                    self.next_drain = Instant::now() + DRAIN_RETRY;
                }
                self.undrained.push(interest);
            }
            Outcome::Failed => {}
        }
    }

    /// `pgcursor.await_pushes_in_flight`, for the waits in place that are
    /// still waiting for it.
    async fn drain(&mut self) {
        match self
            .call("SELECT pgcursor.await_pushes_in_flight()", &[])
            .await
        {
            Outcome::Done => {
                for interest in std::mem::take(&mut self.undrained) {
                    self.wake(interest);
                }
            }
            Outcome::PushesInFlight | Outcome::Failed => {
                self.next_drain = Instant::now() + DRAIN_RETRY;
            }
        }
    }

    fn wake(&self, interest: Interest) {
        self.wakes
            .send(interest.map_or(Wake::Everything, Wake::Queue));
    }

    /// Failed: no session (it is reconnecting, and every wait is put in
    /// place again then), or an error. (Typed parameters: one round trip,
    /// where `execute` would first prepare the statement in one of its own.)
    async fn call(&self, sql: &str, params: &[(&(dyn ToSql + Sync), Type)]) -> Outcome {
        let Some(session) = &self.client else {
            return Outcome::Failed;
        };
        match session.execute_typed(sql, params).await {
            Ok(_) => Outcome::Done,
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => Outcome::PushesInFlight,
            Err(e) if session.is_closed() => {
                debug!("push listener: {sql}: {}", error_detail(&e));
                Outcome::Failed
            }
            Err(e) => {
                // Pushes then do not notify this wait: its pops find their
                // messages at their periodic re-check only.
                warn!("push listener: {sql} failed: {}", error_detail(&e));
                Outcome::Failed
            }
        }
    }
}

async fn register_waits(
    mut requests: mpsc::UnboundedReceiver<Registration>,
    wakes: Wakes,
    waits: Arc<AtomicUsize>,
) {
    let mut registrar = Registrar::new(wakes, waits, OWN_WAITS_MAX);
    loop {
        let draining = !registrar.undrained.is_empty();
        tokio::select! {
            request = requests.recv() => match request {
                Some(Registration::Wait(interest)) => registrar.wait(interest).await,
                Some(Registration::Stop(interest)) => registrar.stop(interest).await,
                Some(Registration::Connected(listener)) => registrar.connected(listener).await,
                None => return,
            },
            _ = tokio::time::sleep_until(registrar.next_drain), if draining => registrar.drain().await,
        }
    }
}

/// Listens, reconnecting with exponential backoff; one warning per outage.
async fn listen_forever(
    pg: tokio_postgres::Config,
    wakes: Wakes,
    registrations: mpsc::UnboundedSender<Registration>,
    listening: Arc<AtomicBool>,
) {
    let mut backoff = MIN_BACKOFF;
    let mut healthy = true;
    loop {
        let (listened, why) = listen_once(&pg, &wakes, &registrations, &listening).await;
        listening.store(false, Ordering::Relaxed);
        if listened {
            backoff = MIN_BACKOFF;
        }
        if listened || healthy {
            warn!("push listener lost PostgreSQL ({why}); long-polls answer at their timeout until it is back");
        } else {
            debug!("push listener still cannot reach PostgreSQL: {why}");
        }
        healthy = false;
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection's life: connect, LISTEN, hand the session to
/// register_waits, forward notifications until the connection ends.
/// Answers whether LISTEN took effect and why it ended.
async fn listen_once(
    pg: &tokio_postgres::Config,
    wakes: &Wakes,
    registrations: &mpsc::UnboundedSender<Registration>,
    up: &AtomicBool,
) -> (bool, String) {
    let (client, mut connection) = match pg.connect(NoTls).await {
        Ok(pair) => pair,
        Err(e) => return (false, error_detail(&e)),
    };
    let client = Arc::new(client);
    // Notifications only arrive while the connection is polled, and LISTEN
    // itself only completes while it is: drive both in one loop.
    let mut messages = stream::poll_fn(move |cx| connection.poll_message(cx));
    let session = client.clone();
    let listen = async move {
        session.batch_execute(LISTENER_LOCK_TIMEOUT).await?;
        session.batch_execute(LISTEN).await
    };
    tokio::pin!(listen);
    let mut listening = false;
    loop {
        tokio::select! {
            done = &mut listen, if !listening => match done {
                Ok(()) => {
                    listening = true;
                    up.store(true, Ordering::Relaxed);
                    info!("push listener: listening on {CHANNEL}");
                    let _ = registrations.send(Registration::Connected(client.clone()));
                }
                Err(e) => return (false, error_detail(&e)),
            },
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    wakes.send(Wake::Queue(n.payload().into()));
                }
                Some(Ok(_)) => {} // a NOTICE
                Some(Err(e)) => return (listening, error_detail(&e)),
                None => return (listening, "connection closed".into()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wake-ups without a listener; the receiver sees what they register.
    fn wakeups() -> (PushWakeups, mpsc::UnboundedReceiver<Registration>) {
        let (registrations, requests) = mpsc::unbounded_channel();
        let w = PushWakeups {
            wakes: Wakes::default(),
            registrations,
            stopping: watch::Sender::new(false),
            listening: Arc::new(AtomicBool::new(false)),
            waits: Arc::new(AtomicUsize::new(0)),
        };
        (w, requests)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn a_push_to_another_queue_does_not_wake() {
        let (w, _requests) = wakeups();
        let mut waiter = w.subscribe(Some("orders"));
        w.wakes.send(Wake::Queue("other".into()));
        assert!(!waiter.wait_for(soon()).await);
        w.wakes.send(Wake::Queue("orders".into()));
        assert!(waiter.wait_for(soon()).await);
    }

    #[tokio::test]
    async fn any_push_wakes_a_namespace_pop_and_everything_wakes_all() {
        let (w, _requests) = wakeups();
        let mut waiter = w.subscribe(None);
        w.wakes.send(Wake::Queue("other".into()));
        assert!(waiter.wait_for(soon()).await);
        let mut one_queue = w.subscribe(Some("orders"));
        w.wakes.send(Wake::Everything);
        assert!(one_queue.wait_for(soon()).await);
    }

    #[tokio::test]
    async fn a_push_before_the_wait_but_after_subscribing_is_not_lost() {
        let (w, _requests) = wakeups();
        let mut waiter = w.subscribe(Some("orders"));
        w.wakes.send(Wake::Queue("orders".into()));
        // ... the request looks for messages here, finds none, then waits:
        assert!(waiter.wait_for(soon()).await);
    }

    #[tokio::test]
    async fn stopping_ends_every_wait_now_and_later() {
        let (w, _requests) = wakeups();
        let mut waiter = w.subscribe(Some("orders"));
        let far = Instant::now() + Duration::from_secs(60);
        let waiting = tokio::spawn(async move { waiter.wait_for(far).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        w.stop_waiting();
        let woken = tokio::time::timeout(Duration::from_secs(1), waiting).await;
        assert!(!woken.expect("the wait ended").unwrap());
        let mut later = w.subscribe(None);
        assert!(later.is_stopping());
        assert!(!later.wait_for(far).await);
    }

    #[tokio::test]
    async fn a_lagging_waiter_rechecks() {
        let (w, _requests) = wakeups();
        let mut waiter = w.subscribe(Some("orders"));
        for _ in 0..QUEUE_CAPACITY * 2 {
            w.wakes.send(Wake::Queue("orders".into()));
        }
        assert!(waiter.wait_for(soon()).await);
    }

    #[tokio::test]
    async fn a_push_reaches_only_its_queues_channel_and_every_queues() {
        let (w, _requests) = wakeups();
        let _orders = w.subscribe(Some("orders"));
        let _other = w.subscribe(Some("other"));
        let mut namespace = w.subscribe(None);
        let channels = |w: &PushWakeups| {
            let mut held: Vec<String> = w
                .wakes
                .channels()
                .keys()
                .map(|i| format!("{i:?}"))
                .collect();
            held.sort();
            held
        };
        assert_eq!(
            channels(&w),
            [r#"None"#, r#"Some("orders")"#, r#"Some("other")"#]
        );
        w.wakes.send(Wake::Queue("orders".into()));
        let sent = |w: &PushWakeups, interest: Interest| w.wakes.channels()[&interest].len();
        assert_eq!(sent(&w, Some("orders".into())), 1);
        assert_eq!(
            sent(&w, Some("other".into())),
            0,
            "another queue's waiters sleep on"
        );
        assert!(
            namespace.wait_for(soon()).await,
            "pops on every queue hear it"
        );
        let again = w.subscribe(Some("orders"));
        drop(_orders);
        assert_eq!(channels(&w).len(), 3, "orders has a waiter left");
        drop(again);
        drop(_other);
        assert_eq!(
            channels(&w),
            [r#"None"#],
            "a channel goes with its last waiter"
        );
    }

    #[tokio::test]
    async fn a_waiter_registers_its_queue_from_its_first_wait_until_dropped() {
        let (w, mut requests) = wakeups();
        let seen = |r: Registration| match r {
            Registration::Wait(i) => format!("wait {i:?}"),
            Registration::Stop(i) => format!("stop {i:?}"),
            Registration::Connected(_) => "connected".to_string(),
        };
        let never_waits = w.subscribe(Some("orders"));
        drop(never_waits);
        assert!(
            requests.try_recv().is_err(),
            "a pop that never waits registers nothing"
        );
        let mut waiter = w.subscribe(Some("orders"));
        let mut namespace = w.subscribe(None);
        assert!(requests.try_recv().is_err());
        waiter.wait_for(soon()).await;
        namespace.wait_for(soon()).await;
        waiter.wait_for(soon()).await;
        assert_eq!(seen(requests.try_recv().unwrap()), r#"wait Some("orders")"#);
        assert_eq!(seen(requests.try_recv().unwrap()), "wait None");
        assert!(requests.try_recv().is_err(), "once per waiter");
        drop(waiter);
        drop(namespace);
        assert_eq!(seen(requests.try_recv().unwrap()), r#"stop Some("orders")"#);
        assert_eq!(seen(requests.try_recv().unwrap()), "stop None");
    }

    /// The listener's waits in PostgreSQL: a lock of its own for up to
    /// own_waits_max queues, the wait on every queue for the others, each
    /// given back with its queue's last waiter.
    #[tokio::test]
    async fn queues_past_the_own_waits_max_wait_through_the_every_queue_wait() {
        let listener = Arc::new(pgcursor_tests::db().await);
        let pid: i32 = listener
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        let wakes = Wakes::default();
        let mut woken = wakes.subscribe(&None); // every queue's wake-ups
        let mut registrar = Registrar::new(wakes, Arc::new(AtomicUsize::new(0)), 3);
        registrar.client = Some(listener);
        let prefix = format!("own-waits-{}", uuid::Uuid::now_v7());
        let queue = |i: usize| -> Interest { Some(format!("{prefix}-{i}").into()) };
        let observer = pgcursor_tests::db().await;
        // The listener's waiting locks: own ones (by queue) and the wait on every queue.
        let held = || async {
            let row = observer
                .query_one(
                    "SELECT count(*) FILTER (WHERE l.objid <> 0), count(*) FILTER (WHERE l.objid = 0)
                       FROM pg_locks l
                      WHERE l.locktype = 'advisory' AND l.pid = $1
                        AND l.classid = pgcursor_internal.waiting_class()::oid",
                    &[&pid],
                )
                .await
                .unwrap();
            (row.get::<_, i64>(0), row.get::<_, i64>(1))
        };
        let notified = |i: usize| {
            let observer = &observer;
            let name = queue(i).unwrap().to_string();
            async move {
                let row = observer
                    .query_one(
                        "SELECT pgcursor_internal.wake_pops(ARRAY[$1::text])",
                        &[&name],
                    )
                    .await
                    .unwrap();
                row.get::<_, Vec<String>>(0) == vec![name]
            }
        };
        for i in 1..=5 {
            registrar.wait(queue(i)).await;
        }
        assert_eq!(
            held().await,
            (3, 1),
            "queues 1-3 own locks, 4 and 5 the every-queue one"
        );
        assert!(notified(5).await, "a push to queue 5 notifies");
        for i in 1..=5 {
            match woken.try_recv() {
                Ok(Wake::Queue(q)) => assert_eq!(Some(q), queue(i), "woken in turn"),
                other => panic!("queue {i}: {other:?}"),
            }
        }
        registrar.wait(queue(5)).await; // a second pop on queue 5: nothing more
        registrar.stop(queue(4)).await;
        registrar.stop(queue(5)).await;
        assert_eq!(held().await, (3, 1), "queue 5 still has a waiter");
        registrar.stop(queue(5)).await;
        assert_eq!(held().await, (3, 0), "the every-queue wait is given back");
        assert!(!notified(5).await, "nobody waits on queue 5");
        for i in 1..=3 {
            registrar.stop(queue(i)).await;
        }
        assert_eq!(held().await, (0, 0));
    }
}
