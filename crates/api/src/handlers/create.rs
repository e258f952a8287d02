//! Creating email tests (spec §2.1) and spam tests (§2.2): validation in the order a caller would
//! want to hear about problems, then one transactional write.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use domain::{Plan, SpamMethod, TestId, TestKind};
use serde_json::{json, Map, Value};
use store::{Account, NewTest};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::params::{self, Body};
use crate::state::{AppState, SmtpSendError, SmtpSendRequest};

/// What both kinds of test share, decoded and validated.
struct Source {
    subject: String,
    html: String,
    source_url: Option<String>,
}

/// The email source of a create request. In a sandbox request a `url` is checked but never
/// fetched: the sandbox answers from what the request holds, and its public credentials must not
/// make the service fetch for strangers.
async fn read_source(m: &Map<String, Value>, state: &AppState, sandbox: bool) -> ApiResult<Source> {
    let subject = params::string(m, "subject")?.ok_or_else(|| {
        ApiError::new(
            ErrorName::NoSubject,
            "`subject` is required: add the email's subject line",
        )
    })?;
    let html = params::string(m, "html")?.filter(|h| !h.is_empty());
    let url = params::string(m, "url")?.filter(|u| !u.trim().is_empty());
    if html.is_none() && url.is_none() {
        return Err(ApiError::new(
            ErrorName::NoSource,
            "send the email source as `html`, or a `url` the service can fetch it from",
        ));
    }
    let encoding = params::string(m, "transfer_encoding")?;
    let charset = params::string(m, "charset")?;
    let decode = |text: &str, field: &str| {
        content::decode::decode_source(text, encoding.as_deref(), charset.as_deref(), field)
            .map_err(|e| ApiError::new(ErrorName::BadRequest, e.to_string()))
    };
    let subject = decode(&subject, "subject")?;
    if subject.trim().is_empty() {
        return Err(ApiError::new(
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
        .map_err(|e| ApiError::new(ErrorName::InvalidUrl, e.to_string()))?;
    intake::check_html(&fetched.body).map_err(intake_error)?;
    Ok(Source {
        subject,
        html: fetched.body,
        source_url: Some(url),
    })
}

/// A `url` the service could fetch: absolute http(s) with a host.
pub(crate) fn check_source_url(raw: &str) -> ApiResult<()> {
    match url::Url::parse(raw) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        _ => Err(ApiError::new(
            ErrorName::InvalidUrl,
            format!("`url` {raw:?} is not an absolute http:// or https:// URL"),
        )),
    }
}

/// The §7 error for a broken intake rule, with what the caller can do about it.
fn intake_error(e: intake::IntakeError) -> ApiError {
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
    ApiError::new(name, format!("{e}{hint}"))
}

/// A callback URL by the intake rule, judged against this service's network policy.
pub(crate) fn callback_url(state: &AppState, raw: &str) -> ApiResult<String> {
    intake::check_callback_url(raw, |ip| state.settings.net_policy.permits(ip))
        .map_err(intake_error)
}

/// The request's `callback_url` (extension), if it names one.
fn read_callback_url(m: &Map<String, Value>, state: &AppState) -> ApiResult<Option<String>> {
    params::string(m, "callback_url")?
        .filter(|u| !u.trim().is_empty())
        .map(|u| callback_url(state, &u))
        .transpose()
}

fn read_tenancy(
    m: &Map<String, Value>,
    plan: Plan,
    account: Option<&Account>,
) -> ApiResult<intake::Tenancy> {
    intake::Tenancy::resolve(
        params::string(m, "reference_id")?,
        params::string(m, "customer_id")?,
        plan,
        account,
        chrono::Utc::now().timestamp(),
    )
    .map_err(intake_error)
}

fn read_headers(m: &Map<String, Value>, plan: Plan) -> ApiResult<BTreeMap<String, String>> {
    let Some(obj) = params::object(m, "headers")? else {
        return Ok(BTreeMap::new());
    };
    if obj.is_empty() {
        return Ok(BTreeMap::new());
    }
    intake::custom_headers_allowed(plan).map_err(intake_error)?;
    if obj.len() > intake::MAX_CUSTOM_HEADERS {
        return Err(intake_error(intake::IntakeError::TooManyHeaders));
    }
    let mut out = BTreeMap::new();
    for (name, value) in obj {
        let value = match value {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                return Err(ApiError::new(
                    ErrorName::BadRequest,
                    format!("header {name:?} must have a string value"),
                ))
            }
        };
        intake::check_custom_header(&name, &value).map_err(intake_error)?;
        out.insert(name, value);
    }
    Ok(out)
}

/// The spam part of a request: from `spam` (email tests) or the top level (spam tests).
struct SpamRequest {
    method: SpamMethod,
    smtp_info: Option<Map<String, Value>>,
    from_address: Option<String>,
    key: Option<String>,
}

fn read_spam(m: &Map<String, Value>) -> ApiResult<SpamRequest> {
    let method = match params::string(m, "test_method")?.filter(|s| !s.trim().is_empty()) {
        None => SpamMethod::Svc,
        Some(s) => s.parse().map_err(|()| {
            ApiError::new(
                ErrorName::InvalidSpamType,
                format!("spam `test_method` {s:?} is not one of svc, smtp, seed"),
            )
        })?,
    };
    let smtp_info = params::object(m, "smtp_info")?;
    if method == SpamMethod::Smtp {
        let host = smtp_info
            .as_ref()
            .map(|i| params::string(i, "host"))
            .transpose()?
            .flatten()
            .filter(|h| !h.trim().is_empty());
        if host.is_none() {
            return Err(ApiError::new(
                ErrorName::BadRequest,
                "the smtp method needs `smtp_info` with at least `host` (and `port`, `secure`, `username`, `password` as needed)",
            ));
        }
    }
    let from_address = params::string(m, "from_address")?.filter(|s| !s.trim().is_empty());
    if let Some(f) = &from_address {
        if !f.contains('@') || f.len() > 320 || f.contains(['\r', '\n']) {
            return Err(ApiError::new(
                ErrorName::BadRequest,
                format!("`from_address` {f:?} is not an email address"),
            ));
        }
    }
    let key = params::string(m, "key")?.filter(|s| !s.trim().is_empty());
    Ok(SpamRequest {
        method,
        smtp_info,
        from_address,
        key,
    })
}

/// Resolves the seed key (a reserved one, or a new one) and the address list. Every method gets
/// one: `smtp` and `svc` send to the same addresses, only `seed` shows them to the caller.
async fn seed_list(
    req: &SpamRequest,
    account: Option<&Account>,
    state: &AppState,
) -> ApiResult<(String, Vec<String>)> {
    let reserved = req.key.as_ref().filter(|_| req.method == SpamMethod::Seed);
    let key = match (reserved, account) {
        (Some(k), Some(a)) => {
            let k = k.trim().to_ascii_lowercase();
            match state.store.seed_key(&k).await? {
                Some((owner, None)) if owner == a.id => k,
                Some((owner, Some(_))) if owner == a.id => {
                    return Err(ApiError::new(
                        ErrorName::BadRequest,
                        format!("seed list key {k:?} is already used by another test; reserve a new one with GET /v5/spam/seedlist"),
                    ))
                }
                _ => {
                    return Err(ApiError::new(
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

fn echo_tenancy(resp: &mut Map<String, Value>, plan: Plan, t: &intake::Tenancy) {
    if plan.is_enterprise() {
        if let Some(r) = &t.reference_id {
            resp.insert("reference_id".into(), json!(r));
        }
        if let Some(c) = &t.customer_id {
            resp.insert("customer_id".into(), json!(c));
        }
    }
}

/// For the smtp method, the send through the caller's server happens now, so that a bad host or
/// refused credentials reach the caller in the creation response (spec §7.1).
async fn send_through_callers_smtp(
    state: &AppState,
    spam: &SpamRequest,
    src: &Source,
    recipients: &[String],
) -> ApiResult<()> {
    let (Some(info), Some(probe)) = (&spam.smtp_info, &state.smtp_probe) else {
        return Ok(());
    };
    let port = params::integer(info, "port")?.unwrap_or(25);
    let port = u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| {
        ApiError::new(
            ErrorName::BadRequest,
            format!("smtp_info `port` {port} is not a TCP port"),
        )
    })?;
    let secure = params::string(info, "secure")?
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !matches!(secure.as_str(), "" | "ssl" | "tls") {
        return Err(ApiError::new(
            ErrorName::BadRequest,
            format!("smtp_info `secure` {secure:?} must be \"ssl\", \"tls\" or empty"),
        ));
    }
    let req = SmtpSendRequest {
        host: params::string(info, "host")?
            .unwrap_or_default()
            .trim()
            .to_string(),
        port,
        secure,
        username: params::string(info, "username")?,
        password: params::string(info, "password")?,
        from_address: spam.from_address.clone().unwrap_or_default(),
        subject: src.subject.clone(),
        html: src.html.clone(),
        recipients: recipients.to_vec(),
    };
    match probe.send_test(req).await {
        Ok(()) => Ok(()),
        Err(SmtpSendError::Refused(m)) => Err(ApiError::new(
            ErrorName::SmtpError,
            format!("smtp_info `host` was not contacted: {m}"),
        )),
        Err(SmtpSendError::Connect(m)) => Err(ApiError::new(
            ErrorName::SmtpError,
            format!("could not reach the SMTP server in smtp_info: {m}"),
        )),
        Err(SmtpSendError::Auth(m)) => Err(ApiError::new(
            ErrorName::SmtpAuthenticationError,
            format!("the SMTP server refused the credentials in smtp_info: {m}"),
        )),
        Err(SmtpSendError::Other(m)) => Err(ApiError::new(
            ErrorName::SmtpError,
            format!("sending through the SMTP server in smtp_info failed: {m}"),
        )),
    }
}

/// The caller's server may relay the message to our SMTP listener before the test row is
/// committed; a reserved key makes the seed addresses acceptable from that moment.
async fn reserve_before_send(state: &AppState, account_id: i64, key: &str) -> ApiResult<()> {
    if state.store.seed_key(key).await?.is_none() {
        state
            .store
            .reserve_seed_key(account_id, key, chrono::Utc::now().timestamp())
            .await?;
    }
    Ok(())
}

pub async fn create_email_test(
    State(state): State<AppState>,
    caller: Caller,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    create_email(&state, &caller, m).await.map(Json)
}

/// Creates an email test from a request body in the §2.1 shape, by the API's rules; the answer is
/// the §2.1 response. The web form builds the same body and comes through here too.
pub async fn create_email(
    state: &AppState,
    caller: &Caller,
    m: Map<String, Value>,
) -> ApiResult<Value> {
    let state = state.clone();
    let account = caller.account();
    let plan = account.map_or(Plan::Enterprise, |a| a.plan);
    let sandbox = params::boolean(&m, "sandbox")?.unwrap_or(false) || account.is_none();
    let src = read_source(&m, &state, sandbox).await?;
    let tenancy = read_tenancy(&m, plan, account)?;
    let headers = read_headers(&m, plan)?;
    let callback_url = read_callback_url(&m, &state)?;
    let free = params::boolean(&m, "free_test")?.unwrap_or(false) || plan == Plan::Free;
    let image_blocking = params::boolean(&m, "image_blocking")?.unwrap_or(false);
    let rules = intake::ClientRules::new(&state.catalog, account);
    let clients = rules
        .resolve(
            &params::id_list(&m, "clients")?.unwrap_or_default(),
            free,
            intake::OnInvalid::Refuse,
        )
        .map_err(intake_error)?;
    let spam = params::object(&m, "spam")?
        .map(|s| read_spam(&s))
        .transpose()?;
    let seed = match &spam {
        Some(s) => Some(seed_list(s, account, &state).await?),
        None => None,
    };

    let id = TestId::generate();
    let mut resp = Map::new();
    resp.insert("id".into(), json!(id.as_str()));
    echo_tenancy(&mut resp, plan, &tenancy);
    if let (Some((key, list)), Some(SpamMethod::Seed)) = (&seed, spam.as_ref().map(|s| s.method)) {
        resp.insert("spam".into(), json!({"key": key, "address_list": list}));
    }
    let Some(account) = account.filter(|_| !sandbox) else {
        return Ok(Value::Object(resp));
    };
    if let Some(s) = &spam {
        if let (SpamMethod::Smtp, Some((key, list))) = (s.method, &seed) {
            reserve_before_send(&state, account.id, key).await?;
            send_through_callers_smtp(&state, s, &src, list).await?;
        }
    }

    let new = NewTest {
        id: id.to_string(),
        account_id: account.id,
        kind: TestKind::Email,
        subject: src.subject,
        html: src.html,
        created_at: chrono::Utc::now().timestamp(),
        reference_id: tenancy.reference_id,
        customer_id: tenancy.customer_id,
        headers,
        image_blocking,
        free_test: free,
        source_url: src.source_url,
        clients: rules.test_clients(&clients, image_blocking),
        spam_method: spam.as_ref().map(|s| s.method),
        seed_key: seed.as_ref().map(|(k, _)| k.clone()),
        spam_from_address: spam.as_ref().and_then(|s| s.from_address.clone()),
        spam_filters: spam_filter_rows(&state, spam.is_some()),
        reprocesses: state.settings.reprocess_quota,
        monthly_limit: tenancy.monthly_limit,
        callback_url,
        text_part: None,
    };
    state.store.create_test(&new).await?;
    state.work_ready.notify_waiters();
    tracing::info!(test_id = %id, clients = new.clients.len(), spam = spam.is_some(), "email test created");
    Ok(Value::Object(resp))
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

pub async fn create_spam_test(
    State(state): State<AppState>,
    caller: Caller,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let account = caller.account();
    let plan = account.map_or(Plan::Enterprise, |a| a.plan);
    let sandbox = params::boolean(&m, "sandbox")?.unwrap_or(false) || account.is_none();
    let src = read_source(&m, &state, sandbox).await?;
    let tenancy = read_tenancy(&m, plan, account)?;
    let callback_url = read_callback_url(&m, &state)?;
    let spam = read_spam(&m)?;
    let seed = seed_list(&spam, account, &state).await?;

    let id = TestId::generate();
    let mut resp = Map::new();
    resp.insert("id".into(), json!(id.as_str()));
    echo_tenancy(&mut resp, plan, &tenancy);
    if spam.method == SpamMethod::Seed {
        resp.insert("address_list".into(), json!(seed.1));
    }
    let Some(account) = account.filter(|_| !sandbox) else {
        return Ok(Json(Value::Object(resp)));
    };
    if spam.method == SpamMethod::Smtp {
        reserve_before_send(&state, account.id, &seed.0).await?;
        send_through_callers_smtp(&state, &spam, &src, &seed.1).await?;
    }
    let new = NewTest {
        id: id.to_string(),
        account_id: account.id,
        kind: TestKind::Spam,
        subject: src.subject,
        html: src.html,
        created_at: chrono::Utc::now().timestamp(),
        reference_id: tenancy.reference_id,
        customer_id: tenancy.customer_id,
        headers: BTreeMap::new(),
        image_blocking: false,
        free_test: false,
        source_url: src.source_url,
        clients: Vec::new(),
        spam_method: Some(spam.method),
        seed_key: Some(seed.0.clone()),
        spam_from_address: spam.from_address.clone(),
        spam_filters: spam_filter_rows(&state, true),
        reprocesses: 0,
        monthly_limit: tenancy.monthly_limit,
        callback_url,
        text_part: None,
    };
    state.store.create_test(&new).await?;
    state.work_ready.notify_waiters();
    tracing::info!(test_id = %id, method = spam.method.as_str(), "spam test created");
    Ok(Json(Value::Object(resp)))
}
