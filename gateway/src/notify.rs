//! Push wake-ups for long-polling pops.
//!
//! `pgcursor.push` runs `pg_notify('pgcursor_push', <queue>)`. One dedicated
//! connection (not from the pool) LISTENs on that channel and fans each
//! notification out inside the gateway through a broadcast channel, so a
//! waiting pop holds no database connection at all. The connection comes
//! back by itself, with backoff, when PostgreSQL goes away; meanwhile
//! waiters simply reach their timeout. After every (re)connect everyone is
//! woken once, since pushes made while nobody listened were not heard.
//!
//! On SIGTERM/SIGINT/SIGQUIT every waiter stops waiting for good, so the
//! server's graceful shutdown (10 s) is not held up, and then cut short, by
//! long-polls waiting for a 30 s timeout: they answer what they have.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_postgres::{AsyncMessage, NoTls};
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::db::error_detail;

/// The channel `pgcursor.push` notifies.
const CHANNEL: &str = "pgcursor_push";
const LISTEN: &str = "LISTEN pgcursor_push";
/// How many wake-ups a slow waiter may fall behind before it just re-checks.
const CAPACITY: usize = 1024;
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

/// The fan-out end every request subscribes to.
#[derive(Clone)]
pub struct PushWakeups {
    sender: broadcast::Sender<Wake>,
    /// Becomes true once, when the server is asked to stop.
    stopping: watch::Sender<bool>,
    /// True while the listener's LISTEN is in effect (a metrics gauge).
    listening: Arc<AtomicBool>,
}

impl PushWakeups {
    /// Starts the listener task, and the one that ends every wait on a
    /// stop signal, on the current runtime.
    pub fn start(config: &Config) -> PushWakeups {
        let (sender, _) = broadcast::channel(CAPACITY);
        let listening = Arc::new(AtomicBool::new(false));
        tokio::spawn(listen_forever(
            listener_config(config),
            sender.clone(),
            listening.clone(),
        ));
        let wakeups = PushWakeups {
            sender,
            stopping: watch::Sender::new(false),
            listening,
        };
        tokio::spawn(stop_waiting_on_signal(wakeups.clone()));
        wakeups
    }

    /// Subscribe BEFORE looking for messages: a push committed after the
    /// look is then never missed.
    pub fn subscribe(&self) -> Waiter {
        Waiter {
            receiver: self.sender.subscribe(),
            stopping: self.stopping.subscribe(),
        }
    }

    /// Whether the listener is connected and listening right now.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    /// Ends every wait, now and later.
    pub fn stop_waiting(&self) {
        self.stopping.send_replace(true);
    }
}

/// actix handles the signals themselves (SIGTERM: graceful; SIGINT and
/// SIGQUIT: at once); this only makes waiting pops answer meanwhile.
async fn stop_waiting_on_signal(wakeups: PushWakeups) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::quit()),
    ) else {
        warn!("cannot watch for stop signals: long-polls will hold up a shutdown");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = quit.recv() => {}
    }
    info!("stopping: waiting pops answer now");
    wakeups.stop_waiting();
}

/// One request's subscription.
pub struct Waiter {
    receiver: broadcast::Receiver<Wake>,
    stopping: watch::Receiver<bool>,
}

impl Waiter {
    /// Waits for a push to `queue` (to any queue when `None`) or until
    /// `until`, or until the server stops. True when woken by a push worth
    /// a new look.
    pub async fn wait_for(&mut self, queue: Option<&str>, until: Instant) -> bool {
        let Waiter { receiver, stopping } = self;
        tokio::select! {
            woken = tokio::time::timeout_at(until, next_relevant(receiver, queue)) => woken.unwrap_or(false),
            _ = stopping.wait_for(|stop| *stop) => false,
        }
    }

    /// The server is stopping: do not wait any more.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }
}

async fn next_relevant(receiver: &mut broadcast::Receiver<Wake>, queue: Option<&str>) -> bool {
    loop {
        match receiver.recv().await {
            Ok(Wake::Queue(pushed)) if queue.is_some_and(|q| q != &*pushed) => continue,
            Ok(_) | Err(RecvError::Lagged(_)) => return true,
            // The listener task is gone (shutdown): only the deadline is left.
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
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

/// Listens, reconnecting with exponential backoff; one warning per outage.
async fn listen_forever(
    pg: tokio_postgres::Config,
    sender: broadcast::Sender<Wake>,
    listening: Arc<AtomicBool>,
) {
    let mut backoff = MIN_BACKOFF;
    let mut healthy = true;
    loop {
        let (listened, why) = listen_once(&pg, &sender, &listening).await;
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

/// One connection's life: connect, LISTEN, forward notifications until the
/// connection ends. Answers whether LISTEN took effect and why it ended.
async fn listen_once(
    pg: &tokio_postgres::Config,
    sender: &broadcast::Sender<Wake>,
    up: &AtomicBool,
) -> (bool, String) {
    let (client, mut connection) = match pg.connect(NoTls).await {
        Ok(pair) => pair,
        Err(e) => return (false, error_detail(&e)),
    };
    // Notifications only arrive while the connection is polled, and LISTEN
    // itself only completes while it is: drive both in one loop.
    let mut messages = stream::poll_fn(move |cx| connection.poll_message(cx));
    let listen = client.batch_execute(LISTEN);
    tokio::pin!(listen);
    let mut listening = false;
    loop {
        tokio::select! {
            done = &mut listen, if !listening => match done {
                Ok(()) => {
                    listening = true;
                    up.store(true, Ordering::Relaxed);
                    info!("push listener: listening on {CHANNEL}");
                    let _ = sender.send(Wake::Everything);
                }
                Err(e) => return (false, error_detail(&e)),
            },
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    // No receivers (no waiting pop) is not an error.
                    let _ = sender.send(Wake::Queue(n.payload().into()));
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

    fn wakeups() -> PushWakeups {
        PushWakeups {
            sender: broadcast::channel(4).0,
            stopping: watch::Sender::new(false),
            listening: Arc::new(AtomicBool::new(false)),
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn a_push_to_another_queue_does_not_wake() {
        let w = wakeups();
        let mut waiter = w.subscribe();
        w.sender.send(Wake::Queue("other".into())).unwrap();
        assert!(!waiter.wait_for(Some("orders"), soon()).await);
        w.sender.send(Wake::Queue("orders".into())).unwrap();
        assert!(waiter.wait_for(Some("orders"), soon()).await);
    }

    #[tokio::test]
    async fn any_push_wakes_a_namespace_pop_and_everything_wakes_all() {
        let w = wakeups();
        let mut waiter = w.subscribe();
        w.sender.send(Wake::Queue("other".into())).unwrap();
        assert!(waiter.wait_for(None, soon()).await);
        w.sender.send(Wake::Everything).unwrap();
        assert!(waiter.wait_for(Some("orders"), soon()).await);
    }

    #[tokio::test]
    async fn a_push_before_the_wait_but_after_subscribing_is_not_lost() {
        let w = wakeups();
        let mut waiter = w.subscribe();
        w.sender.send(Wake::Queue("orders".into())).unwrap();
        // ... the request looks for messages here, finds none, then waits:
        assert!(waiter.wait_for(Some("orders"), soon()).await);
    }

    #[tokio::test]
    async fn stopping_ends_every_wait_now_and_later() {
        let w = wakeups();
        let mut waiter = w.subscribe();
        let far = Instant::now() + Duration::from_secs(60);
        let waiting = tokio::spawn(async move { waiter.wait_for(Some("orders"), far).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        w.stop_waiting();
        let woken = tokio::time::timeout(Duration::from_secs(1), waiting).await;
        assert!(!woken.expect("the wait ended").unwrap());
        let mut later = w.subscribe();
        assert!(later.is_stopping());
        assert!(!later.wait_for(None, far).await);
    }

    #[tokio::test]
    async fn a_lagging_waiter_rechecks() {
        let w = wakeups();
        let mut waiter = w.subscribe();
        for _ in 0..10 {
            w.sender.send(Wake::Queue("other".into())).unwrap();
        }
        assert!(waiter.wait_for(Some("orders"), soon()).await);
    }
}
