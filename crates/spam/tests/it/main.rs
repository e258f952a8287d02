//! Integration tests of the spam crate against spamd and rspamd that the harness starts itself.
//!
//! The daemons start once per test binary, on first use, and are stopped before it exits.

mod fixtures;
mod profiles;
mod scanning;
mod supervision;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use spam::{DaemonConfig, FilterAddresses, FilterDaemons, FilterProfiles};
use tokio::sync::OnceCell;

/// Shared by every test: one runtime, and the daemons once someone needs them.
pub struct Harness {
    runtime: tokio::runtime::Runtime,
    daemons: OnceCell<Result<FilterDaemons, String>>,
    work: tempfile::TempDir,
}

pub type Outcome = Result<(), Failed>;

impl Harness {
    /// Addresses of the shared daemons, starting them on first call.
    pub async fn addresses(&self) -> Result<FilterAddresses, Failed> {
        let daemons = self
            .daemons
            .get_or_init(|| async {
                FilterDaemons::start(daemon_config(&self.work.path().join("shared")))
                    .await
                    .map_err(|e| format!("cannot start the spam filter daemons: {e}"))
            })
            .await;
        match daemons {
            Ok(d) => Ok(d.addresses()),
            Err(e) => Err(e.clone().into()),
        }
    }

    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }
}

/// Test daemons keep rspamd's hyperscan cache under target/, so only the first run pays ~8 s.
pub fn daemon_config(work_dir: &Path) -> DaemonConfig {
    DaemonConfig {
        cache_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("spam-rspamd-cache"),
        ..DaemonConfig::new(work_dir)
    }
}

pub fn shipped_profiles() -> FilterProfiles {
    FilterProfiles::load(&shipped_profiles_path()).expect("data/spam-filters.toml loads")
}

pub fn shipped_profiles_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/spam-filters.toml")
}

type TestFn = fn(&Harness) -> Outcome;

fn main() {
    let args = Arguments::from_args();
    let harness = Arc::new(Harness {
        runtime: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime"),
        daemons: OnceCell::new(),
        work: tempfile::Builder::new()
            .prefix("spam-it-")
            .tempdir()
            .expect("temp dir"),
    });
    let tests: Vec<(&str, TestFn)> = [profiles::tests(), scanning::tests(), supervision::tests()]
        .into_iter()
        .flatten()
        .collect();
    let trials = tests
        .into_iter()
        .map(|(name, test)| {
            let harness = Arc::clone(&harness);
            Trial::test(name, move || test(&harness))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    let harness = match Arc::try_unwrap(harness) {
        Ok(h) => h,
        Err(_) => panic!("a test still holds the harness"),
    };
    let Harness {
        runtime,
        mut daemons,
        work,
    } = harness;
    if let Some(Ok(d)) = daemons.take() {
        runtime.block_on(d.shutdown());
    }
    drop(work);
    conclusion.exit();
}
