//! The `mailproof` command: `serve` runs the service; `accounts` manages API accounts, also while
//! the service runs (they share the SQLite database, which serialises writers).

mod accounts;
mod checks;
mod config;
mod http;
mod links;
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
    #[command(subcommand)]
    command: Command,
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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mailproof: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(o) => serve::run(o).await,
            Command::Accounts { command } => accounts::run(command).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mailproof: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
