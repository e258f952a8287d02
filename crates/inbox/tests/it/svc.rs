//! The svc sender sends as senders send: each seed address its own signed message, each delivery
//! recorded as it lands so that a send taken up again goes only where it has not gone; and the
//! service's own signature verifies without DNS.

use domain::seed::seed_address;
use domain::{FilterType, SpamMethod};
use inbox::SvcSender;
use mail_parser::MessageParser;
use spam::{DnsMode, Envelope, FilterAddresses, FilterProfiles, SpamFilters};
use store::Outcome;
use testkit::smtp::{Received, Reply, SmtpStub};

use crate::processor::{Fixture, OWN, PROFILES, SA, SEEDS};

const RS: &str = "Rspamd (test)";
const FILTERS: &[(&str, FilterType)] = &[
    (SA, FilterType::B2b),
    (RS, FilterType::B2b),
    (OWN, FilterType::B2c),
];

fn signer(dir: &tempfile::TempDir) -> smtp::DkimSigner {
    smtp::DkimSigner::generate_or_load(&dir.path().join("dkim.pem"), SEEDS, "mp1")
        .expect("a new DKIM key")
}

/// The one `To:` address and the `Message-ID:` of a message the stub received.
fn to_and_id(message: &Received) -> (Vec<String>, String) {
    let parsed = MessageParser::default()
        .parse(&message.data)
        .expect("a parsable message");
    let to = parsed
        .to()
        .map(|to| {
            to.iter()
                .filter_map(|a| a.address().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (to, parsed.message_id().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn each_seed_address_gets_its_own_signed_message_and_a_retry_sends_only_the_missing_one() {
    let f = Fixture::new().await;
    let key = "svckey0000000001";
    let test_id = f.create_spam_test_by(key, SpamMethod::Svc, FILTERS).await;
    let refused = seed_address(key, OWN, SEEDS);
    let refusing = refused.clone();
    let flaky = SmtpStub::builder()
        .answer_rcpt(move |rcpt| {
            (rcpt == refusing).then(|| Reply::new(451, "4.3.0 try again later"))
        })
        .start()
        .await;
    let keys = tempfile::tempdir().expect("temp dir");
    let sender = SvcSender::new(f.store.clone(), signer(&keys), flaky.addr, SEEDS.into());

    let err = sender
        .run_one()
        .await
        .expect_err("one seed address refused its message");
    assert!(
        err.to_string().contains(&refused) && err.to_string().contains("1 of 3"),
        "the error names the address that failed: {err}"
    );
    let received = flaky.received();
    let mut ids = Vec::new();
    for (message, client) in received.iter().zip([SA, RS]) {
        let address = seed_address(key, client, SEEDS);
        assert_eq!(
            message.rcpt_to,
            std::slice::from_ref(&address),
            "one recipient per message"
        );
        let (to, id) = to_and_id(message);
        assert_eq!(to, [address], "its own To:, nobody else's");
        assert!(
            message.data.starts_with(b"DKIM-Signature: "),
            "each message signed"
        );
        ids.push(id);
    }
    assert_eq!(
        received.len(),
        2,
        "the two accepted addresses: {received:?}"
    );
    assert_ne!(ids[0], ids[1], "each message has its own Message-ID");
    let results = f.store.spam_results(&test_id).await.expect("spam results");
    let own = results.iter().find(|r| r.client == OWN).expect("OWN's row");
    assert!(
        own.spam.is_none() && own.details.contains("not delivered") && own.details.contains("451"),
        "the failure is noted on the filter that waits for it: {own:?}"
    );

    // Taken up again (here at once, rather than after the backoff) by a sender whose server takes
    // everything: only the refused address is sent to.
    let probe = "probe";
    let now = chrono::Utc::now().timestamp();
    let pending = f
        .store
        .claim_svc_send(probe, now + 3_600, 60)
        .await
        .expect("claim")
        .expect("the failed send is due again");
    assert_eq!(pending.unsent, [OWN], "what is left to send");
    let again = Outcome::Retry {
        error: None,
        not_before: 0,
        counted: false,
    };
    assert!(f
        .store
        .finish_svc_send(&test_id, probe, now, &again)
        .await
        .expect("release"));
    let taking = SmtpStub::builder().start().await;
    let sender = SvcSender::new(f.store.clone(), signer(&keys), taking.addr, SEEDS.into());
    assert!(sender.run_one().await.expect("the retry is delivered"));
    let resent: Vec<Vec<String>> = taking.received().into_iter().map(|m| m.rcpt_to).collect();
    assert_eq!(resent, [[refused]], "only the address that had not had it");
    assert!(
        f.store
            .claim_svc_send(probe, now + 3_600, 60)
            .await
            .expect("claim")
            .is_none(),
        "the test is sent"
    );
}

#[tokio::test]
async fn the_services_own_signature_verifies_without_dns() {
    let f = Fixture::new().await;
    let key = "svckey0000000002";
    f.create_spam_test_by(key, SpamMethod::Svc, &[(OWN, FilterType::B2c)])
        .await;
    let stub = SmtpStub::builder().start().await;
    let keys = tempfile::tempdir().expect("temp dir");
    let sender = SvcSender::new(f.store.clone(), signer(&keys), stub.addr, SEEDS.into());
    assert!(sender.run_one().await.expect("sent"));
    let sent = stub.received().pop().expect("one message");

    let profiles = FilterProfiles::parse(PROFILES).expect("valid profiles");
    let filters = SpamFilters::with_dns(profiles, &FilterAddresses::default(), DnsMode::Disabled);
    let envelope = Envelope {
        client_ip: "127.0.0.1".parse().expect("literal ip"),
        helo: SEEDS.into(),
        hostname: String::new(),
        mail_from: sent.mail_from.clone(),
        rcpt_to: sent.rcpt_to.clone(),
    };
    let dkim_of = |details: &str| {
        details
            .split([',', ';', ' '])
            .find(|w| w.starts_with("MP_DKIM_"))
            .map(str::to_owned)
    };
    let scan = |message: Vec<u8>| {
        let filters = &filters;
        let envelope = &envelope;
        async move {
            let verdict = filters
                .scan_one(OWN, &message, envelope)
                .await
                .expect("the built-in filter scans");
            println!("{}", verdict.details);
            dkim_of(&verdict.details)
        }
    };

    assert_eq!(
        scan(sent.data.clone()).await.as_deref(),
        Some("MP_DKIM_TEMPERROR"),
        "without DNS and without our key, nothing is verified"
    );
    filters
        .answer_own_dkim(&signer(&keys).txt_record())
        .expect("our record parses");
    assert_eq!(
        scan(sent.data.clone()).await.as_deref(),
        Some("MP_DKIM_PASS"),
        "with our key held, our signature verifies offline"
    );
    let text = String::from_utf8(sent.data.clone()).expect("an ASCII message");
    let tampered = text.replacen("Subject: Our November news", "Subject: Changed", 1);
    assert_ne!(tampered, text);
    let verdict = scan(tampered.into_bytes()).await;
    assert!(
        matches!(
            verdict.as_deref(),
            Some("MP_DKIM_FAIL" | "MP_DKIM_NEUTRAL" | "MP_DKIM_PERMERROR")
        ),
        "a changed message does not pass: {verdict:?}"
    );
}
