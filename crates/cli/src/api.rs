//! The v5 client: Basic credentials from the environment, JSON in and out, §7 errors turned into
//! messages that say which call failed. `RateLimited` answers are waited out (`Retry-After`).

use std::time::Duration;

use serde_json::Value;

use crate::error::{chain, CliError};

const KEY_VAR: &str = "MAILPROOF_API_KEY";
const PASSWORD_VAR: &str = "MAILPROOF_PASSWORD";

/// How often one call is retried after `RateLimited`.
const RATE_LIMIT_RETRIES: u32 = 5;
/// Longest single wait for a `Retry-After`.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

pub struct Credentials {
    key: String,
    password: String,
}

impl Credentials {
    pub fn from_env() -> Result<Credentials, CliError> {
        Credentials::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Credentials, CliError> {
        let key = get(KEY_VAR).filter(|v| !v.is_empty());
        let password = get(PASSWORD_VAR).filter(|v| !v.is_empty());
        match (key, password) {
            (Some(key), Some(password)) => Ok(Credentials { key, password }),
            (key, password) => {
                let missing: Vec<&str> =
                    [(key.is_none(), KEY_VAR), (password.is_none(), PASSWORD_VAR)]
                        .iter()
                        .filter(|(m, _)| *m)
                        .map(|(_, n)| *n)
                        .collect();
                Err(CliError::MissingCredentials {
                    names: missing.join(" and "),
                })
            }
        }
    }
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    creds: Credentials,
}

impl Api {
    pub fn new(server: &str, creds: Credentials) -> Result<Api, CliError> {
        let base = server.trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base).map_err(|e| {
            CliError::Usage(format!(
                "--server `{server}` is not a URL ({e}); write it like https://mailproof.example.com"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(CliError::Usage(format!(
                "--server `{server}` must be an http:// or https:// URL"
            )));
        }
        let http = reqwest::Client::builder()
            // One call, not the whole check: the check has its own --timeout.
            .timeout(Duration::from_secs(120))
            .connect_timeout(Duration::from_secs(20))
            .user_agent(concat!("mailproof-check/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                CliError::Usage(format!("cannot set up the HTTP client: {}", chain(&e)))
            })?;
        Ok(Api { http, base, creds })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub async fn get(&self, path: &str, what: &str) -> Result<Value, CliError> {
        let body = self
            .send(reqwest::Method::GET, &self.url(path), None, what)
            .await?;
        parse_json(&body, what)
    }

    pub async fn post(&self, path: &str, body: &Value, what: &str) -> Result<Value, CliError> {
        let body = self
            .send(reqwest::Method::POST, &self.url(path), Some(body), what)
            .await?;
        parse_json(&body, what)
    }

    /// A file by absolute URL (screenshot URLs are absolute), with the same credentials.
    pub async fn download(&self, url: &str, what: &str) -> Result<Vec<u8>, CliError> {
        self.send(reqwest::Method::GET, url, None, what).await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Vec<u8>, CliError> {
        let mut attempt = 0;
        loop {
            let mut req = self
                .http
                .request(method.clone(), url)
                .basic_auth(&self.creds.key, Some(&self.creds.password))
                .header("Accept", "application/json, image/png");
            if let Some(b) = body {
                req = req
                    .header("Content-Type", "application/json")
                    .body(b.to_string());
            }
            let unreachable = |e: reqwest::Error| CliError::Unreachable {
                what: what.to_string(),
                url: url.to_string(),
                cause: chain(&e),
            };
            let resp = req.send().await.map_err(unreachable)?;
            let status = resp.status();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            let bytes = resp.bytes().await.map_err(unreachable)?.to_vec();
            if status.is_success() {
                return Ok(bytes);
            }
            let (name, message) = error_fields(&bytes);
            if status.as_u16() == 429 && attempt < RATE_LIMIT_RETRIES {
                attempt += 1;
                let wait = Duration::from_secs(retry_after.unwrap_or(2)).min(MAX_RETRY_AFTER);
                tokio::time::sleep(wait).await;
                continue;
            }
            if name == "AccessDenied" {
                return Err(CliError::AccessDenied { message });
            }
            return Err(CliError::Server {
                what: what.to_string(),
                status: status.as_u16(),
                name,
                message,
            });
        }
    }
}

/// The §7.1 name and message of an error body, or what can be said of a body that is not one.
fn error_fields(body: &[u8]) -> (String, String) {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let name = v["error"]["name"].as_str().unwrap_or("(no error name)");
    let message = match v["error"]["message"].as_str() {
        Some(m) => m.to_string(),
        None => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.chars().take(200).collect();
            if text.trim().is_empty() {
                "(empty body)".to_string()
            } else {
                text
            }
        }
    };
    (name.to_string(), message)
}

fn parse_json(body: &[u8], what: &str) -> Result<Value, CliError> {
    serde_json::from_slice(body).map_err(|e| CliError::Protocol {
        what: what.to_string(),
        detail: format!("the body is not JSON ({e})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_credentials_are_named() {
        let none = |_: &str| None;
        let e = Credentials::from_lookup(none)
            .err()
            .expect("missing")
            .to_string();
        assert!(
            e.contains("MAILPROOF_API_KEY and MAILPROOF_PASSWORD"),
            "{e}"
        );
        let key_only = |n: &str| (n == KEY_VAR).then(|| "k".to_string());
        let e = Credentials::from_lookup(key_only)
            .err()
            .expect("missing")
            .to_string();
        assert!(e.starts_with("MAILPROOF_PASSWORD not set"), "{e}");
        let empty_key = |n: &str| {
            Some(if n == KEY_VAR {
                String::new()
            } else {
                "p".into()
            })
        };
        let e = Credentials::from_lookup(empty_key)
            .err()
            .expect("missing")
            .to_string();
        assert!(e.starts_with("MAILPROOF_API_KEY not set"), "{e}");
    }

    #[test]
    fn error_bodies_give_their_name_and_message() {
        let (n, m) =
            error_fields(br#"{"error":{"name":"InvalidClient","message":"no such client x"}}"#);
        assert_eq!(
            (n.as_str(), m.as_str()),
            ("InvalidClient", "no such client x")
        );
        let (n, m) = error_fields(b"<html>Bad gateway</html>");
        assert_eq!(
            (n.as_str(), m.as_str()),
            ("(no error name)", "<html>Bad gateway</html>")
        );
    }
}
