//! The checks every request to the socket passes before it is routed, `/mcp` included: it
//! was addressed to the daemon by a local name (`Host`), it was not sent by a page of another
//! site (`Origin`), and a `POST` carries JSON (`Content-Type`).
//!
//! The socket is not reachable from a browser, but a loopback TCP forwarder to it (a
//! debugging proxy, `socat`, an SSH tunnel) would be: a web page could then aim requests at
//! it, and the forwarder's uid would admit them. A page under another name reaches the
//! forwarder only by DNS rebinding, and then its requests carry that name as `Host`; a page
//! that names the loopback address itself sends its own `Origin`; and a page can only send
//! bodies of the CORS-safe types (`text/plain`, forms) without a preflight, which the daemon
//! never answers. So a request with a foreign `Host`, a foreign `Origin`, or a `POST` that is
//! not `application/json` is refused before anything else looks at it.

use super::responses::{ApiBody, error_response};
use crate::agent_api::ApiErrorCode;
use hyper::header::{CONTENT_TYPE, HOST, ORIGIN};
use hyper::{HeaderMap, Method, Response, StatusCode};

/// The names a local client addresses the daemon by, with any port: `airlock` (the CLI, the
/// client libraries, `airlock mcp`, `curl --unix-socket … http://airlock/…`) and the loopback
/// names a forwarder is reached by.
pub const LOCAL_HOSTS: &[&str] = &["airlock", "localhost", "127.0.0.1", "::1"];

/// The refusal of a request that fails a check, or `None` for one that passes them all.
pub(super) fn refusal(method: &Method, headers: &HeaderMap) -> Option<Response<ApiBody>> {
    host(headers)
        .or_else(|| origin(headers))
        .or_else(|| json_post(method, headers))
}

/// What every refusal of a name says to do.
const SEND_LOCAL_HOST: &str = "send `Host: airlock` (curl: --unix-socket PATH http://airlock/...), as the airlock CLI and client libraries do; the daemon answers only requests addressed to airlock, localhost, 127.0.0.1 or ::1";

fn host(headers: &HeaderMap) -> Option<Response<ApiBody>> {
    let refused = |message: String| {
        Some(error_response(
            StatusCode::FORBIDDEN,
            ApiErrorCode::HostNotAllowed,
            message,
            Some(SEND_LOCAL_HOST.into()),
        ))
    };
    let mut values = headers.get_all(HOST).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return refused("the request needs exactly one Host header".into());
    };
    let Some(authority) = value
        .to_str()
        .ok()
        .and_then(|text| text.parse::<hyper::http::uri::Authority>().ok())
    else {
        return refused("the request's Host header is not a host name".into());
    };
    if is_local(authority.host()) {
        return None;
    }
    refused(format!(
        "the request is addressed to `{}`, which is not this daemon's name",
        authority.host()
    ))
}

/// An `Origin`, when there is one, must be a local name's too (any port, `http` or `https`).
/// `Origin: null` (a sandboxed frame, a file, a redirect across sites) is refused: it says
/// only that a browser sent the request.
fn origin(headers: &HeaderMap) -> Option<Response<ApiBody>> {
    let mut values = headers.get_all(ORIGIN).iter();
    let first = values.next()?;
    let refused = |message: String| {
        Some(error_response(
            StatusCode::FORBIDDEN,
            ApiErrorCode::OriginNotAllowed,
            message,
            Some("send no Origin header: the daemon serves local programs, not web pages (a page on a local name, such as http://localhost:8080, may)".into()),
        ))
    };
    if values.next().is_some() {
        return refused("the request has more than one Origin header".into());
    }
    let text = first.to_str().unwrap_or_default();
    let local = text
        .parse::<hyper::Uri>()
        .ok()
        .filter(|uri| matches!(uri.scheme_str(), Some("http" | "https")))
        .and_then(|uri| uri.host().map(is_local))
        .unwrap_or(false);
    if local {
        return None;
    }
    refused(format!(
        "requests from the web origin `{}` are not served",
        text.chars().take(200).collect::<String>()
    ))
}

/// Every `POST` carries `Content-Type: application/json` (parameters such as `charset` are
/// fine), also one without a body: a web page cannot send that type without the preflight
/// the daemon never grants.
fn json_post(method: &Method, headers: &HeaderMap) -> Option<Response<ApiBody>> {
    if method != Method::POST {
        return None;
    }
    let given = headers.get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?"));
    let json = given.is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    });
    if json && headers.get_all(CONTENT_TYPE).iter().count() == 1 {
        return None;
    }
    let message = match given {
        Some(given) => format!(
            "a POST must carry Content-Type: application/json, not `{}`",
            given.chars().take(200).collect::<String>()
        ),
        None => "a POST must carry Content-Type: application/json, and this one has none".into(),
    };
    Some(error_response(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ApiErrorCode::UnsupportedMediaType,
        message,
        Some("send the header `Content-Type: application/json` (curl: -H 'Content-Type: application/json'), also with an empty body".into()),
    ))
}

/// Whether `host` (from a `Host` or an `Origin`, brackets of an IPv6 address and all) is one
/// of [`LOCAL_HOSTS`].
fn is_local(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    LOCAL_HOSTS
        .iter()
        .any(|local| local.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&hyper::header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn code(method: Method, pairs: &[(&hyper::header::HeaderName, &str)]) -> Option<u16> {
        refusal(&method, &headers(pairs)).map(|r| r.status().as_u16())
    }

    #[test]
    fn local_names_pass_with_any_port() {
        for host in [
            "airlock",
            "AIRLOCK",
            "localhost:8080",
            "127.0.0.1",
            "127.0.0.1:9",
            "[::1]",
            "[::1]:8080",
        ] {
            assert_eq!(code(Method::GET, &[(&HOST, host)]), None, "{host}");
        }
    }

    #[test]
    fn foreign_missing_doubled_or_broken_hosts_are_refused() {
        for host in [
            "evil.example",
            "evil.example:80",
            "127.0.0.2",
            "airlock.evil",
            "a b",
        ] {
            assert_eq!(code(Method::GET, &[(&HOST, host)]), Some(403), "{host}");
        }
        assert_eq!(code(Method::GET, &[]), Some(403));
        assert_eq!(
            code(Method::GET, &[(&HOST, "airlock"), (&HOST, "evil.example")]),
            Some(403)
        );
    }

    #[test]
    fn an_origin_must_be_local() {
        let with = |origin: &str| code(Method::GET, &[(&HOST, "airlock"), (&ORIGIN, origin)]);
        assert_eq!(with("http://localhost:3000"), None);
        assert_eq!(with("https://127.0.0.1"), None);
        assert_eq!(with("http://[::1]:8080"), None);
        for origin in [
            "http://evil.example",
            "https://evil.example:443",
            "null",
            "file://localhost",
            "localhost",
            "",
        ] {
            assert_eq!(with(origin), Some(403), "{origin}");
        }
    }

    #[test]
    fn a_post_carries_json() {
        let post = |types: &[&str]| {
            let mut pairs = vec![(&HOST, "airlock")];
            pairs.extend(types.iter().map(|t| (&CONTENT_TYPE, *t)));
            code(Method::POST, &pairs)
        };
        assert_eq!(post(&["application/json"]), None);
        assert_eq!(post(&["Application/JSON; charset=utf-8"]), None);
        assert_eq!(post(&[]), Some(415));
        assert_eq!(post(&["text/plain"]), Some(415));
        assert_eq!(post(&["application/x-www-form-urlencoded"]), Some(415));
        assert_eq!(post(&["application/jsonx"]), Some(415));
        assert_eq!(post(&["application/json", "text/plain"]), Some(415));
        // Other methods carry no body the daemon reads.
        assert_eq!(code(Method::GET, &[(&HOST, "airlock")]), None);
        assert_eq!(code(Method::DELETE, &[(&HOST, "airlock")]), None);
    }
}
