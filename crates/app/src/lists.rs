//! The §4.5 search of a caller's tests, as a query string parsed into a typed filter: the API's
//! lists and the web's test list read the same syntax.

use domain::timespec::{parse_bound, Bound};
use domain::TestKind;
use store::ListFilter;

use crate::error::{Error, ErrorName, Result};

/// Most `headers[...]` filters in one search: each is a subquery, and SQLite bounds how deep one
/// expression may nest, so an unbounded list ends in a storage failure instead of an answer.
pub const MAX_HEADER_FILTERS: usize = 20;

fn invalid(msg: String) -> Error {
    Error::new(ErrorName::InvalidParameter, msg)
}

/// Parses a §4.5 query string. `area` is the list's own kind (`None` for `/v5/tests`).
pub fn parse_query(
    raw: Option<&str>,
    area: Option<TestKind>,
    enterprise: bool,
) -> Result<ListFilter> {
    let now = chrono::Utc::now();
    let mut f = ListFilter {
        kind: area,
        limit: 50,
        offset: 0,
        ..ListFilter::default()
    };
    let mut page: i64 = 1;
    let mut enterprise_param = None;
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        let value = value.trim().to_string();
        match name.as_ref() {
            "from" | "to" => {
                let bound = if name == "from" {
                    Bound::Start
                } else {
                    Bound::End
                };
                let t = parse_bound(&value, now, bound)
                    .map_err(|e| invalid(format!("`{name}`: {e}")))?;
                if name == "from" {
                    f.from = Some(t.timestamp());
                } else {
                    f.to = Some(t.timestamp());
                }
            }
            "subject" => f.subject = Some(value),
            "type" => {
                let kind = TestKind::parse(&value).ok_or_else(|| {
                    invalid(format!("`type` {value:?} must be email-test or spam-test"))
                })?;
                if area.is_some_and(|a| a != kind) {
                    return Err(invalid(format!(
                        "`type={value}` contradicts this list; use /v5/tests to list both kinds"
                    )));
                }
                f.kind = Some(kind);
            }
            "results" => {
                let n: i64 = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=200).contains(n))
                    .ok_or_else(|| {
                        invalid(format!(
                            "`results` {value:?} must be a whole number from 1 to 200"
                        ))
                    })?;
                f.limit = n;
            }
            "page" => {
                page = value
                    .parse()
                    .ok()
                    .filter(|n: &i64| *n >= 1 && *n <= 1_000_000)
                    .ok_or_else(|| {
                        invalid(format!("`page` {value:?} must be a whole number from 1"))
                    })?;
            }
            "customer_id" => {
                enterprise_param.get_or_insert("customer_id");
                f.customer_id = Some(value);
            }
            "reference_id" => {
                enterprise_param.get_or_insert("reference_id");
                f.reference_id = Some(value);
            }
            other => {
                if let Some(header) = other
                    .strip_prefix("headers[")
                    .and_then(|h| h.strip_suffix(']'))
                {
                    enterprise_param.get_or_insert("headers");
                    if header.is_empty() {
                        return Err(invalid(
                            "`headers[]` needs a header name: headers[X-Name]=value".into(),
                        ));
                    }
                    if f.headers.len() == MAX_HEADER_FILTERS {
                        return Err(invalid(format!(
                            "at most {MAX_HEADER_FILTERS} `headers[...]` filters can be combined in one search"
                        )));
                    }
                    f.headers.push((header.to_ascii_lowercase(), value));
                } else if other == "headers" {
                    return Err(invalid(
                        "`headers` takes the form headers[X-Name]=value, one per header".into(),
                    ));
                }
                // Other parameters are ignored: permissive handling (spec §1).
            }
        }
    }
    if let (Some(from), Some(to)) = (f.from, f.to) {
        if from > to {
            return Err(invalid("`from` is later than `to`".into()));
        }
    }
    if let (Some(p), false) = (enterprise_param, enterprise) {
        return Err(Error::new(
            ErrorName::PermissionError,
            format!("searching by `{p}` is an enterprise feature; your plan does not include it"),
        ));
    }
    f.offset = (page - 1).saturating_mul(f.limit);
    Ok(f)
}
