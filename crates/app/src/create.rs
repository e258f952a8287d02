//! Creating email tests (spec §2.1) and spam tests (§2.2) from a typed request: the checks in the
//! order a caller would want to hear about problems (by `intake`'s rules), then one transactional
//! write. The API parses its JSON into a [`TestRequest`]; the web form and the click map build one.

use std::collections::BTreeMap;

use domain::{Plan, SpamMethod, TestId, TestKind};
use store::{Account, NewTest};

use crate::auth::Caller;
use crate::error::{Error, ErrorName, Result};
use crate::state::{AppState, SmtpSendError, SmtpSendRequest};

/// A request to create a test, as the caller sent it (before decoding and checks).
#[derive(Clone, Debug, Default)]
pub struct TestRequest {
    pub subject: Option<String>,
    /// The email's HTML; or else `url`, a page the service fetches it from.
    pub html: Option<String>,
    pub url: Option<String>,
    /// How `subject` and `html` are encoded (`base64`, `quoted-printable`) and their charset.
    pub transfer_encoding: Option<String>,
    pub charset: Option<String>,
    pub reference_id: Option<String>,
    pub customer_id: Option<String>,
    /// Custom headers of the message (email tests).
    pub headers: BTreeMap<String, String>,
    pub callback_url: Option<String>,
    /// Client ids (email tests); empty: the account's defaults.
    pub clients: Vec<String>,
    pub free_test: bool,
    pub image_blocking: bool,
    /// The spam part: an email test's `spam`, a spam test's own fields (`None` there: `svc`).
    pub spam: Option<SpamRequest>,
    /// Check and answer, store nothing (spec §5.3); the sandbox credentials always are.
    pub sandbox: bool,
}

/// How a spam test's message reaches the seed list.
#[derive(Clone, Debug)]
pub struct SpamRequest {
    pub method: SpamMethod,
    pub smtp_info: Option<SmtpInfo>,
    pub from_address: Option<String>,
    /// A seed list key reserved beforehand (`seed` method).
    pub key: Option<String>,
}

impl Default for SpamRequest {
    fn default() -> Self {
        SpamRequest {
            method: SpamMethod::Svc,
            smtp_info: None,
            from_address: None,
            key: None,
        }
    }
}

/// The caller's SMTP server for the `smtp` method. It lives only for the send.
#[derive(Clone, Default)]
pub struct SmtpInfo {
    pub host: Option<String>,
    pub port: Option<i64>,
    pub secure: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for SmtpInfo {
    // The caller's password must never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpInfo")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("secure", &self.secure)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// What creating a test answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    pub id: TestId,
    /// Echoed for enterprise plans only.
    pub reference_id: Option<String>,
    pub customer_id: Option<String>,
    /// The seed list the caller sends to, for the `seed` method only.
    pub seed: Option<SeedList>,
    /// False in the sandbox, which stores nothing.
    pub stored: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedList {
    pub key: String,
    pub addresses: Vec<String>,
}

/// What both kinds of test share, decoded and validated.
struct Source {
    subject: String,
    html: String,
    source_url: Option<String>,
}

/// The email source of a request. In the sandbox a `url` is checked but never fetched: the
/// sandbox answers from what the request holds, and its public credentials must not make the
/// service fetch for strangers.
async fn read_source(req: &TestRequest, state: &AppState, sandbox: bool) -> Result<Source> {
    let subject = req.subject.clone().ok_or_else(|| {
        Error::new(
            ErrorName::NoSubject,
            "`subject` is required: add the email's subject line",
        )
    })?;
    let html = req.html.clone().filter(|h| !h.is_empty());
    let url = req.url.clone().filter(|u| !u.trim().is_empty());
    if html.is_none() && url.is_none() {
        return Err(Error::new(
            ErrorName::NoSource,
            "send the email source as `html`, or a `url` the service can fetch it from",
        ));
    }
    let (encoding, charset) = (req.transfer_encoding.as_deref(), req.charset.as_deref());
    let decode = |text: &str, field: &str| {
        content::decode::decode_source(text, encoding, charset, field)
            .map_err(|e| Error::new(ErrorName::BadRequest, e.to_string()))
    };
    let subject = decode(&subject, "subject")?;
    if subject.trim().is_empty() {
        return Err(Error::new(
            ErrorName::NoSubject,
            "`subject` is empty: give the email's subject line",
        ));
    }
    if let Some(html) = html {
        let html = decode(&html, "html")?;
        intake::check_html(&html).map_err(intake_error)?;
        return Ok(Source {
            subject,
            html,
            source_url: None,
        });
    }
    let url = url.unwrap_or_default();
    if sandbox {
        check_source_url(url.trim())?;
        return Ok(Source {
            subject,
            html: String::new(),
            source_url: Some(url),
        });
    }
    let fetched = content::fetch::fetch_source(url.trim(), &state.settings.net_policy)
        .await
        .map_err(|e| Error::new(ErrorName::InvalidUrl, e.to_string()))?;
    intake::check_html(&fetched.body).map_err(intake_error)?;
    Ok(Source {
        subject,
        html: fetched.body,
        source_url: Some(url),
    })
}

/// A `url` the service could fetch: absolute http(s) with a host.
pub fn check_source_url(raw: &str) -> Result<()> {
    match url::Url::parse(raw) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        _ => Err(Error::new(
            ErrorName::InvalidUrl,
            format!("`url` {raw:?} is not an absolute http:// or https:// URL"),
        )),
    }
}

/// The §7 error for a broken intake rule, with what the caller can do about it.
fn intake_error(e: intake::IntakeError) -> Error {
    use intake::IntakeError as E;
    let name = match &e {
        E::NoClients => ErrorName::NoClients,
        E::InvalidClient(_) => ErrorName::InvalidClient,
        E::InvalidFreeClient(_) => ErrorName::InvalidFreeClient,
        E::EnterpriseOnly { .. } => ErrorName::PermissionError,
        E::MissingCustomerId { .. } => ErrorName::MissingCustomerId,
        E::IdTooLong { .. }
        | E::TooManyHeaders
        | E::HeaderName(_)
        | E::ReservedHeader(_)
        | E::HeaderTooLong(_)
        | E::HeaderLineBreak(_)
        | E::HtmlTooLarge { .. } => ErrorName::BadRequest,
        E::CallbackUrl(_) => ErrorName::InvalidParameter,
    };
    let hint = match &e {
        E::NoClients | E::InvalidClient(_) => "; GET /v5/email/clients lists the ids you can use",
        E::InvalidFreeClient(_) => "; use clients marked `free` in GET /v5/email/clients",
        E::EnterpriseOnly { .. } => "; remove it or upgrade the plan",
        E::MissingCustomerId { .. } => ": add `customer_id`",
        E::HeaderName(_) | E::ReservedHeader(_) | E::HeaderLineBreak(_) => {
            "; choose another name or value"
        }
        E::HtmlTooLarge { .. } => "; remove inlined images or unused markup",
        E::IdTooLong { .. } | E::TooManyHeaders | E::HeaderTooLong(_) | E::CallbackUrl(_) => "",
    };
    Error::new(name, format!("{e}{hint}"))
}

/// A callback URL by the intake rule, judged against this service's network policy.
pub fn callback_url(state: &AppState, raw: &str) -> Result<String> {
    intake::check_callback_url(raw, |ip| state.settings.net_policy.permits(ip))
        .map_err(intake_error)
}

fn read_tenancy(
    req: &TestRequest,
    plan: Plan,
    account: Option<&Account>,
) -> Result<intake::Tenancy> {
    intake::Tenancy::resolve(
        req.reference_id.clone(),
        req.customer_id.clone(),
        plan,
        account,
        chrono::Utc::now().timestamp(),
    )
    .map_err(intake_error)
}

fn read_headers(req: &TestRequest, plan: Plan) -> Result<BTreeMap<String, String>> {
    if req.headers.is_empty() {
        return Ok(BTreeMap::new());
    }
    intake::custom_headers_allowed(plan).map_err(intake_error)?;
    if req.headers.len() > intake::MAX_CUSTOM_HEADERS {
        return Err(intake_error(intake::IntakeError::TooManyHeaders));
    }
    for (name, value) in &req.headers {
        intake::check_custom_header(name, value).map_err(intake_error)?;
    }
    Ok(req.headers.clone())
}

fn check_spam(spam: &SpamRequest) -> Result<()> {
    if spam.method == SpamMethod::Smtp
        && spam
            .smtp_info
            .as_ref()
            .and_then(|i| i.host.as_deref())
            .is_none_or(|h| h.trim().is_empty())
    {
        return Err(Error::new(
            ErrorName::BadRequest,
            "the smtp method needs `smtp_info` with at least `host` (and `port`, `secure`, `username`, `password` as needed)",
        ));
    }
    if let Some(f) = &spam.from_address {
        if !f.contains('@') || f.len() > 320 || f.contains(['\r', '\n']) {
            return Err(Error::new(
                ErrorName::BadRequest,
                format!("`from_address` {f:?} is not an email address"),
            ));
        }
    }
    Ok(())
}

/// Resolves the seed key (a reserved one, or a new one) and the address list. Every method gets
/// one: `smtp` and `svc` send to the same addresses, only `seed` shows them to the caller.
async fn seed_list(
    req: &SpamRequest,
    account: Option<&Account>,
    state: &AppState,
) -> Result<(String, Vec<String>)> {
    let reserved = req.key.as_ref().filter(|_| req.method == SpamMethod::Seed);
    let key = match (reserved, account) {
        (Some(k), Some(a)) => {
            let k = k.trim().to_ascii_lowercase();
            match state.store.seed_key(&k).await? {
                Some((owner, None)) if owner == a.id => k,
                Some((owner, Some(_))) if owner == a.id => {
                    return Err(Error::new(
                        ErrorName::BadRequest,
                        format!("seed list key {k:?} is already used by another test; reserve a new one with GET /v5/spam/seedlist"),
                    ))
                }
                _ => {
                    return Err(Error::new(
                        ErrorName::BadRequest,
                        format!("seed list key {k:?} was not reserved by this account; reserve one with GET /v5/spam/seedlist"),
                    ))
                }
            }
        }
        (Some(k), None) => k.trim().to_ascii_lowercase(),
        (None, _) => domain::seed::generate_key(),
    };
    let addresses = state
        .spam_clients
        .iter()
        .map(|c| domain::seed::seed_address(&key, &c.client, &state.settings.seed_domain))
        .collect();
    Ok((key, addresses))
}

/// For the smtp method, the send through the caller's server happens now, so that a bad host or
/// refused credentials reach the caller in the creation response (spec §7.1).
async fn send_through_callers_smtp(
    state: &AppState,
    spam: &SpamRequest,
    src: &Source,
    recipients: &[String],
) -> Result<()> {
    let (Some(info), Some(probe)) = (&spam.smtp_info, &state.smtp_probe) else {
        return Ok(());
    };
    let port = info.port.unwrap_or(25);
    let port = u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| {
        Error::new(
            ErrorName::BadRequest,
            format!("smtp_info `port` {port} is not a TCP port"),
        )
    })?;
    let secure = info.secure.clone().unwrap_or_default().to_ascii_lowercase();
    if !matches!(secure.as_str(), "" | "ssl" | "tls") {
        return Err(Error::new(
            ErrorName::BadRequest,
            format!("smtp_info `secure` {secure:?} must be \"ssl\", \"tls\" or empty"),
        ));
    }
    let req = SmtpSendRequest {
        host: info.host.clone().unwrap_or_default().trim().to_string(),
        port,
        secure,
        username: info.username.clone(),
        password: info.password.clone(),
        from_address: spam.from_address.clone().unwrap_or_default(),
        subject: src.subject.clone(),
        html: src.html.clone(),
        recipients: recipients.to_vec(),
    };
    match probe.send_test(req).await {
        Ok(()) => Ok(()),
        Err(SmtpSendError::Refused(m)) => Err(Error::new(
            ErrorName::SmtpError,
            format!("smtp_info `host` was not contacted: {m}"),
        )),
        Err(SmtpSendError::Connect(m)) => Err(Error::new(
            ErrorName::SmtpError,
            format!("could not reach the SMTP server in smtp_info: {m}"),
        )),
        Err(SmtpSendError::Auth(m)) => Err(Error::new(
            ErrorName::SmtpAuthenticationError,
            format!("the SMTP server refused the credentials in smtp_info: {m}"),
        )),
        Err(SmtpSendError::Other(m)) => Err(Error::new(
            ErrorName::SmtpError,
            format!("sending through the SMTP server in smtp_info failed: {m}"),
        )),
    }
}

/// The caller's server may relay the message to our SMTP listener before the test row is
/// committed; a reserved key makes the seed addresses acceptable from that moment.
async fn reserve_before_send(state: &AppState, account_id: i64, key: &str) -> Result<()> {
    if state.store.seed_key(key).await?.is_none() {
        state
            .store
            .reserve_seed_key(account_id, key, chrono::Utc::now().timestamp())
            .await?;
    }
    Ok(())
}

/// Creates a test of `kind` by the API's rules. An email test's spam part is optional; a spam
/// test ignores headers, clients, `free_test` and `image_blocking`.
pub async fn create_test(
    state: &AppState,
    caller: &Caller,
    kind: TestKind,
    mut req: TestRequest,
) -> Result<Created> {
    let account = caller.account();
    let plan = account.map_or(Plan::Enterprise, |a| a.plan);
    let sandbox = req.sandbox || account.is_none();
    if kind == TestKind::Spam && req.spam.is_none() {
        req.spam = Some(SpamRequest::default());
    }
    let src = read_source(&req, state, sandbox).await?;
    let tenancy = read_tenancy(&req, plan, account)?;
    let email = kind == TestKind::Email;
    let headers = if email {
        read_headers(&req, plan)?
    } else {
        BTreeMap::new()
    };
    let callback_url = req
        .callback_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        .map(|u| callback_url(state, u))
        .transpose()?;
    let free = email && (req.free_test || plan == Plan::Free);
    let image_blocking = email && req.image_blocking;
    let rules = intake::ClientRules::new(&state.catalog, account);
    let clients = if email {
        rules
            .resolve(&req.clients, free, intake::OnInvalid::Refuse)
            .map_err(intake_error)?
    } else {
        Vec::new()
    };
    let spam = req.spam.take().map(|mut s| {
        let blank = |v: &Option<String>| v.as_deref().is_none_or(|t| t.trim().is_empty());
        if blank(&s.from_address) {
            s.from_address = None;
        }
        if blank(&s.key) {
            s.key = None;
        }
        s
    });
    if let Some(s) = &spam {
        check_spam(s)?;
    }
    let seed = match &spam {
        Some(s) => Some(seed_list(s, account, state).await?),
        None => None,
    };

    let id = TestId::generate();
    let echo = plan.is_enterprise();
    let mut created = Created {
        id: id.clone(),
        reference_id: tenancy.reference_id.clone().filter(|_| echo),
        customer_id: tenancy.customer_id.clone().filter(|_| echo),
        seed: match (&seed, spam.as_ref().map(|s| s.method)) {
            (Some((key, addresses)), Some(SpamMethod::Seed)) => Some(SeedList {
                key: key.clone(),
                addresses: addresses.clone(),
            }),
            _ => None,
        },
        stored: false,
    };
    let Some(account) = account.filter(|_| !sandbox) else {
        return Ok(created);
    };
    if let Some(s) = &spam {
        if let (SpamMethod::Smtp, Some((key, list))) = (s.method, &seed) {
            reserve_before_send(state, account.id, key).await?;
            send_through_callers_smtp(state, s, &src, list).await?;
        }
    }
    let new = NewTest {
        id: id.to_string(),
        account_id: account.id,
        kind,
        subject: src.subject,
        html: src.html,
        created_at: chrono::Utc::now().timestamp(),
        reference_id: tenancy.reference_id,
        customer_id: tenancy.customer_id,
        headers,
        image_blocking,
        free_test: free,
        source_url: src.source_url,
        clients: if email {
            rules.test_clients(&clients, image_blocking)
        } else {
            Vec::new()
        },
        spam_method: spam.as_ref().map(|s| s.method),
        seed_key: seed.as_ref().map(|(k, _)| k.clone()),
        spam_from_address: spam.as_ref().and_then(|s| s.from_address.clone()),
        spam_filters: spam_filter_rows(state, spam.is_some()),
        reprocesses: if email {
            state.settings.reprocess_quota
        } else {
            0
        },
        monthly_limit: tenancy.monthly_limit,
        callback_url,
        text_part: None,
        // The spam part's `from_address`, when given, names the sender.
        sender: None,
    };
    state.store.create_test(&new).await?;
    state.work_ready.notify_waiters();
    tracing::info!(test_id = %id, kind = kind.as_str(), clients = new.clients.len(), spam = spam.is_some(), "test created");
    created.stored = true;
    Ok(created)
}

fn spam_filter_rows(state: &AppState, with_spam: bool) -> Vec<(String, domain::FilterType)> {
    if !with_spam {
        return Vec::new();
    }
    state
        .spam_clients
        .iter()
        .map(|c| (c.client.clone(), c.kind))
        .collect()
}
