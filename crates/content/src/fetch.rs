//! Fetches an email source from a caller-given URL without letting the caller reach the
//! service's own network (SSRF), within the size, time and redirect limits of [`NetPolicy`].
//!
//! Every connection goes to an address the policy permits: IP-literal hosts are checked before
//! the request, and host names are resolved by [`CheckedResolver`], which hands the HTTP client
//! only permitted addresses, so the address checked is the address connected to (no DNS
//! rebinding gap). Redirects are followed here, one hop at a time, each hop checked the same way.
//! Proxies from the environment are ignored, since a proxy would connect on our behalf unchecked.

use std::net::IpAddr;
use std::sync::Arc;

use encoding_rs::Encoding;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION};
use url::{Host, Url};

use crate::decode::to_utf8;
use crate::netpolicy::{resolve_permitted, NetPolicy, ResolveError};

/// A fetched email source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedSource {
    /// The body, converted to UTF-8.
    pub body: String,
    /// The URL the body came from, after redirects.
    pub final_url: String,
    /// The response's `Content-Type` header, if it had a readable one.
    pub content_type: Option<String>,
}

/// Why a URL source could not be fetched. Each message is a sentence the API can return to the
/// caller as is (as an `InvalidURL` error).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    #[error("'{url}' is not a valid URL ({reason}); give an absolute http:// or https:// URL")]
    InvalidUrl { url: String, reason: String },
    #[error("'{url}' uses the {scheme}: scheme; only http and https URLs can be fetched")]
    UnsupportedScheme { url: String, scheme: String },
    #[error(
        "refused: {host} is a private, loopback or otherwise internal address; give a URL on the \
         public internet"
    )]
    RefusedAddress { host: String },
    #[error(
        "refused: {host} resolves only to private/loopback addresses; give a URL on the public \
         internet"
    )]
    RefusedHost { host: String },
    #[error("the host name {host} could not be resolved ({reason}); check the URL")]
    UnresolvedHost { host: String, reason: String },
    #[error("could not fetch {url}: {reason}")]
    Request { url: String, reason: String },
    #[error("{url} answered with HTTP status {status}; the URL must return the email source with a 2xx status")]
    Status { url: String, status: String },
    #[error(
        "{url} answered with a redirect (HTTP {status}) but no usable Location header; give the \
         final URL of the email source"
    )]
    BadRedirect { url: String, status: u16 },
    #[error(
        "{url} redirected more than {max} times; give the final URL of the email source instead"
    )]
    TooManyRedirects { url: String, max: u32 },
    #[error(
        "fetching {url} took longer than the {seconds} second limit; make the source faster to \
         serve or send the HTML itself"
    )]
    Timeout { url: String, seconds: f64 },
    #[error(
        "the source at {url} is larger than the {limit} byte limit; send a smaller email source"
    )]
    TooLarge { url: String, limit: u64 },
    #[error(
        "the source at {url} is not valid {charset}: the bytes {bytes} at byte {offset} do not \
         form a character; declare its real charset in the Content-Type header or a <meta \
         charset> tag, or send the HTML itself"
    )]
    Charset {
        url: String,
        charset: String,
        offset: usize,
        bytes: String,
    },
}

/// Fetches `url` under `policy`: http(s) only, permitted addresses only, at most
/// `policy.max_redirects` redirects, `policy.max_bytes` of body and `policy.timeout` in all.
pub async fn fetch_source(url: &str, policy: &NetPolicy) -> Result<FetchedSource, FetchError> {
    let seconds = policy.timeout.as_secs_f64();
    match tokio::time::timeout(policy.timeout, fetch_following_redirects(url, policy)).await {
        Ok(result) => result,
        Err(_elapsed) => Err(FetchError::Timeout {
            url: url.to_owned(),
            seconds,
        }),
    }
}

async fn fetch_following_redirects(
    url: &str,
    policy: &NetPolicy,
) -> Result<FetchedSource, FetchError> {
    let mut current = checked_url(url, policy)?;
    let client = client(policy, &current)?;
    let mut redirects = 0;
    loop {
        tracing::debug!(url = %current, redirects, "fetching source");
        let response = client
            .get(current.clone())
            .header(
                ACCEPT,
                HeaderValue::from_static("text/html, text/plain;q=0.9, */*;q=0.5"),
            )
            .send()
            .await
            .map_err(|e| request_error(&current, &e, policy))?;
        let status = response.status();
        if let Some(next) = next_hop(url, &current, &response, redirects, policy)? {
            redirects += 1;
            current = next;
            continue;
        }
        if !status.is_success() {
            return Err(FetchError::Status {
                url: current.to_string(),
                status: status.to_string(),
            });
        }
        return read_source(current, response, policy).await;
    }
}

/// POSTs `body` to `url` under `policy` (the webhook deliveries) and returns the HTTP status of
/// the answer; the answer's body is not read. The same client and checks as [`fetch_source`]:
/// http(s) only, permitted addresses only, `policy.timeout` in all. Redirects are not followed:
/// a POST is not repeated at a place the caller did not name, so a 3xx is returned as it is.
/// `headers` are `(name, value)` pairs; a value that cannot be a header is an error.
pub async fn post(
    url: &str,
    content_type: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
    policy: &NetPolicy,
) -> Result<u16, FetchError> {
    post_answer(url, content_type, headers, body, policy)
        .await
        .map(|a| a.status)
}

/// What a [`post_answer`] got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostAnswer {
    pub status: u16,
    /// A redirect's `Location`, as sent (redirects are not followed).
    pub location: Option<String>,
}

/// [`post`], with the redirect's `Location` when the answer is one.
pub async fn post_answer(
    url: &str,
    content_type: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
    policy: &NetPolicy,
) -> Result<PostAnswer, FetchError> {
    let target = checked_url(url, policy)?;
    let client = client(policy, &target)?;
    let invalid_header = |name: &str| FetchError::Request {
        url: target.to_string(),
        reason: format!("the header {name} has a value that cannot be sent"),
    };
    let mut request = client
        .post(target.clone())
        .header(
            CONTENT_TYPE,
            HeaderValue::from_str(content_type).map_err(|_| invalid_header("Content-Type"))?,
        )
        .body(body);
    for (name, value) in headers {
        let value = HeaderValue::from_str(value).map_err(|_| invalid_header(name))?;
        request = request.header(*name, value);
    }
    let send = async {
        request
            .send()
            .await
            .map(|response| PostAnswer {
                status: response.status().as_u16(),
                location: response
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            })
            .map_err(|e| request_error(&target, &e, policy))
    };
    match tokio::time::timeout(policy.timeout, send).await {
        Ok(result) => result,
        Err(_elapsed) => Err(FetchError::Timeout {
            url: target.to_string(),
            seconds: policy.timeout.as_secs_f64(),
        }),
    }
}

/// Where a redirect response leads, checked against the policy like the first URL; `None` when
/// `response` is not a redirect. `followed` redirects came before it on the way from `start`.
pub(crate) fn next_hop(
    start: &str,
    current: &Url,
    response: &reqwest::Response,
    followed: u32,
    policy: &NetPolicy,
) -> Result<Option<Url>, FetchError> {
    let status = response.status();
    if !status.is_redirection() || status == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(None);
    }
    let bad_redirect = || FetchError::BadRedirect {
        url: current.to_string(),
        status: status.as_u16(),
    };
    let location = response
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(bad_redirect)?;
    let next = current.join(location).map_err(|_| bad_redirect())?;
    if followed >= policy.max_redirects {
        return Err(FetchError::TooManyRedirects {
            url: start.to_owned(),
            max: policy.max_redirects,
        });
    }
    checked_url(next.as_str(), policy).map(Some)
}

/// The certificates of `[fetch] ca_file`, if one is set: read, or why not (naming the file). Also
/// checked at start-up ([`check_ca_file`]), so a wrong path stops the service, not each fetch.
fn extra_roots(policy: &NetPolicy) -> Result<Vec<reqwest::Certificate>, String> {
    let Some(path) = &policy.ca_file else {
        return Ok(Vec::new());
    };
    let unusable = |reason: String| format!("[fetch] ca_file {}: {reason}", path.display());
    let pem = std::fs::read(path).map_err(|e| unusable(e.to_string()))?;
    let roots = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| unusable(e.to_string()))?;
    if roots.is_empty() {
        return Err(unusable(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(roots)
}

/// Whether `[fetch] ca_file` (when set) can be read and holds certificates: for the start-up
/// checks.
pub fn check_ca_file(policy: &NetPolicy) -> Result<(), String> {
    extra_roots(policy).map(drop)
}

pub(crate) fn client(policy: &NetPolicy, url: &Url) -> Result<reqwest::Client, FetchError> {
    let mut builder = reqwest::Client::builder();
    for certificate in extra_roots(policy).map_err(|reason| FetchError::Request {
        url: url.to_string(),
        reason,
    })? {
        builder = builder.add_root_certificate(certificate);
    }
    builder
        .dns_resolver(Arc::new(CheckedResolver {
            policy: Arc::new(policy.clone()),
        }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(policy.timeout)
        .user_agent(concat!("mailproof/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| FetchError::Request {
            url: url.to_string(),
            reason: innermost_cause(&e),
        })
}

/// Longest URL accepted; real email source URLs are far shorter.
const MAX_URL_BYTES: usize = 8192;

/// Parses `url` and refuses what may never be fetched: other schemes, and hosts that are
/// addresses the policy does not permit. Host names are checked later, when they are resolved.
pub(crate) fn checked_url(url: &str, policy: &NetPolicy) -> Result<Url, FetchError> {
    if url.len() > MAX_URL_BYTES {
        return Err(FetchError::InvalidUrl {
            url: format!("{}…", url.chars().take(64).collect::<String>()),
            reason: format!("it is longer than {MAX_URL_BYTES} bytes"),
        });
    }
    let parsed = Url::parse(url.trim()).map_err(|e| FetchError::InvalidUrl {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(FetchError::UnsupportedScheme {
            url: url.to_owned(),
            scheme: parsed.scheme().to_owned(),
        });
    }
    // The url crate has already turned the odd IPv4 spellings (2130706433, 0x7f.1) into
    // dotted quads, so this is the address the client will connect to.
    let literal = match parsed.host() {
        Some(Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
        Some(Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        Some(Host::Domain(_)) => None,
        None => {
            return Err(FetchError::InvalidUrl {
                url: url.to_owned(),
                reason: "it has no host".to_owned(),
            })
        }
    };
    if let Some(ip) = literal {
        if !policy.permits(ip) {
            return Err(FetchError::RefusedAddress {
                host: ip.to_string(),
            });
        }
    }
    Ok(parsed)
}

/// Hands the HTTP client only the addresses [`resolve_permitted`] keeps.
struct CheckedResolver {
    policy: Arc<NetPolicy>,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.policy);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let permitted = resolve_permitted(&host, 0, &policy)
                .await
                .map_err(|e| match e {
                    ResolveError::RefusedAddress { host } => FetchError::RefusedAddress { host },
                    ResolveError::RefusedHost { host } => FetchError::RefusedHost { host },
                    ResolveError::Unresolved { host, reason } => {
                        FetchError::UnresolvedHost { host, reason }
                    }
                })?;
            let addrs: Addrs = Box::new(permitted.into_iter());
            Ok(addrs)
        })
    }
}

/// Turns a client error into the sentence for the caller. Errors raised by [`CheckedResolver`]
/// travel inside the client's error chain and are handed back unchanged.
pub(crate) fn request_error(url: &Url, error: &reqwest::Error, policy: &NetPolicy) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(ours) = cause.downcast_ref::<FetchError>() {
            return ours.clone();
        }
        source = cause.source();
    }
    if error.is_timeout() {
        return FetchError::Timeout {
            url: url.to_string(),
            seconds: policy.timeout.as_secs_f64(),
        };
    }
    FetchError::Request {
        url: url.to_string(),
        reason: innermost_cause(error),
    }
}

/// The most specific message in an error chain ("Connection refused (os error 111)").
fn innermost_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Reads the body up to the size limit and converts it to UTF-8.
async fn read_source(
    url: Url,
    mut response: reqwest::Response,
    policy: &NetPolicy,
) -> Result<FetchedSource, FetchError> {
    let too_large = || FetchError::TooLarge {
        url: url.to_string(),
        limit: policy.max_bytes,
    };
    // A declared length over the limit is refused before any of the body is read.
    if response
        .content_length()
        .is_some_and(|n| n > policy.max_bytes)
    {
        return Err(too_large());
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| request_error(&url, &e, policy))?
    {
        let within_limit =
            u64::try_from(body.len() + chunk.len()).is_ok_and(|total| total <= policy.max_bytes);
        if !within_limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    let (encoding, charset) = body_charset(content_type.as_deref(), &body);
    let body = to_utf8(&body, encoding).map_err(|bad| FetchError::Charset {
        url: url.to_string(),
        charset,
        offset: bad.offset,
        bytes: bad.bytes,
    })?;
    Ok(FetchedSource {
        body,
        final_url: url.to_string(),
        content_type,
    })
}

/// The charset to read a body in, and its name for messages. As in browsers: the
/// `Content-Type` charset, else a `<meta>` charset near the start of the document, else UTF-8
/// (a byte order mark overrides all three when the bytes are decoded). Unknown labels are
/// passed over, as browsers do.
fn body_charset(content_type: Option<&str>, body: &[u8]) -> (&'static Encoding, String) {
    let from_header = content_type
        .and_then(charset_parameter)
        .and_then(known_charset);
    let from_meta = || {
        meta_charset(body)
            .and_then(known_charset)
            .map(|(encoding, label)| {
                // The HTML prescan never believes a <meta> claiming UTF-16: it was just read as
                // ASCII, so the document cannot be UTF-16.
                if encoding == encoding_rs::UTF_16BE || encoding == encoding_rs::UTF_16LE {
                    (encoding_rs::UTF_8, "utf-8".to_owned())
                } else {
                    (encoding, label)
                }
            })
    };
    from_header
        .or_else(from_meta)
        .unwrap_or_else(|| (encoding_rs::UTF_8, "utf-8".to_owned()))
}

/// The encoding for a label, unless it is unknown or "replacement" (a refusal).
fn known_charset(label: String) -> Option<(&'static Encoding, String)> {
    Encoding::for_label(label.as_bytes())
        .filter(|encoding| *encoding != encoding_rs::REPLACEMENT)
        .map(|encoding| (encoding, label))
}

/// The `charset` parameter of a `Content-Type` value.
fn charset_parameter(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(['"', '\'']).to_owned())
            .filter(|v| !v.is_empty())
    })
}

/// How far into a document a `<meta>` charset is looked for, as in the HTML prescan.
const META_PRESCAN_BYTES: usize = 1024;

/// A charset named by a `<meta charset=...>` or `<meta http-equiv=Content-Type content="...;
/// charset=...">` tag in the first kilobyte: a simplified form of the HTML prescan.
fn meta_charset(body: &[u8]) -> Option<String> {
    let head = body.get(..META_PRESCAN_BYTES).unwrap_or(body);
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    head.split("<meta").skip(1).find_map(|tag| {
        let tag = tag.split('>').next()?;
        let at = tag.find("charset")?;
        let value = tag.get(at + "charset".len()..)?.trim_start();
        let value = value.strip_prefix('=')?.trim_start();
        let value = value.trim_start_matches(['"', '\'']);
        let end = value
            .find(|c: char| c == '"' || c == '\'' || c == ';' || c == '/' || c.is_whitespace())
            .unwrap_or(value.len());
        Some(value.get(..end)?.to_owned()).filter(|v| !v.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// What the test server answers to one request.
    struct Reply {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        /// Sent before the headers.
        delay: Duration,
        /// Leave out `Content-Length` and end the body by closing the connection.
        no_length: bool,
    }

    impl Reply {
        fn ok(body: impl Into<Vec<u8>>) -> Reply {
            Reply {
                status: 200,
                headers: vec![("Content-Type", "text/html".to_owned())],
                body: body.into(),
                delay: Duration::ZERO,
                no_length: false,
            }
        }

        fn status(status: u16) -> Reply {
            Reply {
                status,
                ..Reply::ok("not here")
            }
        }

        fn redirect(location: String) -> Reply {
            Reply {
                headers: vec![("Location", location)],
                ..Reply::status(302)
            }
        }
    }

    type Routes = Arc<dyn Fn(&str, SocketAddr) -> Reply + Send + Sync>;

    /// A tiny HTTP/1.1 server on 127.0.0.1 with a port of its own; it stops when the test's
    /// runtime does. `routes` gets the request path and the server's own address.
    async fn serve(
        routes: impl Fn(&str, SocketAddr) -> Reply + Send + Sync + 'static,
    ) -> SocketAddr {
        serve_on([127, 0, 0, 1], routes).await
    }

    /// [`serve`] on another loopback address.
    async fn serve_on(
        ip: [u8; 4],
        routes: impl Fn(&str, SocketAddr) -> Reply + Send + Sync + 'static,
    ) -> SocketAddr {
        let listener = TcpListener::bind((IpAddr::from(ip), 0))
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        let routes: Routes = Arc::new(routes);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let routes = Arc::clone(&routes);
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&request);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let reply = routes(&path, addr);
                    tokio::time::sleep(reply.delay).await;
                    let mut out =
                        format!("HTTP/1.1 {} Test\r\nConnection: close\r\n", reply.status);
                    for (name, value) in &reply.headers {
                        out.push_str(&format!("{name}: {value}\r\n"));
                    }
                    if !reply.no_length {
                        out.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
                    }
                    out.push_str("\r\n");
                    let mut bytes = out.into_bytes();
                    bytes.extend_from_slice(&reply.body);
                    // The client may hang up first (size limit, refusal); that is fine.
                    let _ = stream.write_all(&bytes).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        addr
    }

    fn loopback_allowed() -> NetPolicy {
        NetPolicy {
            allow: vec!["127.0.0.1/32".parse().expect("network")],
            timeout: Duration::from_secs(5),
            ..NetPolicy::default()
        }
    }

    async fn fetch_err(url: &str, policy: &NetPolicy) -> FetchError {
        match fetch_source(url, policy).await {
            Ok(source) => panic!("{url} was fetched: {source:?}"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn a_post_reaches_a_permitted_receiver_and_a_redirect_is_not_followed() {
        let addr = serve(|path, addr| match path {
            "/hook" => Reply::status(204),
            _ => Reply::redirect(format!("http://{addr}/hook")),
        })
        .await;
        let policy = loopback_allowed();
        let headers = [("X-Test", "1".to_owned())];
        for (path, status) in [("/hook", 204), ("/moved", 302)] {
            let url = format!("http://{addr}{path}");
            let answer = post(&url, "application/json", &headers, b"{}".to_vec(), &policy).await;
            assert_eq!(answer, Ok(status), "{path}");
        }
    }

    #[tokio::test]
    async fn a_post_to_loopback_is_refused_without_the_allow_list() {
        let addr = serve(|_, _| Reply::status(200)).await;
        let refused = post(
            &format!("http://{addr}/"),
            "application/json",
            &[],
            Vec::new(),
            &NetPolicy::default(),
        )
        .await;
        assert_eq!(
            refused,
            Err(FetchError::RefusedAddress {
                host: "127.0.0.1".to_owned()
            })
        );
        let by_name = post(
            &format!("http://localhost:{}/", addr.port()),
            "application/json",
            &[],
            Vec::new(),
            &NetPolicy::default(),
        )
        .await;
        assert!(
            matches!(by_name, Err(FetchError::RefusedHost { .. })),
            "{by_name:?}"
        );
    }

    #[tokio::test]
    async fn a_loopback_source_is_fetched_when_the_allow_list_names_it() {
        let addr = serve(|_, _| Reply::ok("<p>hello</p>")).await;
        let url = format!("http://{addr}/email.html");
        let source = fetch_source(&url, &loopback_allowed())
            .await
            .expect("allowed fetch");
        assert_eq!(source.body, "<p>hello</p>");
        assert_eq!(source.final_url, url);
        assert_eq!(source.content_type.as_deref(), Some("text/html"));
    }

    #[tokio::test]
    async fn a_loopback_source_is_refused_without_the_allow_list() {
        let addr = serve(|_, _| Reply::ok("secret")).await;
        let e = fetch_err(&format!("http://{addr}/"), &NetPolicy::default()).await;
        assert_eq!(
            e,
            FetchError::RefusedAddress {
                host: "127.0.0.1".to_owned()
            }
        );
        assert!(
            e.to_string().starts_with("refused: 127.0.0.1 is a private"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_host_name_resolving_to_loopback_is_refused_at_resolution() {
        let addr = serve(|_, _| Reply::ok("secret")).await;
        let url = format!("http://localhost:{}/", addr.port());
        let e = fetch_err(&url, &NetPolicy::default()).await;
        assert_eq!(
            e.to_string(),
            "refused: localhost resolves only to private/loopback addresses; give a URL on the \
             public internet"
        );
    }

    #[tokio::test]
    async fn a_host_name_is_fetched_through_its_permitted_address() {
        let addr = serve(|_, _| Reply::ok("via dns")).await;
        let url = format!("http://localhost:{}/", addr.port());
        let source = fetch_source(&url, &loopback_allowed())
            .await
            .expect("localhost resolves to the allowed 127.0.0.1");
        assert_eq!(source.body, "via dns");
    }

    #[tokio::test]
    async fn other_spellings_of_internal_addresses_are_refused() {
        let policy = NetPolicy::default();
        for url in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
        ] {
            let e = fetch_err(url, &policy).await;
            assert!(matches!(e, FetchError::RefusedAddress { .. }), "{url}: {e}");
        }
    }

    #[tokio::test]
    async fn only_http_and_https_are_fetched() {
        let policy = loopback_allowed();
        for url in [
            "file:///etc/passwd",
            "ftp://127.0.0.1/x",
            "gopher://127.0.0.1/",
        ] {
            let e = fetch_err(url, &policy).await;
            assert!(
                matches!(e, FetchError::UnsupportedScheme { .. }),
                "{url}: {e}"
            );
            assert!(e.to_string().contains("only http and https"), "{e}");
        }
        let e = fetch_err("not a url", &policy).await;
        assert!(matches!(e, FetchError::InvalidUrl { .. }), "{e}");
        let e = fetch_err(&format!("http://127.0.0.1/{}", "a".repeat(10_000)), &policy).await;
        assert!(e.to_string().contains("longer than 8192 bytes"), "{e}");
        assert!(e.to_string().len() < 300, "the message stays short: {e}");
    }

    #[tokio::test]
    async fn redirects_are_followed_and_the_final_url_reported() {
        let addr = serve(|path, addr| match path {
            "/start" => Reply::redirect("/middle".to_owned()),
            "/middle" => Reply::redirect(format!("http://localhost:{}/end", addr.port())),
            _ => Reply::ok("arrived"),
        })
        .await;
        let source = fetch_source(&format!("http://{addr}/start"), &loopback_allowed())
            .await
            .expect("two redirects are within the limit");
        assert_eq!(source.body, "arrived");
        assert_eq!(
            source.final_url,
            format!("http://localhost:{}/end", addr.port())
        );
    }

    #[tokio::test]
    async fn a_redirect_to_a_refused_address_is_refused() {
        let addr = serve(|path, addr| match path {
            "/literal" => Reply::redirect(format!("http://127.0.0.2:{}/", addr.port())),
            "/metadata" => Reply::redirect("http://169.254.169.254/latest/".to_owned()),
            _ => Reply::ok("never"),
        })
        .await;
        let policy = loopback_allowed();
        let e = fetch_err(&format!("http://{addr}/literal"), &policy).await;
        assert_eq!(
            e,
            FetchError::RefusedAddress {
                host: "127.0.0.2".to_owned()
            }
        );
        let e = fetch_err(&format!("http://{addr}/metadata"), &policy).await;
        assert!(e.to_string().starts_with("refused: 169.254.169.254"), "{e}");
    }

    #[tokio::test]
    async fn a_redirect_to_a_host_name_resolving_to_a_refused_address_is_refused() {
        // The first hop is on 127.0.0.2, which the policy admits; `localhost` resolves to
        // 127.0.0.1, which it does not.
        let addr = serve_on([127, 0, 0, 2], |_, addr| {
            Reply::redirect(format!("http://localhost:{}/", addr.port()))
        })
        .await;
        let policy = NetPolicy {
            allow: vec!["127.0.0.2/32".parse().expect("network")],
            ..NetPolicy::default()
        };
        let e = fetch_err(&format!("http://{addr}/"), &policy).await;
        assert_eq!(
            e,
            FetchError::RefusedHost {
                host: "localhost".to_owned()
            }
        );
    }

    #[tokio::test]
    async fn the_resolver_hands_out_only_permitted_addresses() {
        let resolve = |policy: NetPolicy| {
            CheckedResolver {
                policy: Arc::new(policy),
            }
            .resolve("localhost".parse().expect("name"))
        };
        let addrs: Vec<SocketAddr> = resolve(loopback_allowed())
            .await
            .expect("localhost is allowed")
            .collect();
        assert!(!addrs.is_empty());
        assert!(
            addrs.iter().all(|a| a.ip() == IpAddr::from([127, 0, 0, 1])),
            "{addrs:?}"
        );
        let refused = match resolve(NetPolicy::default()).await {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e,
        };
        assert_eq!(
            refused.downcast_ref::<FetchError>(),
            Some(&FetchError::RefusedHost {
                host: "localhost".to_owned()
            })
        );
    }

    #[tokio::test]
    async fn redirects_beyond_the_limit_are_refused() {
        let addr = serve(|path, _| {
            let n: u32 = path.trim_start_matches("/r").parse().unwrap_or(0);
            Reply::redirect(format!("/r{}", n + 1))
        })
        .await;
        let policy = NetPolicy {
            max_redirects: 2,
            ..loopback_allowed()
        };
        let e = fetch_err(&format!("http://{addr}/r0"), &policy).await;
        assert!(
            e.to_string().ends_with(
                "redirected more than 2 times; give the final URL of the email source instead"
            ),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_redirect_without_location_is_reported() {
        let addr = serve(|_, _| Reply::status(301)).await;
        let e = fetch_err(&format!("http://{addr}/"), &loopback_allowed()).await;
        assert!(
            matches!(e, FetchError::BadRedirect { status: 301, .. }),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused() {
        let addr = serve(|_, _| Reply::ok(vec![b'x'; 2000])).await;
        let policy = NetPolicy {
            max_bytes: 1000,
            ..loopback_allowed()
        };
        let e = fetch_err(&format!("http://{addr}/big"), &policy).await;
        assert!(matches!(e, FetchError::TooLarge { limit: 1000, .. }), "{e}");
        assert!(
            e.to_string().contains("larger than the 1000 byte limit"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn an_undeclared_body_over_the_limit_is_cut_off_with_an_error() {
        let addr = serve(|_, _| Reply {
            no_length: true,
            ..Reply::ok(vec![b'x'; 200_000])
        })
        .await;
        let policy = NetPolicy {
            max_bytes: 100_000,
            ..loopback_allowed()
        };
        let e = fetch_err(&format!("http://{addr}/stream"), &policy).await;
        assert!(matches!(e, FetchError::TooLarge { .. }), "{e}");
        // Exactly at the limit is fine.
        let addr = serve(|_, _| Reply {
            no_length: true,
            ..Reply::ok(vec![b'x'; 100_000])
        })
        .await;
        let source = fetch_source(&format!("http://{addr}/"), &policy)
            .await
            .expect("a body of exactly max_bytes is accepted");
        assert_eq!(source.body.len(), 100_000);
    }

    #[tokio::test]
    async fn a_slow_server_times_out() {
        let addr = serve(|_, _| Reply {
            delay: Duration::from_secs(30),
            ..Reply::ok("too late")
        })
        .await;
        let policy = NetPolicy {
            timeout: Duration::from_millis(300),
            ..loopback_allowed()
        };
        let url = format!("http://{addr}/slow");
        let e = fetch_err(&url, &policy).await;
        assert_eq!(
            e.to_string(),
            format!(
                "fetching {url} took longer than the 0.3 second limit; make the source faster \
                 to serve or send the HTML itself"
            )
        );
    }

    #[tokio::test]
    async fn a_missing_page_reports_its_status() {
        let addr = serve(|_, _| Reply::status(404)).await;
        let url = format!("http://{addr}/missing.html");
        let e = fetch_err(&url, &loopback_allowed()).await;
        assert_eq!(
            e.to_string(),
            format!(
                "{url} answered with HTTP status 404 Not Found; the URL must return the email \
                 source with a 2xx status"
            )
        );
    }

    #[tokio::test]
    async fn a_closed_port_is_reported_as_a_connection_failure() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let e = fetch_err(&format!("http://127.0.0.1:{port}/"), &loopback_allowed()).await;
        assert!(matches!(e, FetchError::Request { .. }), "{e}");
        assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
    }

    #[tokio::test]
    async fn the_content_type_charset_decodes_the_body() {
        let addr = serve(|_, _| Reply {
            headers: vec![(
                "Content-Type",
                "text/html; charset=\"windows-1252\"".to_owned(),
            )],
            ..Reply::ok(vec![b'c', b'a', b'f', 0xE9, b' ', 0x80])
        })
        .await;
        let source = fetch_source(&format!("http://{addr}/"), &loopback_allowed())
            .await
            .expect("windows-1252 body");
        assert_eq!(source.body, "café €");
    }

    #[tokio::test]
    async fn a_meta_charset_decodes_the_body_when_the_header_names_none() {
        let mut body = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\"></head><body>".to_vec();
        body.extend_from_slice(&[b'n', b'a', 0xEF, b'v', b'e']);
        let addr = serve(move |_, _| Reply::ok(body.clone())).await;
        let source = fetch_source(&format!("http://{addr}/"), &loopback_allowed())
            .await
            .expect("latin-1 body");
        assert!(source.body.ends_with("naïve"), "{}", source.body);
    }

    #[tokio::test]
    async fn a_body_invalid_in_its_charset_is_reported() {
        let addr = serve(|_, _| Reply::ok(vec![b'o', b'k', 0xE9, b'!'])).await;
        let e = fetch_err(&format!("http://{addr}/"), &loopback_allowed()).await;
        assert!(
            e.to_string()
                .contains("is not valid utf-8: the bytes 0xE9 at byte 2"),
            "{e}"
        );
    }

    #[test]
    fn charset_parameters_are_read_like_browsers_do() {
        assert_eq!(
            charset_parameter("text/html; Charset = 'UTF-8' ").as_deref(),
            Some("UTF-8")
        );
        assert_eq!(charset_parameter("text/html"), None);
        assert_eq!(
            meta_charset(b"<!doctype html><META charset=shift_jis>").as_deref(),
            Some("shift_jis")
        );
        // A <meta> claiming UTF-16 was read as ASCII, so it is wrong; unknown labels are ignored.
        let (encoding, _) = body_charset(None, b"<meta charset=\"utf-16\">");
        assert_eq!(encoding, encoding_rs::UTF_8);
        let (encoding, _) = body_charset(Some("text/html; charset=bogus"), b"");
        assert_eq!(encoding, encoding_rs::UTF_8);
    }
}
