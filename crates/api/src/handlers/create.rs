//! Creating email tests (spec §2.1) and spam tests (§2.2): the JSON body read into the application
//! layer's [`TestRequest`], created there, and the answer written back as JSON.

use std::collections::BTreeMap;

use app::create::{SmtpInfo, SpamRequest, TestRequest};
use axum::extract::State;
use axum::Json;
use domain::{SpamMethod, TestKind};
use serde_json::{json, Map, Value};

use crate::auth::Authed;
use crate::error::{ApiError, ApiResult, ErrorName};
use crate::params::{self, Body};
use crate::state::AppState;

pub(crate) use app::create::callback_url;

fn read_headers(m: &Map<String, Value>) -> ApiResult<BTreeMap<String, String>> {
    let Some(obj) = params::object(m, "headers")? else {
        return Ok(BTreeMap::new());
    };
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
        out.insert(name, value);
    }
    Ok(out)
}

/// The spam part of a request: from `spam` (email tests) or the top level (spam tests).
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
    let smtp_info = match params::object(m, "smtp_info")? {
        Some(i) => Some(SmtpInfo {
            host: params::string(&i, "host")?,
            port: params::integer(&i, "port")?,
            secure: params::string(&i, "secure")?,
            username: params::string(&i, "username")?,
            password: params::string(&i, "password")?,
        }),
        None => None,
    };
    Ok(SpamRequest {
        method,
        smtp_info,
        from_address: params::string(m, "from_address")?,
        key: params::string(m, "key")?,
    })
}

/// The fields both kinds of test share.
fn read_request(m: &Map<String, Value>) -> ApiResult<TestRequest> {
    Ok(TestRequest {
        subject: params::string(m, "subject")?,
        html: params::string(m, "html")?,
        url: params::string(m, "url")?,
        transfer_encoding: params::string(m, "transfer_encoding")?,
        charset: params::string(m, "charset")?,
        reference_id: params::string(m, "reference_id")?,
        customer_id: params::string(m, "customer_id")?,
        callback_url: params::string(m, "callback_url")?,
        sandbox: params::boolean(m, "sandbox")?.unwrap_or(false),
        ..TestRequest::default()
    })
}

/// The §2.1/§2.2 answer of a created test.
fn answer(created: app::create::Created, kind: TestKind) -> Value {
    let mut resp = Map::new();
    resp.insert("id".into(), json!(created.id.as_str()));
    if let Some(r) = &created.reference_id {
        resp.insert("reference_id".into(), json!(r));
    }
    if let Some(c) = &created.customer_id {
        resp.insert("customer_id".into(), json!(c));
    }
    if let Some(seed) = created.seed {
        match kind {
            TestKind::Email => {
                resp.insert(
                    "spam".into(),
                    json!({"key": seed.key, "address_list": seed.addresses}),
                );
            }
            TestKind::Spam => {
                resp.insert("address_list".into(), json!(seed.addresses));
            }
        }
    }
    Value::Object(resp)
}

pub async fn create_email_test(
    State(state): State<AppState>,
    caller: Authed,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let req = TestRequest {
        headers: read_headers(&m)?,
        clients: params::id_list(&m, "clients")?.unwrap_or_default(),
        free_test: params::boolean(&m, "free_test")?.unwrap_or(false),
        image_blocking: params::boolean(&m, "image_blocking")?.unwrap_or(false),
        spam: params::object(&m, "spam")?
            .map(|s| read_spam(&s))
            .transpose()?,
        ..read_request(&m)?
    };
    let created = app::create::create_test(&state, &caller, TestKind::Email, req).await?;
    Ok(Json(answer(created, TestKind::Email)))
}

pub async fn create_spam_test(
    State(state): State<AppState>,
    caller: Authed,
    Body(m): Body,
) -> ApiResult<Json<Value>> {
    let req = TestRequest {
        spam: Some(read_spam(&m)?),
        ..read_request(&m)?
    };
    let created = app::create::create_test(&state, &caller, TestKind::Spam, req).await?;
    Ok(Json(answer(created, TestKind::Spam)))
}
