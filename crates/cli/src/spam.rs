//! `--spam`: the spam test run alongside the email test (spec §2.1 `spam`), and for the seed
//! method the sending of the email to the seed addresses through the caller's SMTP server.
//!
//! The SMTP server comes from the environment, like the credentials (a password must not be a
//! flag): `MAILPROOF_SMTP_HOST`, `MAILPROOF_SMTP_PORT` (default 25), `MAILPROOF_SMTP_SECURE`
//! (`ssl`, `tls` for STARTTLS, or empty), `MAILPROOF_SMTP_USERNAME`, `MAILPROOF_SMTP_PASSWORD`,
//! `MAILPROOF_SMTP_FROM`. `seed` sends through it from here; `smtp` passes it to the server as
//! `smtp_info`; `svc` needs none of it (the server sends the email itself).

use std::time::Duration;

use lettre::address::Envelope;
use lettre::message::header::ContentType;
use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde_json::{json, Value};

use crate::error::{chain, CliError};
use crate::source::Email;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SpamMethod {
    Seed,
    Smtp,
    Svc,
}

impl SpamMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            SpamMethod::Seed => "seed",
            SpamMethod::Smtp => "smtp",
            SpamMethod::Svc => "svc",
        }
    }

    /// Whether this method needs `MAILPROOF_SMTP_*`.
    pub fn needs_smtp(self) -> bool {
        matches!(self, SpamMethod::Seed | SpamMethod::Smtp)
    }
}

/// No `Debug`: it holds the SMTP password, which must never reach a log.
#[derive(Clone)]
pub struct SmtpSettings {
    host: String,
    port: u16,
    secure: String,
    username: Option<String>,
    password: Option<String>,
    from: Option<String>,
}

impl SmtpSettings {
    pub fn from_env(method: SpamMethod) -> Result<SmtpSettings, CliError> {
        SmtpSettings::from_lookup(method, |n| std::env::var(n).ok().filter(|v| !v.is_empty()))
    }

    fn from_lookup(
        method: SpamMethod,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<SmtpSettings, CliError> {
        let host = get("MAILPROOF_SMTP_HOST").ok_or_else(|| {
            CliError::Usage(format!(
                "--spam {} needs an SMTP server: set MAILPROOF_SMTP_HOST (and MAILPROOF_SMTP_PORT, \
                 MAILPROOF_SMTP_SECURE, MAILPROOF_SMTP_USERNAME, MAILPROOF_SMTP_PASSWORD as it \
                 requires), or use --spam svc, where the server sends the email itself",
                method.as_str()
            ))
        })?;
        let port = match get("MAILPROOF_SMTP_PORT") {
            None => 25,
            Some(p) => p.trim().parse().map_err(|_| {
                CliError::Usage(format!("MAILPROOF_SMTP_PORT `{p}` is not a port number"))
            })?,
        };
        let secure = get("MAILPROOF_SMTP_SECURE")
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if !matches!(secure.as_str(), "" | "ssl" | "tls") {
            return Err(CliError::Usage(format!(
                "MAILPROOF_SMTP_SECURE `{secure}` must be `ssl` (TLS from the start), `tls` (STARTTLS) or empty"
            )));
        }
        Ok(SmtpSettings {
            host,
            port,
            secure,
            username: get("MAILPROOF_SMTP_USERNAME"),
            password: get("MAILPROOF_SMTP_PASSWORD"),
            from: get("MAILPROOF_SMTP_FROM"),
        })
    }
}

/// The `spam` object of the creation request.
pub fn request(method: SpamMethod, smtp: Option<&SmtpSettings>) -> Value {
    let mut spam = json!({"test_method": method.as_str()});
    if let (SpamMethod::Smtp, Some(s)) = (method, smtp) {
        let mut info = json!({"host": s.host, "port": s.port, "secure": s.secure});
        if let Some(u) = &s.username {
            info["username"] = json!(u);
        }
        if let Some(p) = &s.password {
            info["password"] = json!(p);
        }
        spam["smtp_info"] = info;
    }
    if let Some(from) = smtp.and_then(|s| s.from.as_ref()) {
        spam["from_address"] = json!(from);
    }
    spam
}

/// Sends the email to each seed address, one message per address (as a mailing would). An
/// `.eml` goes as it is; an HTML file is wrapped in a minimal message.
pub async fn send_seed(
    smtp: &SmtpSettings,
    email: &Email,
    addresses: &[String],
) -> Result<(), CliError> {
    let from_text = smtp
        .from
        .clone()
        .or_else(|| email.from.clone())
        .unwrap_or_else(|| "mailproof-check@localhost".into());
    let from: Address = from_text.parse().map_err(|e| {
        CliError::Seed(format!(
            "the sender `{from_text}` is not an address ({e}); set MAILPROOF_SMTP_FROM"
        ))
    })?;
    let tls = match smtp.secure.as_str() {
        "" => Tls::None,
        mode => {
            let params = TlsParameters::new(smtp.host.clone()).map_err(|e| {
                CliError::Seed(format!("TLS setup for {}: {}", smtp.host, chain(&e)))
            })?;
            if mode == "ssl" {
                Tls::Wrapper(params)
            } else {
                Tls::Required(params)
            }
        }
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(smtp.host.as_str())
        .port(smtp.port)
        .tls(tls)
        .timeout(Some(Duration::from_secs(60)));
    if let Some(user) = &smtp.username {
        builder = builder.credentials(Credentials::new(
            user.clone(),
            smtp.password.clone().unwrap_or_default(),
        ));
    }
    let transport = builder.build();
    for to_text in addresses {
        let to: Address = to_text.parse().map_err(|e| {
            CliError::Seed(format!(
                "the server gave `{to_text}`, which is not an address ({e})"
            ))
        })?;
        let bytes = match &email.raw {
            Some(raw) => raw.clone(),
            None => lettre::Message::builder()
                .from(Mailbox::new(None, from.clone()))
                .to(Mailbox::new(None, to.clone()))
                .subject(email.subject.clone())
                .header(ContentType::TEXT_HTML)
                .body(email.html.clone())
                .map_err(|e| CliError::Seed(format!("building the message: {e}")))?
                .formatted(),
        };
        let envelope = Envelope::new(Some(from.clone()), vec![to])
            .map_err(|e| CliError::Seed(format!("the envelope to {to_text}: {e}")))?;
        transport.send_raw(&envelope, &bytes).await.map_err(|e| {
            CliError::Seed(format!(
                "to {to_text} through {}:{}: {}; check MAILPROOF_SMTP_*",
                smtp.host,
                smtp.port,
                chain(&e)
            ))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn seed_and_smtp_need_a_host_named_in_the_error() {
        let e = SmtpSettings::from_lookup(SpamMethod::Seed, env(&[]))
            .err()
            .expect("refused");
        assert!(e.to_string().contains("MAILPROOF_SMTP_HOST"), "{e}");
        let e = SmtpSettings::from_lookup(
            SpamMethod::Smtp,
            env(&[
                ("MAILPROOF_SMTP_HOST", "h"),
                ("MAILPROOF_SMTP_SECURE", "starttls"),
            ]),
        )
        .err()
        .expect("refused");
        assert!(e.to_string().contains("MAILPROOF_SMTP_SECURE"), "{e}");
    }

    #[test]
    fn the_smtp_method_passes_the_settings_as_smtp_info() {
        let s = SmtpSettings::from_lookup(
            SpamMethod::Smtp,
            env(&[
                ("MAILPROOF_SMTP_HOST", "mail.example.com"),
                ("MAILPROOF_SMTP_PORT", "587"),
                ("MAILPROOF_SMTP_SECURE", "TLS"),
                ("MAILPROOF_SMTP_USERNAME", "u"),
                ("MAILPROOF_SMTP_PASSWORD", "p"),
                ("MAILPROOF_SMTP_FROM", "news@example.com"),
            ]),
        )
        .expect("settings");
        assert_eq!(
            request(SpamMethod::Smtp, Some(&s)),
            json!({"test_method": "smtp", "from_address": "news@example.com",
                   "smtp_info": {"host": "mail.example.com", "port": 587, "secure": "tls",
                                 "username": "u", "password": "p"}})
        );
        assert_eq!(
            request(SpamMethod::Svc, None),
            json!({"test_method": "svc"})
        );
    }
}
