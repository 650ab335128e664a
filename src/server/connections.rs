//! Accepting connections, with the limits a service facing careless or
//! hostile clients needs: at most `max_connections` open at once (the next
//! one is answered 503 and closed, instead of the process running out of
//! file descriptors), a time limit on sending a request's headers (which
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
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
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

/// Serves `app` on `listener` until `stop` resolves, then waits up to
/// `drain_timeout` for requests in flight.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
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
        let Ok(permit) = open.clone().try_acquire_owned() else {
            if let Ok(refusal) = refusals.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream).await;
                    drop(refusal);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
        let connection = http.serve_connection(io, TowerToHyperService::new(app.clone()));
        let watched = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = watched.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight when the stop's time ran out");
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
