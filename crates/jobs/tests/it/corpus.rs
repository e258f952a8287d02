//! The corpus suite on a sample, through the real engines: real emails (one with Outlook's
//! conditional comments and settings block, one with web fonts and images, one grown past Gmail's
//! clipping size) in a profile of each engine and of the clients whose behaviours they exercise,
//! every invariant of `jobs::corpus` holding. `corpus-report` runs the same checks over whole
//! corpora (BENCHMARKS.md).

use std::collections::BTreeSet;
use std::time::Duration;

use jobs::corpus::{self, Email, Invariant};
use render::{RenderConfig, Renderer};

use crate::{repo, Fixture};

/// The profiles: the Word engine, Gmail's app (zoom-out, clipping, alt text) and webmail, iOS
/// Mail in WebKit, Thunderbird in Gecko, Yahoo's webmail (class prefix).
const CLIENTS: [&str; 6] = [
    "outlook2016_win",
    "gmail_android",
    "gmail_chrome_web",
    "iphone15_ios",
    "thunderbird_win",
    "yahoo_chrome_web",
];

fn shared(name: &str) -> Email {
    let path = repo().join("../shared/corpus").join(name);
    let html = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the shared corpus sits beside the checkout)",
            path.display()
        )
    });
    Email {
        name: name.into(),
        html,
    }
}

/// `email` past Gmail's clipping size, by rows added to its first table: the cut falls mid-table,
/// where a cut string once put the clip line above the email.
fn grown(email: Email) -> Email {
    let at = email.html.find("</table>").expect("the email has a table");
    let rows: String = (0..4000)
        .map(|i| format!("<tr><td>Line item {i}</td></tr>"))
        .collect();
    Email {
        name: format!("{} grown", email.name),
        html: format!("{}{rows}{}", &email.html[..at], &email.html[at..]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_emails_are_drawn_whole_as_each_client_shows_them_in_every_engine() {
    let f = Fixture::new(store::Backend::Sqlite).await;
    let work = tempfile::tempdir().expect("a work directory");
    let mut cfg = RenderConfig::new(work.path().join("render"));
    cfg.slots_per_engine = 1;
    cfg.resource_wait = Duration::from_secs(1);
    let renderer = Renderer::start(cfg).await.unwrap_or_else(|e| {
        panic!("the engines did not start ({e}); scripts/setup.sh installs them")
    });
    let emails = [
        shared("mailgun--action.html"),
        shared("sendwithus--oxygen-welcome.html"),
        grown(shared("cerberus--responsive.html")),
    ];
    assert!(emails[2].html.len() > emulate::transform::CLIP_BYTES);
    let mut outcomes = Vec::new();
    for email in &emails {
        for id in CLIENTS {
            let client = f.catalog.get(id).expect("in the catalog");
            outcomes.extend(corpus::check(&renderer, &f.rules, client, email).await);
        }
    }
    renderer.shutdown().await;
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            let why = o.failure.as_ref()?;
            Some(format!(
                "{} on {} [{}]: {why}",
                o.email,
                o.client,
                o.invariant.name()
            ))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every invariant was checked, the clip line on both Gmail profiles of the grown email.
    let checked: BTreeSet<Invariant> = outcomes.iter().map(|o| o.invariant).collect();
    assert_eq!(checked, Invariant::ALL.into_iter().collect());
    let clip_checks = outcomes
        .iter()
        .filter(|o| o.invariant == Invariant::ClipLineLast)
        .count();
    assert_eq!(clip_checks, 2, "gmail_android and gmail_chrome_web");
}
