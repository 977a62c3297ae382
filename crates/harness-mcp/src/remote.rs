//! Remote servers, reached over Streamable HTTP: which URLs are allowed, how header values name
//! environment variables, and the transport that carries the session.
//!
//! Header values are secrets (a bearer token): no message here ever holds one, only the
//! header's name and the variables it names.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::retry::Retrying;

/// The transport of a remote session, whose requests are retried by [`Retrying`]'s rules.
pub(crate) type HttpTransport = StreamableHttpClientTransport<Retrying>;

/// `https://` anywhere; `http://` only to this machine (a token sent in clear over a network
/// is a token given away); no user or password in the URL (credentials go in `headers`, which
/// are never shown).
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let parsed = Url::parse(url).map_err(|e| format!("url {url:?} is not a URL ({e})"))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("url holds a user or password; put credentials in headers (Authorization = \"Bearer ${TOKEN}\") so that they are never shown".to_owned());
    }
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(&parsed) => Ok(()),
        "http" => Err(format!(
            "url {url:?} is plain http to another machine; use https (http:// is allowed to loopback addresses only: 127.0.0.1, ::1, localhost)"
        )),
        other => Err(format!("url {url:?} has scheme {other:?}; a remote MCP server is reached over https://")),
    }
}

/// Whether the URL's host is this machine.
fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// A header's name is a valid HTTP header name, and every `${NAME}` in its value is well formed.
pub(crate) fn check_header(name: &str, value: &str) -> Result<(), String> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("header {name:?} is not a valid HTTP header name"))?;
    references(value).map(|_| ()).map_err(|why| format!("header {name:?}: {why}"))
}

/// The variables a header value names, in order; an error for a `${` left open or an invalid name.
pub(crate) fn references(value: &str) -> Result<Vec<&str>, String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err("a ${ is not closed; write ${NAME}".to_owned());
        };
        let name = &after[..end];
        let valid = name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!("${{{name}}} is not an environment variable name (letters, digits, _)"));
        }
        names.push(name);
        rest = &after[end + 1..];
    }
    Ok(names)
}

/// The environment variables a header value reads (`${NAME}`), for listings; none when the
/// value is malformed (the entry is then refused before anything starts).
pub fn header_variables(value: &str) -> Vec<String> {
    references(value).map(|names| names.into_iter().map(str::to_owned).collect()).unwrap_or_default()
}

/// The headers with every `${NAME}` replaced by the variable's value, read by `lookup`. Errors
/// name the header and the variable, never a value.
pub(crate) fn expand_headers(
    headers: &BTreeMap<String, String>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    let mut out = HashMap::new();
    for (name, template) in headers {
        let mut value = String::new();
        let mut rest = template.as_str();
        for variable in references(template).map_err(|why| format!("header {name:?}: {why}"))? {
            let marker = format!("${{{variable}}}");
            let Some(at) = rest.find(&marker) else { break };
            let Some(found) = lookup(variable) else {
                return Err(format!(
                    "header {name:?} names ${{{variable}}}, which is not set in the harness's environment; export it, or remove the header"
                ));
            };
            value.push_str(&rest[..at]);
            value.push_str(&found);
            rest = &rest[at + marker.len()..];
        }
        value.push_str(rest);
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header {name:?} is not a valid HTTP header name"))?;
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| format!("header {name:?}: its value (after ${{NAME}} expansion) holds a character HTTP does not allow in a header, such as a newline"))?;
        // Kept out of the HTTP client's own debug output.
        value.set_sensitive(true);
        out.insert(header, value);
    }
    Ok(out)
}

/// The transport to `url`, sending `headers` with every request; `client` retries.
pub(crate) fn transport(url: &str, headers: HashMap<HeaderName, HeaderValue>, client: Retrying) -> HttpTransport {
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    StreamableHttpClientTransport::with_client(client, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_without_credentials() {
        assert!(check_url("https://mcp.linear.app/mcp").is_ok());
        assert!(check_url("http://127.0.0.1:8000/mcp").is_ok());
        assert!(check_url("http://127.1.2.3/mcp").is_ok());
        assert!(check_url("http://[::1]:9/mcp").is_ok());
        assert!(check_url("http://localhost/mcp").is_ok());
        assert!(check_url("http://10.0.0.5/mcp").unwrap_err().contains("plain http to another machine"));
        assert!(check_url("http://localhost.evil.com/mcp").is_err());
        assert!(check_url("ftp://example.com/").unwrap_err().contains("scheme \"ftp\""));
        assert!(check_url("mcp.example.com").unwrap_err().contains("is not a URL"));
        let e = check_url("https://user:hunter2@example.com/mcp").unwrap_err();
        assert!(e.contains("user or password") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn header_values_name_variables_and_errors_never_show_values() {
        let headers: BTreeMap<String, String> = [
            ("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned()),
            ("X-Team".to_owned(), "a${T}b${T}".to_owned()),
        ]
        .into();
        let lookup = |n: &str| match n {
            "TOKEN" => Some("s3cret".to_owned()),
            "T" => Some("-".to_owned()),
            _ => None,
        };
        let out = expand_headers(&headers, lookup).unwrap();
        assert_eq!(out[&HeaderName::from_static("authorization")], "Bearer s3cret");
        assert!(out[&HeaderName::from_static("authorization")].is_sensitive());
        assert_eq!(out[&HeaderName::from_static("x-team")], "a-b-");

        let missing: BTreeMap<String, String> = [("Authorization".to_owned(), "Bearer ${NOPE}".to_owned())].into();
        let e = expand_headers(&missing, lookup).unwrap_err();
        assert!(e.contains("header \"Authorization\" names ${NOPE}, which is not set"), "{e}");
        let newline: BTreeMap<String, String> = [("X-A".to_owned(), "${TOKEN}".to_owned())].into();
        let e = expand_headers(&newline, |_| Some("a\nb".to_owned())).unwrap_err();
        assert!(e.contains("not allow") && !e.contains("a\nb"), "{e}");

        assert!(check_header("Authorization", "Bearer ${TOKEN").unwrap_err().contains("not closed"));
        assert!(check_header("Authorization", "${1X}").unwrap_err().contains("not an environment variable name"));
        assert!(check_header("Bad Header", "x").unwrap_err().contains("not a valid HTTP header name"));
        assert_eq!(references("$HOME ${A} $${B}").unwrap(), vec!["A", "B"]);
    }
}
