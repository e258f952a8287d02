//! Rspamd over its HTTP `/checkv2` API, with the SMTP envelope passed as request headers.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::filters::Envelope;
use crate::report::{EngineReport, Rule};
use crate::SpamError;

const ENGINE: &str = "rspamd";
/// A `/checkv2` answer lists symbols with short options; megabytes mean something is wrong.
const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct RspamdClient {
    addr: SocketAddr,
    timeout: Duration,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct CheckReply {
    score: f64,
    #[serde(default)]
    required_score: Option<f64>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    thresholds: BTreeMap<String, f64>,
    #[serde(default)]
    symbols: BTreeMap<String, SymbolReply>,
}

#[derive(Deserialize)]
struct SymbolReply {
    #[serde(default)]
    score: f64,
}

impl RspamdClient {
    pub(crate) fn new(addr: SocketAddr, timeout: Duration) -> Result<RspamdClient, SpamError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(2))
            // Loopback only: an HTTP(S)_PROXY in the environment must not capture these calls.
            .no_proxy()
            .build()
            .map_err(|e| SpamError::EngineUnavailable {
                engine: ENGINE,
                addr: addr.to_string(),
                reason: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(RspamdClient {
            addr,
            timeout,
            http,
        })
    }

    /// `GET /ping` → `pong`: used to wait for start-up.
    pub(crate) async fn ping(&self) -> Result<(), SpamError> {
        let url = format!("http://{}/ping", self.addr);
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| self.failed(e))?;
        let body = resp.text().await.map_err(|e| self.failed(e))?;
        if body.trim() == "pong" {
            Ok(())
        } else {
            Err(SpamError::EngineProtocol {
                engine: ENGINE,
                reason: format!("/ping answered `{}`", body.trim()),
            })
        }
    }

    pub(crate) async fn scan(
        &self,
        message: &[u8],
        env: &Envelope,
    ) -> Result<EngineReport, SpamError> {
        let url = format!("http://{}/checkv2", self.addr);
        let mut req = self
            .http
            .post(url)
            .header("IP", env.client_ip.to_string())
            .header("Helo", header_safe(&env.helo))
            .header("Hostname", header_safe(&env.hostname))
            .header("From", header_safe(&env.mail_from));
        for rcpt in &env.rcpt_to {
            req = req.header("Rcpt", header_safe(rcpt));
        }
        let resp = req
            .body(message.to_vec())
            .send()
            .await
            .map_err(|e| self.failed(e))?;
        let status = resp.status();
        let body = read_capped(resp).await.map_err(|e| self.failed(e))?;
        if !status.is_success() {
            return Err(SpamError::EngineProtocol {
                engine: ENGINE,
                reason: format!(
                    "/checkv2 answered HTTP {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                ),
            });
        }
        parse_check_reply(&body).map_err(|reason| SpamError::EngineProtocol {
            engine: ENGINE,
            reason,
        })
    }

    fn failed(&self, e: reqwest::Error) -> SpamError {
        if e.is_timeout() {
            SpamError::EngineTimeout {
                engine: ENGINE,
                timeout_ms: self.timeout.as_millis(),
            }
        } else {
            SpamError::EngineUnavailable {
                engine: ENGINE,
                addr: self.addr.to_string(),
                reason: error_chain(&e),
            }
        }
    }
}

/// Header values come from the caller's envelope; CR/LF or control bytes would break the request.
fn header_safe(value: &str) -> String {
    value
        .chars()
        .filter(|c| !c.is_control())
        .take(998)
        .collect()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

async fn read_capped(mut resp: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = MAX_RESPONSE_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    Ok(body)
}

fn parse_check_reply(body: &[u8]) -> Result<EngineReport, String> {
    let reply: CheckReply = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not a /checkv2 JSON answer ({e}): {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )
    })?;
    // rspamd's own "spam" line is the add-header action, which only some versions report;
    // `required_score` is the reject score, so it is shown as such rather than as the threshold.
    let engine_threshold = reply.thresholds.get("add header").copied();
    let mut notes = Vec::new();
    match (reply.action, reply.required_score) {
        (Some(action), Some(reject)) => {
            notes.push(format!("action: {action} (reject at {reject:.1})"))
        }
        (Some(action), None) => notes.push(format!("action: {action}")),
        (None, _) => {}
    }
    let rules = reply
        .symbols
        .into_iter()
        .map(|(name, s)| Rule {
            name,
            score: s.score,
        })
        .collect();
    Ok(EngineReport {
        score: reply.score,
        engine_threshold,
        rules,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkv2_reply_gives_score_add_header_threshold_symbols_and_action() {
        let body = br#"{"is_skipped":false,"score":9.4,"required_score":15.0,"action":"add header",
            "thresholds":{"reject":15.0,"add header":6.0,"greylist":4.0},
            "symbols":{"HTTP_TO_IP":{"name":"HTTP_TO_IP","score":1.0,"metric_score":1.0},
                       "MIME_GOOD":{"name":"MIME_GOOD","score":-0.1,"options":["text/plain"]}}}"#;
        let report = parse_check_reply(body).expect("valid reply");
        assert_eq!(report.score, 9.4);
        assert_eq!(report.engine_threshold, Some(6.0));
        assert_eq!(report.rules.len(), 2);
        assert_eq!(
            report.rules[0],
            Rule {
                name: "HTTP_TO_IP".into(),
                score: 1.0
            }
        );
        assert_eq!(
            report.notes,
            vec!["action: add header (reject at 15.0)".to_string()]
        );
    }

    #[test]
    fn non_json_reply_is_a_protocol_error() {
        assert!(parse_check_reply(b"<html>busy</html>").is_err());
    }
}
