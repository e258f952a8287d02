//! The rules for an account's credentials and settings, for every way one is made: `mailproof
//! accounts add` and the first account `mailproof serve` creates on an empty database.

/// Longest API key, in bytes: it travels in every request's Basic credentials.
pub const MAX_API_KEY_BYTES: usize = 128;
/// Shortest password an account may have.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// The key of the sandbox credentials (`sandbox:sandbox`), which no account may take.
pub const SANDBOX_KEY: &str = "sandbox";
/// Longest auto-inbox local part: RFC 5321's limit on a local part.
pub const MAX_AUTO_INBOX_CHARS: usize = 64;

/// A rule an account's credentials or settings broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountRuleError {
    #[error(
        "the API key must be 1-{MAX_API_KEY_BYTES} characters without ':' or control characters"
    )]
    KeyForm,
    #[error("the API key '{SANDBOX_KEY}' is reserved for the sandbox credentials")]
    KeyReserved,
    #[error("the password must have at least {MIN_PASSWORD_CHARS} characters")]
    PasswordTooShort,
    #[error("the auto-inbox local part must be 1-{MAX_AUTO_INBOX_CHARS} characters of letters, digits, '.', '_' and '-' (no '+', which starts a tag)")]
    AutoInbox,
    #[error("a monthly test limit or a rate limit must be at least 1")]
    Limit,
}

/// The rule for every API key an account is given. A ':' would end the key early in Basic
/// credentials.
pub fn check_api_key(key: &str) -> Result<(), AccountRuleError> {
    if key.is_empty()
        || key.len() > MAX_API_KEY_BYTES
        || key.contains(':')
        || key.chars().any(char::is_control)
    {
        return Err(AccountRuleError::KeyForm);
    }
    if key == SANDBOX_KEY {
        return Err(AccountRuleError::KeyReserved);
    }
    Ok(())
}

/// The rule for every password an account is given.
pub fn check_password(password: &str) -> Result<(), AccountRuleError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AccountRuleError::PasswordTooShort);
    }
    Ok(())
}

/// The local part of an account's auto-inbox address: no '+', which the inbox reads as the start
/// of a tag.
pub fn check_auto_inbox(local: &str) -> Result<(), AccountRuleError> {
    let ok = !local.is_empty()
        && local.len() <= MAX_AUTO_INBOX_CHARS
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(AccountRuleError::AutoInbox)
    }
}

/// An account's optional limits (tests per customer per month, requests per minute).
pub fn check_limit(limit: Option<i64>) -> Result<(), AccountRuleError> {
    match limit {
        Some(n) if n < 1 => Err(AccountRuleError::Limit),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_basic_credentials_cannot_carry_or_the_sandbox_owns_are_refused() {
        assert_eq!(check_api_key("team-a_01"), Ok(()));
        assert_eq!(check_api_key(""), Err(AccountRuleError::KeyForm));
        assert_eq!(check_api_key("a:b"), Err(AccountRuleError::KeyForm));
        assert_eq!(check_api_key("a\u{7}b"), Err(AccountRuleError::KeyForm));
        assert_eq!(check_api_key(&"k".repeat(128)), Ok(()));
        assert_eq!(
            check_api_key(&"k".repeat(129)),
            Err(AccountRuleError::KeyForm)
        );
        assert_eq!(check_api_key("sandbox"), Err(AccountRuleError::KeyReserved));
    }

    #[test]
    fn passwords_are_counted_in_characters_not_bytes() {
        assert_eq!(
            check_password("1234567"),
            Err(AccountRuleError::PasswordTooShort)
        );
        assert_eq!(check_password("12345678"), Ok(()));
        // Four two-byte characters are eight bytes but four characters.
        assert_eq!(
            check_password("éééé"),
            Err(AccountRuleError::PasswordTooShort)
        );
    }

    #[test]
    fn auto_inbox_local_parts_cannot_hold_a_tag() {
        assert_eq!(check_auto_inbox("qa.team_1-x"), Ok(()));
        assert_eq!(check_auto_inbox("qa+tag"), Err(AccountRuleError::AutoInbox));
        assert_eq!(check_auto_inbox(""), Err(AccountRuleError::AutoInbox));
        assert_eq!(
            check_auto_inbox(&"a".repeat(65)),
            Err(AccountRuleError::AutoInbox)
        );
    }

    #[test]
    fn limits_below_one_are_refused() {
        assert_eq!(check_limit(None), Ok(()));
        assert_eq!(check_limit(Some(1)), Ok(()));
        assert_eq!(check_limit(Some(0)), Err(AccountRuleError::Limit));
    }
}
