//! Accepting connections, with the limits a service facing careless or
//! hostile clients needs: at most `max_connections` open at once (at the
//! cap, the keep-alive connection idle the longest is closed to let the
//! next one in; with none idle, the next one is answered 503 and closed,
//! instead of the process running out of file descriptors), a time limit on sending a request's headers (which
//! also closes keep-alive connections left idle), and a limit on silence in
//! the middle of a request or response. A stop lets requests in flight
//! finish.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use super::keep_alive::OpenConnections;
use tokio::time::{Instant, Sleep};

/// How connections are bounded.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    /// How long a stop waits for requests in flight.
    pub drain_timeout: Duration,
}

/// Refusals written at once to connections over the cap; beyond this many
/// at a time, they are closed without an answer.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;

const OVER_CAPACITY_BODY: &str = concat!(
    r#"{"type":"urn:ctasd:problem:too-many-connections","title":"Too many connections","#,
    r#""status":503,"detail":"the server has as many connections open as it serves; retry","#,
    r#""code":"TOO_MANY_CONNECTIONS"}"#,
);

fn over_capacity() -> String {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{OVER_CAPACITY_BODY}",
        OVER_CAPACITY_BODY.len()
    )
}

/// How long a newcomer waits for the place of the idle connection closed
/// for it before it is answered 503.
const HANDOVER_WAIT: Duration = Duration::from_millis(500);

/// Serves `app` on `listener` until `stop` resolves, then waits up to
/// `drain_timeout` for requests in flight.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) {
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let (stopping, stopped) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let server = Arc::new(Server {
        http,
        app,
        limits,
        open: OpenConnections::default(),
        stopped,
    });
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, or a connection reset before
                    // it was accepted: keep serving the others.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        if let Ok(place) = places.clone().try_acquire_owned() {
            server.spawn(stream, place);
            continue;
        }
        let Ok(refusal) = refusals.clone().try_acquire_owned() else {
            continue;
        };
        // At the cap: an idle keep-alive connection makes room, if any.
        let handover = server
            .open
            .close_the_idlest()
            .then(|| (server.clone(), places.clone()));
        tokio::spawn(async move {
            if let Some((server, places)) = handover
                && let Ok(Ok(place)) =
                    tokio::time::timeout(HANDOVER_WAIT, places.acquire_owned()).await
            {
                server.spawn(stream, place);
            } else {
                refuse(stream).await;
            }
            drop(refusal);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    let every_place = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, places.acquire_many(every_place))
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight when the stop's time ran out");
    }
}

/// What every connection is served with.
struct Server {
    http: hyper::server::conn::http1::Builder,
    app: Router,
    limits: ConnectionLimits,
    open: OpenConnections,
    stopped: watch::Receiver<bool>,
}

impl Server {
    /// Serves one connection in its own task, holding `place` until it
    /// ends: closed gracefully (its answer in flight finished first) when
    /// the server stops or when it is picked to make room.
    fn spawn(self: &Arc<Self>, stream: TcpStream, place: OwnedSemaphorePermit) {
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(IdleTimeout::new(stream, self.limits.idle_timeout));
        let (id, tracked) = self.open.opened();
        let answer = {
            let (server, tracked) = (self.clone(), tracked.clone());
            hyper::service::service_fn(move |request| {
                let answering = server.open.answering(&tracked);
                let app = server.app.clone();
                async move {
                    let response = app.oneshot(request).await;
                    drop(answering);
                    response
                }
            })
        };
        let connection = self.http.serve_connection(io, answer);
        let server = self.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            let mut stopped = server.stopped.clone();
            let mut closing = false;
            loop {
                tokio::select! {
                    ended = connection.as_mut() => {
                        if let Err(error) = ended {
                            tracing::debug!(%error, "connection ended with an error");
                        }
                        break;
                    }
                    () = tracked.picked(), if !closing => {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                    _ = stopped.wait_for(|stop| *stop), if !closing => {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
            server.open.closed(id);
            drop(place);
        });
    }
}

/// Answers a connection over the cap with 503 and closes it.
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(over_capacity().as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// Raises this process's open-file limit to what the system allows, and
/// returns how many connections fit under it with room for the store's and
/// the catalogs' own connections and files.
pub fn connections_that_fit(wanted: usize) -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    const RESERVED: u64 = 256;
    let mut limit = getrlimit(Resource::Nofile);
    if let Some(hard) = limit.maximum
        && limit.current.is_some_and(|soft| soft < hard)
    {
        limit.current = Some(hard);
        if let Err(error) = setrlimit(Resource::Nofile, limit) {
            tracing::debug!(%error, "could not raise the open-file limit");
        }
        limit = getrlimit(Resource::Nofile);
    }
    let Some(soft) = limit.current else {
        return wanted;
    };
    let fits = usize::try_from(soft.saturating_sub(RESERVED))
        .unwrap_or(usize::MAX)
        .max(1);
    if fits < wanted {
        tracing::warn!(
            wanted,
            serving = fits,
            open_file_limit = soft,
            "the open-file limit is too low for the configured connection cap; serving fewer"
        );
        return fits;
    }
    wanted
}

/// A stream that fails with `TimedOut` once no byte has moved either way
/// for `limit`: a client that stopped sending its body, or stopped reading
/// its answer, does not hold a connection forever.
struct IdleTimeout<S> {
    inner: S,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<S> IdleTimeout<S> {
    fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
        }
    }

    fn moved(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.limit);
    }

    /// After the inner stream answered `Pending`: whether silence has lasted too long.
    fn check_silence<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection idle for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                Poll::Ready(result)
            }
            Poll::Pending => self.check_silence(cx),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(result) => {
                if result.as_ref().is_ok_and(|n| *n > 0) {
                    self.moved();
                }
                Poll::Ready(result)
            }
            Poll::Pending => self.check_silence(cx),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.check_silence(cx),
            ready => ready,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => {
                if result.as_ref().is_ok_and(|n| *n > 0) {
                    self.moved();
                }
                Poll::Ready(result)
            }
            Poll::Pending => self.check_silence(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
