//! The one error type of the spam crate: every message says what failed and what to do next.

use std::path::PathBuf;

/// Everything that can go wrong while loading profiles, supervising daemons or scanning.
#[derive(Debug, thiserror::Error)]
pub enum SpamError {
    #[error("cannot read spam filter profiles from {path}: {source}; check the path in the configuration")]
    ProfilesRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid spam filter profiles: {0}; fix data/spam-filters.toml")]
    ProfilesInvalid(String),
    #[error("invalid sender requirements: {0}")]
    Requirements(String),
    #[error("{0}; svc sends will not verify offline (the key file is damaged: remove it to have a new one made)")]
    OwnDkimRecord(String),
    #[error(
        "unknown spam filter profile `{0}`; use one of the names from FilterProfiles::clients"
    )]
    UnknownProfile(String),
    #[error(
        "{program} is not installed or not runnable ({source}); install it with scripts/setup.sh"
    )]
    ProgramMissing {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot prepare {what} for the spam filter daemons: {source}")]
    WorkDir {
        what: String,
        source: std::io::Error,
    },
    #[error("{daemon} did not answer on {addr} within {waited_ms} ms; last problem: {last}; see its log at {log}")]
    DaemonNotReady {
        daemon: &'static str,
        addr: String,
        waited_ms: u128,
        last: String,
        log: PathBuf,
    },
    #[error("{daemon} started but cannot scan ({reason}); check that its user can read {config}, and see its log at {log}")]
    DaemonCannotScan {
        daemon: &'static str,
        reason: String,
        config: PathBuf,
        log: PathBuf,
    },
    #[error("the {engine} filter is down: {reason}; the message is kept and scanned when the filter is back")]
    EngineDown {
        engine: &'static str,
        reason: String,
    },
    #[error("{daemon} exited during start-up ({status}); see its log at {log}")]
    DaemonExited {
        daemon: &'static str,
        status: String,
        log: PathBuf,
    },
    #[error("the {engine} engine is not configured (no address); start it with FilterDaemons or give its address")]
    EngineNotConfigured { engine: &'static str },
    #[error(
        "the {engine} engine at {addr} is unreachable: {reason}; it is retried on the next scan"
    )]
    EngineUnavailable {
        engine: &'static str,
        addr: String,
        reason: String,
    },
    #[error("the {engine} engine gave an answer mailproof cannot read: {reason}")]
    EngineProtocol {
        engine: &'static str,
        reason: String,
    },
    #[error(
        "the {engine} engine did not finish within {timeout_ms} ms; it is retried on the next scan"
    )]
    EngineTimeout {
        engine: &'static str,
        timeout_ms: u128,
    },
    #[error("the message could not be parsed as an email: {0}")]
    UnparsableMessage(String),
}
