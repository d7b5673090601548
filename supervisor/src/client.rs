//! A small client for the agent API over the Unix socket, used by the `airlock` CLI, the
//! end-to-end tests and the benchmark.

use crate::agent_api::{ErrorBody, ExecutionEvent, ExecutionRequest, ExecutionResponse};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use std::path::{Path, PathBuf};
use tokio::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to airlockd at {path}: {source}{hint}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
        hint: &'static str,
    },
    #[error("http error talking to airlockd: {0}")]
    Http(#[from] hyper::Error),
    #[error("cannot build the request: {0}")]
    Request(#[from] hyper::http::Error),
    #[error("airlockd answered {status}: {message}{}", hint.as_deref().map(|h| format!(" (hint: {h})")).unwrap_or_default())]
    Api {
        status: StatusCode,
        code: String,
        message: String,
        hint: Option<String>,
    },
    #[error("unexpected answer from airlockd: {0}")]
    Decode(String),
}

/// One HTTP/1.1 connection to the daemon (requests on it are sent one after another).
#[derive(Debug)]
pub struct Client {
    sender: SendRequest<Full<Bytes>>,
    /// The socket, to read why the daemon closed a connection it does not serve.
    path: PathBuf,
}

impl Client {
    pub async fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| ClientError::Connect {
                hint: match source.kind() {
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                        " (is airlockd running? start it with `airlockd`, or pass --socket)"
                    }
                    std::io::ErrorKind::PermissionDenied => {
                        " (the socket is mode 0660: are you in the daemon's group?)"
                    }
                    _ => "",
                },
                path: path.to_owned(),
                source,
            })?;
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Client {
            sender,
            path: path.to_owned(),
        })
    }

    /// Whether the daemon closed the connection (a kept connection is then not reused).
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Sends a raw request (for tests of malformed input).
    pub async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, ClientError> {
        let sent = match self.sender.ready().await {
            Ok(()) => self.sender.send_request(req).await,
            Err(e) => Err(e),
        };
        match sent {
            Ok(response) => Ok(response),
            Err(e) => Err(refusal(&self.path).await.unwrap_or(ClientError::Http(e))),
        }
    }

    /// Sends `req` and reads the whole answer: its status and body text.
    async fn text(
        &mut self,
        req: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, String), ClientError> {
        let resp = self.send(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// `GET path` → status and body text.
    pub async fn get(&mut self, path: &str) -> Result<(StatusCode, String), ClientError> {
        let req = Request::get(path)
            .header("host", "airlock")
            .body(Full::new(Bytes::new()))?;
        self.text(req).await
    }

    /// `POST path` with a JSON body → status and body text.
    pub async fn post(
        &mut self,
        path: &str,
        body: Bytes,
    ) -> Result<(StatusCode, String), ClientError> {
        let req = Request::post(path)
            .header("host", "airlock")
            .header("content-type", "application/json")
            .body(Full::new(body))?;
        self.text(req).await
    }

    /// `DELETE path` → status and body text.
    pub async fn delete(&mut self, path: &str) -> Result<(StatusCode, String), ClientError> {
        let req = Request::delete(path)
            .header("host", "airlock")
            .body(Full::new(Bytes::new()))?;
        self.text(req).await
    }

    /// `POST /v1/executions/<id>/resume`: finishes an interrupted execution by replay, and
    /// waits for the whole response.
    pub async fn resume(&mut self, id: &str) -> Result<ExecutionResponse, ClientError> {
        let encoded = percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC);
        let (status, body) = self
            .post(&format!("/v1/executions/{encoded}/resume"), Bytes::new())
            .await?;
        if !status.is_success() {
            return Err(api_error(status, body.as_bytes()));
        }
        serde_json::from_str(&body).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// `DELETE /v1/executions/<id>`: asks a running execution of this caller to stop.
    pub async fn cancel(&mut self, id: &str) -> Result<(), ClientError> {
        let req = Request::delete(format!("/v1/executions/{id}"))
            .header("host", "airlock")
            .body(Full::new(Bytes::new()))?;
        let resp = self.send(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            return Err(api_error(status, &bytes));
        }
        Ok(())
    }

    /// Runs a program and waits for the whole response.
    pub async fn execute(
        &mut self,
        request: &ExecutionRequest,
    ) -> Result<ExecutionResponse, ClientError> {
        let body = serde_json::to_vec(request).map_err(|e| ClientError::Decode(e.to_string()))?;
        let req = Request::post("/v1/executions")
            .header("host", "airlock")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))?;
        let resp = self.send(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            return Err(api_error(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// Runs a program and calls `on_event` for every event as it arrives; returns the final
    /// response.
    pub async fn execute_streaming(
        &mut self,
        request: &ExecutionRequest,
        mut on_event: impl FnMut(&ExecutionEvent),
    ) -> Result<ExecutionResponse, ClientError> {
        let body = serde_json::to_vec(request).map_err(|e| ClientError::Decode(e.to_string()))?;
        let req = Request::post("/v1/executions")
            .header("host", "airlock")
            .header("content-type", "application/json")
            .header("accept", "application/x-ndjson")
            .body(Full::new(Bytes::from(body)))?;
        match self.stream(req, |_, event| on_event(event)).await? {
            Some(response) => Ok(response),
            None => Err(ClientError::Decode(
                "the event stream ended without a result".into(),
            )),
        }
    }

    /// `GET /v1/executions/<id>/events?after=N`: the events of a detached (or kept)
    /// execution after number `after`, each with its number; with `follow`, until its result
    /// (returned), else only those there now.
    pub async fn events(
        &mut self,
        id: &str,
        after: u64,
        follow: bool,
        on_event: impl FnMut(u64, &ExecutionEvent),
    ) -> Result<Option<ExecutionResponse>, ClientError> {
        let encoded = percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC);
        let follow = if follow { "" } else { "&follow=false" };
        let req = Request::get(format!(
            "/v1/executions/{encoded}/events?after={after}{follow}"
        ))
        .header("host", "airlock")
        .body(Full::new(Bytes::new()))?;
        self.stream(req, on_event).await
    }

    /// Sends `req` and reads its NDJSON events until the result (returned) or the end.
    async fn stream(
        &mut self,
        req: Request<Full<Bytes>>,
        mut on_event: impl FnMut(u64, &ExecutionEvent),
    ) -> Result<Option<ExecutionResponse>, ClientError> {
        let resp = self.send(req).await?;
        let status = resp.status();
        let mut body = resp.into_body();
        if !status.is_success() {
            let bytes = body.collect().await?.to_bytes();
            return Err(api_error(status, &bytes));
        }
        let mut buf: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame?;
            let Some(data) = frame.data_ref() else {
                continue;
            };
            buf.extend_from_slice(data);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                let value: serde_json::Value = serde_json::from_slice(&line)
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                // Lines of a followed execution carry their number.
                let seq = value
                    .get("seq")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
                let event: ExecutionEvent = serde_json::from_value(value)
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                if let ExecutionEvent::Result(resp) = event {
                    return Ok(Some(*resp));
                }
                on_event(seq, &event);
            }
        }
        Ok(None)
    }
}

pub fn api_error(status: StatusCode, bytes: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => ClientError::Api {
            status,
            code: body.error.code.as_str().to_owned(),
            message: body.error.message,
            hint: body.error.hint,
        },
        Err(_) => ClientError::Api {
            status,
            code: "unknown".into(),
            message: String::from_utf8_lossy(bytes).into_owned(),
            hint: None,
        },
    }
}

/// Why the daemon closed a connection without serving it, if it did: a connection it does not
/// serve (a peer no principal admits, a principal with all its connections open) gets its
/// answer written at once, before anything is read, and is closed; a request sent on it may
/// fail to be written before the answer could be read. A new connection reads that answer
/// again; one the daemon serves answers nothing unasked, so this gives up after a short wait.
async fn refusal(path: &Path) -> Option<ClientError> {
    use tokio::io::AsyncReadExt;
    let mut stream = UnixStream::connect(path).await.ok()?;
    let mut answer = Vec::new();
    let mut limited = (&mut stream).take(64 * 1024);
    let read = limited.read_to_end(&mut answer);
    tokio::time::timeout(std::time::Duration::from_millis(500), read)
        .await
        .ok()?
        .ok()?;
    let text = std::str::from_utf8(&answer).ok()?;
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some(api_error(status, body.as_bytes()))
}
