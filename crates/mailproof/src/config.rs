//! Service settings: command-line flags override environment variables (`MAILPROOF_*`), which
//! override the optional TOML file (`--config`), which overrides the defaults. All problems are
//! reported together.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use content::netpolicy::NetPolicy;
use serde::Deserialize;
use store::BlobsConfig;

/// The TOML file's shape; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub http: Option<String>,
    pub smtp: Option<String>,
    pub public_url: Option<String>,
    pub resources: Option<PathBuf>,
    pub seed_domain: Option<String>,
    pub inbox_domain: Option<String>,
    pub reprocess_quota: Option<i64>,
    pub default_rate_limit: Option<u32>,
    pub retention_days: Option<i64>,
    pub max_body_bytes: Option<usize>,
    pub fetch: Option<NetPolicy>,
    pub blobs: Option<BlobsConfig>,
    pub render: Option<RenderSettings>,
    pub spam: Option<SpamSettings>,
    pub http_limits: Option<HttpLimits>,
    pub dns: Option<DnsSettings>,
    pub metrics: Option<MetricsSettings>,
    pub webhooks: Option<WebhookSettings>,
    pub queues: Option<QueueSettings>,
    pub hits: Option<HitsConfig>,
    pub database: Option<DatabaseSettings>,
    pub keys: Option<KeySettings>,
    pub analytics: Option<AnalyticsSettings>,
    pub role: Option<String>,
}

/// The `[analytics]` section: where tracking hits are served and how machines are told from
/// readers.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnalyticsSettings {
    /// The public base of tracking URLs (default: the public URL with `/t`), e.g. a hostname of
    /// its own. Whatever answers it must pass `<base>/<guid>/<file>` to `/t/<guid>/<file>` of an
    /// api process.
    pub tracking_base_url: Option<String>,
    /// Apple's relay egress ranges (`https://mask-api.icloud.com/egress-ip-ranges.csv`, saved by
    /// the operator). Unset, Apple MPP is judged on the user agent alone and reports say so.
    pub apple_egress_csv: Option<PathBuf>,
    /// Seconds between checks of that file; it is reread when its modification time or size
    /// changed.
    pub apple_egress_check_secs: u64,
    /// Held-open tracking responses in flight at once, in all (at most half of
    /// `[http_limits] max_connections` is used: each keeps its connection)…
    pub max_held_responses: usize,
    /// …and from one client address or IPv6 /64 (at most half of `max_connections_per_address`).
    pub max_held_per_address: usize,
}

impl Default for AnalyticsSettings {
    fn default() -> Self {
        AnalyticsSettings {
            tracking_base_url: None,
            apple_egress_csv: None,
            apple_egress_check_secs: 300,
            max_held_responses: 512,
            max_held_per_address: 16,
        }
    }
}

/// The `[keys]` section: keys every process of one service must share. Unset, each is generated
/// once into the data directory, which only processes sharing that directory share.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeySettings {
    /// At least 32 random bytes that sign presigned screenshot URLs and the web's CSRF tokens
    /// (needed by `api` processes); e.g. `head -c 32 /dev/urandom > url-signing.key`.
    pub url_signing_key_file: Option<PathBuf>,
    /// The PKCS#1 PEM RSA key that signs `svc` spam test mail (needed by `mail` processes); e.g.
    /// `openssl genrsa -traditional -out dkim.pem 2048`.
    pub dkim_key_file: Option<PathBuf>,
    /// The certificate chain (PEM) the SMTP listener offers STARTTLS with (`mail` processes),
    /// with `smtp_tls_key_file`. Without them no STARTTLS is offered, and the sender
    /// requirements cannot see whether a sender uses TLS.
    pub smtp_tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of `smtp_tls_cert_file`.
    pub smtp_tls_key_file: Option<PathBuf>,
}

/// What one `mailproof serve` process does; any number of processes of each role can share one
/// database and blob store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// HTTP: the API, the web pages and screenshots; retention.
    Api,
    /// The rendering engines and the render worker.
    Render,
    /// SMTP intake, the spam filters, the inbound processor, the svc sender and the link checks.
    Mail,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Api, Role::Render, Role::Mail];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Api => "api",
            Role::Render => "render",
            Role::Mail => "mail",
        }
    }
}

/// The roles of this process (`--role api,render,mail`); all three by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    api: bool,
    render: bool,
    mail: bool,
}

impl Default for Roles {
    fn default() -> Self {
        Roles {
            api: true,
            render: true,
            mail: true,
        }
    }
}

impl Roles {
    /// A comma-separated list of `api`, `render` and `mail` (or `all`).
    pub fn parse(text: &str) -> Result<Roles, String> {
        let mut roles = Roles {
            api: false,
            render: false,
            mail: false,
        };
        for part in text.split(',').map(str::trim) {
            match part.to_ascii_lowercase().as_str() {
                "api" => roles.api = true,
                "render" => roles.render = true,
                "mail" => roles.mail = true,
                "all" => roles = Roles::default(),
                "" => {}
                other => {
                    return Err(format!(
                        "--role {text:?}: unknown role {other:?}; give a comma-separated list of api, render and mail (or all)"
                    ))
                }
            }
        }
        if roles.iter().next().is_none() {
            return Err(format!(
                "--role {text:?} names no role; give a comma-separated list of api, render and mail (or all)"
            ));
        }
        Ok(roles)
    }

    pub fn has(self, role: Role) -> bool {
        match role {
            Role::Api => self.api,
            Role::Render => self.render,
            Role::Mail => self.mail,
        }
    }

    pub fn is_all(self) -> bool {
        self == Roles::default()
    }

    pub fn iter(self) -> impl Iterator<Item = Role> {
        Role::ALL.into_iter().filter(move |r| self.has(*r))
    }
}

impl std::fmt::Display for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.iter().map(Role::as_str).collect();
        f.write_str(&names.join(","))
    }
}

/// The `[metrics]` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// When set, `GET /metrics` answers only `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

/// The `[dns]` section: where the lookups mailproof makes itself go (SPF/DKIM/DMARC and URI
/// blocklists in the built-in spam filter, URI blocklists in the link check).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DnsSettings {
    /// Off: no lookups at all (authentication results are `temperror`, blocklists not consulted).
    pub enabled: bool,
    /// One name server, `ip:port`, instead of /etc/resolv.conf's: e.g. your own caching resolver,
    /// which URI blocklists require (they refuse queries from public resolvers).
    pub nameserver: Option<SocketAddr>,
    /// Milliseconds per query try (two tries).
    pub timeout_ms: u64,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings {
            enabled: true,
            nameserver: None,
            timeout_ms: 500,
        }
    }
}

impl DnsSettings {
    pub fn mode(&self) -> content::dns::DnsMode {
        let timeout = std::time::Duration::from_millis(self.timeout_ms);
        match (self.enabled, self.nameserver) {
            (false, _) => content::dns::DnsMode::Disabled,
            (true, Some(addr)) => content::dns::DnsMode::Server { addr, timeout },
            (true, None) => content::dns::DnsMode::System { timeout },
        }
    }
}

/// The `[webhooks]` section: how completion callbacks are retried.
pub type WebhookSettings = webhooks::Retries;

/// The `[hits]` section: how tracking hits are written (a group commit: every hit is answered
/// only once its batch is committed) and how many one client or one campaign may record.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HitsConfig {
    /// Hits waiting for the writer at most; beyond it hit requests wait for room.
    pub queue_capacity: usize,
    /// Hits written in one transaction at most.
    pub batch_max: usize,
    /// Batches written at once; 0: 1 on SQLite, 4 on PostgreSQL.
    pub writers: usize,
    /// Milliseconds the writer waits for more hits before writing a batch that is not full.
    pub batch_wait_ms: u64,
    /// Hits recorded per minute from one client address (an IPv6 /64 is one); 0: no limit.
    pub per_address_per_minute: u32,
    /// Hits recorded per minute for one campaign; 0: no limit.
    pub per_campaign_per_minute: u32,
    /// Hits one campaign may hold in storage; more are refused (counted); 0: no limit.
    pub max_stored_per_campaign: i64,
    /// Hits all campaigns of one account may hold in storage; 0: no limit.
    pub max_stored_per_account: i64,
    /// Milliseconds a hit waits for the database (its campaign read, its batch's commit)
    /// before it is answered unrecorded (counted).
    pub database_wait_ms: u64,
}

impl Default for HitsConfig {
    fn default() -> Self {
        let d = api::hits::HitSettings::default();
        HitsConfig {
            queue_capacity: d.queue_capacity,
            batch_max: d.batch_max,
            writers: d.writers,
            batch_wait_ms: d.batch_wait.as_millis() as u64,
            per_address_per_minute: d.per_address_per_minute,
            per_campaign_per_minute: d.per_campaign_per_minute,
            max_stored_per_campaign: d.max_stored_per_campaign,
            max_stored_per_account: d.max_stored_per_account,
            database_wait_ms: d.database_wait.as_millis() as u64,
        }
    }
}

impl HitsConfig {
    pub fn settings(&self) -> api::hits::HitSettings {
        api::hits::HitSettings {
            queue_capacity: self.queue_capacity,
            batch_max: self.batch_max,
            writers: self.writers,
            batch_wait: std::time::Duration::from_millis(self.batch_wait_ms),
            per_address_per_minute: self.per_address_per_minute,
            per_campaign_per_minute: self.per_campaign_per_minute,
            max_stored_per_campaign: self.max_stored_per_campaign,
            max_stored_per_account: self.max_stored_per_account,
            database_wait: std::time::Duration::from_millis(self.database_wait_ms),
        }
    }
}

/// The `[database]` section: how long PostgreSQL is waited for (see [`store::DbTimeouts`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// Milliseconds a request waits for a database connection (connecting included) before it
    /// fails; while the database is away, how soon requests are answered.
    pub acquire_timeout_ms: u64,
    /// Milliseconds one statement may run; 0: no limit.
    pub statement_timeout_ms: u64,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        let d = store::DbTimeouts::default();
        DatabaseSettings {
            acquire_timeout_ms: d.acquire.as_millis() as u64,
            statement_timeout_ms: d.statement.map_or(0, |t| t.as_millis() as u64),
        }
    }
}

impl DatabaseSettings {
    pub fn timeouts(&self) -> store::DbTimeouts {
        use std::time::Duration;
        store::DbTimeouts {
            acquire: Duration::from_millis(self.acquire_timeout_ms),
            statement: (self.statement_timeout_ms > 0)
                .then(|| Duration::from_millis(self.statement_timeout_ms)),
        }
    }
}

/// The `[queues]` section: how many workers drain the background queues, and how many of their
/// jobs one account may have running at once (`0`: no cap beyond the workers). Jobs are shared
/// between accounts in turn whatever the caps (see `store::fair`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueSettings {
    /// Link checks run at once by a mail process (each may wait on hosts that never answer).
    pub link_check_workers: usize,
    /// Callbacks delivered at once by a mail process.
    pub callback_workers: usize,
    /// Content checks run at once by a render process.
    pub content_check_workers: usize,
    pub render_per_account: u32,
    pub link_checks_per_account: u32,
    pub content_checks_per_account: u32,
    pub callbacks_per_account: u32,
}

impl Default for QueueSettings {
    fn default() -> Self {
        let caps = store::AccountCaps::default();
        QueueSettings {
            link_check_workers: 4,
            callback_workers: 4,
            content_check_workers: 2,
            render_per_account: caps.render.unwrap_or(0),
            link_checks_per_account: caps.link_checks.unwrap_or(0),
            content_checks_per_account: caps.content_checks.unwrap_or(0),
            callbacks_per_account: caps.callbacks.unwrap_or(0),
        }
    }
}

impl QueueSettings {
    /// The caps for the store's claims.
    pub fn caps(&self) -> store::AccountCaps {
        let cap = |n: u32| (n > 0).then_some(n);
        store::AccountCaps {
            render: cap(self.render_per_account),
            link_checks: cap(self.link_checks_per_account),
            content_checks: cap(self.content_checks_per_account),
            callbacks: cap(self.callbacks_per_account),
        }
    }
}

/// The `[http_limits]` section: how long clients may take, how many are served at once, how
/// many failed logins they may make, and which proxies name the client.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpLimits {
    /// Seconds a connection with no request in progress stays open: an idle keep-alive
    /// connection (HTTP/1 or HTTP/2), or a request head that never completes.
    pub header_timeout: u64,
    /// Seconds a request body may take to arrive in all (and a response may wait for a client
    /// that does not read it) before the request is answered 408 and the connection closed.
    pub body_timeout: u64,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Connections one client address (an IPv6 /64 counting as one) may hold at once; more are
    /// refused (429). Trusted proxies are exempt.
    pub max_connections_per_address: usize,
    /// Failed logins per minute from one client address before `RateLimited`.
    pub failed_logins_per_address: u32,
    /// Failed logins per minute for one API key, from all addresses together; an address that
    /// has no failed login may still try once (so a locked key never locks out its owner).
    pub failed_logins_per_key: u32,
    /// Requests per minute one client address may make with the sandbox credentials.
    pub sandbox_requests_per_minute: u32,
    /// Reverse proxies (CIDR blocks, e.g. `["127.0.0.1/32", "10.0.0.0/8"]`) whose `Forwarded` or
    /// `X-Forwarded-For` header names the client's address; from any other peer those headers
    /// are ignored.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: 10,
            body_timeout: 60,
            max_connections: 2048,
            max_connections_per_address: 64,
            failed_logins_per_address: 30,
            failed_logins_per_key: 30,
            sandbox_requests_per_minute: 60,
            trusted_proxies: Vec::new(),
        }
    }
}

/// The `[spam]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpamSettings {
    /// Start spamd and rspamd (offline, on loopback). Off, their profiles' results stay empty.
    pub daemons: bool,
    /// The spamd and rspamd programs, when not in /usr/sbin or /usr/bin.
    pub spamd_program: Option<PathBuf>,
    pub rspamd_program: Option<PathBuf>,
}

impl Default for SpamSettings {
    fn default() -> Self {
        SpamSettings {
            daemons: true,
            spamd_program: None,
            rspamd_program: None,
        }
    }
}

/// The `[render]` section: which engines run and how much work they take at once.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RenderSettings {
    /// Engines to start; an empty list runs no renderer (screenshots stay Pending).
    pub engines: Vec<domain::Engine>,
    /// Pages each engine renders at once (default: one per core).
    pub slots_per_engine: Option<usize>,
    /// Seconds one render may take.
    pub render_timeout: u64,
    /// Seconds a render waits for remote images and stylesheets before the shot is taken anyway.
    pub resource_wait: u64,
    /// Attempts before a screenshot is Bounced.
    pub max_attempts: i64,
    /// Seconds each engine may take to start (per attempt; three attempts). A busy machine
    /// needs more than an idle one.
    pub start_timeout: u64,
}

impl Default for RenderSettings {
    fn default() -> Self {
        RenderSettings {
            engines: domain::Engine::ALL.to_vec(),
            slots_per_engine: None,
            render_timeout: 30,
            resource_wait: 5,
            max_attempts: 3,
            start_timeout: 60,
        }
    }
}

impl FileConfig {
    pub fn load(path: &Path) -> anyhow::Result<FileConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text)
            .with_context(|| format!("config file {} is not valid", path.display()))
    }
}

/// Settings after merging, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    /// `None`: SQLite, `mailproof.sqlite` in the data dir.
    pub database_url: Option<String>,
    pub http: SocketAddr,
    pub smtp: SocketAddr,
    pub public_url: String,
    /// No public URL was configured: it follows the address actually bound.
    pub public_url_is_default: bool,
    pub resources: PathBuf,
    pub seed_domain: String,
    pub inbox_domain: String,
    pub reprocess_quota: i64,
    pub default_rate_limit: u32,
    pub retention_days: i64,
    pub max_body_bytes: usize,
    pub fetch: NetPolicy,
    pub blobs: BlobsConfig,
    pub render: RenderSettings,
    pub spam: SpamSettings,
    pub http_limits: HttpLimits,
    pub dns: DnsSettings,
    pub metrics: MetricsSettings,
    pub webhooks: WebhookSettings,
    pub queues: QueueSettings,
    pub hits: HitsConfig,
    pub database: DatabaseSettings,
    pub keys: KeySettings,
    pub analytics: AnalyticsSettings,
    pub roles: Roles,
}

/// Values given on the command line or in the environment (clap merges those two).
#[derive(Debug, Default, Clone, clap::Args)]
pub struct Overrides {
    /// Where the database, screenshots and keys live.
    #[arg(long, env = "MAILPROOF_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The database: `postgres://USER:PASSWORD@HOST:PORT/DB` or `sqlite://FILE` (default: SQLite
    /// in the data dir).
    #[arg(long, env = "MAILPROOF_DATABASE_URL")]
    pub database_url: Option<String>,
    /// HTTP listen address.
    #[arg(long, env = "MAILPROOF_HTTP")]
    pub http: Option<String>,
    /// SMTP listen address.
    #[arg(long, env = "MAILPROOF_SMTP")]
    pub smtp: Option<String>,
    /// Base URL of the links the API hands out (default: http://<http addr>).
    #[arg(long, env = "MAILPROOF_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Directory with the data files (clients.toml, rules/, spam-filters.toml, fonts/).
    #[arg(long, env = "MAILPROOF_RESOURCES")]
    pub resources: Option<PathBuf>,
    #[arg(long, env = "MAILPROOF_SEED_DOMAIN")]
    pub seed_domain: Option<String>,
    #[arg(long, env = "MAILPROOF_INBOX_DOMAIN")]
    pub inbox_domain: Option<String>,
    /// Optional TOML file with any of these settings and the `[fetch]` and `[blobs]` sections.
    #[arg(long, env = "MAILPROOF_CONFIG")]
    pub config: Option<PathBuf>,
    /// What this process runs: a comma-separated list of api (HTTP), render (the engines) and
    /// mail (SMTP intake, filters, svc sender, link checks); default all.
    #[arg(long, env = "MAILPROOF_ROLE")]
    pub role: Option<String>,
    /// File with the key that signs screenshot URLs (`[keys] url_signing_key_file`); every api
    /// process of one service needs the same one.
    #[arg(long, env = "MAILPROOF_URL_SIGNING_KEY_FILE")]
    pub url_signing_key_file: Option<PathBuf>,
    /// File with the DKIM key of svc spam tests (`[keys] dkim_key_file`); every mail process of
    /// one service needs the same one.
    #[arg(long, env = "MAILPROOF_DKIM_KEY_FILE")]
    pub dkim_key_file: Option<PathBuf>,
    /// Publish this api process's URL-signing key as the service's, replacing the fingerprint
    /// the api processes before it published (after replacing the key on purpose). Without it an
    /// api process with another key than the published one refuses to start.
    #[arg(long, env = "MAILPROOF_REPLACE_SIGNING_KEY")]
    pub replace_signing_key: bool,
}

/// The data files shipped with the source tree, for running from a checkout.
fn default_resources() -> PathBuf {
    let in_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    if in_tree.join("clients.toml").exists() {
        return in_tree;
    }
    PathBuf::from("/usr/share/mailproof")
}

impl Settings {
    pub fn resolve(o: &Overrides) -> anyhow::Result<Settings> {
        let file = match &o.config {
            Some(p) => FileConfig::load(p)?,
            None => FileConfig::default(),
        };
        let mut problems = Vec::new();
        let addr = |name: &str, v: Option<String>, default: &str, problems: &mut Vec<String>| {
            let text = v.unwrap_or_else(|| default.to_string());
            text.parse::<SocketAddr>().unwrap_or_else(|_| {
                problems.push(format!(
                    "--{name} {text:?} is not an address like 127.0.0.1:8080"
                ));
                SocketAddr::from(([127, 0, 0, 1], 0))
            })
        };
        let http = addr(
            "http",
            o.http.clone().or(file.http),
            "127.0.0.1:8080",
            &mut problems,
        );
        let smtp = addr(
            "smtp",
            o.smtp.clone().or(file.smtp),
            "127.0.0.1:2525",
            &mut problems,
        );
        let configured_url = o.public_url.clone().or(file.public_url);
        let public_url_is_default = configured_url.is_none();
        let public_url = configured_url
            .unwrap_or_else(|| format!("http://{http}"))
            .trim_end_matches('/')
            .to_string();
        if !(public_url.starts_with("http://") || public_url.starts_with("https://")) {
            problems.push(format!(
                "--public-url {public_url:?} must start with http:// or https://"
            ));
        }
        let reprocess_quota = file.reprocess_quota.unwrap_or(5);
        if !(0..=1000).contains(&reprocess_quota) {
            problems.push("reprocess_quota must be between 0 and 1000".into());
        }
        let retention_days = file.retention_days.unwrap_or(90);
        if retention_days < 1 {
            problems.push("retention_days must be at least 1".into());
        }
        let http_limits = file.http_limits.unwrap_or_default();
        if http_limits.header_timeout == 0
            || http_limits.body_timeout == 0
            || http_limits.max_connections == 0
            || http_limits.max_connections_per_address == 0
        {
            problems.push(
                "[http_limits] header_timeout, body_timeout, max_connections and max_connections_per_address must be at least 1"
                    .into(),
            );
        }
        let database_url = o.database_url.clone().or(file.database_url);
        if let Some(url) = &database_url {
            if store::Backend::of_url(url).is_none() {
                problems.push(format!(
                    "database_url {:?} must start with postgres:// or sqlite://",
                    store::redact_url(url)
                ));
            }
        }
        let dns = file.dns.unwrap_or_default();
        if !(10..=10_000).contains(&dns.timeout_ms) {
            problems.push("[dns] timeout_ms must be between 10 and 10000".into());
        }
        let webhooks = file.webhooks.unwrap_or_default();
        if webhooks.max_attempts < 1
            || webhooks.base_delay < 1
            || webhooks.max_delay < webhooks.base_delay
        {
            problems.push(
                "[webhooks] max_attempts and base_delay must be at least 1, and max_delay at least base_delay"
                    .into(),
            );
        }
        let hits = file.hits.unwrap_or_default();
        if !(1..=1_000_000).contains(&hits.queue_capacity)
            || !(1..=10_000).contains(&hits.batch_max)
            || hits.batch_wait_ms > 1_000
            || hits.writers > 64
            || hits.max_stored_per_campaign < 0
            || hits.max_stored_per_account < 0
            || !(100..=60_000).contains(&hits.database_wait_ms)
        {
            problems.push(
                "[hits] queue_capacity must be between 1 and 1000000, batch_max between 1 and 10000, batch_wait_ms at most 1000, writers at most 64, max_stored_per_campaign and max_stored_per_account at least 0, database_wait_ms between 100 and 60000"
                    .into(),
            );
        }
        let database = file.database.unwrap_or_default();
        if !(100..=600_000).contains(&database.acquire_timeout_ms)
            || database.statement_timeout_ms > 3_600_000
        {
            problems.push(
                "[database] acquire_timeout_ms must be between 100 and 600000, statement_timeout_ms at most 3600000 (0: no limit)"
                    .into(),
            );
        }
        let queues = file.queues.unwrap_or_default();
        let workers = [
            queues.link_check_workers,
            queues.callback_workers,
            queues.content_check_workers,
        ];
        if workers.iter().any(|w| !(1..=64).contains(w)) {
            problems.push(
                "[queues] link_check_workers, callback_workers and content_check_workers must be between 1 and 64"
                    .into(),
            );
        }
        let mut analytics = file.analytics.unwrap_or_default();
        if let Some(base) = &analytics.tracking_base_url {
            let base = base.trim_end_matches('/').to_string();
            match url::Url::parse(&base) {
                Ok(u)
                    if matches!(u.scheme(), "http" | "https")
                        && u.host().is_some()
                        && u.query().is_none()
                        && u.fragment().is_none() => {}
                _ => problems.push(format!(
                    "[analytics] tracking_base_url {base:?} must be an http:// or https:// URL without query or fragment"
                )),
            }
            analytics.tracking_base_url = Some(base);
        }
        if let Some(path) = &analytics.apple_egress_csv {
            if !path.is_file() {
                problems.push(format!(
                    "[analytics] apple_egress_csv {} is not a readable file",
                    path.display()
                ));
            }
        }
        if !(10..=86_400).contains(&analytics.apple_egress_check_secs) {
            problems
                .push("[analytics] apple_egress_check_secs must be between 10 and 86400".into());
        }
        if analytics.max_held_responses == 0
            || analytics.max_held_per_address == 0
            || analytics.max_held_per_address > analytics.max_held_responses
        {
            problems.push(
                "[analytics] max_held_responses and max_held_per_address must be at least 1, and max_held_per_address at most max_held_responses"
                    .into(),
            );
        }
        let roles = match o.role.clone().or(file.role) {
            Some(text) => Roles::parse(&text).unwrap_or_else(|e| {
                problems.push(e);
                Roles::default()
            }),
            None => Roles::default(),
        };
        let file_keys = file.keys.unwrap_or_default();
        let keys = KeySettings {
            url_signing_key_file: o
                .url_signing_key_file
                .clone()
                .or(file_keys.url_signing_key_file),
            dkim_key_file: o.dkim_key_file.clone().or(file_keys.dkim_key_file),
            smtp_tls_cert_file: file_keys.smtp_tls_cert_file,
            smtp_tls_key_file: file_keys.smtp_tls_key_file,
        };
        if keys.smtp_tls_cert_file.is_some() != keys.smtp_tls_key_file.is_some() {
            problems.push(
                "[keys] smtp_tls_cert_file and smtp_tls_key_file go together: give both (STARTTLS on the SMTP listener) or neither".into(),
            );
        }
        let fetch = file.fetch.unwrap_or_default();
        if let Err(why) = content::fetch::check_ca_file(&fetch) {
            problems.push(why);
        }
        if !problems.is_empty() {
            bail!("invalid settings:\n  {}", problems.join("\n  "));
        }
        Ok(Settings {
            data_dir: o
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from("./data")),
            database_url,
            http,
            smtp,
            public_url,
            public_url_is_default,
            resources: o
                .resources
                .clone()
                .or(file.resources)
                .unwrap_or_else(default_resources),
            seed_domain: o
                .seed_domain
                .clone()
                .or(file.seed_domain)
                .unwrap_or_else(|| "seeds.localhost".into()),
            inbox_domain: o
                .inbox_domain
                .clone()
                .or(file.inbox_domain)
                .unwrap_or_else(|| "inbox.localhost".into()),
            reprocess_quota,
            default_rate_limit: file.default_rate_limit.unwrap_or(600),
            retention_days,
            max_body_bytes: file.max_body_bytes.unwrap_or(32 * 1024 * 1024),
            fetch,
            blobs: file.blobs.unwrap_or_default(),
            render: file.render.unwrap_or_default(),
            spam: file.spam.unwrap_or_default(),
            http_limits,
            dns,
            metrics: file.metrics.unwrap_or_default(),
            webhooks,
            queues,
            hits,
            database,
            keys,
            analytics,
            roles,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_url_chooses_the_backend_and_a_wrong_scheme_is_reported() {
        let default = Settings::resolve(&Overrides::default()).expect("defaults are valid");
        assert_eq!(
            default.database_url, None,
            "SQLite in the data dir by default"
        );
        let pg = Settings::resolve(&Overrides {
            database_url: Some("postgres://mailproof@127.0.0.1:5432/mailproof".into()),
            ..Overrides::default()
        })
        .expect("a postgres URL is valid");
        assert_eq!(
            pg.database_url.as_deref(),
            Some("postgres://mailproof@127.0.0.1:5432/mailproof")
        );
        let err = Settings::resolve(&Overrides {
            database_url: Some("mysql://u:secret@h/db".into()),
            ..Overrides::default()
        })
        .expect_err("mysql is not supported")
        .to_string();
        assert!(err.contains("database_url"), "{err}");
        assert!(!err.contains("secret"), "the password is not shown: {err}");
    }

    #[test]
    fn roles_default_to_all_and_parse_a_comma_list() {
        let all = Settings::resolve(&Overrides::default()).expect("defaults resolve");
        assert!(all.roles.is_all());
        let some = Roles::parse(" api, Mail ").expect("a valid list");
        assert!(some.has(Role::Api) && some.has(Role::Mail) && !some.has(Role::Render));
        assert_eq!(some.to_string(), "api,mail");
        assert!(Roles::parse("render,all").expect("all").is_all());
    }

    #[test]
    fn an_unknown_or_empty_role_is_refused_naming_the_valid_ones() {
        let err = Settings::resolve(&Overrides {
            role: Some("api,renderer".into()),
            ..Default::default()
        })
        .expect_err("an unknown role is refused");
        let msg = err.to_string();
        assert!(
            msg.contains("\"renderer\"") && msg.contains("api, render and mail"),
            "{msg}"
        );
        let err = Roles::parse(" , ").expect_err("no role at all is refused");
        assert!(err.contains("names no role"), "{err}");
    }

    #[test]
    fn key_files_come_from_flags_over_the_config_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("m.toml");
        std::fs::write(
            &config,
            "role = \"render\"\n[keys]\nurl_signing_key_file = \"/k/url\"\ndkim_key_file = \"/k/dkim.pem\"\n",
        )
        .expect("write config");
        let s = Settings::resolve(&Overrides {
            config: Some(config),
            dkim_key_file: Some("/flag/dkim.pem".into()),
            ..Default::default()
        })
        .expect("resolves");
        assert!(s.roles.has(Role::Render) && !s.roles.has(Role::Api));
        assert_eq!(
            s.keys.url_signing_key_file.as_deref(),
            Some(Path::new("/k/url"))
        );
        assert_eq!(
            s.keys.dkim_key_file.as_deref(),
            Some(Path::new("/flag/dkim.pem"))
        );
    }

    #[test]
    fn the_smtp_tls_certificate_and_key_go_together() {
        let dir = tempfile::tempdir().expect("temp dir");
        let err = resolve_file(&dir, "[keys]\nsmtp_tls_cert_file = \"/k/mx.crt\"\n")
            .expect_err("a certificate without its key");
        assert!(err.to_string().contains("go together"), "{err}");
        let s = resolve_file(
            &dir,
            "[keys]\nsmtp_tls_cert_file = \"/k/mx.crt\"\nsmtp_tls_key_file = \"/k/mx.key\"\n",
        )
        .expect("both");
        assert_eq!(
            s.keys.smtp_tls_key_file.as_deref(),
            Some(Path::new("/k/mx.key"))
        );
    }

    /// The settings of a config file holding `text`, in `dir`.
    fn resolve_file(dir: &tempfile::TempDir, text: &str) -> anyhow::Result<Settings> {
        let config = dir.path().join("m.toml");
        std::fs::write(&config, text).expect("write config");
        Settings::resolve(&Overrides {
            config: Some(config),
            ..Default::default()
        })
    }

    #[test]
    fn a_ca_file_that_is_missing_or_not_pem_stops_the_start_naming_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("nowhere.pem");
        let err = resolve_file(&dir, &format!("[fetch]\nca_file = {missing:?}\n"))
            .expect_err("a missing CA file is refused");
        assert!(
            err.to_string().contains("[fetch] ca_file") && err.to_string().contains("nowhere.pem"),
            "{err}"
        );
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").expect("write");
        let err = resolve_file(&dir, &format!("[fetch]\nca_file = {junk:?}\n"))
            .expect_err("a file without certificates is refused");
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        assert!(
            resolve_file(&dir, "[fetch]\n").is_ok(),
            "no CA file: nothing to check"
        );
    }

    #[test]
    fn hit_settings_have_defaults_take_the_file_and_refuse_bounds_out_of_range() {
        let dir = tempfile::tempdir().expect("temp dir");
        let resolve = |text: &str| resolve_file(&dir, text);
        let d = resolve("").expect("defaults").hits.settings();
        assert_eq!(d, api::hits::HitSettings::default());
        assert!(d.per_address_per_minute > 0 && d.per_campaign_per_minute > 0);
        let s = resolve("[hits]\nper_address_per_minute = 0\nbatch_wait_ms = 7\nwriters = 2\n")
            .expect("valid")
            .hits
            .settings();
        assert_eq!(
            (s.per_address_per_minute, s.batch_wait, s.writers),
            (0, std::time::Duration::from_millis(7), 2)
        );
        for bad in [
            "queue_capacity = 0",
            "batch_max = 0",
            "batch_wait_ms = 5000",
        ] {
            let err = resolve(&format!("[hits]\n{bad}\n"))
                .expect_err(bad)
                .to_string();
            assert!(err.contains("[hits]"), "{bad}: {err}");
        }
    }

    #[test]
    fn analytics_settings_are_checked_together() {
        let dir = tempfile::tempdir().expect("temp dir");
        let resolve = |text: &str| resolve_file(&dir, text);
        let defaults = Settings::resolve(&Overrides::default()).expect("defaults");
        assert_eq!(defaults.analytics.tracking_base_url, None);
        assert_eq!(defaults.analytics.apple_egress_csv, None);
        let csv = dir.path().join("egress.csv");
        std::fs::write(&csv, "17.0.0.0/8,US,,,\n").expect("write csv");
        let s = resolve(&format!(
            "[analytics]\ntracking_base_url = \"https://t.example.com/t/\"\napple_egress_csv = {:?}\n",
            csv.display().to_string()
        ))
        .expect("resolves");
        assert_eq!(
            s.analytics.tracking_base_url.as_deref(),
            Some("https://t.example.com/t"),
            "no trailing slash"
        );
        let err = resolve(
            "[analytics]\ntracking_base_url = \"ftp://t.example.com/t?x=1\"\napple_egress_csv = \"/nonexistent/egress.csv\"\nmax_held_per_address = 0\n",
        )
        .expect_err("three problems")
        .to_string();
        for part in [
            "tracking_base_url",
            "apple_egress_csv",
            "max_held_per_address",
        ] {
            assert!(err.contains(part), "{part}: {err}");
        }
    }

    #[test]
    fn queue_caps_of_zero_mean_none_and_zero_workers_are_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let resolve = |text: &str| resolve_file(&dir, text);
        let s = resolve(
            "[queues]
link_check_workers = 3
link_checks_per_account = 0
render_per_account = 2
",
        )
        .expect("resolves");
        assert_eq!(s.queues.link_check_workers, 3);
        let caps = s.queues.caps();
        assert_eq!(
            (caps.link_checks, caps.render, caps.callbacks),
            (None, Some(2), Some(1)),
            "0 is no cap; unset keeps the default of one"
        );
        let defaults = Settings::resolve(&Overrides::default()).expect("defaults");
        assert_eq!(defaults.queues.caps(), store::AccountCaps::default());
        let err = resolve(
            "[queues]
callback_workers = 0
",
        )
        .expect_err("no worker at all")
        .to_string();
        assert!(err.contains("callback_workers"), "{err}");
    }
}
