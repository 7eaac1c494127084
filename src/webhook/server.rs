//! HTTPS: accepts connections, bounds each one's handshake, headers and body, and routes
//! `POST /mutate`, `POST /mutate/namespace-enabled`, `GET /healthz` and `GET /readyz`. Every
//! admission answer is a 200 with an AdmissionReview (never a 500: under `failurePolicy: Fail`
//! an error blocks the deploy).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::review::{self, Policy, Scope, Verdict};

/// Largest review read. The API server refuses request bodies over 3 MiB
/// (`--max-request-body-bytes`, k8s.io/apiserver's default 3 * 1024 * 1024), so a pod's review
/// (the pod, no old object on CREATE) fits with room; a larger body is not read further.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// Most bytes of an oversized body read (and dropped) before the connection is given up.
pub const MAX_DISCARD: usize = 4 * MAX_BODY;
/// The whole TLS handshake. The API server's webhook timeout is 10 s here (`timeoutSeconds`):
/// a handshake slower than that is answered by nobody.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Request headers, from the connection's first byte (or the previous response) on.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The body, once the headers are in: the same 10 s the API server waits in all.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; the API server keeps a few open per replica, more wait.
pub const MAX_CONNECTIONS: usize = 256;

/// What every connection shares.
pub struct Shared {
    pub policy: Policy,
    /// Reviews answered, and the time spent on them (the webhook's own share of admission
    /// latency), logged at shutdown.
    pub stats: std::sync::Mutex<Stats>,
}

/// Counters for the log.
#[derive(Debug, Default)]
pub struct Stats {
    pub reviews: u64,
    pub injected: u64,
    pub total: Duration,
    pub max: Duration,
}

/// Serves until `stop`, then lets connections in flight finish (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
    stop: CancellationToken,
    tracker: &TaskTracker,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = stop.cancelled() => return,
            p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        };
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and the like: wait a moment rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        let stop = stop.clone();
        tracker.spawn(async move {
            let _permit = permit;
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "tls handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "tls handshake timed out");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |req| handle(req, shared.clone()));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(tls), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "connection ended");
                },
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                }
            }
        });
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let scope = match (req.method(), req.uri().path()) {
        (&Method::GET, "/healthz" | "/readyz") => return Ok(text(StatusCode::OK, "ok\n")),
        (&Method::POST, "/mutate") => Scope::Other,
        (&Method::POST, "/mutate/namespace-enabled") => Scope::NamespaceEnabled,
        _ => return Ok(text(StatusCode::NOT_FOUND, "not found\n")),
    };
    let start = Instant::now();
    let body = tokio::time::timeout(BODY_TIMEOUT, read_body(req.into_body())).await;
    let reviewed = match body {
        Ok(Ok(bytes)) => review::review(&bytes, scope, &shared.policy),
        Ok(Err((prefix, why))) => review::invalid(
            "admission.k8s.io/v1",
            review::uid_in_prefix(&prefix).unwrap_or_default(),
            why,
        ),
        Err(_) => review::invalid(
            "admission.k8s.io/v1",
            String::new(),
            format!("body not read within {BODY_TIMEOUT:?}"),
        ),
    };
    let took = start.elapsed();
    match &reviewed.verdict {
        Verdict::Injected => tracing::info!(pod = %reviewed.object, ?took, "injected"),
        Verdict::Skipped(why) => {
            tracing::info!(pod = %reviewed.object, reason = %why, "InjectionSkipped")
        }
        Verdict::NotSelected(why) => {
            tracing::debug!(object = %reviewed.object, reason = why, "not selected")
        }
        Verdict::Invalid(why) => tracing::warn!(reason = %why, "bad review, admitted unchanged"),
    }
    if let Ok(mut s) = shared.stats.lock() {
        s.reviews += 1;
        s.injected += u64::from(reviewed.verdict == Verdict::Injected);
        s.total += took;
        s.max = s.max.max(took);
    }
    let mut r = Response::new(Full::new(Bytes::from(reviewed.response.to_string())));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// The body, at most [`MAX_BODY`] bytes; else what came first (for the uid) and why it stopped.
/// The rest of a larger body is read and dropped, up to [`MAX_DISCARD`], so that the answer
/// reaches a client still writing (closing on unread bytes resets the connection, answer and all).
async fn read_body(mut body: Incoming) -> Result<Bytes, (Bytes, String)> {
    let mut kept = bytes::BytesMut::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                kept.truncate(4096);
                return Err((kept.freeze(), format!("body not read: {e}")));
            }
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total += data.len();
        if total <= MAX_BODY {
            kept.extend_from_slice(&data);
        } else {
            kept.truncate(4096);
            if total > MAX_DISCARD {
                break;
            }
        }
    }
    if total > MAX_BODY {
        return Err((kept.freeze(), format!("body larger than {MAX_BODY} bytes")));
    }
    Ok(kept.freeze())
}
