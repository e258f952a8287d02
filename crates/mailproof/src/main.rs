//! The `mailproof` command: `serve` runs the service; `accounts` manages API accounts, also while
//! the service runs (they share the SQLite database, which serialises writers); `check` tests an
//! email against a running server for CI (crate `cli`).

mod accounts;
mod config;
mod mail;
mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mailproof",
    version,
    about = "Self-hostable email rendering and spam testing"
)]
struct Cli {
    /// Log lines as text for people or as one JSON object per line for log collectors.
    #[arg(
        long,
        global = true,
        env = "MAILPROOF_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP API, the SMTP listener and the workers.
    Serve(config::Overrides),
    /// Manage API accounts.
    Accounts {
        #[command(subcommand)]
        command: accounts::AccountsCommand,
    },
    /// Test an email against a running server, for CI: exit 0 when unchanged, 1 when a client
    /// bounced, changed beyond --max-diff or a filter said spam, 2 when the check could not run.
    /// Credentials come from MAILPROOF_API_KEY and MAILPROOF_PASSWORD.
    Check(::cli::CheckArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: in a file or a log collector they are
        // noise around every field.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mailproof: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(o) => serve::run(o)
                .await
                .map(|()| std::process::ExitCode::SUCCESS),
            Command::Accounts { command } => accounts::run(command)
                .await
                .map(|()| std::process::ExitCode::SUCCESS),
            // `check` has exit codes of its own (0 passed, 1 failed, 2 could not check).
            Command::Check(args) => Ok(::cli::run(args).await),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mailproof: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
