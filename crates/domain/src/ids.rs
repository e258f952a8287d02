//! Test identifiers: random, unguessable, URL-safe.

use std::fmt;

use rand::Rng;

/// A test's public identifier: 26 characters of lowercase Crockford base32 (128 random bits).
///
/// Ids are unguessable so that a leaked screenshot URL does not reveal its neighbours.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TestId(String);

const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

impl TestId {
    pub fn generate() -> TestId {
        let mut rng = rand::thread_rng();
        let id: String = (0..26)
            .map(|_| ALPHABET[rng.gen_range(0..32)] as char)
            .collect();
        TestId(id)
    }

    /// Accepts what [`TestId::generate`] produces; anything else cannot name a test.
    pub fn parse(s: &str) -> Option<TestId> {
        let ok = s.len() == 26 && s.bytes().all(|b| ALPHABET.contains(&b));
        ok.then(|| TestId(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_back_and_differ() {
        let a = TestId::generate();
        let b = TestId::generate();
        assert_ne!(a, b);
        assert_eq!(TestId::parse(a.as_str()), Some(a));
    }

    #[test]
    fn foreign_strings_are_not_ids() {
        assert_eq!(TestId::parse(""), None);
        assert_eq!(TestId::parse("../../etc/passwd"), None);
        assert_eq!(TestId::parse("ABCDEFGHJKMNPQRSTVWXYZ0123"), None);
    }
}
