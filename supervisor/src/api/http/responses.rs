//! Response bodies: JSON, the error shape every non-2xx answer has, and NDJSON events.

use crate::agent_api::{ApiError, ApiErrorCode, ErrorBody, ExecutionEvent};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

pub type ApiBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A response body that writes what a channel carries as it comes, each item turned into
/// bytes by `encode`; it ends when the channel closes.
pub(super) struct ChannelBody<T> {
    rx: mpsc::Receiver<T>,
    encode: fn(T) -> Bytes,
}

impl<T> ChannelBody<T> {
    pub(super) fn new(rx: mpsc::Receiver<T>, encode: fn(T) -> Bytes) -> ChannelBody<T> {
        ChannelBody { rx, encode }
    }
}

/// Execution events as NDJSON lines, as they happen.
pub(super) fn event_body(rx: mpsc::Receiver<ExecutionEvent>) -> ChannelBody<ExecutionEvent> {
    ChannelBody::new(rx, |event| {
        let mut line = serde_json::to_vec(&event).unwrap_or_else(|_| b"{}".to_vec());
        line.push(b'\n');
        Bytes::from(line)
    })
}

impl<T> Body for ChannelBody<T> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => Poll::Ready(Some(Ok(Frame::data((self.encode)(item))))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Reads a request body of at most `limit` bytes as the JSON of `T` (`what` it is, for the
/// message), or the error answer, whose hint shows what to send.
pub(super) async fn json_body<T: serde::de::DeserializeOwned>(
    req: hyper::Request<hyper::body::Incoming>,
    limit: usize,
    what: &str,
    hint: &str,
) -> Result<T, Response<ApiBody>> {
    let body = whole_body(timed_body(req), limit, what, hint).await?;
    serde_json::from_slice(&body).map_err(|e| invalid_json(&e, what, hint))
}

/// Reads all of `body`, at most `limit` bytes (`what` it is, for the message), or the error
/// answer: `413 request_too_large` past the limit, `400 bad_request` for a body that failed
/// (or did not arrive within `body_timeout`).
pub(super) async fn whole_body(
    body: TimedBody,
    limit: usize,
    what: &str,
    hint: &str,
) -> Result<Bytes, Response<ApiBody>> {
    let body = match http_body_util::Limited::new(body, limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return Err(error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                ApiErrorCode::RequestTooLarge,
                format!("{what} over {limit} bytes"),
                Some(hint.into()),
            ));
        }
        Err(e) => {
            return Err(error_response(
                StatusCode::BAD_REQUEST,
                ApiErrorCode::BadRequest,
                format!("cannot read the request body: {e}"),
                Some(hint.into()),
            ));
        }
    };
    Ok(body)
}

/// How long a request's body may take to arrive once its head has (`[daemon] body_timeout`),
/// put in every request's extensions by the routes.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyTimeout(pub(super) std::time::Duration);

/// The body of `req`, which fails once it has taken longer than the request's
/// [`BodyTimeout`] to arrive (a request without one gets the policy's default).
pub(super) fn timed_body(req: hyper::Request<hyper::body::Incoming>) -> TimedBody {
    let timeout = req.extensions().get::<BodyTimeout>().map_or(
        std::time::Duration::from_millis(airlock_policy::DaemonSettings::DEFAULT_BODY_TIMEOUT_MS),
        |t| t.0,
    );
    TimedBody::new(req.into_body(), timeout)
}

/// A request body with a deadline ([`timed_body`]): a client that sends a head and then its
/// body slowly, or not at all, holds its connection only that long.
pub(super) struct TimedBody {
    inner: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: std::time::Duration,
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum BodyError {
    #[error(
        "the body did not arrive within {0:?} ([daemon] body_timeout); send the whole body at once"
    )]
    TimedOut(std::time::Duration),
    #[error("{0}")]
    Read(#[from] hyper::Error),
}

impl TimedBody {
    /// `body`, failing once it has taken longer than `timeout` to arrive.
    pub(super) fn new(body: hyper::body::Incoming, timeout: std::time::Duration) -> TimedBody {
        TimedBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
        }
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Pending => {
                if self.deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(BodyError::TimedOut(self.timeout))));
                }
                Poll::Pending
            }
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(BodyError::from))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// `400 invalid_json` for a body that is not the JSON of `what`, with the hint of what to send.
pub(super) fn invalid_json(e: &serde_json::Error, what: &str, hint: &str) -> Response<ApiBody> {
    error_response(
        StatusCode::BAD_REQUEST,
        ApiErrorCode::InvalidJson,
        format!("the body is not {what}: {e}"),
        Some(hint.into()),
    )
}

pub fn json_response<T: serde::Serialize>(status: StatusCode, value: &T) -> Response<ApiBody> {
    let body = match serde_json::to_vec(value) {
        Ok(b) => b,
        Err(e) => {
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                ApiErrorCode::Internal,
                format!("cannot serialise the response: {e}"),
                None,
            );
        }
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub fn error_response(
    status: StatusCode,
    code: ApiErrorCode,
    message: String,
    hint: Option<String>,
) -> Response<ApiBody> {
    let body = ErrorBody {
        error: ApiError {
            code,
            message,
            hint,
        },
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(bytes)).boxed());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
