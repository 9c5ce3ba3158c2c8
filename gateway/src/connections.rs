//! How many client connections the gateway holds at once. Each takes a file
//! descriptor, and a long-poll holds its connection for the whole wait, so
//! a gateway serving a thousand waiting consumers needs a thousand of them.
//! The usual soft limit on open files is 1,024 (systemd's default, and most
//! shells'), while the hard limit is far higher: so the gateway raises its
//! soft limit to the hard one at startup, as nginx and Go programs do.
//!
//! Then it accepts no more connections than the limit leaves room for once
//! its own descriptors are counted: its database connections (the pool,
//! the listener, housekeeping) and a margin for the runtime. Past that,
//! new clients wait in the kernel's accept queue until a connection
//! closes. Without the cap, accept() would fail with EMFILE instead, and so
//! would every database connection the gateway then had to open (after a
//! PostgreSQL restart, say): requests already accepted would fail too.

use std::any::Any;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use actix_web::dev::Extensions;
use tracing::warn;

/// Descriptors kept for other than client connections, beyond one per
/// database connection: stdio, the listening socket, the runtime's epoll
/// and wake-up descriptors, a connection being opened.
const RESERVED_FOR_THE_PROCESS: u64 = 64;

/// actix-web's own default cap per worker.
const ACTIX_MAX_PER_WORKER: usize = 25_000;

/// Client connections open now.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// Raises the soft limit on open files to the hard limit (where there is
/// one to raise) and answers the soft limit then in force; None where it
/// cannot be read.
#[cfg(unix)]
pub fn raise_open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write `limit`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            // Refused (e.g. a hard limit of "unlimited" where the kernel caps
            // open files lower): keep the soft limit as it was.
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    Some(limit.rlim_cur)
}

#[cfg(not(unix))]
pub fn raise_open_files_limit() -> Option<u64> {
    None
}

/// The most client connections one of `workers` HTTP workers holds: what
/// `open_files` leaves once the gateway's `database_connections` and
/// RESERVED_FOR_THE_PROCESS are counted, shared out, at least 1 and at
/// most actix-web's default. With no known limit, actix-web's default.
pub fn per_worker_cap(
    open_files: Option<u64>,
    database_connections: usize,
    workers: usize,
) -> usize {
    let Some(open_files) = open_files else {
        return ACTIX_MAX_PER_WORKER;
    };
    let reserved = RESERVED_FOR_THE_PROCESS + database_connections as u64;
    let share = open_files.saturating_sub(reserved) / workers.max(1) as u64;
    usize::try_from(share)
        .unwrap_or(usize::MAX)
        .clamp(1, ACTIX_MAX_PER_WORKER)
}

/// Client connections open now.
pub fn open() -> usize {
    OPEN.load(Ordering::Relaxed)
}

/// When the last "at capacity" warning was logged, in seconds since the epoch.
static WARNED_FULL_AT: AtomicU64 = AtomicU64::new(0);

/// Counts a connection as open for as long as actix keeps its data.
struct Counted;

impl Counted {
    /// Counts one more; answers how many are open now.
    fn new() -> (Counted, usize) {
        (Counted, OPEN.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `HttpServer::on_connect`, given the gateway's cap: counts the connection
/// until it closes, warns when it fills the cap, and notes its socket for
/// `peer::has_hung_up`.
pub fn opened(connection: &dyn Any, data: &mut Extensions, cap: usize) {
    let (counted, open) = Counted::new();
    data.insert(counted);
    if open >= cap {
        warn_at_capacity(cap);
    }
    crate::peer::note_socket(connection, data);
}

/// At most once a minute: new clients now wait to be accepted.
fn warn_at_capacity(cap: usize) {
    if crate::clock::once_a_minute(&WARNED_FULL_AT) {
        warn!(
            "{cap} HTTP connections open, the most the open-files limit allows: new clients wait until one closes; raise the limit (LimitNOFILE, ulimit -n) to serve more"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_what_the_limit_leaves_shared_among_workers() {
        // 1,024 open files, 16 + 2 database connections, 1 worker.
        assert_eq!(per_worker_cap(Some(1024), 18, 1), 1024 - 64 - 18);
        assert_eq!(per_worker_cap(Some(1024), 18, 2), (1024 - 64 - 18) / 2);
        // A limit the gateway's own descriptors take whole still serves one.
        assert_eq!(per_worker_cap(Some(50), 18, 1), 1);
        // A high limit, or none known: actix-web's default.
        assert_eq!(per_worker_cap(Some(1 << 40), 18, 1), ACTIX_MAX_PER_WORKER);
        assert_eq!(per_worker_cap(None, 18, 4), ACTIX_MAX_PER_WORKER);
    }
}
