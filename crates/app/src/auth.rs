//! Who is calling: checking an API key and password (the sandbox credentials, the
//! verified-credential cache, failed-login limits, argon2 through the bounded login guard), and
//! hashing passwords for new accounts.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use sha2::{Digest, Sha256};
use store::Account;

use crate::error::{Error, ErrorName, Result};
use crate::login::{Outcome, Verdict};
use crate::state::AppState;

/// Who is calling.
#[derive(Clone, Debug)]
pub enum Caller {
    Account(Account),
    /// `sandbox`/`sandbox`: requests are validated and answered, nothing is created (spec §5.3).
    Sandbox,
}

impl Caller {
    pub fn account(&self) -> Option<&Account> {
        match self {
            Caller::Account(a) => Some(a),
            Caller::Sandbox => None,
        }
    }
}

pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash password: {e}"))
}

/// Largest argon2 memory a stored hash may ask for (the default is 19 MiB); a larger cost in the
/// database is refused rather than allocated.
const MAX_HASH_MEMORY_BLOCKS: usize = 256 * 1024;

/// Checks `password` against a PHC string, with `memory` as argon2's working memory (grown to
/// what the hash's parameters need and kept by the caller for the next check).
fn verify_password(password: &str, phc: &str, memory: &mut Vec<Block>) -> Result<bool, String> {
    let hash = PasswordHash::new(phc).map_err(|e| format!("stored password hash: {e}"))?;
    let (Some(salt), Some(expected)) = (hash.salt, hash.hash) else {
        return Err("stored password hash has no salt or output".into());
    };
    let params = Params::try_from(&hash).map_err(|e| format!("stored hash parameters: {e}"))?;
    let algorithm =
        Algorithm::try_from(hash.algorithm).map_err(|e| format!("stored hash algorithm: {e}"))?;
    let version = match hash.version.map(Version::try_from).transpose() {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => return Err(format!("stored hash version: {e}")),
    };
    let blocks = params.block_count();
    if blocks > MAX_HASH_MEMORY_BLOCKS {
        return Err(format!("stored hash asks for {blocks} KiB of memory"));
    }
    if memory.len() < blocks {
        memory.resize(blocks, Block::default());
    }
    let mut salt_buf = [0u8; 64];
    let salt = salt
        .decode_b64(&mut salt_buf)
        .map_err(|e| format!("stored hash salt: {e}"))?;
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut out, &mut memory[..blocks])
        .map_err(|e| format!("argon2: {e}"))?;
    // Constant time, as password_hash's own comparison.
    Ok(domain::signing::constant_time_eq(&out, expected.as_bytes()))
}

/// Checks an API key and password however they arrived (a Basic header, the web sign-in form):
/// the sandbox credentials, the verified-credential cache, failed-login limits for `address`, then
/// argon2 through the bounded login guard.
pub async fn check_credentials(
    state: &AppState,
    user: String,
    pass: String,
    address: Option<std::net::IpAddr>,
) -> Result<Caller> {
    if user == "sandbox" && pass == "sandbox" {
        // Public credentials: each address has a budget of its own, apart from every account's.
        let limit = state.settings.sandbox_requests_per_minute;
        let from = address.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        if let Err(wait) = state.sandbox_rate.check(from, limit) {
            return Err(Error::rate_limited(
                format!("the sandbox credentials allow {limit} requests a minute from one address; retry in {wait} s"),
                wait,
            ));
        }
        return Ok(Caller::Sandbox);
    }
    let cache_key: [u8; 32] = Sha256::digest(format!("{user}\0{pass}").as_bytes()).into();
    if let Some((id, digest)) = state.credentials.get(&cache_key) {
        if let Some(account) = state.store.account_by_id(id).await? {
            if account.api_key == user && hash_digest(&account) == digest {
                return Ok(Caller::Account(account));
            }
        }
    }
    // Only credentials that need argon2 are limited: a client whose login is cached keeps working
    // while others storm its key or its address. The attempt is charged as a failure now, before
    // the check, and given back if the password is right.
    let (per_address, per_key) = (
        state.settings.failed_logins_per_address,
        state.settings.failed_logins_per_key,
    );
    let attempt = match state.logins.admit(address, &user, per_address, per_key) {
        Ok(a) => a,
        Err(wait) => {
            return Err(Error::rate_limited(
                format!(
                "too many failed logins from this address or for this API key; retry in {wait} s"
            ),
                wait,
            ))
        }
    };
    let verdict = state
        .logins
        .verify(
            cache_key,
            || async { state.store.account_by_key(&user).await.map_err(Error::from) },
            move |phc, memory| verify_password(&pass, phc, memory),
        )
        .await;
    let outcome = match &verdict {
        Verdict::Valid(_) => Outcome::Valid,
        Verdict::WrongPassword => Outcome::WrongPassword,
        Verdict::UnknownKey => Outcome::UnknownKey,
        Verdict::Busy | Verdict::Failed(_) => Outcome::NotChecked,
    };
    state.logins.settle(attempt, outcome, per_address, per_key);
    match verdict {
        Verdict::Valid(account) => {
            state
                .credentials
                .put(cache_key, account.id, hash_digest(&account));
            Ok(Caller::Account(account))
        }
        Verdict::WrongPassword | Verdict::UnknownKey => Err(Error::new(
            ErrorName::AccessDenied,
            "unknown API key or wrong password",
        )),
        Verdict::Busy => Err(Error::rate_limited(
            "too many logins are being checked at once; retry in 1 s".into(),
            1,
        )),
        Verdict::Failed(e) => Err(e),
    }
}

/// A hash of a random password with the default cost, checked in place of an unknown key's.
pub(crate) fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| {
        let mut secret = [0u8; 16];
        argon2::password_hash::rand_core::RngCore::fill_bytes(&mut OsRng, &mut secret);
        hash_password(&hex::encode(secret)).unwrap_or_default()
    })
}

/// Identifies the stored password hash a cached credential was checked against.
fn hash_digest(account: &Account) -> [u8; 32] {
    Sha256::digest(account.password_hash.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::{hash_password, verify_password};

    /// The memory-reusing check agrees with the hasher, across checks sharing one buffer.
    #[test]
    fn passwords_verify_against_their_hash_with_reused_memory() {
        let phc = hash_password("s3cret").unwrap_or_default();
        let mut memory = Vec::new();
        assert_eq!(verify_password("s3cret", &phc, &mut memory), Ok(true));
        assert_eq!(verify_password("s3cre", &phc, &mut memory), Ok(false));
        assert_eq!(verify_password("s3cret", &phc, &mut memory), Ok(true));
        assert!(verify_password("s3cret", "not a hash", &mut memory).is_err());
    }
}
