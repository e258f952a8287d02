//! The mail side as one service: the spam filter daemons (supervised, followed by the scanners),
//! the inbound SMTP listener, the inbound processor and the svc sender as tasks, and the DKIM key
//! the svc sender signs with. The binary starts it with [`MailService::start`] and reports the
//! parts' states where it shows them (`/healthz`) through a [`StatusBoard`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use content::dns::DnsMode;
use content::uribl::UriblLookup;
use spam::requirements::SenderRequirements;
use spam::{
    DaemonConfig, DaemonState, FilterAddresses, FilterProfiles, FilterStatus, FilterSupervisor,
    SpamFilters,
};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::{InboundProcessor, InboxConfig, InboxError, InboxSink, SvcSender};

/// DKIM selector of the service's own key (`mailproof._domainkey.<seed domain>`).
pub const DKIM_SELECTOR: &str = "mailproof";
/// How long shutdown waits for each task to finish its current message.
const TASK_GRACE: Duration = Duration::from_secs(30);

/// The state of one part of the mail side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartState {
    Ok,
    Starting,
    /// Not run, and why when it is not obvious.
    Off(Option<String>),
    /// Failed; `next_retry` is the UNIX time of the next start attempt, when one is planned.
    Down {
        reason: String,
        next_retry: Option<i64>,
    },
}

/// Where the mail side reports its parts: group `smtp` (name ``), group `filters` (names
/// `spamassassin`, `rspamd`).
pub trait StatusBoard: Send + Sync + 'static {
    fn report(&self, group: &str, name: &str, state: PartState);
}

/// What the mail side needs of the deployment.
#[derive(Debug, Clone)]
pub struct MailConfig {
    pub inbox: InboxConfig,
    /// The filter profiles (`spam-filters.toml`).
    pub profiles: PathBuf,
    /// The mailbox providers' sender requirements (`sender-requirements.toml`).
    pub requirements: PathBuf,
    /// What requests made for a caller may reach (the one-click unsubscribe POST).
    pub fetch: content::netpolicy::NetPolicy,
    pub dns: DnsMode,
    /// The data directory: the daemons' work dir (`filters/`) and the default DKIM key
    /// (`dkim.pem`) are kept there.
    pub data_dir: PathBuf,
    /// A DKIM key shared by every mail process (`[keys] dkim_key_file`); `None`: one generated in
    /// the data directory.
    pub dkim_key_file: Option<PathBuf>,
    /// The certificate and key the SMTP listener offers STARTTLS with; `None`: no STARTTLS.
    pub smtp_tls: Option<smtp::TlsFiles>,
    /// Start spamd and rspamd (`[spam] daemons`).
    pub daemons: bool,
    pub spamd_program: Option<PathBuf>,
    pub rspamd_program: Option<PathBuf>,
}

/// The spam filter profiles of `config`: the API lists them, the mail side scans with them.
pub fn filter_profiles(config: &MailConfig) -> Result<FilterProfiles, InboxError> {
    Ok(FilterProfiles::load(&config.profiles)?)
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
    ///
    /// `work_ready` is the API's wake-up for new tests (svc sends), also woken when auto-inbox
    /// mail makes a test; `outer_stop` is the service's stop signal.
    pub async fn start(
        config: MailConfig,
        store: store::Store,
        catalog: Arc<domain::Catalog>,
        work_ready: Arc<Notify>,
        outer_stop: watch::Receiver<bool>,
        health: Arc<dyn StatusBoard>,
        smtp_listener: tokio::net::TcpListener,
    ) -> Result<MailService, InboxError> {
        let profiles = filter_profiles(&config)?;
        let requirements = SenderRequirements::load(&config.requirements)?;
        let dns_mode = config.dns.clone();
        let uribl = UriblLookup::new(profiles.uribl_zones().to_vec(), &dns_mode);
        let names: Vec<String> = profiles.all().iter().map(|p| p.client.clone()).collect();
        let bound = smtp_listener
            .local_addr()
            .map_err(|e| InboxError::Listener(e.to_string()))?;
        let inbox_cfg = config.inbox.clone();
        let seed_domain = inbox_cfg.seed_domain.clone();

        // A configured key is shared with the other mail processes: it must exist (never
        // generated here, or each process would sign with its own) and is checked before any
        // mail is taken. The default key is generated in the background on first start.
        let configured = match &config.dkim_key_file {
            Some(path) => Some(load_configured_dkim(path.clone(), seed_domain.clone()).await?),
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
            hostname: seed_domain.clone(),
            tls: config.smtp_tls.clone(),
            ..smtp::SmtpConfig::default()
        };
        let smtp_stop = stopped(stop_rx.clone());
        health.report("smtp", "", PartState::Ok);
        let smtp_health = health.clone();
        tasks.push((
            "smtp listener",
            tokio::spawn(async move {
                if let Err(e) = smtp::serve(smtp_listener, smtp_cfg, sink, smtp_stop).await {
                    tracing::error!(error = %e, "the SMTP listener failed");
                    smtp_health.report(
                        "smtp",
                        "",
                        PartState::Down {
                            reason: format!("the SMTP listener failed: {e}; restart the service"),
                            next_retry: None,
                        },
                    );
                }
            }),
        ));

        let filters_dir = config.data_dir.join("filters");
        let start_filter_daemons = config.daemons;
        let mut daemon_cfg = DaemonConfig::new(&filters_dir);
        if let Some(program) = &config.spamd_program {
            daemon_cfg.spamd_program = program.clone();
        }
        if let Some(program) = &config.rspamd_program {
            daemon_cfg.rspamd_program = program.clone();
        }
        // Shared with the svc sender, which gives it the key it signs with (see below).
        let filters = Arc::new(
            SpamFilters::with_dns(profiles, &FilterAddresses::default(), dns_mode.clone())
                .with_requirements(requirements, config.fetch.clone()),
        );
        let processor_filters = filters.clone();
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
                        health.report(
                            "filters",
                            name,
                            PartState::Off(Some("[spam] daemons = false in the configuration".into())),
                        );
                    }
                    None
                };
                if let Some(supervisor) = &supervisor {
                    let mut status = supervisor.status();
                    // Mail that came before the filters waits, stored, for their first start
                    // (seconds), rather than being deferred with a backoff.
                    let first = async {
                        let settled = status
                            .wait_for(|s| {
                                report_filters(&*health, s);
                                s.spamd != DaemonState::Starting
                                    && s.rspamd != DaemonState::Starting
                            })
                            .await
                            .map(|now| now.clone());
                        if let Ok(now) = settled {
                            processor_filters.update(&now);
                        }
                    };
                    tokio::select! {
                        () = first => {}
                        () = stopped(processor_stop.clone()) => {}
                    }
                    follow_filters(status, processor_filters.clone(), health.clone(), processor_stop.clone());
                }
                if !*processor_stop.borrow_and_update() {
                    InboundProcessor::new(
                        processor_store,
                        inbox_cfg,
                        catalog,
                        processor_filters,
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

        let key_path = config.data_dir.join("dkim.pem");
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
                // Our own sends verify without DNS: the filter answers for our selector from the
                // key itself, so a test does not depend on the record being published.
                if let Err(e) = filters.answer_own_dkim(&signer.txt_record()) {
                    tracing::error!(error = %e, "svc sends will show DKIM temperror or permerror");
                }
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
    health: Arc<dyn StatusBoard>,
    stop: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let follow = async {
            loop {
                let now = status.borrow_and_update().clone();
                filters.update(&now);
                report_filters(&*health, &now);
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

fn report_filters(health: &dyn StatusBoard, status: &FilterStatus) {
    for (name, state) in [("spamassassin", &status.spamd), ("rspamd", &status.rspamd)] {
        let part = match state {
            DaemonState::Up(_) => PartState::Ok,
            DaemonState::Starting => PartState::Starting,
            DaemonState::Off => PartState::Off(None),
            DaemonState::Down { reason, retry_at } => PartState::Down {
                reason: reason.clone(),
                next_retry: retry_at
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .and_then(|d| i64::try_from(d.as_secs()).ok()),
            },
        };
        health.report("filters", name, part);
    }
}

/// The DKIM key of `[keys] dkim_key_file`, which must exist.
async fn load_configured_dkim(
    path: PathBuf,
    domain: String,
) -> Result<smtp::DkimSigner, InboxError> {
    if !path.is_file() {
        return Err(InboxError::DkimKeyMissing { path });
    }
    let shown = path.clone();
    let signer = tokio::task::spawn_blocking(move || {
        smtp::DkimSigner::generate_or_load(&path, &domain, DKIM_SELECTOR)
    })
    .await
    .map_err(|e| InboxError::DkimKey {
        path: shown.clone(),
        reason: format!("the key task failed: {e}"),
    })?
    .map_err(|e| InboxError::DkimKey {
        path: shown,
        reason: e.to_string(),
    })?;
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
