//! `airlock mcp`: the facade on stdio. Each JSON-RPC message read from stdin is POSTed to
//! `/mcp` on the daemon's socket, and what the daemon answers (one JSON message, or an event
//! stream of progress notifications ending with the answer) is written to stdout, one message
//! per line. The relay connects as the user who started it, so that user's principal decides
//! what the agent sees, exactly as for any other client of the socket; it understands nothing
//! of MCP beyond routing (and forgets nothing the daemon does not already keep).
//!
//! Requests run concurrently (a long `execute` does not hold up a `ping`); a
//! `notifications/cancelled` drops the cancelled request's connection, which stops its program
//! in the daemon.

use crate::client::{Client, ClientError};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::CONTENT_TYPE;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

/// The largest message read from stdin, and the largest answer or event accepted from the
/// daemon (a response may carry a program's whole result, which the policy caps well below).
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Connections to the daemon kept open between exchanges.
const IDLE_CONNECTIONS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("cannot read stdin: {0}")]
    Stdin(#[source] std::io::Error),
    #[error(
        "a message on stdin is longer than {MAX_MESSAGE_BYTES} bytes; MCP messages are one JSON object per line"
    )]
    MessageTooLong,
}

/// Why one exchange with the daemon got no answer to relay; the message goes to the client as
/// the request's JSON-RPC error.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The request could not be made (a header value the daemon handed out that is not one).
    #[error("{0}")]
    Request(hyper::http::Error),
    #[error("cannot read the daemon's answer: {0}")]
    Read(Box<dyn std::error::Error + Send + Sync>),
    #[error("an event from the daemon is longer than {MAX_MESSAGE_BYTES} bytes")]
    EventTooLong,
    #[error("airlockd answered {status}: {body}")]
    Refused {
        status: hyper::StatusCode,
        body: String,
    },
}

/// What the relay remembers of the conversation: the protocol version the client and daemon
/// agreed (sent back on every request, as Streamable HTTP asks) and a session id, should the
/// daemon ever hand one out.
#[derive(Debug, Default)]
struct Conversation {
    protocol_version: Option<String>,
    session: Option<String>,
}

/// Relays messages between `input`/`output` and the daemon at `socket` until `input` ends,
/// then waits for the answers still coming.
pub async fn relay(
    socket: &Path,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Result<(), RelayError> {
    let (out_tx, out_rx) = mpsc::channel::<String>(256);
    let writer = tokio::spawn(write_lines(output, out_rx));
    let conversation = Arc::new(Mutex::new(Conversation::default()));
    let mut in_flight: JoinSet<()> = JoinSet::new();
    let requests: Arc<Mutex<HashMap<String, AbortHandle>>> = Arc::default();
    let idle: Arc<Mutex<Vec<Client>>> = Arc::default();
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    let result = loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_MESSAGE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => break Ok(()),
            Ok(_) if line.len() > MAX_MESSAGE_BYTES => break Err(RelayError::MessageTooLong),
            Ok(_) => {}
            Err(e) => break Err(RelayError::Stdin(e)),
        }
        while in_flight.try_join_next().is_some() {}
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(text) {
            Ok(m) => m,
            Err(e) => {
                let _ = out_tx
                    .send(error_line(&Value::Null, -32700, &format!("not JSON: {e}")))
                    .await;
                continue;
            }
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        if method == "notifications/cancelled" {
            // Stateless: a request is cancelled by closing its own connection.
            let id = message
                .pointer("/params/requestId")
                .map(Value::to_string)
                .unwrap_or_default();
            if let Some(task) = lock(&requests).remove(&id) {
                task.abort();
            }
            continue;
        }
        let id = message.get("id").cloned();
        let exchange = Exchange {
            socket: socket.to_owned(),
            conversation: conversation.clone(),
            idle: idle.clone(),
            out: out_tx.clone(),
            body: Bytes::copy_from_slice(text.as_bytes()),
            id: id.clone(),
        };
        // The handshake settles the protocol version every later request carries, so it is
        // finished before the next message is read.
        if matches!(method, "initialize" | "server/discover") {
            exchange.run().await;
            continue;
        }
        let handle = in_flight.spawn(exchange.run());
        if let Some(id) = id.filter(|_| !method.is_empty()) {
            let mut requests = lock(&requests);
            requests.retain(|_, task| !task.is_finished());
            requests.insert(id.to_string(), handle);
        }
    };
    while in_flight.join_next().await.is_some() {}
    drop(out_tx);
    let _ = writer.await;
    result
}

/// Stdin and stdout for the relay. An MCP client starts `airlock mcp` with pipes, which are
/// read and written on the event loop itself; anything else (a terminal, a file) goes through
/// tokio's blocking stdio. (Tokio's stdio hands every read and write to a thread of its
/// blocking pool; on a pipe that hand-off was most of the relay's latency.)
pub fn stdio() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    // Duplicates of fds 0 and 1: the pipe types make them non-blocking, which is shared with
    // the originals but not with the client's ends of the pipes.
    let input: Box<dyn AsyncRead + Unpin + Send> = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let output: Box<dyn AsyncWrite + Unpin + Send> = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
    {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One message and its answer.
struct Exchange {
    socket: PathBuf,
    conversation: Arc<Mutex<Conversation>>,
    /// Connections to the daemon that finished an exchange, kept for the next ones (at most
    /// [`IDLE_CONNECTIONS`]); a connection whose exchange was cut off is not reused.
    idle: Arc<Mutex<Vec<Client>>>,
    out: mpsc::Sender<String>,
    body: Bytes,
    /// The request's id (`None` for a notification or a response).
    id: Option<Value>,
}

impl Exchange {
    async fn run(self) {
        if let Err(error) = self.exchange().await {
            // A request the daemon never answered still gets an answer, so the client does
            // not wait for ever; a notification's failure has nobody to tell.
            if let Some(id) = &self.id {
                let _ = self
                    .out
                    .send(error_line(id, -32603, &error.to_string()))
                    .await;
            }
        }
    }

    async fn exchange(&self) -> Result<(), ExchangeError> {
        let reused = {
            let mut idle = lock(&self.idle);
            idle.retain(|c| !c.is_closed());
            idle.pop()
        };
        let mut client = match reused {
            Some(client) => client,
            None => Client::connect(&self.socket).await?,
        };
        let mut req = Request::post("/mcp")
            .header("host", "airlock")
            .header(CONTENT_TYPE, "application/json")
            .header("accept", "application/json, text/event-stream");
        {
            let conversation = lock(&self.conversation);
            if let Some(version) = &conversation.protocol_version {
                req = req.header("mcp-protocol-version", version);
            }
            if let Some(session) = &conversation.session {
                req = req.header("mcp-session-id", session);
            }
        }
        let req = req
            .body(Full::new(self.body.clone()))
            .map_err(ExchangeError::Request)?;
        let resp = client.send(req).await?;
        if let Some(session) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            lock(&self.conversation).session = Some(session.to_owned());
        }
        let status = resp.status();
        let kind = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mut body = resp.into_body();
        if kind.starts_with("text/event-stream") {
            let mut events = EventStream::default();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(ClientError::from)?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                for message in events.push(&data)? {
                    self.deliver(&message).await;
                }
            }
            self.keep(client);
            return Ok(());
        }
        let bytes = http_body_util::Limited::new(body, MAX_MESSAGE_BYTES)
            .collect()
            .await
            .map_err(ExchangeError::Read)?
            .to_bytes();
        self.keep(client);
        if kind.starts_with("application/json") && !bytes.is_empty() {
            self.deliver(&String::from_utf8_lossy(&bytes)).await;
            return Ok(());
        }
        if status.is_success() {
            return Ok(());
        }
        Err(ExchangeError::Refused {
            status,
            body: String::from_utf8_lossy(&bytes).trim().to_owned(),
        })
    }

    fn keep(&self, client: Client) {
        let mut idle = lock(&self.idle);
        if idle.len() < IDLE_CONNECTIONS {
            idle.push(client);
        }
    }

    /// Writes one message from the daemon to stdout, on one line; notes the protocol version
    /// of a handshake's answer.
    async fn deliver(&self, text: &str) {
        let Ok(message) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let version = message
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
            .or_else(|| {
                message
                    .pointer("/result/supportedVersions/0")
                    .and_then(Value::as_str)
            });
        if let Some(version) = version {
            lock(&self.conversation).protocol_version = Some(version.to_owned());
        }
        let _ = self.out.send(message.to_string()).await;
    }
}

/// Server-sent events, parsed as they arrive: each event's `data` lines joined, empty ones
/// (priming events, keep-alives) skipped.
#[derive(Debug, Default)]
struct EventStream {
    pending: Vec<u8>,
    data: String,
}

impl EventStream {
    fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, ExchangeError> {
        self.pending.extend_from_slice(chunk);
        let mut messages = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    messages.push(std::mem::take(&mut self.data));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        if self.pending.len() + self.data.len() > MAX_MESSAGE_BYTES {
            return Err(ExchangeError::EventTooLong);
        }
        Ok(messages)
    }
}

fn error_line(id: &Value, code: i64, message: &str) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }).to_string()
}

async fn write_lines(mut output: impl AsyncWrite + Unpin, mut lines: mpsc::Receiver<String>) {
    while let Some(line) = lines.recv().await {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn events_are_split_on_blank_lines_and_empty_ones_skipped() {
        let mut s = EventStream::default();
        assert!(s.push(b"id: 0\nretry: 3000\ndata:\n\n").unwrap().is_empty());
        assert!(s.push(b"data: {\"a\":").unwrap().is_empty());
        let got = s.push(b"1}\n\ndata: {\"b\":2}\r\n\r\n").unwrap();
        assert_eq!(got, vec!["{\"a\":1}".to_owned(), "{\"b\":2}".to_owned()]);
    }

    #[tokio::test]
    async fn a_daemon_that_is_not_there_still_answers_every_request() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("missing.sock");
        let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\nnot json\n";
        let (reader, mut writer) = tokio::io::duplex(1 << 16);
        let (out, mut out_read) = tokio::io::duplex(1 << 16);
        writer.write_all(input).await.unwrap();
        drop(writer);
        relay(&socket, reader, out).await.unwrap();
        let mut text = String::new();
        out_read.read_to_string(&mut text).await.unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let request = lines.iter().find(|l| l["id"] == json!(7)).unwrap();
        assert!(
            request["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cannot connect to airlockd"),
            "{request}"
        );
        assert!(
            lines.iter().any(|l| l["error"]["code"] == json!(-32700)),
            "{text}"
        );
    }
}
