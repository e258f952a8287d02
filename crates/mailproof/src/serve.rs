//! `mailproof serve`: loads and checks the data files, opens storage, makes sure an account exists,
//! then runs the parts of its roles (`--role`: the HTTP API, the renderer, the mail side) until
//! SIGTERM or SIGINT.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use domain::Catalog;
use rand::Rng;
use store::{Blobs, Store};
use tokio::sync::{watch, Notify};

use crate::config::{Overrides, Role, Roles, Settings};

/// The client rule sets, loaded once: the renderer transforms with them and the API analyses
/// emails with them.
fn load_rules(settings: &Settings, catalog: &Catalog) -> anyhow::Result<Arc<emulate::RuleBook>> {
    let rules_dir = settings.resources.join("rules");
    let rules = emulate::RuleBook::load(&rules_dir)
        .with_context(|| format!("in the client rules {}", rules_dir.display()))?;
    rules
        .check_catalog(catalog)
        .context("the client catalog names a rule set that does not exist")?;
    Ok(Arc::new(rules))
}

/// The renderer and its worker, when any engine is configured.
#[allow(clippy::too_many_arguments)]
async fn start_rendering(
    settings: &Settings,
    store: &Store,
    blobs: &Blobs,
    catalog: &Arc<Catalog>,
    rules: Arc<emulate::RuleBook>,
    work_ready: Arc<Notify>,
    runtime: &background::Runtime,
    health: &api::health::Health,
) -> anyhow::Result<Option<Arc<render::Renderer>>> {
    use api::health::{Component, State};
    let r = &settings.render;
    if r.engines.is_empty() {
        tracing::warn!(
            "no rendering engines configured ([render] engines = []): screenshots stay Pending"
        );
        health.set(
            "engines",
            "",
            Component {
                state: State::Off,
                reason: Some("[render] engines = [] in the configuration".into()),
                next_retry: None,
            },
        );
        return Ok(None);
    }
    let mut cfg = render::RenderConfig::new(settings.data_dir.join("work").join("render"));
    cfg.engines = r.engines.clone();
    if let Some(slots) = r.slots_per_engine {
        cfg.slots_per_engine = slots.max(1);
    }
    cfg.net_policy = settings.fetch.clone();
    cfg.render_timeout = Duration::from_secs(r.render_timeout.max(1));
    cfg.resource_wait = Duration::from_secs(r.resource_wait);
    cfg.start_timeout = Duration::from_secs(r.start_timeout.max(1));
    let fonts = settings.resources.join("fonts").join("fonts.conf");
    if fonts.is_file() {
        cfg.fonts_conf = Some(fonts);
    }
    let slots = cfg.slots_per_engine * cfg.engines.len();
    tracing::info!(engines = ?cfg.engines, slots_per_engine = cfg.slots_per_engine, "starting rendering engines");
    let engines = cfg.engines.clone();
    for engine in &engines {
        health.set(
            "engines",
            &engine.to_string(),
            Component::new(State::Starting),
        );
    }
    // The error itself says what happened (a missing browser names scripts/setup.sh).
    let renderer = Arc::new(
        render::Renderer::start(cfg)
            .await
            .context("cannot start the rendering engines")?,
    );
    for engine in &engines {
        health.set("engines", &engine.to_string(), Component::new(State::Ok));
    }
    let worker = jobs::RenderWorker::new(
        store.clone(),
        blobs.clone(),
        catalog.clone(),
        rules,
        renderer.clone(),
        jobs::RenderWorkerConfig {
            worker_id: background::lease_owner("render"),
            concurrency: slots,
            max_attempts: r.max_attempts.max(1),
            rescan: Duration::from_secs(2),
            max_fault_backoff: Duration::from_secs(15),
            engines,
        },
    );
    runtime.spawn(worker.run(work_ready, runtime.cancel_token()));
    Ok(Some(renderer))
}

pub fn load_catalog(resources: &Path) -> anyhow::Result<Catalog> {
    let path = resources.join("clients.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the client catalog {}", path.display()))?;
    Catalog::parse(&text).with_context(|| format!("in {}", path.display()))
}

/// The per-client analytics matrix beside the catalog, with exactly one row per profile: a
/// profile added without being measured stops the start-up rather than showing a blank row.
pub fn load_analytics_matrix(
    resources: &Path,
    catalog: &Catalog,
) -> anyhow::Result<analytics::matrix::Matrix> {
    let path = resources.join(analytics::matrix::MATRIX_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read the analytics matrix {} (written by `analytics-matrix write`)",
            path.display()
        )
    })?;
    let matrix = analytics::matrix::Matrix::parse(&text)?;
    matrix.check_ids(catalog.clients().iter().map(|c| c.id.as_str()))?;
    Ok(matrix)
}

/// The inbox row profiles beside the catalog, each catalog profile in exactly one row: a profile
/// added without its row stops the start-up rather than showing no inbox row.
pub fn load_inbox_rows(
    resources: &Path,
    catalog: &Catalog,
) -> anyhow::Result<content::inbox::InboxRows> {
    let path = resources.join(content::inbox::INBOX_ROWS_FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the inbox rows {}", path.display()))?;
    let rows = content::inbox::InboxRows::parse(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("in {}", path.display()))?;
    rows.check_ids(catalog.clients().iter().map(|c| c.id.as_str()))
        .map_err(anyhow::Error::msg)?;
    Ok(rows)
}

/// The key that signs screenshot URLs (and the web's CSRF tokens): `[keys] url_signing_key_file`
/// when configured, which every api process of one service must share; otherwise made once and
/// kept in the data directory, so that URLs stay valid across restarts.
fn signing_key(settings: &Settings) -> anyhow::Result<Vec<u8>> {
    if let Some(path) = &settings.keys.url_signing_key_file {
        let key = std::fs::read(path).with_context(|| {
            format!(
                "cannot read [keys] url_signing_key_file {}: create it once (`head -c 32 /dev/urandom > {}`) and give every api process the same file",
                path.display(),
                path.display()
            )
        })?;
        if key.len() < 32 {
            bail!(
                "[keys] url_signing_key_file {} has {} bytes; it needs at least 32 random bytes (`head -c 32 /dev/urandom > {}`)",
                path.display(),
                key.len(),
                path.display()
            );
        }
        return Ok(key);
    }
    let path = settings.data_dir.join("signing.key");
    match std::fs::read(&path) {
        Ok(k) if k.len() >= 32 => return Ok(k),
        Ok(_) => bail!(
            "{} is shorter than 32 bytes; delete it to make a new one",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    let key: [u8; 32] = rand::thread_rng().gen();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, key).with_context(|| format!("cannot write {}", tmp.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(key.to_vec())
}

/// Publishes the fingerprint of this api process's URL-signing key in the database, or checks it
/// against the one published by the api processes before it: two keys would make each process
/// refuse the screenshot links the others sign, which nothing else detects.
async fn check_signing_key_shared(
    store: &Store,
    settings: &Settings,
    key: &[u8],
    replace: bool,
) -> anyhow::Result<()> {
    let mine = domain::signing::key_fingerprint("url signing", key);
    let now = chrono::Utc::now().timestamp();
    if replace {
        store
            .replace_key_fingerprint("url_signing", &mine, now)
            .await?;
        tracing::warn!(fingerprint = %mine, "published this process's URL-signing key as the service's (--replace-signing-key): links signed with the previous key are no longer accepted");
        return Ok(());
    }
    let published = store
        .publish_key_fingerprint("url_signing", &mine, now)
        .await?;
    if published != mine {
        let source = match &settings.keys.url_signing_key_file {
            Some(p) => p.display().to_string(),
            None => settings.data_dir.join("signing.key").display().to_string(),
        };
        bail!(
            "this api process's URL-signing key ({source}, fingerprint {mine}) is not the one the service's other api processes use (fingerprint {published}): each would refuse the screenshot links the others sign. Give every api process the same [keys] url_signing_key_file; if the key was replaced on purpose, start once with --replace-signing-key (MAILPROOF_REPLACE_SIGNING_KEY=true)"
        );
    }
    Ok(())
}

/// Configured key files this process will read must be readable by its user: checked first, so
/// that a key written 0600 by another user stops the start with the file and the fix named,
/// rather than failing later or restart-looping in a container.
fn check_key_files_readable(settings: &Settings) -> anyhow::Result<()> {
    let keys = [
        (
            Role::Api,
            "url_signing_key_file",
            &settings.keys.url_signing_key_file,
        ),
        (Role::Mail, "dkim_key_file", &settings.keys.dkim_key_file),
    ];
    for (role, name, path) in keys {
        let Some(path) = path.as_ref().filter(|_| settings.roles.has(role)) else {
            continue;
        };
        if let Err(e) = std::fs::File::open(path) {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                bail!(
                    "[keys] {name} {} cannot be read by this process (uid {}): {e}. Make it readable by that user, e.g. `chown {} {}` or `chgrp <its group> {} && chmod 0640 {}` (in the container image mailproof runs as uid 10001)",
                    path.display(),
                    procs::own_uid(),
                    procs::own_uid(),
                    path.display(),
                    path.display(),
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// A process running only some roles shares its work with other processes, which may not share
/// its data directory: a key generated there would be this process's alone (presigned URLs that
/// other api processes refuse, svc mail signed with a key nobody published).
fn warn_about_unshared_keys(settings: &Settings) {
    let roles = settings.roles;
    if roles.is_all() {
        return;
    }
    if roles.has(Role::Api) && settings.keys.url_signing_key_file.is_none() {
        tracing::warn!(
            roles = %roles,
            fallback = %settings.data_dir.join("signing.key").display(),
            "NO SHARED URL SIGNING KEY: this api process signs screenshot URLs with a key in its own data directory; other api processes accept them only if they share that directory. Set [keys] url_signing_key_file (or MAILPROOF_URL_SIGNING_KEY_FILE) to the same file on every api process"
        );
    }
    if roles.has(Role::Mail) && settings.keys.dkim_key_file.is_none() {
        tracing::warn!(
            roles = %roles,
            fallback = %settings.data_dir.join("dkim.pem").display(),
            "NO SHARED DKIM KEY: this mail process signs svc spam test mail with a key in its own data directory; other mail processes sign with theirs unless they share that directory. Set [keys] dkim_key_file (or MAILPROOF_DKIM_KEY_FILE) to the same file on every mail process"
        );
    }
}

/// What `/healthz` says of a part that runs in other processes.
fn not_this_role(health: &api::health::Health, group: &str, names: &[&str]) {
    use api::health::{Component, State};
    for name in names {
        health.set(
            group,
            name,
            Component {
                state: State::Off,
                reason: Some("not this process's role".into()),
                next_retry: None,
            },
        );
    }
}

/// The HTTP routes of a process without the api role: its own health and metrics, for the
/// orchestrator and the scraper; every other path says where the API is.
fn status_router(state: api::AppState, roles: Roles) -> axum::Router {
    use axum::response::IntoResponse;
    axum::Router::new()
        .route("/healthz", axum::routing::get(api::health::healthz))
        .route("/metrics", axum::routing::get(api::metrics::metrics))
        .fallback(move |req: axum::extract::Request| async move {
            api::ApiError::new(
                api::ErrorName::NotFound,
                format!(
                    "{} {} is not served here: this process runs the roles {roles} and answers only /healthz and /metrics; the API and web pages are served by processes with the api role",
                    req.method(),
                    req.uri().path()
                ),
            )
            .into_response()
        })
        .with_state(state)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

pub async fn run(o: Overrides) -> anyhow::Result<()> {
    let settings = Settings::resolve(&o)?;
    let roles = settings.roles;
    warn_about_unshared_keys(&settings);
    check_key_files_readable(&settings)?;
    let catalog = Arc::new(load_catalog(&settings.resources)?);
    let analytics_matrix = Arc::new(load_analytics_matrix(&settings.resources, &catalog)?);
    let inbox_rows = Arc::new(load_inbox_rows(&settings.resources, &catalog)?);
    std::fs::create_dir_all(&settings.data_dir).with_context(|| {
        format!(
            "cannot create data directory {}",
            settings.data_dir.display()
        )
    })?;
    let store = crate::accounts::open_store_waiting(
        &settings.data_dir,
        settings.database_url.as_deref(),
        settings.database.timeouts(),
        &format!("mailproof {roles} (pid {})", std::process::id()),
    )
    .await?
    .with_account_caps(settings.queues.caps());
    let blobs = Blobs::open(&settings.blobs, &settings.data_dir)?;
    blobs.check().await?;
    // The first account's credentials are printed once: by a process that serves the API.
    if roles.has(Role::Api) {
        crate::accounts::ensure_first_account(&store).await?;
    }
    // Bind before building the state: with port 0 the default public URL needs the real port.
    let http_socket = tokio::net::TcpListener::bind(settings.http)
        .await
        .with_context(|| format!("cannot listen on {}", settings.http))?;
    let bound = http_socket.local_addr()?;
    let public_url = if settings.public_url_is_default {
        format!("http://{bound}")
    } else {
        settings.public_url.clone()
    };
    // Wake-ups reach workers of this process only; workers in other processes poll the
    // database every few seconds (render, inbound, svc, link checks).
    let work_ready = Arc::new(Notify::new());
    // No route of a process without the api role signs or checks anything: it gets a key of its
    // own rather than reading (or generating) the shared one.
    let signing_key = if roles.has(Role::Api) {
        let key = signing_key(&settings)?;
        check_signing_key_shared(&store, &settings, &key, o.replace_signing_key).await?;
        key
    } else {
        rand::thread_rng().gen::<[u8; 32]>().to_vec()
    };
    let tracking_base = settings
        .analytics
        .tracking_base_url
        .clone()
        .unwrap_or_else(|| format!("{public_url}/t"));
    let api_settings = api::ApiSettings {
        app: api::AppSettings {
            tracking_base,
            public_url,
            signing_key,
            net_policy: settings.fetch.clone(),
            reprocess_quota: settings.reprocess_quota,
            default_rate_limit: settings.default_rate_limit,
            seed_domain: settings.seed_domain.clone(),
            max_body_bytes: settings.max_body_bytes,
            failed_logins_per_address: settings.http_limits.failed_logins_per_address,
            failed_logins_per_key: settings.http_limits.failed_logins_per_key,
            sandbox_requests_per_minute: settings.http_limits.sandbox_requests_per_minute,
        },
        metrics_token: settings.metrics.token.clone(),
        metrics_port_public: !settings.http.ip().is_loopback(),
        hits: settings.hits.settings(),
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    // The background workers of this process; the mail side's SMTP tasks still stop by `stop_rx`.
    let runtime = background::Runtime::new();
    let health = Arc::new(api::health::Health::default());
    // Only a mail process binds SMTP: another one on the same machine could not otherwise start.
    let mail = if roles.has(Role::Mail) {
        let smtp_listener = tokio::net::TcpListener::bind(settings.smtp)
            .await
            .with_context(|| format!("cannot listen for SMTP on {}", settings.smtp))?;
        let smtp_bound = smtp_listener.local_addr()?;
        let mail = inbox::MailService::start(
            crate::mail::config(&settings),
            store.clone(),
            catalog.clone(),
            work_ready.clone(),
            stop_rx.clone(),
            Arc::new(crate::mail::HealthBoard(health.clone())),
            smtp_listener,
        )
        .await?;
        Some((mail, smtp_bound))
    } else {
        not_this_role(&health, "smtp", &[""]);
        not_this_role(&health, "filters", &["spamassassin", "rspamd"]);
        None
    };
    let rules = load_rules(&settings, &catalog)?;
    let (spam_clients, smtp_probe) = crate::mail::api_parts(&settings)?;
    let state = api::AppState::new(
        store.clone(),
        blobs.clone(),
        catalog.clone(),
        spam_clients,
        api_settings,
        work_ready.clone(),
    )
    .with_smtp_probe(smtp_probe)
    .with_health(health.clone())
    .with_rules(rules.clone())
    .with_analytics(hit_runtime(&settings, roles.has(Role::Api))?)
    .with_analytics_matrix(analytics_matrix.clone());

    let (links_ready, checks_ready, inbox_ready) = (
        state.links_ready.clone(),
        state.checks_ready.clone(),
        state.inbox_ready.clone(),
    );
    let limits = listener::Limits {
        header_timeout: Duration::from_secs(settings.http_limits.header_timeout),
        body_timeout: Duration::from_secs(settings.http_limits.body_timeout),
        max_connections: settings.http_limits.max_connections,
        max_connections_per_address: settings.http_limits.max_connections_per_address,
        trusted_proxies: settings.http_limits.trusted_proxies.clone(),
    };
    let hits = state.analytics.clone();
    let router = if roles.has(Role::Api) {
        // The web pages answer under `/`; everything else (the API under /v5, screenshots,
        // health) falls through to the API's router, with its own error rules.
        let web_options = web::WebOptions {
            secure_cookies: state.settings.public_url.starts_with("https://"),
            share_days: 7,
            analytics_matrix: analytics_matrix.clone(),
        };
        web::router(state.app.clone(), web_options).fallback_service(api::router(state))
    } else {
        status_router(state, roles)
    }
    .layer(axum::middleware::map_response(api::security_headers));
    // Said before HTTP is served, so that no /healthz answer calls a starting process ready.
    if roles.has(Role::Render) {
        for engine in &settings.render.engines {
            health.set(
                "engines",
                &engine.to_string(),
                api::health::Component::new(api::health::State::Starting),
            );
        }
    }
    // HTTP is served before the engines start, so that /healthz answers `starting` meanwhile
    // (an orchestrator would otherwise take the process for dead). A failed start ends it.
    let (abort_http, http_aborted) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn(listener::serve(http_socket, router, limits, async move {
        tokio::select! {
            _ = shutdown_signal() => {}
            _ = http_aborted => {}
        }
        // Held-open tracking images would otherwise keep the server waiting up to 20 s.
        hits.release_held();
    }));
    // Before the engines start: scripts (and the tests) can ask /healthz, which says `starting`.
    println!("mailproof: health on http://{bound}/healthz");

    let rendering = if roles.has(Role::Render) {
        match start_rendering(
            &settings,
            &store,
            &blobs,
            &catalog,
            rules,
            work_ready.clone(),
            &runtime,
            &health,
        )
        .await
        {
            Ok(rendering) => rendering,
            Err(e) => {
                let _ = abort_http.send(());
                let _ = http.await;
                return Err(e);
            }
        }
    } else {
        not_this_role(&health, "engines", &[""]);
        None
    };
    // Link checks follow links on the network and need no engine: background work of the mail
    // role, beside the filters' own URI blocklist lookups (and, like them, off the API's hosts).
    if let Some((mail, _)) = &mail {
        runtime.spawn(
            jobs::LinkCheckWorker {
                store: store.clone(),
                policy: settings.fetch.clone(),
                uribl: mail.uribl.clone(),
            }
            .run(
                links_ready,
                runtime.cancel_token(),
                settings.queues.link_check_workers,
            ),
        );
        // Callbacks are outbound background work, like the link checks: the mail role's.
        runtime.spawn(
            webhooks::DeliveryWorker {
                store: store.clone(),
                policy: settings.fetch.clone(),
                retries: settings.webhooks.clone(),
            }
            .run(runtime.cancel_token(), settings.queues.callback_workers),
        );
    }
    // Retention runs in every api process: its deletes are idempotent (a test already purged is
    // not picked again; deleting screenshots already gone succeeds), so several api processes
    // only repeat a cheap query.
    if roles.has(Role::Api) {
        let (store, blobs, days) = (store.clone(), blobs.clone(), settings.retention_days);
        runtime.periodic("retention", background::RETENTION_EVERY, move || {
            background::retention_pass(store.clone(), blobs.clone(), days)
        });
    }
    // Content checks judge contrast in the engine: the render role's, where the engines are (with
    // `[render] engines = []` the reports say contrast was not judged, and why).
    if roles.has(Role::Render) {
        let worker =
            jobs::ContentCheckWorker::new(store.clone(), settings.fetch.clone(), rendering.clone());
        runtime.spawn(worker.run(
            checks_ready,
            runtime.cancel_token(),
            settings.queues.content_check_workers,
        ));
        // One loop: a test's rows are a dozen small pages, and the engines' slots are shared
        // with the screenshots.
        let worker = jobs::InboxRowWorker {
            store: store.clone(),
            blobs: blobs.clone(),
            catalog: catalog.clone(),
            rows: inbox_rows.clone(),
            renderer: rendering.clone(),
        };
        runtime.spawn(worker.run(inbox_ready, runtime.cancel_token(), 1));
    }

    tracing::info!(http = %bound, roles = %roles, clients = catalog.clients().len(), data_dir = %settings.data_dir.display(), "mailproof is ready");
    // Lines on stdout that scripts (and the tests) can wait for.
    println!("mailproof: roles {roles}");
    if let Some((_, smtp_bound)) = &mail {
        println!("mailproof: smtp on {smtp_bound}");
    }
    println!("mailproof: listening on http://{bound}");
    // Kept until shutdown: dropping it would end the HTTP server.
    let _abort_http = abort_http;
    if let Err(e) = http.await {
        tracing::error!(error = %e, "the HTTP server task failed");
    }
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    // Every worker stops (each finishes the row it is on), and with them their references to the
    // renderer.
    runtime.shutdown().await;
    if let Some((mail, _)) = mail {
        mail.shutdown().await;
    }
    if let Some(renderer) = rendering {
        match Arc::try_unwrap(renderer) {
            Ok(r) => r.shutdown().await,
            Err(_) => {
                tracing::warn!("renderer still in use at shutdown; engines end with the process")
            }
        }
    }
    store.close().await;
    Ok(())
}

/// What analytics hits need at run time. Apple's relay ranges are read (and checked) at start by
/// a process that serves hits, then reread every `apple_egress_check_secs` when the file changed.
fn hit_runtime(
    settings: &Settings,
    serves_hits: bool,
) -> anyhow::Result<Arc<api::handlers::analytics::HitRuntime>> {
    use api::handlers::analytics::{AppleEgress, HitRuntime, HoldLimits};
    let a = &settings.analytics;
    let egress = match a.apple_egress_csv.clone().filter(|_| serves_hits) {
        Some(path) => AppleEgress::load(path).map_err(anyhow::Error::msg)?,
        None => AppleEgress::default(),
    };
    // A held image keeps its connection open for its 20 s, so held images may take at most half
    // of the listener's connections, in all and of one address's share: the other half is left
    // for everything else, whoever holds images.
    let http = &settings.http_limits;
    let limits = HoldLimits {
        max: a.max_held_responses.min(http.max_connections / 2).max(1),
        per_address: a
            .max_held_per_address
            .min(http.max_connections_per_address / 2)
            .max(1),
    };
    if limits.max < a.max_held_responses || limits.per_address < a.max_held_per_address {
        tracing::info!(
            max_held_responses = limits.max,
            max_held_per_address = limits.per_address,
            "held-open images limited to half of [http_limits] max_connections and max_connections_per_address"
        );
    }
    let runtime = Arc::new(HitRuntime::new(egress, limits));
    if runtime.egress.configured() {
        let every = Duration::from_secs(a.apple_egress_check_secs);
        let watched = runtime.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let r = watched.clone();
                match tokio::task::spawn_blocking(move || r.egress.refresh()).await {
                    Ok(Ok(true)) => tracing::info!("Apple relay ranges reloaded"),
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "Apple relay ranges not reloaded; the ranges loaded before stay")
                    }
                    Err(e) => tracing::error!(error = %e, "reloading Apple relay ranges"),
                }
            }
        });
    }
    Ok(runtime)
}
