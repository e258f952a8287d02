//! Benchmark: starts spamd and rspamd, then prints warm scans/second for every filter profile.
//!
//! Usage: `spam-bench [--iterations N] [--profiles data/spam-filters.toml] [--no-dns]`
//! (`--no-dns` measures the built-in analyzer without SPF/DKIM/DMARC lookups).

use std::path::PathBuf;
use std::time::Instant;

use spam::{DaemonConfig, DnsMode, Envelope, FilterDaemons, FilterProfiles, SpamFilters};

const SPAM: &str =
    "From: \"Deals\" <deals@cheap-meds-4u.example>\r\nTo: undisclosed-recipients:;\r\n\
Subject: CHEAP VIAGRA - 100% GUARANTEED!!!\r\nMIME-Version: 1.0\r\nContent-Type: text/html\r\n\r\n\
<p>Online pharmacy, no prescription. Make money fast, act now!</p>\
<a href=\"http://198.51.100.77/buy\">CLICK HERE</a>\r\n";

const HAM: &str = "Date: Sun, 22 Nov 2026 10:00:00 +0000\r\nMessage-ID: <n1@mail.example.com>\r\n\
From: Club <news@example.com>\r\nTo: jane@example.org\r\nSubject: November notes\r\n\
List-Unsubscribe: <https://example.com/u>\r\nMIME-Version: 1.0\r\n\
Content-Type: text/plain; charset=utf-8\r\n\r\nHello Jane, the meeting is on Thursday.\r\n";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut iterations: usize = 100;
    let mut profiles_path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/spam-filters.toml"
    ));
    let mut dns = DnsMode::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--iterations" => iterations = args.next().ok_or("--iterations needs N")?.parse()?,
            "--profiles" => profiles_path = args.next().ok_or("--profiles needs a path")?.into(),
            "--no-dns" => dns = DnsMode::Disabled,
            other => return Err(format!("unknown argument {other}; see the file header").into()),
        }
    }
    let profiles = FilterProfiles::load(&profiles_path)?;
    let work = std::env::temp_dir().join(format!("spam-bench-{}", std::process::id()));
    let started = Instant::now();
    let daemons = FilterDaemons::start(DaemonConfig::new(&work)).await?;
    println!("daemons ready in {:.2} s", started.elapsed().as_secs_f64());
    let filters = SpamFilters::with_dns(profiles.clone(), &daemons.addresses(), dns);
    let env = Envelope {
        client_ip: "198.51.100.77".parse()?,
        helo: "PC-4711".into(),
        hostname: "unknown".into(),
        mail_from: "deals@cheap-meds-4u.example".into(),
        rcpt_to: vec!["jane@example.org".into()],
    };

    println!(
        "{:<58} {:>6} {:>9} {:>10}  verdict spam/ham",
        "filter", "scans", "scans/s", "ms/scan"
    );
    for profile in profiles.all() {
        // Warm-up: first scans load rules and fill caches.
        for message in [SPAM, HAM] {
            filters
                .scan_one(&profile.client, message.as_bytes(), &env)
                .await?;
        }
        let start = Instant::now();
        for i in 0..iterations {
            let message = if i % 2 == 0 { SPAM } else { HAM };
            filters
                .scan_one(&profile.client, message.as_bytes(), &env)
                .await?;
        }
        let secs = start.elapsed().as_secs_f64();
        let spam = filters
            .scan_one(&profile.client, SPAM.as_bytes(), &env)
            .await?;
        let ham = filters
            .scan_one(&profile.client, HAM.as_bytes(), &env)
            .await?;
        println!(
            "{:<58} {:>6} {:>9.1} {:>10.2}  {:>2} ({:.1}) / {:>2} ({:.1})",
            profile.client,
            iterations,
            iterations as f64 / secs,
            secs * 1000.0 / iterations as f64,
            spam.spam.wire(),
            spam.score,
            ham.spam.wire(),
            ham.score
        );
    }
    let start = Instant::now();
    for _ in 0..iterations {
        for (client, result) in filters.scan_all(SPAM.as_bytes(), &env).await {
            result.map_err(|e| format!("{client}: {e}"))?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "scan_all (every engine once, concurrently): {:.1} messages/s, {:.2} ms each",
        iterations as f64 / secs,
        secs * 1000.0 / iterations as f64
    );
    daemons.shutdown().await;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
