//! The daemon's HTTP client for talking to the outside (Streamable HTTP MCP servers; later
//! OpenAPI and GraphQL sources): rustls with the `ring` provider and the system's roots.
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
