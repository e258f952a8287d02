//! The mail side of `mailproof serve`: the spam filter daemons, the inbound SMTP listener, the
//! inbound processor and the svc sender as tasks, and the `smtp` method's send through a caller's
//! server (`api::SmtpProbe`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use api::health::{Component, Health, State};
use api::{SmtpProbe, SmtpSendError, SmtpSendRequest, SpamClientInfo};
use content::netpolicy::ResolveError;
use content::uribl::UriblLookup;
use inbox::{InboundProcessor, InboxConfig, InboxSink, SvcSender};
use spam::{
    DaemonConfig, DaemonState, FilterAddresses, FilterProfiles, FilterStatus, FilterSupervisor,
    SpamFilters,
};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

/// DKIM selector of the service's own key (`mailproof._domainkey.<seed domain>`).
const DKIM_SELECTOR: &str = "mailproof";
/// Bound on one send through a caller's server, so that test creation cannot hang.
const CALLER_SMTP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for each task to finish its current message.
const TASK_GRACE: Duration = Duration::from_secs(30);

pub struct MailContext {
    pub settings: crate::config::Settings,
    pub store: store::Store,
    pub catalog: Arc<domain::Catalog>,
    /// The API's wake-up for new tests (svc sends); also woken when auto-inbox mail makes a test.
    pub work_ready: Arc<Notify>,
    pub stop: watch::Receiver<bool>,
    /// Where the SMTP listener and the filters report their state (`GET /healthz`).
    pub health: Arc<Health>,
}

/// What the API needs of the mail side without running it: the filter profiles it lists (for
/// `api::AppState::new`) and the `smtp` method's send through a caller's server, which happens in
/// the API process at test creation (for `api::AppState::with_smtp_probe`). The `svc` and `seed`
/// methods only write rows that a `mail` process's workers pick up.
pub fn api_parts(
    settings: &crate::config::Settings,
) -> anyhow::Result<(Vec<SpamClientInfo>, Arc<dyn SmtpProbe>)> {
    let profiles = FilterProfiles::load(&settings.resources.join("spam-filters.toml"))?;
    let probe: Arc<dyn SmtpProbe> = Arc::new(CallerSmtp {
        seed_domain: settings.seed_domain.clone(),
        policy: settings.fetch.clone(),
    });
    Ok((client_infos(&profiles), probe))
}

fn client_infos(profiles: &FilterProfiles) -> Vec<SpamClientInfo> {
    profiles
        .all()
        .iter()
        .map(|p| SpamClientInfo {
            client: p.client.clone(),
            kind: p.kind,
            description: p.description.clone(),
        })
        .collect()
}

pub struct MailService {
    /// The URI blocklists the built-in filter consults, for the link check to report.
    pub uribl: UriblLookup,
    stop: watch::Sender<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl MailService {
    /// Starts spamd + rspamd (spam::FilterDaemons, work dir under <data_dir>/filters), the SMTP
    /// listener on `smtp_listener`, the inbound processor and the svc sender.
    ///
    /// Returns once the profiles are loaded and the listener serves; the filter daemons and the
    /// DKIM key come up in the background (mail waits, stored, until they do).
    pub async fn start(
        ctx: MailContext,
        smtp_listener: tokio::net::TcpListener,
    ) -> anyhow::Result<MailService> {
        let MailContext {
            settings,
            store,
            catalog,
            work_ready,
            stop: outer_stop,
            health,
        } = ctx;
        let profiles_path = settings.resources.join("spam-filters.toml");
        let profiles = FilterProfiles::load(&profiles_path)?;
        let dns_mode = settings.dns.mode();
        let uribl = UriblLookup::new(profiles.uribl_zones().to_vec(), &dns_mode);
        let names: Vec<String> = client_infos(&profiles)
            .into_iter()
            .map(|c| c.client)
            .collect();
        let bound = smtp_listener
            .local_addr()
            .context("cannot read the SMTP listener's address")?;
        let inbox_cfg = InboxConfig {
            seed_domain: settings.seed_domain.clone(),
            inbox_domain: settings.inbox_domain.clone(),
            reprocess_quota: settings.reprocess_quota,
        };

        // A configured key is shared with the other mail processes: it must exist (never
        // generated here, or each process would sign with its own) and is checked before any
        // mail is taken. The default key is generated in the background on first start.
        let configured = match &settings.keys.dkim_key_file {
            Some(path) => {
                Some(load_configured_dkim(path.clone(), settings.seed_domain.clone()).await?)
            }
            None => None,
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        tasks.push((
            "stop relay",
            tokio::spawn(relay_stop(outer_stop, stop_tx.clone())),
        ));

        let inbound_ready = Arc::new(Notify::new());
        let sink = Arc::new(InboxSink::new(
            store.clone(),
            inbox_cfg.clone(),
            &names,
            inbound_ready.clone(),
        ));
        let smtp_cfg = smtp::SmtpConfig {
            hostname: settings.seed_domain.clone(),
            ..smtp::SmtpConfig::default()
        };
        let smtp_stop = stopped(stop_rx.clone());
        health.set("smtp", "", Component::new(State::Ok));
        let smtp_health = health.clone();
        tasks.push((
            "smtp listener",
            tokio::spawn(async move {
                if let Err(e) = smtp::serve(smtp_listener, smtp_cfg, sink, smtp_stop).await {
                    tracing::error!(error = %e, "the SMTP listener failed");
                    smtp_health.set(
                        "smtp",
                        "",
                        Component::down(
                            format!("the SMTP listener failed: {e}; restart the service"),
                            None,
                        ),
                    );
                }
            }),
        ));

        let filters_dir = settings.data_dir.join("filters");
        let start_filter_daemons = settings.spam.daemons;
        let mut daemon_cfg = DaemonConfig::new(&filters_dir);
        if let Some(program) = &settings.spam.spamd_program {
            daemon_cfg.spamd_program = program.clone();
        }
        if let Some(program) = &settings.spam.rspamd_program {
            daemon_cfg.rspamd_program = program.clone();
        }
        let processor_store = store.clone();
        let mut processor_stop = stop_rx.clone();
        let processor_ready = work_ready.clone();
        tasks.push((
            "inbound processor",
            tokio::spawn(async move {
                let supervisor = if start_filter_daemons {
                    Some(FilterSupervisor::start(daemon_cfg))
                } else {
                    tracing::warn!("spam filter daemons are off ([spam] daemons = false): SpamAssassin and Rspamd results stay empty");
                    for name in ["spamassassin", "rspamd"] {
                        health.set(
                            "filters",
                            name,
                            Component {
                                state: State::Off,
                                reason: Some("[spam] daemons = false in the configuration".into()),
                                next_retry: None,
                            },
                        );
                    }
                    None
                };
                let filters = Arc::new(SpamFilters::with_dns(
                    profiles,
                    &FilterAddresses::default(),
                    dns_mode.clone(),
                ));
                if let Some(supervisor) = &supervisor {
                    let mut status = supervisor.status();
                    // Mail that came before the filters waits, stored, for their first start
                    // (seconds), rather than being deferred with a backoff.
                    let first = async {
                        let settled = status
                            .wait_for(|s| {
                                report_filters(&health, s);
                                s.spamd != DaemonState::Starting
                                    && s.rspamd != DaemonState::Starting
                            })
                            .await
                            .map(|now| now.clone());
                        if let Ok(now) = settled {
                            filters.update(&now);
                        }
                    };
                    tokio::select! {
                        () = first => {}
                        () = stopped(processor_stop.clone()) => {}
                    }
                    follow_filters(status, filters.clone(), health.clone(), processor_stop.clone());
                }
                if !*processor_stop.borrow_and_update() {
                    InboundProcessor::new(
                        processor_store,
                        inbox_cfg,
                        catalog,
                        filters,
                        processor_ready,
                    )
                    .run(inbound_ready, background::cancelled_by(processor_stop))
                    .await;
                }
                if let Some(supervisor) = supervisor {
                    supervisor.shutdown().await;
                }
            }),
        ));

        let key_path = settings.data_dir.join("dkim.pem");
        let seed_domain = settings.seed_domain.clone();
        tasks.push((
            "svc sender",
            tokio::spawn(async move {
                let signer = match configured {
                    Some(signer) => signer,
                    None => match dkim_signer(key_path, seed_domain.clone()).await {
                        Some(signer) => signer,
                        None => return,
                    },
                };
                SvcSender::new(store, signer, loopback(bound), seed_domain)
                    .run(work_ready, background::cancelled_by(stop_rx))
                    .await;
            }),
        ));
        tracing::info!(smtp = %bound, profiles = names.len(), "mail service started");
        Ok(MailService {
            uribl,
            stop: stop_tx,
            tasks,
        })
    }

    /// Stops accepting mail, lets the workers finish their current message, stops the daemons.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for (name, task) in self.tasks {
            match tokio::time::timeout(TASK_GRACE, task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(task = name, error = %e, "mail task ended abnormally")
                }
                Err(_) => tracing::warn!(task = name, "mail task did not stop in time"),
            }
        }
        tracing::info!("mail service stopped");
    }
}

/// Turns the service's stop signal (or its sender going away) into ours.
async fn relay_stop(mut outer: watch::Receiver<bool>, inner: watch::Sender<bool>) {
    while !*outer.borrow_and_update() {
        if outer.changed().await.is_err() {
            break;
        }
    }
    let _ = inner.send(true);
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Keeps the scanners and `/healthz` in step with the daemons until `stop`.
fn follow_filters(
    mut status: watch::Receiver<FilterStatus>,
    filters: Arc<SpamFilters>,
    health: Arc<Health>,
    stop: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let follow = async {
            loop {
                let now = status.borrow_and_update().clone();
                filters.update(&now);
                report_filters(&health, &now);
                if status.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::select! {
            () = follow => {}
            () = stopped(stop) => {}
        }
    });
}

fn report_filters(health: &Health, status: &FilterStatus) {
    for (name, state) in [("spamassassin", &status.spamd), ("rspamd", &status.rspamd)] {
        let component = match state {
            DaemonState::Up(_) => Component::new(State::Ok),
            DaemonState::Starting => Component::new(State::Starting),
            DaemonState::Off => Component::new(State::Off),
            DaemonState::Down { reason, retry_at } => Component::down(
                reason.clone(),
                retry_at
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .and_then(|d| i64::try_from(d.as_secs()).ok()),
            ),
        };
        health.set("filters", name, component);
    }
}

/// The DKIM key of `[keys] dkim_key_file`, which must exist.
async fn load_configured_dkim(path: PathBuf, domain: String) -> anyhow::Result<smtp::DkimSigner> {
    if !path.is_file() {
        anyhow::bail!(
            "[keys] dkim_key_file {} is not a file: create the key once (`openssl genrsa -traditional -out {} 2048`) and give every mail process the same file",
            path.display(),
            path.display()
        );
    }
    let shown = path.display().to_string();
    let signer = tokio::task::spawn_blocking(move || {
        smtp::DkimSigner::generate_or_load(&path, &domain, DKIM_SELECTOR)
    })
    .await
    .context("the DKIM key task failed")?
    .with_context(|| format!("cannot use [keys] dkim_key_file {shown}"))?;
    tracing::info!(
        name = signer.dns_name(),
        record = signer.dns_record(),
        "publish this DKIM record for svc tests to pass DKIM"
    );
    Ok(signer)
}

/// The service's DKIM key, generated on first use (RSA generation takes a moment: off the runtime).
async fn dkim_signer(key_path: PathBuf, domain: String) -> Option<smtp::DkimSigner> {
    let loaded = tokio::task::spawn_blocking(move || {
        smtp::DkimSigner::generate_or_load(&key_path, &domain, DKIM_SELECTOR)
    })
    .await;
    match loaded {
        Ok(Ok(signer)) => {
            tracing::info!(
                name = signer.dns_name(),
                record = signer.dns_record(),
                "publish this DKIM record for svc tests to pass DKIM"
            );
            Some(signer)
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "no DKIM key: svc spam tests are not sent");
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "DKIM key task failed: svc spam tests are not sent");
            None
        }
    }
}

/// Where to reach our own listener: a wildcard bind is reached over loopback.
fn loopback(bound: SocketAddr) -> SocketAddr {
    if bound.ip().is_unspecified() {
        let ip = match bound.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        };
        SocketAddr::new(ip, bound.port())
    } else {
        bound
    }
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
            smtp::SendError::Host(
                ResolveError::RefusedAddress { .. } | ResolveError::RefusedHost { .. },
            ) => SmtpSendError::Refused(e.to_string()),
            smtp::SendError::Host(ResolveError::Unresolved { .. })
            | smtp::SendError::NoSession { .. }
            | smtp::SendError::Connect { .. }
            | smtp::SendError::Timeout { .. } => SmtpSendError::Connect(e.to_string()),
            smtp::SendError::Auth { .. } => SmtpSendError::Auth(e.to_string()),
            _ => SmtpSendError::Other(e.to_string()),
        })
    }
}
