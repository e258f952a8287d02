//! `mailproof check`: the command for CI. It submits an email to a v5 server, follows the test
//! to its end, downloads the screenshots, compares each client with a baseline and says, by its
//! exit code and a report (text, JSON or JUnit XML), whether the email still renders as before.
//!
//! Exit codes: 0 every check passed; 1 a check failed (a client bounced, a screenshot changed
//! beyond `--max-diff`, a spam filter said spam, no approved version with `--require-approval`); 2 the check could not be made (usage, missing
//! credentials, the server refused or could not be reached, `--timeout` exceeded).

mod api;
mod check;
mod compare;
mod error;
pub mod junit;
mod progress;
pub mod report;
mod source;
mod spam;
pub mod threshold;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub use error::CliError;
pub use report::Report;
pub use spam::SpamMethod;
pub use threshold::MaxDiff;

/// Exit code when every check passed.
pub const EXIT_OK: u8 = 0;
/// Exit code when a client bounced, changed beyond the limit, or a spam filter said spam.
pub const EXIT_FAILED: u8 = 1;
/// Exit code when the check could not be made at all.
pub const EXIT_ERROR: u8 = 2;

/// Report format written to standard output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Junit,
}

/// What a failed sender requirement does to the check (`--requirements`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RequirementsPolicy {
    Fail,
    Warn,
    Off,
}

/// `mailproof check`. Credentials come only from the environment (`MAILPROOF_API_KEY`,
/// `MAILPROOF_PASSWORD`): flags would show them in the process list.
#[derive(Clone, Debug, clap::Args)]
pub struct CheckArgs {
    /// The email: an HTML file, or a whole message as `.eml` (its subject and HTML part are used).
    pub email: PathBuf,
    /// Base URL of the v5 server, e.g. https://mailproof.example.com.
    #[arg(long)]
    pub server: String,
    /// Client ids to render (comma-separated or repeated); the account's defaults when omitted.
    #[arg(long, value_delimiter = ',')]
    pub clients: Vec<String>,
    /// Compare with this earlier test on the same server (needs mailproof's diff endpoint).
    #[arg(long, conflicts_with = "baseline_file")]
    pub baseline: Option<String>,
    /// Compare locally with a report.json written by an earlier run's --out (any v5 server).
    #[arg(long)]
    pub baseline_file: Option<PathBuf>,
    /// Largest share of a screenshot's pixels that may change: `0.5%` or a fraction `0.005`.
    #[arg(long, default_value = "0.1%")]
    pub max_diff: MaxDiff,
    /// Run a spam test alongside: `seed` sends the email to the seed addresses through the SMTP
    /// server in MAILPROOF_SMTP_*; `smtp` has the server send through that SMTP server; `svc`
    /// has the server send it itself.
    #[arg(long)]
    pub spam: Option<SpamMethod>,
    /// With --spam: what a mailbox provider's sender requirement that fails does (mailproof's
    /// `…/spam/requirements`): `fail` the check, only `warn` in the report, or `off` (not asked).
    #[arg(long, value_enum, default_value = "fail")]
    pub requirements: RequirementsPolicy,
    /// Directory for the screenshots and report.json (usable later as --baseline-file).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Report written to standard output.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Subject of the test (default: the .eml's subject, the HTML's <title>, or the file name).
    #[arg(long)]
    pub subject: Option<String>,
    /// Fail unless a version of this email with the same HTML is approved on the server
    /// (mailproof's versions and approvals): the gate before a send.
    #[arg(long)]
    pub require_approval: bool,
    /// Longest the whole check may take: seconds, or with a unit (`90s`, `10m`).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Runs the check, writes the report and returns the exit code (see the crate documentation).
pub async fn run(args: CheckArgs) -> ExitCode {
    let progress = progress::Progress::new();
    let report = match check::check(&args, &progress).await {
        Ok(report) => report,
        Err(e) => {
            progress.clear();
            eprintln!("mailproof check: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    progress.clear();
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => match serde_json::to_string_pretty(&report) {
            Ok(s) => s + "\n",
            Err(e) => {
                eprintln!("mailproof check: writing the JSON report failed: {e}");
                return ExitCode::from(EXIT_ERROR);
            }
        },
        Format::Junit => junit::write(&report),
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("mailproof check: writing the report to standard output failed: {e}");
        return ExitCode::from(EXIT_ERROR);
    }
    let failures = report.failures();
    // A machine-readable report on stdout is usually redirected to a file; the CI log still
    // needs to say which clients failed.
    if args.format != Format::Text && !failures.is_empty() {
        eprintln!("mailproof check: FAILED");
        for f in &failures {
            eprintln!("  - {f}");
        }
    }
    if failures.is_empty() {
        ExitCode::from(EXIT_OK)
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

/// `600`, `600s`, `10m`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a duration; write seconds (600) or 90s, 10m, 1h"))?;
    let secs = match unit.trim() {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{s}`; use s, m or h (e.g. 10m)"
            ))
        }
    };
    if secs == 0 {
        return Err("the timeout must be longer than 0 s".into());
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_seconds_or_a_unit() {
        assert_eq!(parse_duration("600"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("10d").is_err());
        assert!(parse_duration("m").is_err());
    }
}
