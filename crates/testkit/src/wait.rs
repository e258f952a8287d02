//! Waiting for background work a test started, without sleeping a guessed time.

use std::time::Duration;

/// Returns once `done()` is true, looking every 20 ms.
///
/// # Panics
/// After `within` without it, with `what` (what did not happen) as the message.
pub async fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} (waited {within:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
