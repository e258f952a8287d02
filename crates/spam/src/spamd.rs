//! SpamAssassin over spamd's SPAMC/1.5 protocol: `REPORT` for score, threshold and scored rules.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::report::{EngineReport, Rule};
use crate::SpamError;

const ENGINE: &str = "spamassassin";
/// spamd answers are the report text plus a few headers; anything bigger is not spamd.
const MAX_RESPONSE_BYTES: u64 = 1024 * 1024;

/// A connection recipe for one spamd; each scan opens its own TCP connection, as spamc does.
#[derive(Debug, Clone)]
pub(crate) struct SpamdClient {
    addr: SocketAddr,
    timeout: Duration,
}

impl SpamdClient {
    pub(crate) fn new(addr: SocketAddr, timeout: Duration) -> SpamdClient {
        SpamdClient { addr, timeout }
    }

    /// `PING` → `SPAMD/1.5 0 PONG`: used to wait for start-up.
    pub(crate) async fn ping(&self) -> Result<(), SpamError> {
        let reply = self.exchange(b"PING SPAMC/1.5\r\n\r\n", &[]).await?;
        let status = reply.split(|b| *b == b'\n').next().unwrap_or_default();
        if String::from_utf8_lossy(status).contains("PONG") {
            Ok(())
        } else {
            Err(self.protocol(format!(
                "expected PONG, got `{}`",
                String::from_utf8_lossy(status).trim()
            )))
        }
    }

    pub(crate) async fn scan(&self, message: &[u8]) -> Result<EngineReport, SpamError> {
        let head = format!(
            "REPORT SPAMC/1.5\r\nContent-length: {}\r\n\r\n",
            message.len()
        );
        let reply = self.exchange(head.as_bytes(), message).await?;
        parse_report_reply(&reply).map_err(|reason| self.protocol(reason))
    }

    async fn exchange(&self, head: &[u8], body: &[u8]) -> Result<Vec<u8>, SpamError> {
        let work = async {
            let mut stream = TcpStream::connect(self.addr)
                .await
                .map_err(|e| self.unavailable(e))?;
            stream
                .write_all(head)
                .await
                .map_err(|e| self.unavailable(e))?;
            stream
                .write_all(body)
                .await
                .map_err(|e| self.unavailable(e))?;
            // spamd reads until Content-length; the half-close mirrors spamc.
            stream.shutdown().await.map_err(|e| self.unavailable(e))?;
            let mut reply = Vec::new();
            (&mut stream)
                .take(MAX_RESPONSE_BYTES)
                .read_to_end(&mut reply)
                .await
                .map_err(|e| self.unavailable(e))?;
            Ok(reply)
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| SpamError::EngineTimeout {
                engine: ENGINE,
                timeout_ms: self.timeout.as_millis(),
            })?
    }

    fn unavailable(&self, e: std::io::Error) -> SpamError {
        SpamError::EngineUnavailable {
            engine: ENGINE,
            addr: self.addr.to_string(),
            reason: e.to_string(),
        }
    }

    fn protocol(&self, reason: String) -> SpamError {
        SpamError::EngineProtocol {
            engine: ENGINE,
            reason,
        }
    }
}

/// Parses `SPAMD/1.1 0 EX_OK`, the `Spam: True ; 23.9 / 5.0` header and the report's rule table.
fn parse_report_reply(reply: &[u8]) -> Result<EngineReport, String> {
    let text = String::from_utf8_lossy(reply);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no header/body separator in a {} byte reply", reply.len()))?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let mut status_fields = status.split_whitespace();
    let proto = status_fields.next().unwrap_or_default();
    let code = status_fields.next().unwrap_or_default();
    if !proto.starts_with("SPAMD/") {
        return Err(format!("unexpected status line `{status}`"));
    }
    if code != "0" {
        return Err(format!("spamd refused the message: `{status}`"));
    }
    let spam_header = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("spam"))
        .map(|(_, value)| value.trim().to_string())
        .ok_or_else(|| "reply has no `Spam:` header".to_string())?;
    // "True ; 23.9 / 5.0"
    let numbers = spam_header
        .split_once(';')
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("cannot read `Spam: {spam_header}`"))?;
    let (score, threshold) = numbers
        .split_once('/')
        .ok_or_else(|| format!("cannot read `Spam: {spam_header}`"))?;
    let score: f64 = score
        .trim()
        .parse()
        .map_err(|_| format!("bad score in `Spam: {spam_header}`"))?;
    let threshold: f64 = threshold
        .trim()
        .parse()
        .map_err(|_| format!("bad threshold in `Spam: {spam_header}`"))?;
    Ok(EngineReport {
        score,
        engine_threshold: Some(threshold),
        rules: parse_rule_table(body),
        notes: Vec::new(),
    })
}

/// Reads the ` pts rule name  description` table at the end of a spamd report.
/// Description continuation lines start with spaces and no number, so they are skipped.
fn parse_rule_table(body: &str) -> Vec<Rule> {
    let table = match body.split_once("---- ") {
        Some((_, rest)) => rest.split_once('\n').map_or("", |(_, t)| t),
        None => return Vec::new(),
    };
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let score: f64 = fields.next()?.parse().ok()?;
            let name = fields.next()?;
            let is_rule_name = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            is_rule_name.then(|| Rule {
                name: name.to_string(),
                score,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLY: &str = "SPAMD/1.1 0 EX_OK\r\nContent-length: 500\r\nSpam: True ; 11.8 / 5.0\r\n\r\n\
Spam detection software...\n\nContent analysis details:   (11.8 points, 5.0 required)\n\n \
pts rule name              description\n---- ---------------------- --------------------------------------------------\n \
2.7 MISSING_DATE           Missing Date: header\n-0.0 NO_RECEIVED            Informational: message has no Received headers\n \
0.2 NORMAL_HTTP_TO_IP      URI: URI host has a public dotted-decimal IPv4\n                            address\n \
1.8 DRUGS_ERECTILE         Refers to an erectile drug\n\n";

    #[test]
    fn report_reply_gives_score_threshold_and_scored_rules() {
        let report = parse_report_reply(REPLY.as_bytes()).expect("valid reply");
        assert_eq!(report.score, 11.8);
        assert_eq!(report.engine_threshold, Some(5.0));
        let names: Vec<(&str, f64)> = report
            .rules
            .iter()
            .map(|r| (r.name.as_str(), r.score))
            .collect();
        assert_eq!(
            names,
            vec![
                ("MISSING_DATE", 2.7),
                ("NO_RECEIVED", -0.0),
                ("NORMAL_HTTP_TO_IP", 0.2),
                ("DRUGS_ERECTILE", 1.8)
            ]
        );
    }

    #[test]
    fn error_status_from_spamd_is_a_protocol_error() {
        let err = parse_report_reply(b"SPAMD/1.0 76 Bad header line: x\r\n\r\n")
            .expect_err("error status");
        assert!(err.contains("76"), "{err}");
    }
}
