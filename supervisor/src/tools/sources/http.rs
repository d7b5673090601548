//! The daemon's HTTP client for talking to the outside (Streamable HTTP MCP servers, OpenAPI
//! and GraphQL sources): rustls with the `ring` provider and the system's roots; and what the
//! HTTP sources share: reading an answer with a size limit, describing a transport error.
//!
//! Redirects are never followed: a redirect could carry the configured credentials (headers)
//! to another host, and an MCP endpoint has no reason to move.

use std::sync::Once;

#[derive(Debug, thiserror::Error)]
pub enum OutboundHttpError {
    #[error("cannot build the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// A new client (cheap: build one per connection so each server gets its own pool).
pub fn client() -> Result<reqwest::Client, OutboundHttpError> {
    install_crypto_provider();
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("airlock/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// rustls needs one process-wide crypto provider; reqwest is built without one so that the
/// build needs no C toolchain beyond what `ring` uses.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An embedding program may have installed one already; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Largest answer body read from an HTTP API (OpenAPI and GraphQL sources); the rest is never
/// read.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// An answer's body, read up to a limit.
#[derive(Debug)]
pub struct Body {
    pub bytes: Vec<u8>,
    /// The body went on past the limit (what was read is kept, for an error excerpt).
    pub over_limit: bool,
}

/// Reads `response`'s body, stopping at `max` bytes: a service cannot make the daemon hold
/// more than that, however much it sends or announces.
pub async fn read_limited(
    response: &mut reqwest::Response,
    max: usize,
) -> Result<Body, reqwest::Error> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Ok(Body {
            bytes: Vec::new(),
            over_limit: true,
        });
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > max {
            return Ok(Body {
                bytes,
                over_limit: true,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Body {
        bytes,
        over_limit: false,
    })
}

/// A transport error as a program may read it: every cause, and never the URL (its query may
/// carry an API key).
pub fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut out = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
