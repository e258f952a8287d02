//! DKIM: keys on disk, signatures that a verifier accepts, and that break when the message changes.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::PermissionsExt as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mail_auth::common::parse::TxtRecordParser as _;
use mail_auth::common::verify::DomainKey;
use mail_auth::{
    AuthenticatedMessage, DkimResult, MessageAuthenticator, Parameters, ResolverCache, Txt, MX,
};
use smtp::DkimSigner;

/// An in-memory DNS cache pre-filled with our TXT record, so verification needs no network.
struct Cache<K, V>(Mutex<HashMap<K, V>>);

impl<K: Hash + Eq, V: Clone> ResolverCache<K, V> for Cache<K, V> {
    fn get<Q>(&self, name: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.0.lock().expect("cache lock").get(name).cloned()
    }

    fn remove<Q>(&self, name: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.0.lock().expect("cache lock").remove(name)
    }

    fn insert(&self, key: K, value: V, _valid_until: Instant) {
        self.0.lock().expect("cache lock").insert(key, value);
    }
}

fn empty<K, V>() -> Cache<K, V> {
    Cache(Mutex::new(HashMap::new()))
}

/// Verifies every DKIM signature of `message` against the TXT record `record` at `name`.
async fn verify(message: &[u8], name: &str, record: &str) -> Vec<DkimResult> {
    let txt: Cache<String, Txt> = empty();
    let key = DomainKey::parse(record.as_bytes()).expect("our DNS record parses as a DKIM key");
    txt.insert(format!("{name}."), Txt::from(key), Instant::now());
    let mx: Cache<String, Arc<Vec<MX>>> = empty();
    let ipv4: Cache<String, Arc<Vec<Ipv4Addr>>> = empty();
    let ipv6: Cache<String, Arc<Vec<Ipv6Addr>>> = empty();
    let ptr: Cache<IpAddr, Arc<Vec<String>>> = empty();
    let authenticator = MessageAuthenticator::new_system_conf()
        .or_else(|_| MessageAuthenticator::new_cloudflare())
        .expect("a resolver object (never used: the cache answers)");
    let parsed = AuthenticatedMessage::parse(message).expect("the signed message parses");
    let params = Parameters {
        params: &parsed,
        cache_txt: Some(&txt),
        cache_mx: Some(&mx),
        cache_ptr: Some(&ptr),
        cache_ipv4: Some(&ipv4),
        cache_ipv6: Some(&ipv6),
    };
    authenticator
        .verify_dkim(params)
        .await
        .iter()
        .map(|output| output.result().clone())
        .collect()
}

fn message() -> Vec<u8> {
    smtp::build_message(
        "Signed",
        "<p>Signed body</p>",
        "news@acme.example",
        &["jane@example.org".to_owned()],
        "acme.example",
    )
    .expect("build a message")
}

#[tokio::test]
async fn signature_verifies_with_the_published_record_and_breaks_on_tampering() {
    let dir = tempfile::tempdir().expect("temp dir");
    let signer = DkimSigner::generate_or_load(&dir.path().join("dkim.pem"), "acme.example", "mp1")
        .expect("a new key");
    assert_eq!(signer.dns_name(), "mp1._domainkey.acme.example");
    let record = signer.dns_record();
    assert!(record.starts_with("v=DKIM1; k=rsa; p="), "{record}");

    let signed = signer.sign(&message()).expect("signing works");
    assert!(
        signed.starts_with(b"DKIM-Signature: "),
        "the signature header comes first"
    );
    let results = verify(&signed, &signer.dns_name(), &record).await;
    assert_eq!(
        results,
        vec![DkimResult::Pass],
        "the verifier accepts our signature"
    );

    let text = String::from_utf8(signed).expect("ASCII message");
    let tampered = text.replacen("Subject: Signed", "Subject: Changed", 1);
    assert_ne!(tampered, text);
    let results = verify(tampered.as_bytes(), &signer.dns_name(), &record).await;
    assert!(
        matches!(
            results.as_slice(),
            [DkimResult::Fail(_)] | [DkimResult::Neutral(_)]
        ),
        "a changed header breaks the signature: {results:?}"
    );
}

#[tokio::test]
async fn key_is_private_and_reused_across_restarts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("dkim.pem");
    let first = DkimSigner::generate_or_load(&path, "acme.example", "mp1").expect("a new key");
    let mode = std::fs::metadata(&path)
        .expect("key file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "only the owner may read the private key");
    let again = DkimSigner::generate_or_load(&path, "acme.example", "mp1").expect("the same key");
    assert_eq!(
        first.dns_record(),
        again.dns_record(),
        "a restart keeps the published key valid"
    );
}

#[tokio::test]
async fn corrupt_key_file_is_reported_not_replaced() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("dkim.pem");
    std::fs::write(&path, "not a key").expect("write junk");
    let err =
        DkimSigner::generate_or_load(&path, "acme.example", "mp1").expect_err("junk is no key");
    assert!(err.to_string().contains("dkim.pem"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("still there"),
        "not a key"
    );
}
