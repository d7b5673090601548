//! What the commands that talk to `airlockd` share: finding its socket, the JSON of its
//! answers, and the encoding of an id in a request's path.

use airlock_supervisor::client::{Client, api_error};
use airlock_supervisor::daemon::socket_path;
use anyhow::Result;
use std::path::PathBuf;

/// The daemon's socket: the one given, else the default. (Resolved only by the commands that
/// talk to the daemon: `airlock secret` needs none.)
pub fn daemon_socket(given: Option<PathBuf>) -> Result<PathBuf> {
    match given {
        Some(s) => Ok(s),
        None => Ok(socket_path::client_socket_path()?),
    }
}

/// A connection to the daemon at `given` (or the default socket).
pub async fn connect(given: Option<PathBuf>) -> Result<Client> {
    Ok(Client::connect(&daemon_socket(given)?).await?)
}

/// The JSON of a successful answer, or the API's error.
pub fn answer_json(status: hyper::StatusCode, body: &str) -> Result<serde_json::Value> {
    if !status.is_success() {
        return Err(api_error(status, body.as_bytes()).into());
    }
    Ok(serde_json::from_str(body)?)
}

/// A path segment, percent-encoded.
pub fn path_segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;

    #[test]
    fn a_given_socket_is_used_as_it_is() {
        let given = PathBuf::from("/tmp/some/airlock.sock");
        assert_eq!(daemon_socket(Some(given.clone())).unwrap(), given);
    }

    #[test]
    fn path_segments_encode_everything_but_letters_and_digits() {
        assert_eq!(path_segment("exec-01ab"), "exec%2D01ab");
        assert_eq!(path_segment("a b/c?d"), "a%20b%2Fc%3Fd");
        assert_eq!(path_segment("../x"), "%2E%2E%2Fx");
        assert_eq!(path_segment("é"), "%C3%A9");
        assert_eq!(path_segment("Abc123"), "Abc123");
    }

    #[test]
    fn a_successful_answer_is_its_json() {
        let v = answer_json(StatusCode::OK, r#"{"id":"x","n":[1,2]}"#).unwrap();
        assert_eq!(v, serde_json::json!({"id": "x", "n": [1, 2]}));
    }

    #[test]
    fn a_successful_answer_that_is_not_json_is_an_error() {
        assert!(answer_json(StatusCode::OK, "not json").is_err());
    }

    #[test]
    fn an_error_answer_is_the_apis_error() {
        let body =
            r#"{"error":{"code":"not_found","message":"no execution `x`","hint":"list them"}}"#;
        let e = answer_json(StatusCode::NOT_FOUND, body).unwrap_err();
        assert_eq!(
            e.to_string(),
            "airlockd answered 404 Not Found: no execution `x` (hint: list them)"
        );
        // Not the API's error body: the body itself is the message.
        let e = answer_json(StatusCode::BAD_GATEWAY, "upstream gone").unwrap_err();
        assert_eq!(
            e.to_string(),
            "airlockd answered 502 Bad Gateway: upstream gone"
        );
    }
}
