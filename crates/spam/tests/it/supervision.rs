//! Starting, stopping and referencing the filter daemons.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use spam::{
    DaemonConfig, DaemonSource, DaemonState, DnsMode, EngineKind, FilterAddresses, FilterDaemons,
    FilterStatus, FilterSupervisor, SpamError, SpamFilters,
};

use crate::fixtures::{clean_envelope, clean_newsletter};
use crate::{daemon_config, shipped_profiles, Harness, Outcome, TestFn};

pub fn tests() -> Vec<(&'static str, TestFn)> {
    vec![
        (
            "supervision::a_stopped_daemon_fails_only_its_own_profiles",
            a_stopped_daemon_fails_only_its_own_profiles,
        ),
        (
            "supervision::a_missing_daemon_program_says_how_to_install_it",
            a_missing_daemon_program_says_how_to_install_it,
        ),
        (
            "supervision::external_addresses_are_used_without_starting_anything",
            external_addresses_are_used_without_starting_anything,
        ),
        (
            "supervision::an_abandoned_run_dir_is_removed_by_the_next_start",
            an_abandoned_run_dir_is_removed_by_the_next_start,
        ),
        (
            "supervision::a_filter_that_cannot_start_is_retried_and_the_other_runs_from_a_private_dir",
            a_filter_that_cannot_start_is_retried_and_the_other_runs_from_a_private_dir,
        ),
    ]
}

fn a_stopped_daemon_fails_only_its_own_profiles(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let shared = harness.addresses().await?;
        // A spamd of our own, so stopping it does not disturb the other tests.
        let own = FilterDaemons::start(DaemonConfig {
            rspamd: DaemonSource::Off,
            ..daemon_config(&harness.work_dir().join("own-spamd"))
        })
        .await
        .map_err(|e| format!("cannot start spamd: {e}"))?;
        let addresses = FilterAddresses {
            spamd: own.addresses().spamd,
            rspamd: shared.rspamd,
        };
        let filters = SpamFilters::with_dns(shipped_profiles(), &addresses, DnsMode::Disabled);
        let (message, env) = (clean_newsletter(), clean_envelope());
        for (client, result) in filters.scan_all(&message, &env).await {
            result.map_err(|e| format!("{client} failed while spamd ran: {e}"))?;
        }

        own.shutdown().await;

        for (client, result) in filters.scan_all(&message, &env).await {
            let profile = shipped_profiles()
                .get(&client)
                .cloned()
                .expect("known profile");
            match (profile.engine, result) {
                (EngineKind::Spamassassin, Err(SpamError::EngineUnavailable { engine, .. })) => {
                    assert_eq!(engine, "spamassassin")
                }
                (EngineKind::Spamassassin, other) => {
                    panic!("{client}: expected spamd to be unavailable, got {other:?}")
                }
                (_, Err(e)) => panic!("{client} failed although its engine runs: {e}"),
                (_, Ok(_)) => {}
            }
        }
        Ok(())
    })
}

fn external_addresses_are_used_without_starting_anything(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let shared = harness.addresses().await?;
        let (Some(spamd), Some(rspamd)) = (shared.spamd, shared.rspamd) else {
            return Err("the shared daemons have no addresses".into());
        };
        let external = FilterDaemons::start(DaemonConfig::external(spamd, rspamd))
            .await
            .map_err(|e| format!("external config: {e}"))?;
        assert_eq!(external.addresses(), shared);
        // Shutting down a value that started nothing leaves the shared daemons running.
        external.shutdown().await;
        let filters = SpamFilters::with_dns(shipped_profiles(), &shared, DnsMode::Disabled);
        filters
            .scan_one(
                "SpamAssassin (consumer mailbox)",
                &clean_newsletter(),
                &clean_envelope(),
            )
            .await
            .map_err(|e| format!("shared spamd stopped: {e}"))?;
        Ok(())
    })
}

fn a_missing_daemon_program_says_how_to_install_it(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let result = FilterDaemons::start(DaemonConfig {
            spamd_program: "/nonexistent/spamd".into(),
            rspamd: DaemonSource::Off,
            ..daemon_config(&harness.work_dir().join("missing-program"))
        })
        .await;
        match result {
            Err(e @ SpamError::ProgramMissing { .. }) => {
                assert!(e.to_string().contains("scripts/setup.sh"), "{e}");
                Ok(())
            }
            Err(other) => Err(format!("expected ProgramMissing, got {other}").into()),
            Ok(_) => Err("a nonexistent spamd started".into()),
        }
    })
}

/// Issue 9 point 6: the work dir sits inside a 0700 directory (like a clone under /root or a
/// `mktemp -d`), rspamd's program does not exist. spamd must still come up and judge mail, rspamd
/// must be reported down with its reason and be tried again, and scans for it must say so.
fn a_filter_that_cannot_start_is_retried_and_the_other_runs_from_a_private_dir(
    harness: &Harness,
) -> Outcome {
    harness.runtime.block_on(async {
        let private = harness.work_dir().join("private-home");
        std::fs::create_dir_all(&private).map_err(|e| format!("mkdir: {e}"))?;
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("chmod 0700: {e}"))?;
        let supervisor = FilterSupervisor::start(DaemonConfig {
            rspamd_program: "/nonexistent/rspamd".into(),
            retry_first: Duration::from_millis(200),
            retry_max: Duration::from_millis(400),
            ..daemon_config(&private.join("data").join("filters"))
        });
        let mut status = supervisor.status();
        let mut rspamd_failures = 0;
        let mut last_retry_at = None;
        let seen = tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                let now: FilterStatus = status.borrow_and_update().clone();
                if let DaemonState::Down { reason, retry_at } = &now.rspamd {
                    if last_retry_at != Some(*retry_at) {
                        last_retry_at = Some(*retry_at);
                        rspamd_failures += 1;
                        assert!(reason.contains("/nonexistent/rspamd"), "{reason}");
                    }
                }
                if matches!(now.spamd, DaemonState::Up(_)) && rspamd_failures >= 2 {
                    return now;
                }
                if let DaemonState::Down { reason, .. } = &now.spamd {
                    panic!("spamd did not start from a work dir inside a 0700 directory: {reason}");
                }
                if status.changed().await.is_err() {
                    panic!("the supervisor stopped reporting");
                }
            }
        })
        .await
        .map_err(|_| {
            format!(
                "spamd up and two rspamd attempts not seen within 120 s: {:?}",
                *status.borrow()
            )
        })?;

        let filters = SpamFilters::with_dns(
            shipped_profiles(),
            &FilterAddresses::default(),
            DnsMode::Disabled,
        );
        filters.update(&seen);
        let (message, env) = (clean_newsletter(), clean_envelope());
        for (client, result) in filters.scan_all(&message, &env).await {
            let profile = shipped_profiles()
                .get(&client)
                .cloned()
                .expect("known profile");
            match (profile.engine, result) {
                (EngineKind::Rspamd, Err(e @ SpamError::EngineDown { .. })) => {
                    let text = e.to_string();
                    assert!(text.contains("rspamd") && text.contains("down"), "{text}");
                }
                (EngineKind::Rspamd, other) => {
                    panic!("{client}: expected rspamd to be reported down, got {other:?}")
                }
                (_, Err(e)) => panic!("{client} failed although its engine runs: {e}"),
                (_, Ok(v)) => assert!(v.details.contains("score"), "{v:?}"),
            }
        }
        let run_dir = daemon_config(&private.join("data").join("filters")).run_dir;
        assert!(
            run_dir.is_dir(),
            "the run dir {} exists while running",
            run_dir.display()
        );
        supervisor.shutdown().await;
        assert!(
            !run_dir.exists(),
            "the run dir {} is removed on shutdown",
            run_dir.display()
        );
        Ok(())
    })
}

/// A run dir whose owner process is gone (killed outright) is removed by the next start.
fn an_abandoned_run_dir_is_removed_by_the_next_start(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let abandoned = daemon_config(&harness.work_dir().join("abandoned")).run_dir;
        std::fs::create_dir_all(abandoned.join("spamassassin"))
            .map_err(|e| format!("mkdir: {e}"))?;
        // Beyond the default pid_max: no such process.
        std::fs::write(abandoned.join("owner.pid"), "4194305").map_err(|e| format!("{e}"))?;
        let own = FilterDaemons::start(DaemonConfig {
            spamd_program: "/nonexistent/spamd".into(),
            rspamd: DaemonSource::Off,
            ..daemon_config(&harness.work_dir().join("sweeper"))
        })
        .await;
        assert!(own.is_err(), "a nonexistent spamd cannot start");
        assert!(!abandoned.exists(), "{} was removed", abandoned.display());
        Ok(())
    })
}
