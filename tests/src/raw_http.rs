//! Hand-written HTTP/1.1 requests over the daemon's Unix socket, byte for byte: for request
//! targets no HTTP client would send (raw `..`, NUL bytes, overlong paths).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The answer to one raw request: status code (0 if the daemon answered no status line)
/// and everything after the headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    pub status: u16,
    pub body: String,
}

/// Sends `GET <target>` with `Connection: close` and reads the whole answer. `target` goes on
/// the wire exactly as given.
pub fn get(socket: &Path, target: &[u8]) -> std::io::Result<RawResponse> {
    let mut request = b"GET ".to_vec();
    request.extend_from_slice(target);
    request.extend_from_slice(b" HTTP/1.1\r\nHost: airlock\r\nConnection: close\r\n\r\n");
    let (status, body) = send(socket, &request)?;
    Ok(RawResponse { status, body })
}

/// Sends `request` (a whole request, which should say `Connection: close`) byte for byte and
/// reads the whole answer: its status code (0 if the daemon answered no status line) and
/// everything after the headers.
pub fn send(socket: &Path, request: &[u8]) -> std::io::Result<(u16, String)> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(request)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}
