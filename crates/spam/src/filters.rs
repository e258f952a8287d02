//! The scanning API: every engine scans a message once, every profile judges the engine's score.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

use content::netpolicy::NetPolicy;
use content::uribl::UriblLookup;

use crate::builtin::{BuiltinAnalyzer, DnsMode};
use crate::daemons::{DaemonState, FilterAddresses, FilterStatus};
use crate::profiles::{EngineKind, FilterProfile, FilterProfiles, FilterType};
use crate::report::EngineReport;
use crate::requirements::{Arrival, Net, Report, SenderRequirements};
use crate::rspamd::RspamdClient;
use crate::spamd::SpamdClient;
use crate::SpamError;

/// Largest message handed to an engine; bigger ones are scanned truncated, as spamc does.
pub const MAX_MESSAGE_BYTES: usize = 30 * 1024 * 1024;
/// spamd gets at most spamc's default `--max-size` (500 KB): SpamAssassin is Perl, and its body
/// rules look at the start of each part anyway.
pub const SPAMD_MAX_BYTES: usize = 500 * 1024;

/// SpamAssassin is CPU-bound Perl: large messages take seconds.
const SPAMD_TIMEOUT: Duration = Duration::from_secs(60);
const RSPAMD_TIMEOUT: Duration = Duration::from_secs(30);

/// The SMTP envelope the message arrived with; filters judge the sender, not just the content.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub client_ip: IpAddr,
    pub helo: String,
    /// Reverse-DNS name of `client_ip` (empty when it has none).
    pub hostname: String,
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
}

/// One filter's judgement in the shape of spec §2.8 plus the score behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub client: String,
    pub kind: FilterType,
    pub spam: domain::SpamVerdict,
    pub score: f64,
    pub details: String,
}

enum Engine<T> {
    Ready(SocketAddr, Arc<T>),
    /// Not configured or could not be built; the reason is logged with every scan.
    Missing(String),
    /// Supervised but not answering now; every scan says why and when it is tried again.
    Down {
        reason: String,
        retry_at: Option<SystemTime>,
    },
}

impl<T> Clone for Engine<T> {
    fn clone(&self) -> Self {
        match self {
            Engine::Ready(addr, client) => Engine::Ready(*addr, client.clone()),
            Engine::Missing(reason) => Engine::Missing(reason.clone()),
            Engine::Down { reason, retry_at } => Engine::Down {
                reason: reason.clone(),
                retry_at: *retry_at,
            },
        }
    }
}

/// The profiles plus one client per engine. Cheap to share behind an `Arc`; the engines follow
/// the daemons' state through [`SpamFilters::update`].
pub struct SpamFilters {
    profiles: FilterProfiles,
    /// The providers' sender requirements and the policy their unsubscribe POST goes through;
    /// `None` until given ([`SpamFilters::with_requirements`]).
    requirements: Option<(SenderRequirements, NetPolicy, UriblLookup)>,
    /// The DNS setting, for the requirements' address blocklists.
    dns: DnsMode,
    spamd: RwLock<Engine<SpamdClient>>,
    rspamd: RwLock<Engine<RspamdClient>>,
    builtin: BuiltinAnalyzer,
}

fn spamd_engine(addr: Option<SocketAddr>) -> Engine<SpamdClient> {
    match addr {
        Some(addr) => Engine::Ready(addr, Arc::new(SpamdClient::new(addr, SPAMD_TIMEOUT))),
        None => Engine::Missing("no spamd address".into()),
    }
}

fn rspamd_engine(addr: Option<SocketAddr>) -> Engine<RspamdClient> {
    match addr {
        Some(addr) => match RspamdClient::new(addr, RSPAMD_TIMEOUT) {
            Ok(client) => Engine::Ready(addr, Arc::new(client)),
            Err(e) => Engine::Missing(e.to_string()),
        },
        None => Engine::Missing("no rspamd address".into()),
    }
}

/// The engine for a daemon's new state; an engine already talking to the same address is kept.
fn follow<T>(
    current: &RwLock<Engine<T>>,
    state: &DaemonState,
    make: fn(Option<SocketAddr>) -> Engine<T>,
) {
    let next = match state {
        DaemonState::Up(addr) => {
            let same = matches!(
                &*current.read().unwrap_or_else(PoisonError::into_inner),
                Engine::Ready(a, _) if a == addr
            );
            if same {
                return;
            }
            make(Some(*addr))
        }
        DaemonState::Off => make(None),
        DaemonState::Starting => Engine::Down {
            reason: "it is starting".into(),
            retry_at: None,
        },
        DaemonState::Down { reason, retry_at } => Engine::Down {
            reason: reason.clone(),
            retry_at: Some(*retry_at),
        },
    };
    *current.write().unwrap_or_else(PoisonError::into_inner) = next;
}

impl<T> Engine<T> {
    fn snapshot(lock: &RwLock<Engine<T>>) -> Engine<T> {
        // The engine is replaced whole; a panic elsewhere cannot leave it half-written.
        lock.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl SpamFilters {
    /// Filters against the given daemons, with the built-in analyzer using the system resolver.
    pub fn new(profiles: FilterProfiles, addresses: &FilterAddresses) -> SpamFilters {
        SpamFilters::with_dns(profiles, addresses, DnsMode::default())
    }

    /// The built-in analyzer looks names up through `dns`, for SPF/DKIM/DMARC and the profiles'
    /// URI blocklists.
    pub fn with_dns(
        profiles: FilterProfiles,
        addresses: &FilterAddresses,
        dns: DnsMode,
    ) -> SpamFilters {
        let uribl = UriblLookup::new(profiles.uribl_zones().to_vec(), &dns);
        SpamFilters {
            profiles,
            requirements: None,
            dns: dns.clone(),
            spamd: RwLock::new(spamd_engine(addresses.spamd)),
            rspamd: RwLock::new(rspamd_engine(addresses.rspamd)),
            builtin: BuiltinAnalyzer::new(dns, uribl),
        }
    }

    /// Checks the providers' sender requirements too ([`SpamFilters::sender_requirements`]).
    pub fn with_requirements(
        mut self,
        requirements: SenderRequirements,
        policy: NetPolicy,
    ) -> SpamFilters {
        let blocklists = UriblLookup::new(requirements.blocklists().to_vec(), &self.dns);
        self.requirements = Some((requirements, policy, blocklists));
        self
    }

    /// The sender-requirements report of `message` as it arrived, through the built-in
    /// analyzer's resolver and own keys; `None` when no requirements were given.
    pub async fn sender_requirements(&self, message: &[u8], arrival: &Arrival) -> Option<Report> {
        let (requirements, policy, blocklists) = self.requirements.as_ref()?;
        let net = Net {
            analyzer: &self.builtin,
            policy,
            blocklists,
        };
        Some(requirements.check(&net, message, arrival).await)
    }

    /// The built-in analyzer verifies signatures by `record`'s key without DNS (our own sends).
    pub fn answer_own_dkim(&self, record: &domain::DkimTxtRecord) -> Result<(), SpamError> {
        self.builtin.answer_own_dkim(record)
    }

    /// Follows the supervised daemons: scans go to the ones up, and a scan for one that is down
    /// fails with [`SpamError::EngineDown`] saying why.
    pub fn update(&self, status: &FilterStatus) {
        follow(&self.spamd, &status.spamd, spamd_engine);
        follow(&self.rspamd, &status.rspamd, rspamd_engine);
    }

    /// The spam clients of `GET /v5/spam/clients`, in file order.
    pub fn clients(&self) -> &[FilterProfile] {
        self.profiles.all()
    }

    /// Scans with one profile (and so one engine).
    pub async fn scan_one(
        &self,
        profile: &str,
        message: &[u8],
        env: &Envelope,
    ) -> Result<Verdict, SpamError> {
        let profile = self
            .profiles
            .get(profile)
            .ok_or_else(|| SpamError::UnknownProfile(profile.to_string()))?;
        let report = self.run_engine(profile.engine, message, env).await?;
        Ok(judge(profile, &report))
    }

    /// Scans with every profile; each engine runs once, concurrently with the others.
    /// A failing engine fails only its own profiles.
    pub async fn scan_all(
        &self,
        message: &[u8],
        env: &Envelope,
    ) -> Vec<(String, Result<Verdict, SpamError>)> {
        let used = self.profiles.engines();
        let run_if_used = |engine: EngineKind| {
            let wanted = used.contains(&engine);
            async move {
                if wanted {
                    Some(self.run_engine(engine, message, env).await)
                } else {
                    None
                }
            }
        };
        let (sa, rs, mp) = tokio::join!(
            run_if_used(EngineKind::Spamassassin),
            run_if_used(EngineKind::Rspamd),
            run_if_used(EngineKind::Builtin),
        );
        self.profiles
            .all()
            .iter()
            .map(|profile| {
                let report = match profile.engine {
                    EngineKind::Spamassassin => &sa,
                    EngineKind::Rspamd => &rs,
                    EngineKind::Builtin => &mp,
                };
                let verdict = match report {
                    Some(Ok(report)) => Ok(judge(profile, report)),
                    Some(Err(e)) => Err(e.for_another_profile()),
                    None => Err(SpamError::EngineNotConfigured {
                        engine: profile.engine.as_str(),
                    }),
                };
                (profile.client.clone(), verdict)
            })
            .collect()
    }

    async fn run_engine(
        &self,
        engine: EngineKind,
        message: &[u8],
        env: &Envelope,
    ) -> Result<EngineReport, SpamError> {
        let started = Instant::now();
        let cap = match engine {
            EngineKind::Spamassassin => SPAMD_MAX_BYTES,
            EngineKind::Rspamd | EngineKind::Builtin => MAX_MESSAGE_BYTES,
        };
        let (message, truncated_from) = if message.len() > cap {
            (&message[..cap], Some(message.len()))
        } else {
            (message, None)
        };
        let result = match engine {
            EngineKind::Spamassassin => match Engine::snapshot(&self.spamd) {
                Engine::Ready(_, client) => client.scan(message).await,
                Engine::Missing(reason) => Err(not_configured(engine, &reason)),
                Engine::Down { reason, retry_at } => Err(down(engine, &reason, retry_at)),
            },
            EngineKind::Rspamd => match Engine::snapshot(&self.rspamd) {
                Engine::Ready(_, client) => client.scan(message, env).await,
                Engine::Missing(reason) => Err(not_configured(engine, &reason)),
                Engine::Down { reason, retry_at } => Err(down(engine, &reason, retry_at)),
            },
            EngineKind::Builtin => self.builtin.analyze(message, env).await,
        };
        let elapsed_ms = started.elapsed().as_millis();
        telemetry::global().filter_scan(engine.as_str(), result.is_ok());
        match result {
            Ok(mut report) => {
                tracing::debug!(
                    engine = engine.as_str(),
                    elapsed_ms,
                    score = report.score,
                    "scanned"
                );
                if let Some(size) = truncated_from {
                    report.notes.push(format!(
                        "message of {size} bytes scanned truncated to the first {cap}"
                    ));
                }
                Ok(report)
            }
            Err(e) => {
                tracing::warn!(engine = engine.as_str(), elapsed_ms, error = %e, "spam filter failed; its result stays empty until retried");
                Err(e)
            }
        }
    }
}

fn not_configured(engine: EngineKind, reason: &str) -> SpamError {
    tracing::debug!(engine = engine.as_str(), reason, "engine not configured");
    SpamError::EngineNotConfigured {
        engine: engine.as_str(),
    }
}

fn down(engine: EngineKind, reason: &str, retry_at: Option<SystemTime>) -> SpamError {
    let next = match retry_at.map(|t| t.duration_since(SystemTime::now())) {
        Some(Ok(wait)) => format!(" (next start attempt in {} s)", wait.as_secs().max(1)),
        Some(Err(_)) => " (being started again now)".to_string(),
        None => String::new(),
    };
    SpamError::EngineDown {
        engine: engine.as_str(),
        reason: format!("{reason}{next}"),
    }
}

fn judge(profile: &FilterProfile, report: &EngineReport) -> Verdict {
    Verdict {
        client: profile.client.clone(),
        kind: profile.kind,
        spam: profile.classify(report.score),
        // `+ 0.0` turns an engine's "-0.0" into a plain 0.
        score: report.score + 0.0,
        details: report.details(profile.spam_at),
    }
}

impl SpamError {
    /// The same scan failure, reported again for another profile that shares the engine.
    fn for_another_profile(&self) -> SpamError {
        match self {
            SpamError::EngineNotConfigured { engine } => SpamError::EngineNotConfigured { engine },
            SpamError::EngineUnavailable {
                engine,
                addr,
                reason,
            } => SpamError::EngineUnavailable {
                engine,
                addr: addr.clone(),
                reason: reason.clone(),
            },
            SpamError::EngineProtocol { engine, reason } => SpamError::EngineProtocol {
                engine,
                reason: reason.clone(),
            },
            SpamError::EngineTimeout { engine, timeout_ms } => SpamError::EngineTimeout {
                engine,
                timeout_ms: *timeout_ms,
            },
            SpamError::UnparsableMessage(reason) => SpamError::UnparsableMessage(reason.clone()),
            SpamError::EngineDown { engine, reason } => SpamError::EngineDown {
                engine,
                reason: reason.clone(),
            },
            other => SpamError::EngineProtocol {
                engine: "unknown",
                reason: other.to_string(),
            },
        }
    }
}
