//! `mailproof accounts add|list|remove`, and the first account `mailproof serve` makes on an empty
//! database; the rules they apply are `intake::account`'s.

use std::path::PathBuf;

use anyhow::{bail, Context};
use domain::Plan;
use store::{NewAccount, Store};

/// Where the service's database is: read as `serve` reads it (flags, then `MAILPROOF_*`, then
/// the `--config` file, then SQLite in ./data), so an account cannot land in another database
/// than the service's.
#[derive(clap::Args)]
pub struct DbArgs {
    /// The service's TOML configuration file (its `data_dir` and `database_url`).
    #[arg(long, env = "MAILPROOF_CONFIG")]
    config: Option<PathBuf>,
    #[arg(long, env = "MAILPROOF_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The service's database when it is not SQLite in the data dir (`postgres://...`).
    #[arg(long, env = "MAILPROOF_DATABASE_URL")]
    database_url: Option<String>,
    /// Create the SQLite database if it does not exist yet. Without it a missing database is an
    /// error: most likely the command is not looking where the service keeps its database.
    #[arg(long)]
    create_database: bool,
}

impl DbArgs {
    async fn open(self) -> anyhow::Result<Store> {
        let settings = crate::config::Settings::resolve(&crate::config::Overrides {
            config: self.config,
            data_dir: self.data_dir,
            database_url: self.database_url,
            ..Default::default()
        })?;
        if settings.database_url.is_none() && !self.create_database {
            let file = settings.data_dir.join("mailproof.sqlite");
            if !file.exists() {
                bail!(
                    "no database at {}: the service's database is elsewhere, or it was never started. Point at it with --config (or MAILPROOF_CONFIG), --database-url or --data-dir as `mailproof serve` is configured; to create a new SQLite database there, add --create-database",
                    file.display()
                );
            }
        }
        open_store(
            &settings.data_dir,
            settings.database_url.as_deref(),
            settings.database.timeouts(),
            "mailproof accounts",
        )
        .await
    }
}

#[derive(clap::Subcommand)]
pub enum AccountsCommand {
    /// Create an account.
    Add {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        api_key: String,
        #[arg(long)]
        password: String,
        /// free, standard, enterprise or reseller.
        #[arg(long)]
        plan: Plan,
        /// Tests per customer_id per calendar month (reseller plans).
        #[arg(long)]
        monthly_test_limit: Option<i64>,
        /// Requests per minute.
        #[arg(long)]
        rate_limit: Option<i64>,
        /// Restrict the account to these client ids (comma-separated).
        #[arg(long, value_delimiter = ',')]
        clients: Option<Vec<String>>,
        /// Local part of the account's auto-inbox address.
        #[arg(long)]
        auto_inbox: Option<String>,
        /// Data files, to check --clients against the catalog.
        #[arg(long, env = "MAILPROOF_RESOURCES")]
        resources: Option<PathBuf>,
    },
    /// List accounts (never their passwords).
    List {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Remove an account and all of its tests.
    Remove {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        api_key: String,
    },
}

/// The service's database: `database_url` if given (its connections named `application_name`),
/// else SQLite in `data_dir`.
pub async fn open_store(
    data_dir: &std::path::Path,
    database_url: Option<&str>,
    timeouts: store::DbTimeouts,
    application_name: &str,
) -> anyhow::Result<Store> {
    match database_url {
        Some(url) => Store::connect_as(url, timeouts, application_name)
            .await
            .with_context(|| cannot_open(url)),
        None => {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
            Store::open(data_dir)
                .await
                .with_context(|| format!("cannot open the database in {}", data_dir.display()))
        }
    }
}

fn cannot_open(url: &str) -> String {
    format!(
        "cannot open the PostgreSQL database at {}; check database_url and that the server is up",
        store::redact_url(url)
    )
}

/// Pauses between tries to reach a PostgreSQL server that is away at start.
const START_BACKOFF: store::Backoff = store::Backoff::doubling(1, 30);

/// [`open_store`] for `serve`: a PostgreSQL server that is unreachable at start (machines booting
/// together, a failover) is named in the log and tried again with a growing pause until it
/// answers or the process is stopped, as a container orchestrator expects of a process that
/// starts before its database. Anything else (a wrong URL, refused credentials, a failed
/// migration) stops the start at once: waiting would not fix it.
pub async fn open_store_waiting(
    data_dir: &std::path::Path,
    database_url: Option<&str>,
    timeouts: store::DbTimeouts,
    application_name: &str,
) -> anyhow::Result<Store> {
    let Some(url) = database_url else {
        return open_store(data_dir, None, timeouts, application_name).await;
    };
    let mut failed = 0_i64;
    loop {
        match Store::connect_as(url, timeouts, application_name).await {
            Ok(store) => {
                if failed > 0 {
                    tracing::info!(database = %store::redact_url(url), tries = failed + 1, "PostgreSQL answered; starting");
                }
                return Ok(store);
            }
            Err(e) if e.is_unavailable() => {
                failed += 1;
                let secs = START_BACKOFF.delay_secs(failed, rand::random());
                tracing::warn!(
                    database = %store::redact_url(url),
                    error = %e,
                    retry_in_s = secs,
                    "PostgreSQL is unreachable; mailproof starts once it answers (check that the server is up and database_url points at it)"
                );
                tokio::time::sleep(std::time::Duration::from_secs(secs.unsigned_abs())).await;
            }
            Err(e) => return Err(e).with_context(|| cannot_open(url)),
        }
    }
}

/// On the first start with an empty database, an enterprise account is made so that a new user
/// can call the API at once; its credentials are printed this once (or taken from the
/// environment).
pub async fn ensure_first_account(store: &Store) -> anyhow::Result<()> {
    if !store.accounts().await?.is_empty() {
        return Ok(());
    }
    let api_key =
        std::env::var("MAILPROOF_API_KEY").unwrap_or_else(|_| domain::signing::random_secret(24));
    let password =
        std::env::var("MAILPROOF_PASSWORD").unwrap_or_else(|_| domain::signing::random_secret(24));
    intake::account::check_api_key(&api_key).context("MAILPROOF_API_KEY")?;
    intake::account::check_password(&password).context("MAILPROOF_PASSWORD")?;
    let hash = api::hash_password(&password).map_err(anyhow::Error::msg)?;
    store
        .create_account(
            &NewAccount {
                api_key: api_key.clone(),
                password_hash: hash,
                plan: Plan::Enterprise,
                monthly_test_limit: None,
                rate_limit_per_minute: None,
                allowed_clients: None,
                auto_inbox: None,
            },
            chrono::Utc::now().timestamp(),
        )
        .await?;
    println!(
        "mailproof: created the first account (enterprise plan); keep these, they are shown once:"
    );
    println!("  API key:  {api_key}");
    println!("  password: {password}");
    Ok(())
}

pub async fn run(cmd: AccountsCommand) -> anyhow::Result<()> {
    match cmd {
        AccountsCommand::Add {
            db,
            api_key,
            password,
            plan,
            monthly_test_limit,
            rate_limit,
            clients,
            auto_inbox,
            resources,
        } => {
            use intake::account;
            account::check_api_key(&api_key).context("--api-key")?;
            account::check_password(&password).context("--password")?;
            account::check_limit(monthly_test_limit).context("--monthly-test-limit")?;
            account::check_limit(rate_limit).context("--rate-limit")?;
            if let Some(local) = &auto_inbox {
                account::check_auto_inbox(local).context("--auto-inbox")?;
            }
            let clients = match clients {
                Some(list) => {
                    let list: Vec<String> = list
                        .iter()
                        .map(|c| c.trim().to_ascii_lowercase())
                        .filter(|c| !c.is_empty())
                        .collect();
                    let resources = crate::config::Settings::resolve(&crate::config::Overrides {
                        resources,
                        ..Default::default()
                    })?
                    .resources;
                    let catalog = crate::serve::load_catalog(&resources)?;
                    let unknown: Vec<&String> =
                        list.iter().filter(|c| catalog.get(c).is_none()).collect();
                    if !unknown.is_empty() {
                        bail!("unknown client ids in --clients: {unknown:?}");
                    }
                    Some(list)
                }
                None => None,
            };
            let hash = api::hash_password(&password).map_err(anyhow::Error::msg)?;
            let store = db.open().await?;
            let account = store
                .create_account(
                    &NewAccount {
                        api_key,
                        password_hash: hash,
                        plan,
                        monthly_test_limit,
                        rate_limit_per_minute: rate_limit,
                        allowed_clients: clients,
                        auto_inbox,
                    },
                    chrono::Utc::now().timestamp(),
                )
                .await?;
            store.close().await;
            println!("added account {} (plan {})", account.api_key, account.plan);
        }
        AccountsCommand::List { db } => {
            let store = db.open().await?;
            println!(
                "{:<40} {:<11} {:>8} {:>10} {:<20} clients",
                "api_key", "plan", "rate/min", "month/cust", "auto_inbox"
            );
            for a in store.accounts().await? {
                println!(
                    "{:<40} {:<11} {:>8} {:>10} {:<20} {}",
                    a.api_key,
                    a.plan,
                    a.rate_limit_per_minute
                        .map_or("-".into(), |n| n.to_string()),
                    a.monthly_test_limit.map_or("-".into(), |n| n.to_string()),
                    a.auto_inbox.unwrap_or_else(|| "-".into()),
                    a.allowed_clients.map_or("all".into(), |c| c.join(","))
                );
            }
            store.close().await;
        }
        AccountsCommand::Remove { db, api_key } => {
            let store = db.open().await?;
            let removed = store.remove_account(&api_key).await?;
            store.close().await;
            if !removed {
                bail!("no account has API key {api_key:?}");
            }
            println!("removed account {api_key}");
        }
    }
    Ok(())
}
