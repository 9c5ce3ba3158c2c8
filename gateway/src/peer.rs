//! Whether a request's client is still connected. actix-web runs a handler
//! to its end even after the client has hung up (actix-web issue #3462).
//! For a pop that matters: a long-poll its client gave up on would still
//! lease the next messages, to nobody, and they would wait out the lease
//! before another consumer got them. So a pop asks just before it looks
//! (routes/pop.rs).

use std::any::Any;

use actix_web::dev::Extensions;
use actix_web::HttpRequest;

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
        // SAFETY: `fd` is the socket of the connection carrying `req`.
        // actix's HTTP/1 dispatcher owns that socket and runs this request's
        // handler, so the socket stays open while the handler runs.
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
