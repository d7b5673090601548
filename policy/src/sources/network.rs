//! `network` of a `[[server]]`: `"host"`, `"none"`, or a list of the hosts it may reach
//! (`["api.github.com:443", "*.example.com:443", "192.0.2.10:8080"]`).
//!
//! Only the format and the matching live here. The supervisor enforces a list: the server runs
//! in an empty network namespace whose one way out is a proxy the daemon runs, which checks
//! each host against [`NetworkRule::allows`] and each address it resolves to against the
//! addresses no server may reach.

use crate::document::Field;
use crate::error::PolicyError;
use std::net::IpAddr;
use toml::de::DeValue;

/// Entries a list may hold (a list is reviewed by people; longer ones are a mistake).
pub const MAX_RULES: usize = 256;

/// What a stdio server may reach on the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ServerNetwork {
    /// The host's network (the default).
    #[default]
    Host,
    /// An empty network namespace: nothing at all.
    None,
    /// An empty network namespace whose one way out is the daemon's proxy, which lets
    /// through connections to these hosts and ports only.
    Allow(Vec<NetworkRule>),
}

impl ServerNetwork {
    /// `host`, `none`, or the list as written.
    pub fn describe(&self) -> String {
        match self {
            ServerNetwork::Host => "host".to_owned(),
            ServerNetwork::None => "none".to_owned(),
            ServerNetwork::Allow(rules) if rules.is_empty() => {
                "[] (every connection refused)".to_owned()
            }
            ServerNetwork::Allow(rules) => format!(
                "[{}] (through the daemon's proxy)",
                rules
                    .iter()
                    .map(|r| r.text.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The rule that lets a connection to `host:port` through, if any. `host` is a name or an
    /// IP literal as a client asked for it (any case, a trailing dot allowed).
    pub fn allows(&self, host: &str, port: u16) -> Option<&NetworkRule> {
        match self {
            ServerNetwork::Host => None,
            ServerNetwork::None => None,
            ServerNetwork::Allow(rules) => rules.iter().find(|r| r.allows(host, port)),
        }
    }
}

/// One entry of a `network` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRule {
    pub host: HostPattern,
    pub port: u16,
    /// The entry as written, for messages.
    pub text: String,
}

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// One name (`api.github.com`), lower case, without a trailing dot.
    Name(String),
    /// `*.example.com`: every name under `example.com` (`api.example.com`,
    /// `a.b.example.com`), not `example.com` itself, which is listed on its own.
    Subdomains(String),
    /// An address, matched only by a client that asks for that address.
    Ip(IpAddr),
}

impl NetworkRule {
    /// Whether this entry lets a connection to `host:port` through.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        let host = normalise(host);
        match &self.host {
            HostPattern::Name(name) => host == *name,
            HostPattern::Subdomains(parent) => host
                .strip_suffix(parent.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            HostPattern::Ip(ip) => parse_ip(&host).is_some_and(|asked| asked == *ip),
        }
    }

    /// One entry: `name:port`, `*.name:port`, `a.b.c.d:port` or `[v6]:port`.
    pub fn parse(text: &str) -> Result<NetworkRule, String> {
        let (host, port) = split_port(text).ok_or_else(|| {
            format!("\"{text}\" needs a port: write it as \"{text}:443\" (host:port)")
        })?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("\"{text}\": the port must be a number from 1 to 65535"))?;
        let lower = normalise(host);
        if let Some(ip) = parse_ip(&lower) {
            if let Some(why) = unreachable_address(ip) {
                return Err(format!(
                    "\"{text}\" is {why}, which no confined server may reach: give the server network = \"host\" if it must"
                ));
            }
            return Ok(NetworkRule {
                host: HostPattern::Ip(ip),
                port,
                text: text.to_owned(),
            });
        }
        if host.starts_with('[') {
            return Err(format!("\"{text}\" is not a valid IPv6 address"));
        }
        let (pattern, name) = match lower.strip_prefix("*.") {
            Some(parent) => (HostPattern::Subdomains(parent.to_owned()), parent),
            None => (HostPattern::Name(lower.clone()), lower.as_str()),
        };
        if !is_host_name(name) {
            return Err(format!(
                "\"{text}\" is not a host name (letters, digits, `-` and dots; `*.` only at the start)"
            ));
        }
        if matches!(pattern, HostPattern::Subdomains(_)) && !name.contains('.') {
            return Err(format!(
                "\"{text}\" matches every name under a top-level domain: name the domain (\"*.example.com:443\")"
            ));
        }
        Ok(NetworkRule {
            host: pattern,
            port,
            text: text.to_owned(),
        })
    }
}

/// Why no confined server may reach `ip`, if it may not: the host's own loopback (the daemon's
/// listeners, other local services), link-local addresses (cloud metadata services at
/// 169.254.169.254), and addresses that are no single host. An IPv4 address written as IPv6
/// (`::ffff:127.0.0.1`) is judged as the IPv4 address it is.
pub fn unreachable_address(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    UNREACHABLE
        .iter()
        .find(|(_, test)| test(ip))
        .map(|(why, _)| *why)
}

/// The addresses no confined server may reach, each with the reason; one predicate a row.
type AddressTest = fn(IpAddr) -> bool;
const UNREACHABLE: &[(&str, AddressTest)] = &[
    // The daemon's own TCP listeners (the MCP facade) and every local service of the host.
    ("a loopback address", |ip| ip.is_loopback()),
    // 0.0.0.0 and :: reach the host itself on Linux; 0.0.0.0/8 is "this network".
    ("an unspecified address", |ip| match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 0,
        IpAddr::V6(v6) => v6.is_unspecified(),
    }),
    // 169.254.169.254 is the metadata service of every major cloud, with its credentials.
    ("a link-local address", |ip| match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }),
    // Not one host: a connection there is not to whom the list names.
    ("a multicast address", |ip| ip.is_multicast()),
    ("a broadcast address", |ip| match ip {
        IpAddr::V4(v4) => v4.is_broadcast(),
        IpAddr::V6(_) => false,
    }),
];

/// Reads `network` (absent: `host`).
pub(crate) fn read(field: Option<Field<'_>>) -> Result<ServerNetwork, PolicyError> {
    let Some(field) = field else {
        return Ok(ServerNetwork::Host);
    };
    if matches!(field.value(), DeValue::Array(_)) {
        let items = field.array("a list of \"host:port\" entries")?;
        if items.len() > MAX_RULES {
            return Err(field.invalid(format!(
                "{} entries; at most {MAX_RULES}: use `*.domain:port` entries",
                items.len()
            )));
        }
        let mut rules = Vec::with_capacity(items.len());
        for item in items {
            let text = item.string("a string (\"host:port\")")?;
            rules.push(NetworkRule::parse(text).map_err(|why| item.invalid(why))?);
        }
        return Ok(ServerNetwork::Allow(rules));
    }
    match field.string("\"host\", \"none\" or a list of \"host:port\" entries")? {
        "host" => Ok(ServerNetwork::Host),
        "none" => Ok(ServerNetwork::None),
        other => Err(field.invalid(format!(
            "unknown network \"{other}\" (expected \"host\", \"none\" or a list such as [\"api.github.com:443\"])"
        ))),
    }
}

/// Lower case, without the trailing dot of a fully qualified name or an IPv6 literal's
/// brackets.
fn normalise(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.to_ascii_lowercase()
}

/// An IP literal (IPv4 in dotted form only: `ping 0x7f.1` style forms are not addresses here,
/// and are not names either).
fn parse_ip(host: &str) -> Option<IpAddr> {
    host.parse().ok()
}

/// `host:port` split at the last colon, `[v6]:port` at the bracket.
fn split_port(text: &str) -> Option<(&str, &str)> {
    if text.starts_with('[') {
        let end = text.find(']')?;
        let port = text[end + 1..].strip_prefix(':')?;
        return Some((&text[..=end], port));
    }
    let (host, port) = text.rsplit_once(':')?;
    (!host.contains(':') && !host.is_empty()).then_some((host, port))
}

/// Labels of letters, digits and `-` (not at either end), 1 to 63 bytes each, 253 in all.
/// A name whose last label is all digits is refused: it would be read as an address by some
/// clients and as a name by others.
pub fn is_host_name(name: &str) -> bool {
    let labels: Vec<&str> = name.split('.').collect();
    name.len() <= 253
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        && labels
            .last()
            .is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> NetworkRule {
        NetworkRule::parse(text).unwrap()
    }

    #[test]
    fn names_match_exactly_in_any_case() {
        let r = rule("API.GitHub.com:443");
        assert!(r.allows("api.github.com", 443));
        assert!(r.allows("Api.Github.Com.", 443));
        assert!(!r.allows("api.github.com", 80));
        assert!(!r.allows("github.com", 443));
        assert!(!r.allows("api.github.com.evil.example", 443));
        assert!(!r.allows("xapi.github.com", 443));
    }

    #[test]
    fn a_wildcard_takes_subdomains_not_the_apex() {
        let r = rule("*.example.com:443");
        assert!(r.allows("api.example.com", 443));
        assert!(r.allows("a.b.example.com", 443));
        assert!(!r.allows("example.com", 443));
        assert!(!r.allows("badexample.com", 443));
        assert!(!r.allows(".example.com", 443));
        assert!(!r.allows("api.example.com", 8443));
    }

    #[test]
    fn addresses_match_only_themselves() {
        let r = rule("192.0.2.10:8080");
        assert!(r.allows("192.0.2.10", 8080));
        assert!(!r.allows("192.0.2.11", 8080));
        let v6 = rule("[2001:db8::1]:443");
        assert!(v6.allows("[2001:db8::1]", 443));
        assert!(v6.allows("2001:DB8:0::1", 443));
        // A name never matches an address entry, nor an address a name entry.
        assert!(!rule("example.com:443").allows("93.184.216.34", 443));
    }

    #[test]
    fn entries_are_checked() {
        let refused = |text: &str| NetworkRule::parse(text).unwrap_err();
        assert!(refused("api.github.com").contains("needs a port"));
        assert!(refused("api.github.com:0").contains("1 to 65535"));
        assert!(refused("api.github.com:99999").contains("1 to 65535"));
        assert!(refused("api.github.com:https").contains("1 to 65535"));
        assert!(refused("*.com:443").contains("top-level domain"));
        assert!(refused("a*.example.com:443").contains("not a host name"));
        assert!(refused("exa_mple.com:443").contains("not a host name"));
        assert!(refused("1.2.3:443").contains("not a host name"));
        assert!(refused("127.0.0.1:5432").contains("a loopback address"));
        assert!(refused("[::1]:22").contains("a loopback address"));
        assert!(refused("[::ffff:127.0.0.1]:22").contains("a loopback address"));
        assert!(refused("169.254.169.254:80").contains("a link-local address"));
        assert!(refused("0.0.0.0:80").contains("an unspecified address"));
        assert!(refused("[fe80::1]:80").contains("a link-local address"));
        assert!(refused("[zz::1]:80").contains("not a valid IPv6"));
    }

    #[test]
    fn unreachable_addresses_have_reasons() {
        let why = |s: &str| unreachable_address(s.parse().unwrap());
        assert_eq!(why("127.0.0.53"), Some("a loopback address"));
        assert_eq!(why("169.254.169.254"), Some("a link-local address"));
        assert_eq!(why("::ffff:169.254.169.254"), Some("a link-local address"));
        assert_eq!(why("224.0.0.1"), Some("a multicast address"));
        assert_eq!(why("255.255.255.255"), Some("a broadcast address"));
        assert_eq!(why("0.1.2.3"), Some("an unspecified address"));
        assert_eq!(why("192.0.2.2"), None);
        assert_eq!(why("10.1.2.3"), None);
        assert_eq!(why("2001:db8::1"), None);
    }
}
