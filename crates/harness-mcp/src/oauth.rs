//! OAuth for remote servers, where no browser is at hand: a pre-registered client gets its
//! token with the client credentials grant, from the authorization server that discovery
//! finds ([`discovery`]). The token goes in the `Authorization` header of every request, is
//! fetched again when the server answers 401 (or it expires), and is asked for once with the
//! larger scope a 403 `insufficient_scope` names. It is kept, between runs, in a file only
//! the user can read ([`store`]).
//!
//! The interactive flows (authorization code in a browser) are not done: a run has nobody to
//! send to a browser. No message here holds a token or a secret.

mod assertion;
mod discovery;
mod store;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Url;
use serde_json::Value;

use crate::config::OAuthClientConfig;
use crate::remote;
use assertion::SigningKey;
use discovery::{Challenge, Found};
use store::Token;

/// A token this close to its expiry is fetched again before it is sent.
const EXPIRY_MARGIN: u64 = 30;
/// How long the authorization server has for each request.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How the client proves itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Method {
    /// The id and secret in a `Basic` header (the default of RFC 8414).
    Basic,
    /// The id and secret in the form.
    Post,
    /// A client assertion signed with the client's key (RFC 7523).
    Jwt,
}

/// The form fields, and the `Basic` header's id and secret, of a token request.
type Proof = (Vec<(&'static str, String)>, Option<(String, String)>);

/// What the client proves itself with: a secret, or a private key.
enum Credential {
    Secret(String),
    Key(SigningKey),
}

/// What a server's OAuth client knows and has: its registration, what discovery found, its
/// token and its scope.
pub(crate) struct OAuth {
    server: String,
    url: Url,
    client_id: String,
    credential: Credential,
    method: Option<String>,
    http: reqwest::Client,
    store: Option<std::path::PathBuf>,
    /// Say on stderr what goes wrong beside the request (not with `--quiet`).
    report: bool,
    state: tokio::sync::Mutex<State>,
    failure: Mutex<Option<String>>,
}

/// What changes as the session goes on.
#[derive(Default)]
struct State {
    token: Option<Token>,
    found: Option<Found>,
    /// The scope asked for last (grown by a step-up).
    scope: Option<String>,
    step_ups: u32,
}

/// Seconds since the epoch.
fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl OAuth {
    /// The client of server `server` at `url`, as configured; its secret read now from the
    /// environment by `lookup`, its token from the file of an earlier run, if any; `report`:
    /// warn on stderr when the token cannot be kept.
    pub(crate) fn new(
        server: &str,
        url: &str,
        config: &OAuthClientConfig,
        lookup: impl Fn(&str) -> Option<String>,
        report: bool,
    ) -> Result<Self, String> {
        let parsed = Url::parse(url).map_err(|e| format!("url {url:?} is not a URL ({e})"))?;
        let credential = credential(config, lookup)?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| format!("cannot make an HTTP client ({e})"))?;
        let store = store::path(url, &config.client_id);
        let token = store.as_deref().and_then(|p| store::load(p, url, &config.client_id));
        Ok(Self {
            server: server.to_owned(),
            url: parsed,
            client_id: config.client_id.clone(),
            credential,
            method: config.token_endpoint_auth_method.clone(),
            http,
            store,
            report,
            state: tokio::sync::Mutex::new(State { token, ..State::default() }),
            failure: Mutex::new(None),
        })
    }

    /// Why the last authorization failed, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Records why authorization failed, and returns it.
    fn fail(&self, why: String) -> String {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(why.clone());
        why
    }

    /// The token to send now: the one held, or a new one when it has expired and discovery
    /// is done (else none: the server's 401 starts discovery).
    pub(crate) async fn bearer(&self) -> Option<String> {
        let mut state = self.state.lock().await;
        match &state.token {
            Some(token) if token.fresh(now(), EXPIRY_MARGIN) => return Some(token.access_token.clone()),
            Some(_) => {}
            None => return None,
        }
        let found = state.found.clone()?;
        let scope = state.scope.clone().or(found.scope.clone());
        self.fetch(&mut state, &found, scope).await.ok()
    }

    /// A new token, after the server refused `refused` (or no token) with `challenge`; the
    /// one another request got meanwhile, if it did.
    pub(crate) async fn authorize(&self, challenge: Option<&str>, refused: Option<&str>) -> Result<String, String> {
        let mut state = self.state.lock().await;
        if let Some(token) = state.token.as_ref().filter(|t| t.fresh(now(), EXPIRY_MARGIN))
            && Some(token.access_token.as_str()) != refused
        {
            return Ok(token.access_token.clone());
        }
        let challenge = Challenge::parse(challenge.unwrap_or_default());
        let found = self.discover(&mut state, &challenge).await?;
        let scope = challenge.scope.clone().or_else(|| state.scope.clone()).or(found.scope.clone());
        self.fetch(&mut state, &found, scope).await
    }

    /// A token with the larger scope a 403 `insufficient_scope` asked for: once a session,
    /// so that a server that always wants more does not loop.
    pub(crate) async fn step_up(&self, challenge: &str) -> Result<String, String> {
        let mut state = self.state.lock().await;
        let asked = Challenge::parse(challenge).scope;
        if state.step_ups >= 1 {
            return Err(self.fail(format!(
                "MCP server {:?} refused the token for insufficient scope again (it asks for {:?}) after one larger scope was granted; not asked again",
                self.server,
                asked.unwrap_or_default()
            )));
        }
        state.step_ups += 1;
        let found = self.discover(&mut state, &Challenge::parse(challenge)).await?;
        let scope = union(state.scope.as_deref(), asked.as_deref());
        self.fetch(&mut state, &found, scope).await
    }

    /// What discovery found, found once a session.
    async fn discover(&self, state: &mut State, challenge: &Challenge) -> Result<Found, String> {
        if let Some(found) = &state.found {
            return Ok(found.clone());
        }
        let found = discovery::discover(&self.http, &self.url, challenge)
            .await
            .map_err(|why| self.fail(format!("OAuth discovery for {} failed: {why}", self.url)))?;
        state.found = Some(found.clone());
        Ok(found)
    }

    /// Asks for a token with `scope`, keeps it (in memory and in its file) and returns it.
    async fn fetch(&self, state: &mut State, found: &Found, scope: Option<String>) -> Result<String, String> {
        let token = self.request(found, scope.as_deref()).await.map_err(|why| {
            self.fail(format!("no OAuth token for client {:?} from the authorization server: {why}", self.client_id))
        })?;
        // A failure before this one is no longer why anything fails.
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = None;
        if let Some(path) = &self.store
            && let Err(why) = store::save(path, self.url.as_str(), &self.client_id, &token)
            && self.report
        {
            eprintln!(
                "harness: warning: MCP server {:?}: the OAuth token is not kept for later runs: {why}",
                self.server
            );
        }
        let access = token.access_token.clone();
        state.scope = scope;
        state.token = Some(token);
        Ok(access)
    }

    /// The method to use at the token endpoint: with a key, `private_key_jwt`; with a
    /// secret, the configured one, else the first of `client_secret_basic` and
    /// `client_secret_post` the server accepts.
    fn method(&self, found: &Found) -> Result<Method, String> {
        let accepts = |m: &str| found.auth_methods.as_ref().is_none_or(|all| all.iter().any(|a| a == m));
        let pick = match (&self.credential, self.method.as_deref()) {
            (Credential::Key(_), _) => Some(Method::Jwt),
            (_, Some("client_secret_basic")) => Some(Method::Basic),
            (_, Some("client_secret_post")) => Some(Method::Post),
            (_, Some(_)) => None,
            (_, None) if accepts("client_secret_basic") => Some(Method::Basic),
            (_, None) if accepts("client_secret_post") => Some(Method::Post),
            (_, None) => None,
        };
        let offered = found.auth_methods.clone().unwrap_or_default().join(", ");
        let signs = found.signing_algs.as_ref().is_none_or(|algs| algs.iter().any(|a| a == assertion::ALGORITHM));
        match pick {
            Some(Method::Jwt) if !signs => Err(format!(
                "its token endpoint takes client assertions signed with {}, and this client signs with {} alone",
                found.signing_algs.clone().unwrap_or_default().join(", "),
                assertion::ALGORITHM
            )),
            Some(m) if accepts(name(m)) => Ok(m),
            _ => Err(format!(
                "its token endpoint takes {offered}, and this client authenticates with {} (oauth.token_endpoint_auth_method, oauth.private_key_env)",
                match self.credential {
                    Credential::Key(_) => "private_key_jwt",
                    Credential::Secret(_) => "client_secret_basic or client_secret_post",
                }
            )),
        }
    }

    /// The form fields and the `Basic` header (id, secret) that prove who the client is.
    fn proof(&self, method: Method, found: &Found) -> Result<Proof, String> {
        let id = self.client_id.clone();
        match (&self.credential, method) {
            (Credential::Secret(secret), Method::Basic) => {
                // RFC 6749 §2.3.1: both form-encoded before they are joined.
                Ok((Vec::new(), Some((encode_one(&id), encode_one(secret)))))
            }
            (Credential::Secret(secret), _) => Ok((vec![("client_id", id), ("client_secret", secret.clone())], None)),
            (Credential::Key(key), _) => {
                let jwt = key.assertion(&id, &found.issuer, now())?;
                let kind = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned();
                Ok((vec![("client_id", id), ("client_assertion_type", kind), ("client_assertion", jwt)], None))
            }
        }
    }

    /// One client credentials request (RFC 6749 §4.4), with the resource (RFC 8707).
    async fn request(&self, found: &Found, scope: Option<&str>) -> Result<Token, String> {
        remote::check_url(&found.token_endpoint).map_err(|why| format!("token endpoint refused: {why}"))?;
        let method = self.method(found)?;
        let (proof, basic) = self.proof(method, found)?;
        let mut form = vec![("grant_type", "client_credentials"), ("resource", found.resource.as_str())];
        form.extend(scope.map(|s| ("scope", s)));
        form.extend(proof.iter().map(|(k, v)| (*k, v.as_str())));
        let mut request = self
            .http
            .post(&found.token_endpoint)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json")
            .body(encode(&form));
        if let Some((id, secret)) = basic {
            request = request.basic_auth(id, Some(secret));
        }
        let response = request.send().await.map_err(|e| format!("cannot reach {} ({e})", found.token_endpoint))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| format!("cannot read its answer ({e})"))?;
        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if !status.is_success() {
            let error = value["error"].as_str().unwrap_or("no error code");
            let said = value["error_description"].as_str().map(|d| format!(": {d}")).unwrap_or_default();
            return Err(format!("{} answered {status}, {error}{said}", found.token_endpoint));
        }
        token(&value, now()).ok_or_else(|| format!("{} answered without a bearer access_token", found.token_endpoint))
    }
}

/// A method's name in metadata.
fn name(method: Method) -> &'static str {
    match method {
        Method::Basic => "client_secret_basic",
        Method::Post => "client_secret_post",
        Method::Jwt => "private_key_jwt",
    }
}

/// The client's secret or key, read now from the variable the configuration names.
fn credential(config: &OAuthClientConfig, lookup: impl Fn(&str) -> Option<String>) -> Result<Credential, String> {
    let (field, name) = match (&config.client_secret_env, &config.private_key_env) {
        (Some(name), _) => ("client_secret_env", name),
        (None, Some(name)) => ("private_key_env", name),
        (None, None) => return Err("oauth needs client_secret_env or private_key_env".to_owned()),
    };
    let value = lookup(name).filter(|s| !s.is_empty()).ok_or_else(|| {
        format!(
            "oauth.{field} names ${name}, which is not set in the harness's environment; export it (the {} of client {:?})",
            if field == "private_key_env" { "private key" } else { "client secret" },
            config.client_id
        )
    })?;
    if config.client_secret_env.is_some() {
        return Ok(Credential::Secret(value));
    }
    SigningKey::from_pem(&value)
        .map(Credential::Key)
        .map_err(|why| format!("oauth.private_key_env: ${name} is not a usable key: {why}"))
}

/// The token of a successful token response, if it is a bearer token.
fn token(value: &Value, now: u64) -> Option<Token> {
    let access_token = value["access_token"].as_str().filter(|t| !t.is_empty())?.to_owned();
    let kind = value["token_type"].as_str().unwrap_or("Bearer");
    if !kind.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let expires_at = value["expires_in"].as_u64().map(|s| now.saturating_add(s));
    Some(Token { access_token, expires_at })
}

/// The scopes of both, each once, in order.
fn union(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut all: Vec<&str> = Vec::new();
    for scope in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if !all.contains(&scope) {
            all.push(scope);
        }
    }
    (!all.is_empty()).then(|| all.join(" "))
}

/// `application/x-www-form-urlencoded` of the pairs.
fn encode(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(k, v)| format!("{}={}", encode_one(k), encode_one(v))).collect::<Vec<_>>().join("&")
}

/// One form-encoded value: unreserved bytes as they are, spaces as `+`, the rest `%XX`.
fn encode_one(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => out.push(char::from(b)),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_grow_without_repeats_and_forms_are_encoded() {
        assert_eq!(union(Some("a b"), Some("b c")).as_deref(), Some("a b c"));
        assert_eq!(union(None, None), None);
        assert_eq!(encode(&[("scope", "a b"), ("x", "é&=")]), "scope=a+b&x=%C3%A9%26%3D");
    }

    #[test]
    fn only_bearer_tokens_are_taken() {
        let t =
            token(&serde_json::json!({"access_token": "t", "token_type": "bearer", "expires_in": 60}), 100).unwrap();
        assert_eq!(t.expires_at, Some(160));
        assert!(token(&serde_json::json!({"access_token": "t", "token_type": "mac"}), 0).is_none());
        assert!(token(&serde_json::json!({"access_token": ""}), 0).is_none());
    }
}
