//! The rules for creating a test, in one place for every way a test comes in: the HTTP API
//! (`POST /v5/email/tests`, `/v5/spam/tests`) and the auto-inbox (mail turned into a test).
//!
//! What a plan may use, which clients a test gets when it names none, which ids and X-headers may
//! be stored and how large an email may be are decided here and nowhere else, so the two paths
//! cannot drift apart. The callers differ only in how they report a broken rule: the API answers
//! with an error, the auto-inbox (which cannot answer) skips what it may skip and otherwise makes
//! no test. That choice is explicit in each call ([`OnInvalid`]).
//!
//! Invariant: no IO. The clock, the catalog and the account are handed in.

pub mod account;

use std::collections::HashSet;
use std::net::IpAddr;

use domain::{Catalog, Client, Plan, Variant};
use store::{Account, NewTestClient};

/// RFC 5322's limit on a header line, which spec §8 applies to every X-header line.
pub const MAX_HEADER_LINE: usize = 998;
/// Custom X-headers stored with one test.
pub const MAX_CUSTOM_HEADERS: usize = 50;
/// Longest `reference_id` / `customer_id`.
pub const MAX_ID_LEN: usize = 255;
/// Largest email source accepted: what the renderer takes (larger HTML would bounce for every
/// client, so it is refused when the test is created instead).
pub const MAX_HTML_BYTES: usize = domain::MAX_HTML_BYTES;
/// Longest `callback_url`: far more than a real webhook endpoint needs, little to store.
pub const MAX_CALLBACK_URL: usize = 2048;

/// A rule the request broke. The API turns each into its §7 error; the auto-inbox logs it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntakeError {
    #[error("no client is available for this test")]
    NoClients,
    #[error("unknown client id(s): {}", .0.join(", "))]
    InvalidClient(Vec<String>),
    #[error("client(s) {} are not available in free tests", .0.join(", "))]
    InvalidFreeClient(Vec<String>),
    #[error("`{field}` is an enterprise feature and the plan is {plan}")]
    EnterpriseOnly { field: &'static str, plan: Plan },
    #[error("`{field}` is longer than {MAX_ID_LEN} characters")]
    IdTooLong { field: &'static str },
    #[error("the {plan} plan bills per customer: every test needs a customer id")]
    MissingCustomerId { plan: Plan },
    #[error("at most {MAX_CUSTOM_HEADERS} headers may be stored with a test")]
    TooManyHeaders,
    #[error("header {0:?} is not allowed: header names begin with `X-` and use letters, digits, `-` and `_`")]
    HeaderName(String),
    #[error("header {0:?} uses the reserved prefix `X-SVC`")]
    ReservedHeader(String),
    #[error("header {0:?} is longer than a {MAX_HEADER_LINE}-character header line allows")]
    HeaderTooLong(String),
    #[error("header {0:?} has a line break in its value")]
    HeaderLineBreak(String),
    #[error("the email source is {len} bytes, over the {MAX_HTML_BYTES}-byte limit")]
    HtmlTooLarge { len: usize },
    #[error("`callback_url` {0}")]
    CallbackUrl(String),
}

/// What to do with a broken rule that could be passed over (an unknown client id, a malformed
/// header): refuse the request (the API), or skip the offending item (the auto-inbox).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInvalid {
    Refuse,
    Skip,
}

/// Which clients a caller may use: the catalog, narrowed by a client-restricted account's list.
/// `account` is `None` for the sandbox, which may use every client.
#[derive(Clone, Copy)]
pub struct ClientRules<'a> {
    catalog: &'a Catalog,
    account: Option<&'a Account>,
}

impl<'a> ClientRules<'a> {
    pub fn new(catalog: &'a Catalog, account: Option<&'a Account>) -> ClientRules<'a> {
        ClientRules { catalog, account }
    }

    /// Is `id` within a client-restricted account's list? An alias counts as the profile it
    /// answers with.
    fn permitted(&self, id: &str) -> bool {
        let profile = self.catalog.get(id).and_then(|c| c.alias_of.as_deref());
        self.account
            .and_then(|a| a.allowed_clients.as_ref())
            .is_none_or(|list| list.iter().any(|c| c == id || Some(c.as_str()) == profile))
    }

    /// May the caller use `client` at all? (A free plan only uses free clients.)
    pub fn usable(&self, client: &Client) -> bool {
        let free_plan = self.account.is_some_and(|a| a.plan == Plan::Free);
        (!free_plan || client.free) && self.permitted(&client.id)
    }

    /// The account's default list as `GET /v5/email/clients/default` shows it: configured or the
    /// catalog's, narrowed to usable clients. Empty means every usable client (spec §4.3 rule 3).
    pub fn default_list(&self) -> Vec<String> {
        let configured = self.account.and_then(|a| a.default_clients.clone());
        configured
            .unwrap_or_else(|| self.catalog.defaults().map(|c| c.id.clone()).collect())
            .into_iter()
            .filter(|id| self.catalog.get(id).is_some_and(|c| self.usable(c)))
            .collect()
    }

    /// The clients of a new email test: the requested ids (without repeats, in the order given),
    /// or, when none are requested (or none survive [`OnInvalid::Skip`]), the account's defaults.
    /// `free` narrows everything to free clients (a free test or a free plan).
    pub fn resolve(
        &self,
        requested: &[String],
        free: bool,
        on_invalid: OnInvalid,
    ) -> Result<Vec<String>, IntakeError> {
        let mut seen = HashSet::new();
        let mut ids: Vec<String> = requested
            .iter()
            .map(|id| id.trim())
            .filter(|id| !id.is_empty() && seen.insert(*id))
            .map(str::to_owned)
            .collect();
        let known = |id: &String| self.catalog.get(id).is_some() && self.permitted(id);
        let is_free = |id: &String| self.catalog.get(id).is_some_and(|c| c.free);
        match on_invalid {
            OnInvalid::Refuse => {
                let unknown: Vec<String> = ids.iter().filter(|id| !known(id)).cloned().collect();
                if !unknown.is_empty() {
                    return Err(IntakeError::InvalidClient(unknown));
                }
                if free {
                    let not_free: Vec<String> =
                        ids.iter().filter(|id| !is_free(id)).cloned().collect();
                    if !not_free.is_empty() {
                        return Err(IntakeError::InvalidFreeClient(not_free));
                    }
                }
            }
            OnInvalid::Skip => ids.retain(|id| known(id) && (!free || is_free(id))),
        }
        if ids.is_empty() {
            ids = self.defaults(free);
        }
        if ids.is_empty() {
            return Err(IntakeError::NoClients);
        }
        Ok(ids)
    }

    /// The clients of a test that names none. An empty default list means all clients (spec §4.3
    /// rule 3); a list none of whose clients this caller may use (a client-restricted or free plan
    /// whose clients are not among the defaults) is empty for this caller too, so it means all of
    /// the caller's clients, as `GET /v5/email/clients/default` shows it.
    fn defaults(&self, free: bool) -> Vec<String> {
        let suits = |c: &Client| (!free || c.free) && self.permitted(&c.id);
        let configured = self.account.and_then(|a| a.default_clients.clone());
        let base: Vec<String> = match configured {
            Some(list) if list.is_empty() => Vec::new(),
            Some(list) => list,
            None => self.catalog.defaults().map(|c| c.id.clone()).collect(),
        };
        let ids: Vec<String> = base
            .into_iter()
            .filter(|id| self.catalog.get(id).is_some_and(suits))
            .collect();
        if !ids.is_empty() {
            return ids;
        }
        self.catalog
            .clients()
            .iter()
            .filter(|c| suits(c))
            .map(|c| c.id.clone())
            .collect()
    }

    /// The rows of a new test's clients, each with the screenshots it gets.
    pub fn test_clients(&self, ids: &[String], image_blocking: bool) -> Vec<NewTestClient> {
        ids.iter()
            .filter_map(|id| self.catalog.get(id))
            .map(|c| NewTestClient {
                client_id: c.id.clone(),
                variants: Variant::for_client(image_blocking, c.image_blocking, c.rotate),
            })
            .collect()
    }
}

/// Enterprise-only ids and the per-customer monthly limit (spec §5.7, reseller plans).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tenancy {
    pub reference_id: Option<String>,
    pub customer_id: Option<String>,
    /// `(limit, "YYYY-MM")` when the test counts against a per-customer monthly limit.
    pub monthly_limit: Option<(i64, String)>,
}

impl Tenancy {
    /// Checks the ids a request carries against the plan. Empty strings count as absent. `now` is
    /// a UNIX timestamp (the month of a monthly limit is taken from it, in UTC).
    pub fn resolve(
        reference_id: Option<String>,
        customer_id: Option<String>,
        plan: Plan,
        account: Option<&Account>,
        now: i64,
    ) -> Result<Tenancy, IntakeError> {
        let reference_id = reference_id.filter(|s| !s.is_empty());
        let customer_id = customer_id.filter(|s| !s.is_empty());
        for (field, value) in [
            ("reference_id", &reference_id),
            ("customer_id", &customer_id),
        ] {
            let Some(value) = value else { continue };
            if !plan.is_enterprise() {
                return Err(IntakeError::EnterpriseOnly { field, plan });
            }
            if value.len() > MAX_ID_LEN {
                return Err(IntakeError::IdTooLong { field });
            }
        }
        if plan.requires_customer_id() && customer_id.is_none() {
            return Err(IntakeError::MissingCustomerId { plan });
        }
        let monthly_limit = match (account.and_then(|a| a.monthly_test_limit), &customer_id) {
            (Some(limit), Some(_)) if plan.requires_customer_id() => {
                let month = chrono::DateTime::from_timestamp(now, 0)
                    .unwrap_or_default()
                    .format("%Y-%m")
                    .to_string();
                Some((limit, month))
            }
            _ => None,
        };
        Ok(Tenancy {
            reference_id,
            customer_id,
            monthly_limit,
        })
    }
}

/// May a custom X-header with this name and value be stored with a test? (Enterprise plans only;
/// see [`custom_headers_allowed`].)
pub fn check_custom_header(name: &str, value: &str) -> Result<(), IntakeError> {
    let lower = name.to_ascii_lowercase();
    let valid_name = lower.starts_with("x-")
        && name.len() > 2
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid_name {
        return Err(IntakeError::HeaderName(name.to_owned()));
    }
    if lower.starts_with("x-svc") {
        return Err(IntakeError::ReservedHeader(name.to_owned()));
    }
    // "Name: value" on one line.
    if value.contains(['\r', '\n']) {
        return Err(IntakeError::HeaderLineBreak(name.to_owned()));
    }
    if name.len() + 2 + value.len() > MAX_HEADER_LINE {
        return Err(IntakeError::HeaderTooLong(name.to_owned()));
    }
    Ok(())
}

/// Custom X-headers are an enterprise feature (spec §4.6, §5.7).
pub fn custom_headers_allowed(plan: Plan) -> Result<(), IntakeError> {
    if plan.is_enterprise() {
        Ok(())
    } else {
        Err(IntakeError::EnterpriseOnly {
            field: "headers",
            plan,
        })
    }
}

/// The email source must be one the renderer will take.
pub fn check_html(html: &str) -> Result<(), IntakeError> {
    if html.len() > MAX_HTML_BYTES {
        return Err(IntakeError::HtmlTooLarge { len: html.len() });
    }
    Ok(())
}

/// May a test (or an account's default) be called back at this URL? http or https, with a host,
/// no credentials, at most [`MAX_CALLBACK_URL`] bytes; an address literal must be one `permits`
/// (the network policy) admits. Host names are judged when the callback is delivered, since
/// their addresses may change. Returns the URL as it will be called.
pub fn check_callback_url(
    raw: &str,
    permits: impl Fn(IpAddr) -> bool,
) -> Result<String, IntakeError> {
    let bad = |reason: String| Err(IntakeError::CallbackUrl(reason));
    let raw = raw.trim();
    if raw.len() > MAX_CALLBACK_URL {
        return bad(format!(
            "is {} bytes long; give a URL of at most {MAX_CALLBACK_URL} bytes",
            raw.len()
        ));
    }
    let url = match url::Url::parse(raw) {
        Ok(url) => url,
        Err(e) => {
            return bad(format!(
                "{raw:?} is not a valid URL ({e}); give an absolute http:// or https:// URL"
            ))
        }
    };
    if !matches!(url.scheme(), "http" | "https") {
        return bad(format!(
            "uses the {}: scheme; give an http:// or https:// URL",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad(
            "carries credentials; remove them and verify callbacks by their \
             X-Mailproof-Signature header instead"
                .to_owned(),
        );
    }
    let literal = match url.host() {
        None => return bad(format!("{raw:?} has no host; give an absolute URL")),
        Some(url::Host::Domain(_)) => None,
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
    };
    if let Some(ip) = literal.filter(|ip| !permits(*ip)) {
        return bad(format!(
            "points at {ip}, a private, loopback or otherwise internal address the service may \
             not call; give a host on the public internet"
        ));
    }
    Ok(url.to_string())
}

#[cfg(test)]
mod tests;
