//! The mail side's wiring: `inbox::MailService` (filters, SMTP listener, inbound processor, svc
//! sender) from the settings, its parts' states onto `/healthz`, and the API's `smtp` method,
//! which sends through a caller's own server (`api::SmtpProbe` over `smtp::send_via`).

use std::sync::Arc;
use std::time::Duration;

use api::health::{Component, Health, State};
use api::{SmtpProbe, SmtpSendError, SmtpSendRequest, SpamClientInfo};
use inbox::{InboxConfig, MailConfig, PartState, StatusBoard};

use crate::config::Settings;

/// Bound on one send through a caller's server, so that test creation cannot hang.
const CALLER_SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// The mail side's settings.
pub fn config(settings: &Settings) -> MailConfig {
    MailConfig {
        inbox: InboxConfig {
            seed_domain: settings.seed_domain.clone(),
            inbox_domain: settings.inbox_domain.clone(),
            reprocess_quota: settings.reprocess_quota,
            starttls: settings.keys.smtp_tls_cert_file.is_some(),
        },
        profiles: settings.resources.join("spam-filters.toml"),
        requirements: settings.resources.join("sender-requirements.toml"),
        fetch: settings.fetch.clone(),
        dns: settings.dns.mode(),
        data_dir: settings.data_dir.clone(),
        dkim_key_file: settings.keys.dkim_key_file.clone(),
        smtp_tls: settings
            .keys
            .smtp_tls_cert_file
            .clone()
            .zip(settings.keys.smtp_tls_key_file.clone())
            .map(|(cert, key)| smtp::TlsFiles { cert, key }),
        daemons: settings.spam.daemons,
        spamd_program: settings.spam.spamd_program.clone(),
        rspamd_program: settings.spam.rspamd_program.clone(),
    }
}

/// `/healthz` as the mail side's status board.
pub struct HealthBoard(pub Arc<Health>);

impl StatusBoard for HealthBoard {
    fn report(&self, group: &str, name: &str, state: PartState) {
        let component = match state {
            PartState::Ok => Component::new(State::Ok),
            PartState::Starting => Component::new(State::Starting),
            PartState::Off(reason) => Component {
                state: State::Off,
                reason,
                next_retry: None,
            },
            PartState::Down { reason, next_retry } => Component::down(reason, next_retry),
        };
        self.0.set(group, name, component);
    }
}

/// What the API needs of the mail side without running it: the filter profiles it lists (for
/// `api::AppState::new`) and the `smtp` method's send through a caller's server, which happens in
/// the API process at test creation (for `api::AppState::with_smtp_probe`). The `svc` and `seed`
/// methods only write rows that a `mail` process's workers pick up.
pub fn api_parts(settings: &Settings) -> anyhow::Result<(Vec<SpamClientInfo>, Arc<dyn SmtpProbe>)> {
    let profiles = inbox::filter_profiles(&config(settings))?;
    let probe: Arc<dyn SmtpProbe> = Arc::new(CallerSmtp {
        seed_domain: settings.seed_domain.clone(),
        policy: settings.fetch.clone(),
    });
    let infos = profiles
        .all()
        .iter()
        .map(|p| SpamClientInfo {
            client: p.client.clone(),
            kind: p.kind,
            description: p.description.clone(),
        })
        .collect();
    Ok((infos, probe))
}

/// The `smtp` method: the test message goes through the caller's own SMTP server.
struct CallerSmtp {
    seed_domain: String,
    /// The caller's host is reached only where a `url` source could be fetched from.
    policy: content::netpolicy::NetPolicy,
}

#[async_trait::async_trait]
impl SmtpProbe for CallerSmtp {
    async fn send_test(&self, req: SmtpSendRequest) -> Result<(), SmtpSendError> {
        let secure = match req.secure.as_str() {
            "ssl" => smtp::Secure::Ssl,
            "tls" => smtp::Secure::Tls,
            _ => smtp::Secure::None,
        };
        let from = if req.from_address.trim().is_empty() {
            format!("mailproof@{}", self.seed_domain)
        } else {
            req.from_address.clone()
        };
        let message = smtp::build_message(
            &req.subject,
            &req.html,
            &from,
            &req.recipients,
            &self.seed_domain,
        )
        .map_err(|e| SmtpSendError::Other(e.to_string()))?;
        let info = smtp::SmtpInfo {
            host: req.host,
            port: req.port,
            secure,
            username: req.username.filter(|u| !u.is_empty()),
            password: req.password,
        };
        smtp::send_via(
            &info,
            &self.policy,
            inbox::bare_address(&from),
            &req.recipients,
            &message,
            CALLER_SMTP_TIMEOUT,
        )
        .await
        .map_err(|e| match e {
            // One answer whether the name is unknown or internal (see `for_caller`).
            smtp::SendError::Host(refused) => {
                tracing::info!(error = %refused, "smtp_info host refused");
                SmtpSendError::Refused(refused.for_caller())
            }
            smtp::SendError::NoSession { .. }
            | smtp::SendError::Connect { .. }
            | smtp::SendError::Timeout { .. } => SmtpSendError::Connect(e.to_string()),
            smtp::SendError::Auth { .. } => SmtpSendError::Auth(e.to_string()),
            _ => SmtpSendError::Other(e.to_string()),
        })
    }
}
