//! Scanning real messages with every profile against the running engines.

use domain::SpamVerdict;
use spam::{
    DnsMode, FilterAddresses, SpamError, SpamFilters, Verdict, MAX_MESSAGE_BYTES, SPAMD_MAX_BYTES,
};

use crate::fixtures::{clean_envelope, clean_newsletter, obvious_spam, spam_envelope};
use crate::{shipped_profiles, Harness, Outcome, TestFn};

pub fn tests() -> Vec<(&'static str, TestFn)> {
    vec![
        (
            "scanning::obvious_spam_is_spam_for_most_profiles",
            obvious_spam_is_spam_for_most_profiles,
        ),
        (
            "scanning::clean_newsletter_is_not_spam_for_most_profiles",
            clean_newsletter_is_not_spam_for_most_profiles,
        ),
        (
            "scanning::details_name_the_score_threshold_and_fired_rules",
            details_name_the_score_threshold_and_fired_rules,
        ),
        (
            "scanning::oversized_messages_are_scanned_truncated_with_a_note",
            oversized_messages_are_scanned_truncated_with_a_note,
        ),
        (
            "scanning::spamassassin_scans_a_truncated_copy_of_large_messages",
            spamassassin_scans_a_truncated_copy_of_large_messages,
        ),
        (
            "scanning::scan_one_agrees_with_scan_all_and_rejects_unknown_profiles",
            scan_one_agrees_with_scan_all_and_rejects_unknown_profiles,
        ),
    ]
}

async fn filters(harness: &Harness) -> Result<SpamFilters, libtest_mimic::Failed> {
    let addresses = harness.addresses().await?;
    Ok(SpamFilters::with_dns(
        shipped_profiles(),
        &addresses,
        DnsMode::default(),
    ))
}

fn verdicts(results: Vec<(String, Result<Verdict, SpamError>)>) -> Vec<Verdict> {
    results
        .into_iter()
        .map(|(client, r)| r.unwrap_or_else(|e| panic!("{client} failed: {e}")))
        .collect()
}

fn summary(verdicts: &[Verdict]) -> String {
    verdicts
        .iter()
        .map(|v| format!("{} => {} ({})", v.client, v.spam.label(), v.details))
        .collect::<Vec<_>>()
        .join("\n")
}

fn obvious_spam_is_spam_for_most_profiles(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let filters = filters(harness).await?;
        let verdicts = verdicts(filters.scan_all(&obvious_spam(), &spam_envelope()).await);
        assert_eq!(verdicts.len(), filters.clients().len());
        let spam = verdicts
            .iter()
            .filter(|v| v.spam == SpamVerdict::Spam)
            .count();
        assert!(
            spam * 3 >= verdicts.len() * 2,
            "at least two thirds say spam:\n{}",
            summary(&verdicts)
        );
        assert!(
            verdicts.iter().all(|v| v.spam != SpamVerdict::NotSpam),
            "{}",
            summary(&verdicts)
        );
        Ok(())
    })
}

fn clean_newsletter_is_not_spam_for_most_profiles(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let filters = filters(harness).await?;
        let verdicts = verdicts(
            filters
                .scan_all(&clean_newsletter(), &clean_envelope())
                .await,
        );
        let ham = verdicts
            .iter()
            .filter(|v| v.spam == SpamVerdict::NotSpam)
            .count();
        assert!(
            ham * 3 >= verdicts.len() * 2,
            "at least two thirds say not spam:\n{}",
            summary(&verdicts)
        );
        assert!(
            verdicts.iter().all(|v| v.spam != SpamVerdict::Spam),
            "{}",
            summary(&verdicts)
        );
        Ok(())
    })
}

fn details_name_the_score_threshold_and_fired_rules(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let filters = filters(harness).await?;
        let verdicts = verdicts(filters.scan_all(&obvious_spam(), &spam_envelope()).await);
        let by = |client: &str| {
            verdicts
                .iter()
                .find(|v| v.client == client)
                .unwrap_or_else(|| panic!("verdict for {client}"))
        };
        let sa = by("SpamAssassin (corporate gateway)");
        assert!(
            sa.details.starts_with(&format!(
                "score {:.2} / spam at 5.0 (engine threshold 5.0)",
                sa.score
            )),
            "{}",
            sa.details
        );
        assert!(sa.details.contains("DRUGS_ERECTILE"), "{}", sa.details);
        let rs = by("Rspamd (consumer mailbox)");
        assert!(rs.details.contains("HTTP_TO_IP"), "{}", rs.details);
        assert!(rs.details.contains("action: "), "{}", rs.details);
        let mp = by("mailproof checks (corporate gateway)");
        for rule in [
            "MP_PHARMA_PHRASES",
            "MP_LINK_TO_IP",
            "MP_SUBJECT_SHOUTY",
            "MP_MISSING_MESSAGE_ID",
        ] {
            assert!(mp.details.contains(rule), "{rule} in {}", mp.details);
        }
        // Authentication is reported as it came out, never as an unverified pass.
        assert!(!mp.details.contains("_PASS"), "{}", mp.details);
        Ok(())
    })
}

fn scan_one_agrees_with_scan_all_and_rejects_unknown_profiles(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let filters = filters(harness).await?;
        let (message, env) = (obvious_spam(), spam_envelope());
        let one = filters
            .scan_one("Rspamd (corporate gateway)", &message, &env)
            .await
            .expect("rspamd scan");
        let all = verdicts(filters.scan_all(&message, &env).await);
        let same = all
            .iter()
            .find(|v| v.client == one.client)
            .expect("same profile in scan_all");
        assert_eq!((one.spam, one.score), (same.spam, same.score));
        let err = filters
            .scan_one("Hotmail", &message, &env)
            .await
            .expect_err("unknown profile");
        assert!(
            matches!(err, SpamError::UnknownProfile(ref p) if p == "Hotmail"),
            "{err}"
        );
        Ok(())
    })
}

fn oversized_messages_are_scanned_truncated_with_a_note(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        // Only the built-in engine: the point is the size cap, not the daemons.
        let filters = SpamFilters::with_dns(
            shipped_profiles(),
            &FilterAddresses::default(),
            DnsMode::Disabled,
        );
        let message = padded_newsletter(MAX_MESSAGE_BYTES + 1);
        let verdict = filters
            .scan_one(
                "mailproof checks (consumer mailbox)",
                &message,
                &clean_envelope(),
            )
            .await
            .expect("builtin scan of a large message");
        assert!(
            verdict
                .details
                .contains(&format!("truncated to the first {MAX_MESSAGE_BYTES}")),
            "{}",
            verdict.details
        );
        let err = filters
            .scan_one("Rspamd (consumer mailbox)", &message, &clean_envelope())
            .await
            .expect_err("rspamd has no address here");
        assert!(
            matches!(err, SpamError::EngineNotConfigured { engine: "rspamd" }),
            "{err}"
        );
        Ok(())
    })
}

/// The clean newsletter grown past `len` bytes with ordinary text lines.
fn padded_newsletter(len: usize) -> Vec<u8> {
    let mut message = clean_newsletter();
    let line = b"Padding line of an attachment-sized newsletter body.\r\n";
    while message.len() < len {
        message.extend_from_slice(line);
    }
    message
}

fn spamassassin_scans_a_truncated_copy_of_large_messages(harness: &Harness) -> Outcome {
    harness.runtime.block_on(async {
        let filters = filters(harness).await?;
        let message = padded_newsletter(SPAMD_MAX_BYTES + 100 * 1024);
        let verdict = filters
            .scan_one(
                "SpamAssassin (corporate gateway)",
                &message,
                &clean_envelope(),
            )
            .await
            .map_err(|e| format!("spamd scan of a large message: {e}"))?;
        assert!(
            verdict
                .details
                .contains(&format!("truncated to the first {SPAMD_MAX_BYTES}")),
            "{}",
            verdict.details
        );
        Ok(())
    })
}
