//! Starting, stopping and referencing the filter daemons.

use spam::{
    DaemonConfig, DaemonSource, DnsMode, EngineKind, FilterAddresses, FilterDaemons, SpamError,
    SpamFilters,
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
