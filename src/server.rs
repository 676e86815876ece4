//! The HTTP server of a node (public API and peer RPC on one port), on hyper directly rather
//! than `axum::serve`, for the limits that a node facing the network needs:
//! - a client must send a request's headers within [`HEADER_READ_TIMEOUT`], or its connection
//!   is closed (a slow client cannot hold connections open for ever);
//! - every request is answered within the request timeout of [`crate::api::app`];
//! - at shutdown, open connections get [`DRAIN`] to finish, then are dropped.
//!
//! - a connection must take what the node writes within [`WRITE_TIMEOUT`], or it is closed
//!   (a watcher that stops reading frees its slot);
//! - at most `max_connections` connections are served at once, and beyond that only members'
//!   peer requests, on a small reserve ([`crate::connections`]); every other connection is
//!   closed at once, unread.
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

use crate::connections::{Connections, FromMemberHost, LocalClient, Remote, Reserved, Slot};
use crate::tls::{ClientCert, PeerCert, Tls};

/// How long a client has to send a request's headers; also how long a kept-alive connection
/// may sit idle before the next request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a write to a connection may wait for the client to read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections may finish at shutdown.
pub const DRAIN: Duration = Duration::from_millis(500);

/// Serves `app` on `listener` (over TLS with `tls`) until `shutdown` completes, at most as
/// many connections at once as `connections` admits.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Option<Arc<Tls>>,
    connections: Arc<Connections>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
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
        // Beyond the cap: closed at once, nothing read (counted).
        let Some(slot) = connections.admit(remote.ip()) else {
            drop(stream);
            continue;
        };
        let local = stream.local_addr().ok().map(|a| a.ip());
        let stream = timed(stream);
        let mut app = per_connection(&app, remote, &slot, &connections);
        if local == Some(remote.ip()) {
            app = app.layer(Extension(LocalClient));
        }
        let Some(tls) = &tls else {
            let conn = graceful.watch(http(stream, app));
            tokio::spawn(async move {
                // Errors here are the client's (reset, timed out headers): nothing to do.
                let _ = conn.await;
                drop(slot);
            });
            continue;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            let handshake = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream));
            // A failed handshake (no TLS, a certificate the CA did not sign) is the client's.
            let Ok(Ok(stream)) = handshake.await else {
                return;
            };
            let cert = client_cert(stream.get_ref().1);
            let app = app.layer(Extension(ClientCert(cert)));
            let _ = watcher.watch(http(stream, app)).await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
}

/// `app` as one connection from `remote` on `slot` sees it: its client's address on every
/// request, whether that address is a member's (its peer bodies read from the members' share
/// before authentication: connections.rs, `PreAuthBodies`), and the reserve's restriction.
fn per_connection(
    app: &Router,
    remote: std::net::SocketAddr,
    slot: &Slot,
    c: &Connections,
) -> Router {
    let mut app = app.clone().layer(Extension(Remote(remote)));
    if c.is_member_host(remote.ip()) {
        app = app.layer(Extension(FromMemberHost));
    }
    if matches!(slot, Slot::Reserve(_)) {
        app = app.layer(Extension(Reserved));
    }
    app
}

/// One HTTP/1.1 connection of `app` on `io`, with the header read timeout.
fn http<I>(io: I, app: Router) -> http1::Connection<TokioIo<I>, TowerToHyperService<Router>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    http1::Builder::new()
        // Date is written on the API's answers only (src/api.rs, `any_origin`).
        .auto_date_header(false)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(app))
}

/// An accepted connection, its writes bounded by [`WRITE_TIMEOUT`].
fn timed(
    stream: tokio::net::TcpStream,
) -> std::pin::Pin<Box<tokio_io_timeout::TimeoutStream<tokio::net::TcpStream>>> {
    let _ = stream.set_nodelay(true);
    let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
    stream.set_write_timeout(Some(WRITE_TIMEOUT));
    Box::pin(stream)
}

/// The certificate a TLS client presented, with the intermediates it sent (a chain through an
/// intermediate CA names a member as well as one the root signed); `None` without one.
fn client_cert(conn: &rustls::ServerConnection) -> Option<Arc<PeerCert>> {
    let chain = conn.peer_certificates().filter(|c| !c.is_empty())?;
    let chain = chain.iter().map(|d| d.clone().into_owned()).collect();
    Some(Arc::new(PeerCert::new(chain)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::member_name;
    use crate::tls::test_pki::{ca, files, issue};
    use crate::wire::{AddressBook, HttpWire, Wire};

    /// Issue 30, on real HTTPS: node 1 asks "member 2" at an address where a server holding
    /// member 3's key answers. Before, node 1 checked the address alone (every lab
    /// certificate names 127.0.0.1) and took that answer as member 2's; now the handshake
    /// fails and member 3 is still reached as member 3.
    #[tokio::test]
    async fn a_members_key_answers_for_no_other_member() {
        let dir = tempfile::tempdir().unwrap();
        let root = ca("electd test CA", None);
        let (c1, k1) = issue(&["127.0.0.1", &member_name(1)], &root);
        let (c3, k3) = issue(&["127.0.0.1", &member_name(3)], &root);
        let node1 = Arc::new(Tls::load(&files(dir.path(), "n1", &root, &c1, &k1)).unwrap());
        let node3 = Arc::new(Tls::load(&files(dir.path(), "n3", &root, &c3, &k3)).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let app = Router::new().route("/peer/x", axum::routing::post(|| async { "member 3" }));
        let stop = tokio_util::sync::CancellationToken::new();
        let book = AddressBook::new([(2, addr.clone()), (3, addr.clone())].into());
        let conns = Arc::new(Connections::new(16, book.clone()));
        let server = tokio::spawn(serve(
            listener,
            app,
            Some(node3),
            conns,
            stop.clone().cancelled_owned(),
        ));
        let wire = HttpWire::new(
            "127.0.0.1:0".parse().unwrap(),
            book,
            Duration::from_secs(2),
            Some(node1),
        );
        let ask = |to| {
            let req = axum::http::Request::post("/peer/x")
                .body(axum::body::Bytes::new())
                .unwrap();
            wire.send(to, req, Duration::from_secs(2))
        };
        let as_3 = ask(3).await.expect("member 3 answers as itself");
        assert_eq!(as_3.body().as_ref(), b"member 3");
        let e = ask(2)
            .await
            .expect_err("member 3's key answered as member 2");
        assert!(e.to_string().contains("member 2"), "{e}");
        stop.cancel();
        server.await.unwrap().unwrap();
    }

    /// electd's clients (the peer transport, the client crate) drop idle connections before
    /// the server closes them, so that none reuses a connection the server is closing.
    #[test]
    fn clients_drop_idle_connections_before_the_server_does() {
        assert!(electd_client::CLIENT_IDLE < HEADER_READ_TIMEOUT);
    }
}
