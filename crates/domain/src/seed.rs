//! Seed addresses (spec §1 `seed` method): one address per spam filter profile, unique to a test's
//! key, so that a message arriving at it names both the test and the filter that must scan it.

use rand::Rng;

const KEY_ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// Length of the keys [`generate_key`] makes.
pub const KEY_LEN: usize = 16;

/// RFC 5321 allows 64 octets before the `@`; senders refuse longer addresses.
pub const MAX_LOCAL_PART: usize = 64;

/// A fresh seed-list key: 16 characters of lowercase base32 (80 random bits).
pub fn generate_key() -> String {
    let mut rng = rand::thread_rng();
    (0..KEY_LEN)
        .map(|_| KEY_ALPHABET[rng.gen_range(0..32)] as char)
        .collect()
}

/// Keys are what [`generate_key`] makes, or what a caller chose: 4-64 of a-z, 0-9, `-` and `_`.
pub fn is_valid_key(key: &str) -> bool {
    (4..=64).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The filter profile's name reduced to an address-safe slug: `SpamAssassin (b2b)` -> `spamassassin-b2b`.
pub fn profile_slug(profile: &str) -> String {
    let mut slug = String::new();
    for ch in profile.chars() {
        if ch.is_ascii_alphanumeric() {
            slug.push(ch.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_string()
}

/// Octets before the `@` of a generated key's seed address for `profile`: must not exceed
/// [`MAX_LOCAL_PART`], or mail cannot be sent to it.
pub fn generated_local_part_len(profile: &str) -> usize {
    KEY_LEN + 1 + profile_slug(profile).len()
}

/// `<key>.<profile slug>@<domain>`.
pub fn seed_address(key: &str, profile: &str, domain: &str) -> String {
    format!("{key}.{}@{domain}", profile_slug(profile))
}

/// Splits a seed address's local part into `(key, profile slug)`.
pub fn parse_seed_local_part(local: &str) -> Option<(&str, &str)> {
    let (key, slug) = local.split_once('.')?;
    (is_valid_key(key) && !slug.is_empty()).then_some((key, slug))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_addresses_round_trip() {
        let key = generate_key();
        assert!(is_valid_key(&key));
        let addr = seed_address(&key, "SpamAssassin (corporate gateway)", "seeds.localhost");
        let local = addr.split('@').next().unwrap_or_default();
        assert_eq!(
            parse_seed_local_part(local),
            Some((key.as_str(), "spamassassin-corporate-gateway"))
        );
    }
}
