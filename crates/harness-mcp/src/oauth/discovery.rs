//! Where a protected MCP server's authorization server is, and what it offers: the protected
//! resource metadata (RFC 9728) named by the server's `WWW-Authenticate` challenge or found at
//! its well-known URLs, then the authorization server's metadata (RFC 8414, or OpenID
//! discovery), at the URLs the MCP spec lists in its order; and for a server of the
//! 2025-03-26 spec (no resource metadata), the server's own origin with `/token` as the
//! last fallback.

use reqwest::Url;
use serde_json::Value;

use crate::remote;

/// The parameters of a `Bearer` challenge (`resource_metadata`, `scope`, `error`).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Challenge {
    pub(crate) resource_metadata: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) error: Option<String>,
}

impl Challenge {
    /// Reads `Bearer k=v, k="quoted \" v"`; a malformed header gives what could be read.
    pub(crate) fn parse(header: &str) -> Self {
        let mut out = Self::default();
        let rest = header.trim_start();
        let rest = match rest.get(..6) {
            Some(scheme) if scheme.eq_ignore_ascii_case("bearer") => &rest[6..],
            _ => return out,
        };
        for (key, value) in params(rest) {
            match key.to_ascii_lowercase().as_str() {
                "resource_metadata" => out.resource_metadata = Some(value),
                "scope" => out.scope = Some(value),
                "error" => out.error = Some(value),
                _ => {}
            }
        }
        out
    }
}

/// The `key=value` pairs of an auth-param list; quoted values unescaped.
fn params(mut rest: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        let Some(eq) = rest.find('=') else { return out };
        let key = rest[..eq].trim().to_owned();
        rest = rest[eq + 1..].trim_start();
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, c)| c)),
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            rest = &quoted[end..];
            value
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            let value = rest[..end].trim().to_owned();
            rest = &rest[end..];
            value
        };
        out.push((key, value));
    }
}

/// What discovery found: where to ask for a token, how, for which resource and scopes.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) token_endpoint: String,
    /// `token_endpoint_auth_methods_supported`; `None` when the metadata does not say.
    pub(crate) auth_methods: Option<Vec<String>>,
    /// `token_endpoint_auth_signing_alg_values_supported`; `None` when it does not say.
    pub(crate) signing_algs: Option<Vec<String>>,
    /// The authorization server's issuer: the audience of a client assertion.
    pub(crate) issuer: String,
    /// The resource the token is for (RFC 8707): the metadata's, checked against the server.
    pub(crate) resource: String,
    /// The scopes to ask for, as the spec picks them: the challenge's, else the resource's
    /// `scopes_supported`, else none.
    pub(crate) scope: Option<String>,
}

/// A JSON document fetched with GET: `Ok(None)` for a 4xx (not there), an error otherwise.
async fn get_json(http: &reqwest::Client, url: &str) -> Result<Option<Value>, String> {
    remote::check_url(url).map_err(|why| format!("metadata URL refused: {why}"))?;
    let response = http
        .get(url)
        .header("Accept", "application/json")
        .header("MCP-Protocol-Version", rmcp::model::ProtocolVersion::LATEST.to_string())
        .send()
        .await
        .map_err(|e| format!("cannot fetch {url} ({e})"))?;
    let status = response.status();
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(format!("{url} answered {status}"));
    }
    let body = response.bytes().await.map_err(|e| format!("cannot read {url} ({e})"))?;
    let value: Value = serde_json::from_slice(&body).map_err(|e| format!("{url} is not JSON ({e})"))?;
    if value.is_object() { Ok(Some(value)) } else { Err(format!("{url} is not a JSON object")) }
}

/// The first of `urls` that answers with a JSON object, and where it was.
async fn first_json(http: &reqwest::Client, urls: &[String]) -> Result<Option<(String, Value)>, String> {
    for url in urls {
        if let Some(value) = get_json(http, url).await? {
            return Ok(Some((url.clone(), value)));
        }
    }
    Ok(None)
}

/// `origin` + `/.well-known/<name>` + `path` (a path of `/` adds nothing).
fn well_known(url: &Url, name: &str, path: &str) -> String {
    let path = path.trim_end_matches('/');
    format!("{}/.well-known/{name}{path}", url.origin().ascii_serialization())
}

/// The protected resource metadata's URLs: the challenge's, else the path-based one, then the root.
fn resource_metadata_urls(server: &Url, challenge: &Challenge) -> Vec<String> {
    if let Some(url) = &challenge.resource_metadata {
        return vec![url.clone()];
    }
    let mut urls = vec![well_known(server, "oauth-protected-resource", server.path())];
    let root = well_known(server, "oauth-protected-resource", "");
    if !urls.contains(&root) {
        urls.push(root);
    }
    urls
}

/// The authorization server's metadata URLs, in the order of the MCP spec.
pub(crate) fn authorization_metadata_urls(issuer: &Url) -> Vec<String> {
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        return vec![
            well_known(issuer, "oauth-authorization-server", ""),
            well_known(issuer, "openid-configuration", ""),
        ];
    }
    vec![
        well_known(issuer, "oauth-authorization-server", path),
        well_known(issuer, "openid-configuration", path),
        format!("{}{path}/.well-known/openid-configuration", issuer.origin().ascii_serialization()),
    ]
}

/// Whether a token for `resource` may be used at `server`: the same origin, and the server's
/// path within the resource's (a token for another server is never asked for or sent).
pub(crate) fn resource_matches(resource: &Url, server: &Url) -> bool {
    let dir = |u: &Url| {
        let p = u.path();
        if p.ends_with('/') { p.to_owned() } else { format!("{p}/") }
    };
    resource.origin() == server.origin() && dir(server).starts_with(&dir(resource))
}

/// Discovers where and how to get a token for `server`, from its challenge (if any).
pub(crate) async fn discover(http: &reqwest::Client, server: &Url, challenge: &Challenge) -> Result<Found, String> {
    let Some((at, metadata)) = first_json(http, &resource_metadata_urls(server, challenge)).await? else {
        return legacy(http, server, challenge).await;
    };
    let resource = metadata["resource"].as_str().unwrap_or_default();
    let checked = Url::parse(resource).ok().filter(|r| resource_matches(r, server));
    if checked.is_none() {
        return Err(format!(
            "its protected resource metadata ({at}) is for resource {resource:?}, not for {server}; no token is asked for a server that is not the one named"
        ));
    }
    let Some(issuer) = metadata["authorization_servers"].as_array().and_then(|a| a.first()).and_then(Value::as_str)
    else {
        return Err(format!("its protected resource metadata ({at}) names no authorization_servers"));
    };
    let issuer =
        Url::parse(issuer).map_err(|e| format!("{at} names authorization server {issuer:?}, not a URL ({e})"))?;
    let Some((where_, as_metadata)) = first_json(http, &authorization_metadata_urls(&issuer)).await? else {
        return Err(format!("authorization server {issuer} publishes no metadata (RFC 8414 or OpenID discovery)"));
    };
    let supported = metadata["scopes_supported"].as_array().map(|s| words(s).join(" "));
    let scope = challenge.scope.clone().or(supported).filter(|s| !s.is_empty());
    found(&where_, &as_metadata, &issuer, resource.to_owned(), scope)
}

/// The strings of a JSON array.
fn words(values: &[Value]) -> Vec<&str> {
    values.iter().filter_map(Value::as_str).collect()
}

/// The token endpoint and its methods out of authorization server metadata fetched from `at`.
fn found(at: &str, metadata: &Value, issuer: &Url, resource: String, scope: Option<String>) -> Result<Found, String> {
    let said = metadata["issuer"].as_str().unwrap_or_default();
    if said.trim_end_matches('/') != issuer.as_str().trim_end_matches('/') {
        return Err(format!("{at} is the metadata of issuer {said:?}, not of {issuer} (RFC 8414 §3.3)"));
    }
    let Some(token_endpoint) = metadata["token_endpoint"].as_str() else {
        return Err(format!("{at} names no token_endpoint"));
    };
    if let Some(grants) = metadata["grant_types_supported"].as_array()
        && !grants.iter().any(|g| g == "client_credentials")
    {
        return Err(format!(
            "authorization server {issuer} does not offer the client credentials grant (its grant_types_supported: {}); the interactive flows (a browser) are not supported: give the server a token in headers (Authorization = \"Bearer ${{TOKEN}}\") instead",
            words(grants).join(", ")
        ));
    }
    let list = |key: &str| metadata[key].as_array().map(|m| words(m).into_iter().map(str::to_owned).collect());
    Ok(Found {
        token_endpoint: token_endpoint.to_owned(),
        auth_methods: list("token_endpoint_auth_methods_supported"),
        signing_algs: list("token_endpoint_auth_signing_alg_values_supported"),
        issuer: said.to_owned(),
        resource,
        scope,
    })
}

/// A server of the 2025-03-26 spec: its origin is the authorization server, whose metadata
/// is at the origin's well-known URL, else whose token endpoint is `/token`.
async fn legacy(http: &reqwest::Client, server: &Url, challenge: &Challenge) -> Result<Found, String> {
    let origin = server.origin().ascii_serialization();
    let issuer = Url::parse(&origin).map_err(|e| format!("{server} has no origin ({e})"))?;
    let resource = server.as_str().to_owned();
    let scope = challenge.scope.clone();
    match first_json(http, &[well_known(&issuer, "oauth-authorization-server", "")]).await? {
        Some((at, metadata)) => found(&at, &metadata, &issuer, resource, scope),
        None => Ok(Found {
            token_endpoint: format!("{origin}/token"),
            auth_methods: None,
            signing_algs: None,
            issuer: origin,
            resource,
            scope,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read_with_quotes_and_escapes() {
        let c = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://x/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(c.resource_metadata.as_deref(), Some("https://x/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(Challenge::parse(r#"bearer realm="a \"b\"",scope=x"#).scope.as_deref(), Some("x"));
        assert_eq!(Challenge::parse("Basic realm=x"), Challenge::default());
        assert_eq!(Challenge::parse("Bearer"), Challenge::default());
        assert_eq!(Challenge::parse(r#"Bearer scope="open"#).scope.as_deref(), Some("open"));
    }

    #[test]
    fn metadata_urls_follow_the_spec_order() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            authorization_metadata_urls(&u("https://a.example/tenant1")),
            [
                "https://a.example/.well-known/oauth-authorization-server/tenant1",
                "https://a.example/.well-known/openid-configuration/tenant1",
                "https://a.example/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            authorization_metadata_urls(&u("https://a.example/")),
            [
                "https://a.example/.well-known/oauth-authorization-server",
                "https://a.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            resource_metadata_urls(&u("https://m.example/mcp"), &Challenge::default()),
            [
                "https://m.example/.well-known/oauth-protected-resource/mcp",
                "https://m.example/.well-known/oauth-protected-resource"
            ]
        );
    }

    #[test]
    fn a_resource_matches_its_own_server_only() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(resource_matches(&u("https://m.example/mcp"), &u("https://m.example/mcp")));
        assert!(resource_matches(&u("https://m.example/"), &u("https://m.example/mcp")));
        assert!(!resource_matches(&u("https://evil.example.com/mcp"), &u("https://m.example/mcp")));
        assert!(!resource_matches(&u("https://m.example/mcp2"), &u("https://m.example/mcp")));
        assert!(!resource_matches(&u("http://m.example/mcp"), &u("https://m.example/mcp")));
    }

    /// A path, and the JSON it answers given the server's base URL.
    type Route = (&'static str, fn(&str) -> Value);

    /// A server on loopback that answers GET `path` with the JSON `make(base)` returns, 404
    /// elsewhere, logging every path asked for.
    async fn serving(routes: Vec<Route>) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use axum::response::IntoResponse;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, at) = (asked.clone(), base.clone());
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            log.lock().unwrap().push(uri.path().to_owned());
            let found = routes.iter().find(|(p, _)| *p == uri.path()).map(|(_, make)| make(&at));
            async move {
                match found {
                    Some(v) => {
                        ([(axum::http::header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
                    }
                    None => axum::http::StatusCode::NOT_FOUND.into_response(),
                }
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        (base, asked)
    }

    #[tokio::test]
    async fn discovery_follows_the_challenge_and_the_issuers_path_to_openid_configuration() {
        let routes: Vec<Route> = vec![
            (
                "/custom/metadata.json",
                |b| serde_json::json!({"resource": format!("{b}/mcp"), "authorization_servers": [format!("{b}/tenant1")], "scopes_supported": ["a", "b"]}),
            ),
            (
                "/tenant1/.well-known/openid-configuration",
                |b| serde_json::json!({"issuer": format!("{b}/tenant1"), "token_endpoint": format!("{b}/tenant1/token"), "token_endpoint_auth_methods_supported": ["client_secret_post"]}),
            ),
        ];
        let (base, asked) = serving(routes).await;
        let http = reqwest::Client::new();
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let challenge = Challenge::parse(&format!(r#"Bearer resource_metadata="{base}/custom/metadata.json""#));
        let found = discover(&http, &server, &challenge).await.unwrap();
        assert_eq!(found.token_endpoint, format!("{base}/tenant1/token"));
        assert_eq!(found.scope.as_deref(), Some("a b"), "scopes_supported when the challenge has none");
        assert_eq!(found.auth_methods, Some(vec!["client_secret_post".to_owned()]));
        assert_eq!(
            *asked.lock().unwrap(),
            [
                "/custom/metadata.json",
                "/.well-known/oauth-authorization-server/tenant1",
                "/.well-known/openid-configuration/tenant1",
                "/tenant1/.well-known/openid-configuration",
            ]
        );

        // Without resource metadata (2025-03-26): the origin, then /token.
        let (base, asked) = serving(Vec::new()).await;
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let scoped = Challenge::parse(r#"Bearer scope="x""#);
        let found = discover(&http, &server, &scoped).await.unwrap();
        assert_eq!((found.token_endpoint, found.scope.as_deref()), (format!("{base}/token"), Some("x")));
        assert_eq!(
            *asked.lock().unwrap(),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-authorization-server",
            ]
        );
    }
}
