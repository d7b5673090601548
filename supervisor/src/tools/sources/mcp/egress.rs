//! The one way out of a stdio server with a `network` list: an HTTP proxy the daemon runs on
//! a listener inside the server's own (otherwise empty) network namespace, at
//! `127.0.0.1:3128` there, which the launcher made and handed over. The server finds it in
//! `HTTPS_PROXY`/`HTTP_PROXY`.
//!
//! Each request names a host: `CONNECT host:port` (HTTPS and any other TCP) or an absolute
//! `http://` URL (plain HTTP, forwarded with `Connection: close` and the URL's `Host`). The
//! host must match the server's list ([`ServerNetwork::allows`]); the proxy resolves it
//! itself (the server has no DNS) and connects only to addresses that are not the host's own
//! (loopback, link-local, …: [`unreachable_address`]), so a listed name that resolves to
//! `127.0.0.1` reaches nothing. Everything refused is logged with the server and the host,
//! and answered `403` with the reason.
//!
//! Bounded: a request head of [`MAX_HEAD`] bytes read within [`HEAD_TIMEOUT`], [`MAX_TUNNELS`]
//! connections at once per server; the proxy ends with the server's process.

use airlock_policy::ServerNetwork;
use airlock_policy::sources::network::{is_host_name, unreachable_address};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::{debug, warn};

/// The largest request head read (the request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a name may take to resolve, and a connection to open.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections through the proxy at once, per server (each holds two of the daemon's
/// descriptors); more are answered `503`.
pub const MAX_TUNNELS: usize = 64;

/// Resolves a name to addresses (the system's resolver; tests give their own).
pub type Resolver = Arc<
    dyn Fn(String, u16) -> Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>
        + Send
        + Sync,
>;

/// The system's resolver (`getaddrinfo`, on tokio's blocking pool).
pub fn system_resolver() -> Resolver {
    Arc::new(|host, port| {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        })
    })
}

/// One server's proxy.
#[derive(Clone)]
pub struct Egress {
    /// The server's name, for the log and the answers.
    pub server: String,
    pub network: Arc<ServerNetwork>,
    pub resolver: Resolver,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("server", &self.server)
            .field("network", &self.network)
            .finish_non_exhaustive()
    }
}

/// Accepts on `listener` until the returned task is aborted (with the server's process).
/// Connections in progress end with it.
pub fn serve(
    listener: std::net::TcpListener,
    egress: Egress,
) -> io::Result<tokio::task::JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_TUNNELS));
    Ok(tokio::spawn(async move {
        // Dropped (and so aborted) with this task.
        let mut tunnels = tokio::task::JoinSet::new();
        loop {
            let (client, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, most likely: wait rather than spin.
                    warn!(server = %egress.server, error = %e, "the egress proxy cannot accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            while tunnels.try_join_next().is_some() {}
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                warn!(server = %egress.server, limit = MAX_TUNNELS, "refused a connection: the server has as many open as its proxy allows");
                let why = format!(
                    "server `{}` has {MAX_TUNNELS} connections open through the daemon's proxy already; close one first",
                    egress.server
                );
                tunnels.spawn(async move {
                    let mut client = client;
                    let _ = answer(&mut client, 503, &why).await;
                });
                continue;
            };
            let egress = egress.clone();
            tunnels.spawn(async move {
                egress.handle(client).await;
                drop(slot);
            });
        }
    }))
}

/// What a client asked to reach.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    host: String,
    port: u16,
    /// For plain HTTP: the request head to send upstream (origin-form, `Host` from the URL,
    /// `Connection: close`). `None` for `CONNECT`.
    forward: Option<Vec<u8>>,
}

/// Why a request is not carried out: the status and the text of the answer.
#[derive(Debug)]
struct Refusal {
    status: u16,
    why: String,
}

fn refuse(status: u16, why: impl Into<String>) -> Refusal {
    Refusal {
        status,
        why: why.into(),
    }
}

impl Egress {
    async fn handle(&self, mut client: TcpStream) {
        let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
            Ok(Ok(Some(head))) => head,
            Ok(Ok(None)) => return,
            Ok(Err(refusal)) => {
                let _ = answer(&mut client, refusal.status, &refusal.why).await;
                return;
            }
            Err(_) => {
                let _ = answer(&mut client, 408, "no request head within 10 s").await;
                return;
            }
        };
        let (head_len, rest) = head;
        let target = match parse_request(&rest[..head_len]) {
            Ok(target) => target,
            Err(refusal) => {
                let _ = answer(&mut client, refusal.status, &refusal.why).await;
                return;
            }
        };
        let leftover = &rest[head_len..];
        let upstream = match self.open(&target).await {
            Ok(upstream) => upstream,
            Err(refusal) => {
                if refusal.status == 403 {
                    warn!(server = %self.server, host = %target.host, port = target.port, reason = %refusal.why, "refused a connection of the server");
                } else {
                    debug!(server = %self.server, host = %target.host, port = target.port, reason = %refusal.why, "a connection of the server failed");
                }
                let _ = answer(&mut client, refusal.status, &refusal.why).await;
                return;
            }
        };
        debug!(server = %self.server, host = %target.host, port = target.port, "connection through the egress proxy");
        let mut upstream = upstream;
        let started = match &target.forward {
            None => client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .and(Ok(())),
            Some(head) => upstream.write_all(head).await,
        };
        if started.is_err() || upstream.write_all(leftover).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }

    /// A connection to what `target` names, if the list allows it and it resolves to an
    /// address a server may reach.
    async fn open(&self, target: &Target) -> Result<TcpStream, Refusal> {
        let Target { host, port, .. } = target;
        let port = *port;
        if let Some(why) = host.parse::<IpAddr>().ok().and_then(unreachable_address) {
            return Err(refuse(
                403,
                format!("{host} is {why}, which no confined server may reach"),
            ));
        }
        if self.network.allows(host, port).is_none() {
            return Err(refuse(
                403,
                format!(
                    "server `{}` may not connect to {host}:{port}: it is not in the server's `network` list (the operator adds \"{host}:{port}\" to it in the policy)",
                    self.server
                ),
            ));
        }
        let addresses = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::time::timeout(RESOLVE_TIMEOUT, (self.resolver)(host.clone(), port))
                .await
                .map_err(|_| refuse(504, format!("resolving {host} took longer than 5 s")))?
                .map_err(|e| refuse(502, format!("cannot resolve {host}: {e}")))?,
        };
        let (allowed, denied): (Vec<SocketAddr>, Vec<SocketAddr>) = addresses
            .into_iter()
            .partition(|a| unreachable_address(a.ip()).is_none());
        if allowed.is_empty() {
            let Some(first) = denied.first() else {
                return Err(refuse(502, format!("{host} has no address")));
            };
            let why = unreachable_address(first.ip()).unwrap_or("an address of the host");
            return Err(refuse(
                403,
                format!(
                    "{host} resolves to {} ({why}), which no confined server may reach",
                    first.ip()
                ),
            ));
        }
        let mut last = None;
        for address in allowed {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = Some(format!("{address}: {e}")),
                Err(_) => last = Some(format!("{address}: no answer within 10 s")),
            }
        }
        Err(refuse(
            502,
            format!(
                "cannot connect to {host}:{port} ({})",
                last.unwrap_or_default()
            ),
        ))
    }
}

/// Reads up to the end of the request head: `(head length, bytes read)`, `None` if the client
/// closed first.
async fn read_head(client: &mut TcpStream) -> Result<Option<(usize, Vec<u8>)>, Refusal> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| refuse(400, format!("reading the request: {e}")))?;
        if n == 0 {
            return Ok(None);
        }
        let searched_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf[searched_from..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
        {
            return Ok(Some((searched_from + end + 4, buf)));
        }
        if buf.len() > MAX_HEAD {
            return Err(refuse(
                431,
                format!("the request head is longer than {MAX_HEAD} bytes"),
            ));
        }
    }
}

/// The target of a request head (the whole head, through its blank line).
fn parse_request(head: &[u8]) -> Result<Target, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(refuse(400, "an incomplete request head")),
        Err(e) => return Err(refuse(400, format!("not an HTTP request: {e}"))),
    }
    let (Some(method), Some(uri)) = (request.method, request.path) else {
        return Err(refuse(400, "no request line"));
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(uri, None)?;
        return Ok(Target {
            host,
            port,
            forward: None,
        });
    }
    let Some(rest) = strip_prefix_ignore_case(uri, "http://") else {
        return Err(refuse(
            400,
            "this is the daemon's proxy: send `CONNECT host:port` (HTTPS) or an absolute `http://` URL",
        ));
    };
    let (authority_text, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let (host, port) = authority(authority_text, Some(80))?;
    let mut forward = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        // Hop-by-hop headers and the Host (taken from the URL, so a request cannot name one
        // host to the proxy and another to a shared front end).
        if matches!(
            name.as_str(),
            "host" | "connection" | "keep-alive" | "proxy-connection" | "proxy-authorization"
        ) {
            continue;
        }
        forward.extend_from_slice(header.name.as_bytes());
        forward.extend_from_slice(b": ");
        forward.extend_from_slice(header.value);
        forward.extend_from_slice(b"\r\n");
    }
    let host_header = if port == 80 {
        host_for_header(&host)
    } else {
        format!("{}:{port}", host_for_header(&host))
    };
    forward
        .extend_from_slice(format!("Host: {host_header}\r\nConnection: close\r\n\r\n").as_bytes());
    Ok(Target {
        host,
        port,
        forward: Some(forward),
    })
}

/// `host:port` (or `[v6]:port`), the port defaulting to `default` when absent; the host lower
/// case, without a trailing dot, and either a host name or an IP literal.
fn authority(text: &str, default: Option<u16>) -> Result<(String, u16), Refusal> {
    let bad = || refuse(400, format!("\"{text}\" is not host:port"));
    if text.contains('@') {
        return Err(refuse(400, "credentials in a URL are not carried"));
    }
    let (host, port) = if let Some(inner) = text.strip_prefix('[') {
        let end = inner.find(']').ok_or_else(bad)?;
        let port = &inner[end + 1..];
        (&inner[..end], port.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(bad)?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad()),
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if host.parse::<IpAddr>().is_err() && !is_host_name(&host) {
        return Err(bad());
    }
    Ok((host, port))
}

fn host_for_header(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// A short plain-text answer that closes the connection.
async fn answer(client: &mut TcpStream, status: u16, why: &str) -> io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Gateway Timeout",
    };
    let body = format!("airlock: {why}\n");
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(text.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_policy::NetworkRule;

    fn head(text: &str) -> Result<Target, Refusal> {
        parse_request(text.as_bytes())
    }

    #[test]
    fn connect_names_host_and_port() {
        let t = head("CONNECT API.GitHub.com.:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.forward),
            ("api.github.com", 443, None)
        );
        let v6 = head("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("2001:db8::1", 8443));
        assert_eq!(
            head("CONNECT example.com HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            head("CONNECT ex_ample.com:443 HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn plain_http_is_rewritten_to_the_url_host() {
        let t = head(
            "GET http://Example.com:8080/a?b=1 HTTP/1.1\r\nHost: other.example\r\nProxy-Authorization: x\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!((t.host.as_str(), t.port), ("example.com", 8080));
        let forward = String::from_utf8(t.forward.unwrap()).unwrap();
        assert_eq!(
            forward,
            "GET /a?b=1 HTTP/1.1\r\nAccept: */*\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n"
        );
        let bare = head("GET http://example.com HTTP/1.1\r\n\r\n").unwrap();
        assert!(
            String::from_utf8(bare.forward.unwrap())
                .unwrap()
                .starts_with("GET / HTTP/1.1\r\n")
        );
        assert_eq!(bare.port, 80);
    }

    #[test]
    fn other_requests_are_refused() {
        assert!(
            head("GET / HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .why
                .contains("CONNECT host:port")
        );
        assert_eq!(
            head("GET https://a.example/ HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .status,
            400
        );
        assert!(
            head("GET http://u:p@a.example/ HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .why
                .contains("credentials")
        );
        assert_eq!(head("\u{1}\u{2}\r\n\r\n").unwrap_err().status, 400);
    }

    fn egress(rules: &[&str], names: &[(&str, &str)]) -> Egress {
        let names: Vec<(String, IpAddr)> = names
            .iter()
            .map(|(n, a)| ((*n).to_owned(), a.parse().unwrap()))
            .collect();
        Egress {
            server: "s".into(),
            network: Arc::new(ServerNetwork::Allow(
                rules
                    .iter()
                    .map(|r| NetworkRule::parse(r).unwrap())
                    .collect(),
            )),
            resolver: Arc::new(move |host, port| {
                let found: Vec<SocketAddr> = names
                    .iter()
                    .filter(|(n, _)| *n == host)
                    .map(|(_, a)| SocketAddr::new(*a, port))
                    .collect();
                Box::pin(async move { Ok(found) })
            }),
        }
    }

    fn target(host: &str, port: u16) -> Target {
        Target {
            host: host.into(),
            port,
            forward: None,
        }
    }

    #[tokio::test]
    async fn unlisted_hosts_and_raw_addresses_are_refused() {
        let e = egress(
            &["api.example.com:443"],
            &[("api.example.com", "192.0.2.7")],
        );
        let unlisted = e.open(&target("other.example.com", 443)).await.unwrap_err();
        assert_eq!(unlisted.status, 403);
        assert!(
            unlisted.why.contains("not in the server's `network` list"),
            "{}",
            unlisted.why
        );
        let raw = e.open(&target("192.0.2.7", 443)).await.unwrap_err();
        assert_eq!(raw.status, 403, "{}", raw.why);
        let port = e.open(&target("api.example.com", 80)).await.unwrap_err();
        assert_eq!(port.status, 403);
    }

    #[tokio::test]
    async fn listed_names_resolving_to_the_host_itself_are_refused() {
        let e = egress(
            &[
                "local.example.com:80",
                "meta.example.com:80",
                "both.example.com:80",
            ],
            &[
                ("local.example.com", "127.0.0.1"),
                ("meta.example.com", "169.254.169.254"),
                ("both.example.com", "::1"),
                ("both.example.com", "fe80::1"),
            ],
        );
        for (name, why) in [
            ("local.example.com", "a loopback address"),
            ("meta.example.com", "a link-local address"),
            ("both.example.com", "a loopback address"),
        ] {
            let refused = e.open(&target(name, 80)).await.unwrap_err();
            assert_eq!(refused.status, 403, "{name}");
            assert!(refused.why.contains(why), "{name}: {}", refused.why);
        }
    }

    #[tokio::test]
    async fn a_listed_name_is_connected_to_its_address() {
        // A listener on an address of this host that is not loopback, when it has one.
        let Some(ip) = non_loopback_address() else {
            return;
        };
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let e = egress(
            &[&format!("svc.example.com:{port}")],
            &[("svc.example.com", &ip.to_string())],
        );
        let opened = e.open(&target("svc.example.com", port)).await;
        assert!(opened.is_ok(), "{:?}", opened.err());
    }

    /// An IPv4 address of this host other than loopback (the one a route out leaves from).
    pub(crate) fn non_loopback_address() -> Option<IpAddr> {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        socket.connect("192.0.2.1:9").ok()?;
        let ip = socket.local_addr().ok()?.ip();
        (unreachable_address(ip).is_none()).then_some(ip)
    }
}
