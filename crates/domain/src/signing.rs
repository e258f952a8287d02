//! The one place that signs and compares secrets: HMAC-SHA256 in hex (presigned screenshot URLs,
//! CSRF tokens, sandbox sessions, webhook signatures) and a constant-time comparison (signatures,
//! password hashes, bearer tokens), and the public fingerprint of a shared key. Pure computation, so it lives with the vocabulary and every
//! crate that signs or checks uses it instead of writing its own.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Hex HMAC-SHA256 with `key` over the concatenation of `parts`; the parts are fed in order, so
/// callers add their own separators or domain labels (`b"web-csrf\0"`) to keep two uses of one key
/// from ever producing the same MAC.
pub fn hmac_sha256_hex(key: &[u8], parts: &[&[u8]]) -> String {
    // HMAC accepts keys of any length, so `new_from_slice` cannot fail; an empty string is a
    // signature no valid one equals, and `secret_eq` refuses empty expectations.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    for part in parts {
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `a` equals `b`, taking the same time whatever the first differing byte, so that a
/// guess cannot be refined by timing. Only a length difference returns early: lengths of
/// signatures and tokens are public.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Whether a submitted secret `given` matches the `expected` one, in constant time; an empty
/// expectation (a MAC that could not be computed, a token never issued) matches nothing.
pub fn secret_eq(expected: &str, given: &str) -> bool {
    !expected.is_empty() && constant_time_eq(expected.as_bytes(), given.as_bytes())
}

/// A random secret of `len` characters from an alphabet without look-alikes (no `I`, `l`, `O`,
/// `0`, `1`): about 5.8 bits each, for credentials a person may copy by hand.
pub fn random_secret(len: usize) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
        .collect()
}

/// A short public name for a secret key: the first 8 bytes of SHA-256 over
/// `mailproof <purpose> key`, a NUL and the key, in hex. Processes that must share a key publish
/// and compare this (in the shared database, which is seen more widely than the key file), never
/// the key.
pub fn key_fingerprint(purpose: &str, key: &[u8]) -> String {
    use sha2::Digest;
    let mut digest = Sha256::new();
    digest.update(format!("mailproof {purpose} key\0").as_bytes());
    digest.update(key);
    hex::encode(&digest.finalize()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_stay_the_ones_already_published() {
        // Computed independently (Python: sha256(b"mailproof url signing key\0" + b"k" * 32)
        // [:8].hex()): a different value would make every running service refuse its own key.
        assert_eq!(
            key_fingerprint("url signing", &[b'k'; 32]),
            "ed6d7a59f36f2a0b"
        );
        assert_ne!(
            key_fingerprint("url signing", &[b'k'; 32]),
            key_fingerprint("url signing", &[b'j'; 32])
        );
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2, split across parts to prove the parts are concatenated.
        assert_eq!(
            hmac_sha256_hex(b"Jefe", &[b"what do ya want ", b"for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn hmac_depends_on_key_and_every_part() {
        let base = hmac_sha256_hex(b"k", &[b"a", b"b"]);
        assert_ne!(base, hmac_sha256_hex(b"K", &[b"a", b"b"]));
        assert_ne!(base, hmac_sha256_hex(b"k", &[b"a", b"c"]));
        assert_eq!(base.len(), 64);
    }

    #[test]
    fn comparison_is_exact() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
        assert!(secret_eq("abc", "abc"));
        assert!(!secret_eq("abc", "abC"));
        assert!(!secret_eq("", ""), "an empty expectation matches nothing");
    }
}
