//! The HTTP server of a node (public API and peer RPC on one port), on hyper directly rather
//! than `axum::serve`, for the limits that a node facing the network needs:
//! - a client must send a request's headers within [`HEADER_READ_TIMEOUT`], or its connection
//!   is closed (a slow client cannot hold connections open for ever);
//! - every request is answered within the request timeout of [`crate::api::app`];
//! - at shutdown, open connections get [`DRAIN`] to finish, then are dropped.
//!
//! A failed `accept` (out of file descriptors, say) is logged and retried after a pause; it never
//! stops the server.
//!
//! With TLS ([`crate::tls`]) every connection is TLS: its handshake must end within
//! [`HEADER_READ_TIMEOUT`] too, it takes the server config in force when it begins (a reload
//! changes the next connections), and the certificate its client presented rides on each of
//! its requests as a [`ClientCert`].

use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

use crate::tls::{ClientCert, PeerCert, Tls};

/// How long a client has to send a request's headers; also how long a kept-alive connection
/// may sit idle before the next request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long open connections may finish at shutdown.
pub const DRAIN: Duration = Duration::from_millis(500);

/// Serves `app` on `listener` (over TLS with `tls`) until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Option<Arc<Tls>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!("accept failed: {e}; retrying in 50 ms");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Some(tls) = &tls else {
            let conn = graceful.watch(http(stream, app.clone()));
            tokio::spawn(async move {
                // Errors here are the client's (reset, timed out headers): nothing to do.
                let _ = conn.await;
            });
            continue;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config());
        let (app, watcher) = (app.clone(), graceful.watcher());
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream));
            // A failed handshake (no TLS, a certificate the CA did not sign) is the client's.
            let Ok(Ok(stream)) = handshake.await else {
                return;
            };
            let cert = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| Arc::new(PeerCert::new(c.clone().into_owned())));
            let app = app.layer(Extension(ClientCert(cert)));
            let _ = watcher.watch(http(stream, app)).await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
}

/// One HTTP/1.1 connection of `app` on `io`, with the header read timeout.
fn http<I>(io: I, app: Router) -> http1::Connection<TokioIo<I>, TowerToHyperService<Router>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(app))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// electd's clients (the peer transport, the client crate) drop idle connections before
    /// the server closes them, so that none reuses a connection the server is closing.
    #[test]
    fn clients_drop_idle_connections_before_the_server_does() {
        assert!(electd_client::CLIENT_IDLE < HEADER_READ_TIMEOUT);
    }
}
