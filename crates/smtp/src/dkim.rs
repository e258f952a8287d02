//! DKIM signing for the messages the `svc` method sends: an RSA-SHA256 key kept on disk, the
//! signature header, and the DNS record an operator publishes.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use base64::Engine as _;
use mail_auth::common::crypto::{RsaKey, Sha256};
use mail_auth::common::headers::HeaderWriter as _;
use mail_auth::dkim::Done;
use rsa::pkcs1::{DecodeRsaPrivateKey as _, EncodeRsaPrivateKey as _};
use rsa::pkcs8::EncodePublicKey as _;

use crate::error::SmtpError;

const KEY_BITS: usize = 2048;
/// Headers we sign when the message has them. Listing To, Subject and the body type keeps a relay
/// from changing what the recipient sees without breaking the signature.
const SIGNED_HEADERS: [&str; 10] = [
    "From",
    "Reply-To",
    "To",
    "Cc",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
];

/// Signs outgoing messages for one domain and selector.
pub struct DkimSigner {
    signer: mail_auth::dkim::DkimSigner<RsaKey<Sha256>, Done>,
    /// The public key as SubjectPublicKeyInfo DER, the form DKIM's `p=` tag carries.
    public_key_der: Vec<u8>,
    domain: String,
    selector: String,
}

impl std::fmt::Debug for DkimSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DkimSigner")
            .field("domain", &self.domain)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

impl DkimSigner {
    /// Loads the PKCS#1 PEM key at `key_path`, or generates a 2048-bit RSA key there (mode 0600) when
    /// the file does not exist yet.
    pub fn generate_or_load(
        key_path: &Path,
        domain: &str,
        selector: &str,
    ) -> Result<Self, SmtpError> {
        let pem = match std::fs::read_to_string(key_path) {
            Ok(pem) => pem,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => generate_key(key_path)?,
            Err(source) => {
                return Err(SmtpError::DkimKeyFile {
                    path: key_path.to_owned(),
                    source,
                })
            }
        };
        let bad_key = |reason: String| SmtpError::DkimKey {
            path: key_path.to_owned(),
            reason,
        };
        let private =
            rsa::RsaPrivateKey::from_pkcs1_pem(&pem).map_err(|e| bad_key(e.to_string()))?;
        let public_key_der = private
            .to_public_key()
            .to_public_key_der()
            .map_err(|e| bad_key(e.to_string()))?
            .into_vec();
        let key = RsaKey::<Sha256>::from_pkcs1_pem(&pem).map_err(|e| bad_key(e.to_string()))?;
        let signer = mail_auth::dkim::DkimSigner::from_key(key)
            .domain(domain)
            .selector(selector)
            .headers(SIGNED_HEADERS);
        tracing::info!(domain, selector, path = %key_path.display(), "DKIM key ready");
        Ok(Self {
            signer,
            public_key_der,
            domain: domain.to_owned(),
            selector: selector.to_owned(),
        })
    }

    /// The message with a `DKIM-Signature:` header prepended.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SmtpError> {
        let signature = self
            .signer
            .sign(message)
            .map_err(|err| SmtpError::DkimSign(err.to_string()))?;
        let header = signature.to_header();
        let mut signed = Vec::with_capacity(header.len() + message.len());
        signed.extend_from_slice(header.as_bytes());
        signed.extend_from_slice(message);
        Ok(signed)
    }

    /// The TXT record value to publish at [`DkimSigner::dns_name`].
    pub fn dns_record(&self) -> String {
        format!(
            "v=DKIM1; k=rsa; p={}",
            base64::engine::general_purpose::STANDARD.encode(&self.public_key_der)
        )
    }

    /// Where the TXT record goes: `<selector>._domainkey.<domain>`.
    pub fn dns_name(&self) -> String {
        format!("{}._domainkey.{}", self.selector, self.domain)
    }

    /// The record and its name together, for a verifier that answers for this key itself.
    pub fn txt_record(&self) -> domain::DkimTxtRecord {
        domain::DkimTxtRecord {
            name: self.dns_name(),
            value: self.dns_record(),
        }
    }
}

/// Generates a key and writes it atomically with owner-only permissions; returns its PEM.
fn generate_key(key_path: &Path) -> Result<String, SmtpError> {
    tracing::info!(path = %key_path.display(), "generating a new DKIM key");
    let private = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, KEY_BITS)
        .map_err(|err| SmtpError::DkimGenerate(err.to_string()))?;
    let pem = private
        .to_pkcs1_pem(rsa::pkcs1::LineEnding::LF)
        .map_err(|err| SmtpError::DkimGenerate(err.to_string()))?;
    let file_error = |source| SmtpError::DkimKeyFile {
        path: key_path.to_owned(),
        source,
    };
    let tmp = key_path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(file_error)?;
    file.write_all(pem.as_bytes()).map_err(file_error)?;
    file.sync_all().map_err(file_error)?;
    drop(file);
    std::fs::rename(&tmp, key_path).map_err(file_error)?;
    Ok(pem.to_string())
}
