//! Whether a request's client is still connected. actix-web runs a handler
//! to its end even after the client has hung up (actix-web issue #3462).
//! For a pop that matters: a long-poll its client gave up on would still
//! lease the next messages, to nobody, and they would wait out the lease
//! before another consumer got them. So a pop asks just before it looks
//! (routes/pop.rs). And whether a client still takes its answer: one that
//! stops reading a long answer has its connection shut down
//! (`watch_long_answers`).

use std::any::Any;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use actix_web::body::{BodySize, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest};
use tokio::time::Instant;

use crate::app::AppState;
use crate::body::Holding;

/// The socket of an accepted connection, noted by `note_socket`.
#[cfg(unix)]
#[derive(Clone, Copy)]
struct ClientSocket(std::os::fd::RawFd);

/// `HttpServer::on_connect`: notes the socket of each TCP connection, so
/// that its requests can look at it.
pub fn note_socket(connection: &dyn Any, data: &mut Extensions) {
    #[cfg(unix)]
    if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        use std::os::fd::AsRawFd;
        data.insert(ClientSocket(tcp.as_raw_fd()));
    }
    #[cfg(not(unix))]
    let _ = (connection, data);
}

/// True once the client has closed the request's connection: a look at the
/// socket, which takes nothing from it, reads end of file or an error.
/// Nothing to read yet, or bytes of a next request: still there. Without a
/// noted socket (not TCP, not unix): assumed there.
pub fn has_hung_up(req: &HttpRequest) -> bool {
    #[cfg(unix)]
    if let Some(&ClientSocket(fd)) = req.conn_data::<ClientSocket>() {
        let mut byte = 0u8;
        // SAFETY: recv writes at most one byte into `byte`. `fd` is the
        // socket of the connection carrying `req`, owned by actix's HTTP/1
        // dispatcher, open while the handler runs. A pop's look runs on
        // after a reset dropped its handler (routes/pop.rs): the descriptor
        // may then be closed (an error: hung up, rightly) or reused by
        // another connection, whose bytes MSG_PEEK leaves where they are.
        // MSG_PEEK leaves the byte for actix; MSG_DONTWAIT never blocks.
        let read = unsafe {
            libc::recv(
                fd,
                std::ptr::addr_of_mut!(byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        return match read {
            0 => true,
            n if n > 0 => false,
            _ => !matches!(
                std::io::Error::last_os_error().kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ),
        };
    }
    #[cfg(not(unix))]
    let _ = req;
    false
}

/// Answers at least this long are watched by `watch_long_answers`. Shorter
/// ones fit in the sockets' buffers, so the gateway is done with them even
/// when their client reads nothing.
const WATCH_ANSWERS_FROM: u64 = 1 << 20;

/// Middleware (`middleware::from_fn`): a long answer whose client takes
/// none of it for PGCURSOR_SEND_TIMEOUT_MS has its connection shut down.
/// actix-web has no send timeout, so a client that stopped reading a 16 MB
/// pop (or vanished without a word) kept its connection and the unsent rest
/// of the answer in the gateway's memory for ever. Taking is what the
/// client's TCP acknowledges: a client reading slowly is not cut off.
pub async fn watch_long_answers(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, Holding<StopsOnDrop>>>, actix_web::Error> {
    let answer = next.call(req).await?;
    let long =
        matches!(answer.response().body().size(), BodySize::Sized(n) if n >= WATCH_ANSWERS_FROM);
    // Looked up for long answers only: every request passes here.
    let request = answer.request();
    let watched = long.then(|| {
        let socket = request.conn_data::<ClientSocket>().copied()?;
        let state = request.app_data::<web::Data<AppState>>()?;
        Some((socket, state.config.send_timeout()))
    });
    let Some((socket, within)) = watched.flatten() else {
        return Ok(answer.map_into_left_body());
    };
    let Some(acked) = bytes_acked(socket) else {
        return Ok(answer.map_into_left_body());
    };
    let watchdog = actix_web::rt::spawn(shut_down_when_stuck(socket, acked, within));
    Ok(answer
        .map_body(|_, body| Holding::new(BoxBody::new(body), StopsOnDrop(watchdog)))
        .map_into_right_body())
}

/// A watchdog that stops once dropped with its answer's body (sent, or its
/// connection gone), so it never touches a socket number used again.
pub struct StopsOnDrop(tokio::task::JoinHandle<()>);

impl Drop for StopsOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Shuts `socket` down once its client has acknowledged nothing more than
/// `acked` bytes for `within`. Runs on the connection's worker thread, so
/// never while its answer is being dropped, and it is aborted then
/// (`StopsOnDrop`), before the socket can be closed.
async fn shut_down_when_stuck(socket: ClientSocket, mut acked: u64, within: Duration) {
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(within / 4).await;
        match bytes_acked(socket) {
            Some(now) if now != acked => (acked, since) = (now, Instant::now()),
            _ if since.elapsed() >= within => break,
            _ => {}
        }
    }
    // SAFETY: `socket` is the connection's, still open (see above); its
    // writes then fail, and actix-web drops the connection and the answer.
    unsafe {
        libc::shutdown(socket.0, libc::SHUT_RDWR);
    }
    crate::metrics::counters().answers_abandoned.increment(1);
    if crate::clock::once_a_minute(&WARNED_STUCK_AT) {
        tracing::warn!(
            "a client took none of its answer for {} ms (PGCURSOR_SEND_TIMEOUT_MS): its connection was shut down",
            within.as_millis()
        );
    }
}

/// When `shut_down_when_stuck` last warned.
static WARNED_STUCK_AT: AtomicU64 = AtomicU64::new(0);

/// How many bytes sent on `socket` its peer has acknowledged (TCP_INFO);
/// `None` where that cannot be known.
fn bytes_acked(socket: ClientSocket) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getsockopt fills at most `len` bytes of `info`, a plain
        // C struct for which all zeroes is a valid value.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let got = unsafe {
            libc::getsockopt(
                socket.0,
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                std::ptr::addr_of_mut!(info).cast(),
                &mut len,
            )
        };
        (got == 0).then_some(info.tcpi_bytes_acked)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        None
    }
}
