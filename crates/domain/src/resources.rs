//! What a screenshot's page asked for and did not get: an image or stylesheet that could not be
//! fetched (a mailproof addition to a client's result, `failed_resources`). A broken email (a
//! wrong address) and an unreachable host (refused, down, slow) look the same in a picture; this
//! says which.

use serde::{Deserialize, Serialize};

use crate::spelling::{vocabulary, Spelled};

/// The most failures kept per screenshot; an email with more says so by having this many.
pub const MAX_FAILED_PER_SHOT: usize = 100;

/// The longest address kept; a longer one is cut (and says so with `…`).
pub const MAX_URL_CHARS: usize = 2048;

vocabulary! {
    /// What the page wanted the resource for.
    #[derive(Serialize, Deserialize, strum::EnumString)]
    #[serde(rename_all = "snake_case")]
    #[strum(serialize_all = "snake_case")]
    pub enum ResourceKind {
        /// An `<img>` (or `<input type=image>`).
        Image,
        /// A CSS `background-image` (or the `background` attribute).
        BackgroundImage,
        /// A `<link rel=stylesheet>`.
        Stylesheet,
    }
}

impl Spelled for ResourceKind {
    const WHAT: &'static str = "resource kind";
}

impl ResourceKind {
    /// For people: "image", "background image", "stylesheet".
    pub fn label(self) -> &'static str {
        match self {
            ResourceKind::Image => "image",
            ResourceKind::BackgroundImage => "background image",
            ResourceKind::Stylesheet => "stylesheet",
        }
    }
}

vocabulary! {
    /// Why it was not fetched.
    #[derive(Serialize, Deserialize, strum::EnumString)]
    #[serde(rename_all = "snake_case")]
    #[strum(serialize_all = "snake_case")]
    pub enum FetchFailure {
        /// The network policy does not let the service fetch from that address (a private,
        /// loopback or otherwise internal one, unless the operator allow-listed it).
        RefusedByPolicy,
        /// The host name does not resolve.
        Dns,
        /// The host refused or dropped the connection.
        Connect,
        /// Still loading when the picture was taken, or the host took longer than the service
        /// waits.
        Timeout,
        /// The host answered with an HTTP error status (`status`).
        HttpStatus,
        /// The engine got no usable resource and no finer reason is known (over https the
        /// service sees no status; or the answer was not an image or stylesheet).
        NotLoaded,
    }
}

impl Spelled for FetchFailure {
    const WHAT: &'static str = "fetch failure";
}

/// One resource a screenshot's page could not load.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedResource {
    pub url: String,
    pub kind: ResourceKind,
    pub reason: FetchFailure,
    /// The HTTP status, for [`FetchFailure::HttpStatus`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl FailedResource {
    /// `url` cut to [`MAX_URL_CHARS`].
    pub fn new(url: &str, kind: ResourceKind, reason: FetchFailure, status: Option<u16>) -> Self {
        let url = match url.char_indices().nth(MAX_URL_CHARS) {
            Some((end, _)) => format!("{}…", &url[..end]),
            None => url.to_string(),
        };
        FailedResource {
            url,
            kind,
            reason,
            status: status.filter(|_| reason == FetchFailure::HttpStatus),
        }
    }

    /// The reason in a person's words, saying what to do where there is something to do.
    pub fn explain(&self) -> String {
        match self.reason {
            FetchFailure::RefusedByPolicy => {
                "refused: the address is private or internal, which the service does not fetch \
                 from; use a public address"
                    .into()
            }
            FetchFailure::Dns => "the host name does not resolve: check the address".into(),
            FetchFailure::Connect => "the host refused the connection or closed it".into(),
            FetchFailure::Timeout => "too slow: still loading when the picture was taken".into(),
            FetchFailure::HttpStatus => match self.status {
                Some(404) => "HTTP 404: no file at this address".into(),
                Some(code) => format!("the host answered HTTP {code}"),
                None => "the host answered with an error".into(),
            },
            FetchFailure::NotLoaded => "did not load (no usable answer came back)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_back_as_written_and_say_what_happened() {
        let failed = vec![
            FailedResource::new(
                "http://x.test/a.png",
                ResourceKind::Image,
                FetchFailure::HttpStatus,
                Some(404),
            ),
            FailedResource::new(
                "http://10.0.0.1/b.css",
                ResourceKind::Stylesheet,
                FetchFailure::RefusedByPolicy,
                Some(403),
            ),
        ];
        let text = serde_json::to_string(&failed).expect("json");
        let back: Vec<FailedResource> = serde_json::from_str(&text).expect("readable");
        assert_eq!(back, failed);
        assert!(
            text.contains(r#""reason":"http_status","status":404"#),
            "{text}"
        );
        // A status only travels with an HTTP status failure.
        assert_eq!(failed[1].status, None);
        assert_eq!(failed[0].explain(), "HTTP 404: no file at this address");
        assert!(failed[1].explain().contains("private or internal"));
    }

    #[test]
    fn long_addresses_are_cut_with_a_mark() {
        let url = format!("http://x.test/{}", "a".repeat(5000));
        let f = FailedResource::new(&url, ResourceKind::Image, FetchFailure::Dns, None);
        assert_eq!(f.url.chars().count(), MAX_URL_CHARS + 1);
        assert!(f.url.ends_with('…'));
    }
}
