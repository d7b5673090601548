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

/// A response body that writes execution events as NDJSON lines as they happen.
pub(super) struct EventBody {
    pub(super) rx: mpsc::Receiver<ExecutionEvent>,
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                let mut line = serde_json::to_vec(&event).unwrap_or_else(|_| b"{}".to_vec());
                line.push(b'\n');
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(line)))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
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
