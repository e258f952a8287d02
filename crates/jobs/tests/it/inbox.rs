//! Inbox rows through the real engines: each family's calibration holds (its measurement's text is
//! cut where the measurement says), every field stays in its width and lines, and emails with a
//! proper preheader, none, a too-short one, hidden padding and emoji in the subject give the rows
//! and the warnings a sender needs; corpus emails give rows that start their preview.

use std::time::Duration;

use content::inbox::{self, InboxReport, InboxRows};
use domain::Catalog;
use jobs::inbox_rows::{draw_rows, RowsInput};
use render::{RenderConfig, Renderer};

use crate::repo;

fn rows_file() -> InboxRows {
    let text = std::fs::read_to_string(repo().join("data").join(inbox::INBOX_ROWS_FILE))
        .expect("data/inbox-rows.toml");
    InboxRows::parse(&text).expect("data/inbox-rows.toml is valid")
}

fn catalog() -> Catalog {
    let text = std::fs::read_to_string(repo().join("data/clients.toml")).expect("catalog");
    Catalog::parse(&text).expect("catalog parses")
}

async fn engines() -> Renderer {
    let work = tempfile::tempdir().expect("work dir").keep();
    let mut cfg = RenderConfig::new(work.join("render"));
    cfg.slots_per_engine = 1;
    cfg.resource_wait = Duration::from_secs(1);
    Renderer::start(cfg).await.unwrap_or_else(|e| {
        panic!("the engines did not start ({e}); scripts/setup.sh installs them")
    })
}

/// Every catalog profile: one row per family, light and dark where the family has both.
fn all_clients(catalog: &Catalog) -> Vec<String> {
    catalog.clients().iter().map(|c| c.id.clone()).collect()
}

async fn rows_of(
    renderer: &Renderer,
    html: &str,
    subject: &str,
    clients: &[String],
) -> (InboxReport, Vec<jobs::inbox_rows::RowPicture>) {
    let input = RowsInput {
        subject,
        from: Some("\"Northbound Outfitters\" <orders@northbound.example>"),
        clients,
    };
    match draw_rows(
        renderer,
        &rows_file(),
        &catalog(),
        &input,
        inbox::preview(html),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => panic!("rows not drawn: {e}"),
    }
}

/// Writes `pictures` to `MAILPROOF_SHOTS_DIR`, when set, to be looked at.
fn keep(pictures: &[jobs::inbox_rows::RowPicture], label: &str) {
    let Some(dir) = std::env::var_os("MAILPROOF_SHOTS_DIR") else {
        return;
    };
    for p in pictures {
        let path =
            std::path::Path::new(&dir).join(format!("inbox-{label}-{}-{:?}.png", p.row, p.scheme));
        std::fs::write(&path, &p.png).expect("write a picture");
    }
}

/// Each field within its width and lines, as measured in the engine.
fn within_bounds(report: &InboxReport) -> Vec<String> {
    let mut bad = Vec::new();
    for r in &report.rows {
        for (name, f) in [
            ("sender", &r.sender),
            ("subject", &r.subject),
            ("preview", &r.preview),
        ] {
            if f.used_width > f.width + 0.5 || f.used_lines > f.lines {
                bad.push(format!(
                    "{} {name}: {:.1} px of {:.1}, {} lines of {}",
                    r.id, f.used_width, f.width, f.used_lines, f.lines
                ));
            }
        }
    }
    bad
}

fn hidden(text: &str) -> String {
    format!("<div style=\"display:none;max-height:0;overflow:hidden\">{text}</div>")
}

const BODY: &str = "<table><tr><td><a href=\"https://example.com/view\">View in browser</a></td></tr>\
    <tr><td><h1>Your order is on its way</h1><p>Thanks for shopping with Northbound. Your parcel left \
    our warehouse this morning.</p></td></tr></table>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbox_rows_are_cut_where_each_client_family_cuts_them() {
    let renderer = engines().await;
    let file = rows_file();
    let catalog = catalog();
    let clients = all_clients(&catalog);

    // Calibration: the measurement's text is cut after its measured count (within 10 %), in
    // the subject and, where measured, the preview.
    let mut off = Vec::new();
    let mut report_lines = Vec::new();
    for profile in file.rows.iter() {
        let Some(cal) = &profile.calibration else {
            continue;
        };
        let html = format!("<body>{}<p>x</p></body>", hidden(&cal.sample));
        let (report, _) = rows_of(&renderer, &html, &cal.sample, &profile.clients).await;
        let row = &report.rows[0];
        let subject = inbox::readable(&row.subject.drawn).chars().count() as f64;
        let want = f64::from(cal.subject_chars);
        report_lines.push(format!("{}: subject {subject} of {want}", profile.id));
        if (subject - want).abs() > want * 0.1 {
            off.push(format!(
                "{}: subject cut after {subject} characters, measured {want}",
                profile.id
            ));
        }
        if let Some(p) = cal.preview_chars {
            let shown = inbox::readable(&row.preview.drawn).chars().count() as f64;
            report_lines.push(format!("{}: preview {shown} of {p}", profile.id));
            if (shown - f64::from(p)).abs() > f64::from(p) * 0.1 {
                off.push(format!(
                    "{}: preview cut after {shown} characters, measured {p}",
                    profile.id
                ));
            }
        }
        off.extend(within_bounds(&report));
    }
    println!("{}", report_lines.join("\n"));
    assert!(off.is_empty(), "{}", off.join("\n"));

    // A proper preheader: every row starts its preview with it, no warning about it.
    let proper = "Order NB-10428 confirmed: shipping to San Francisco, arriving on Tuesday the 18th of March between 9 and 5";
    let (report, pictures) = rows_of(
        &renderer,
        &format!("<body>{}{BODY}</body>", hidden(proper)),
        "Your order has shipped",
        &clients,
    )
    .await;
    assert_eq!(report.rows.len(), file.rows.len(), "one row per family");
    assert!(
        within_bounds(&report).is_empty(),
        "{:?}",
        within_bounds(&report)
    );
    for r in &report.rows {
        let shown = inbox::readable(&r.preview.drawn);
        assert!(
            proper.starts_with(shown.trim_end_matches('…')) || shown.starts_with(proper),
            "{}: {shown:?}",
            r.id
        );
        assert_eq!(r.subject.text, "Your order has shipped", "{}", r.id);
        assert_eq!(r.sender.text, "Northbound Outfitters", "{}", r.id);
    }
    assert!(
        !report.warnings.iter().any(|w| w.id.ends_with("preheader")),
        "{:?}",
        report.warnings
    );
    keep(&pictures, "proper");
    // One picture per family and scheme, as wide as the row at its scale.
    let schemes: usize = report.rows.iter().map(|r| r.schemes.len()).sum();
    assert_eq!(pictures.len(), schemes);
    for p in &pictures {
        let profile = file.rows.iter().find(|r| r.id == p.row).expect("row");
        let img = image::load_from_memory(&p.png).expect("a PNG");
        let want =
            ((profile.width + profile.sender_width + 32) as f32 * profile.scale).round() as u32;
        assert!(
            img.width().abs_diff(want) <= 2,
            "{} {:?}: {} px, want {want}",
            p.row,
            p.scheme,
            img.width()
        );
    }

    // No preheader: the warning quotes the first text the rows show.
    let (report, _) = rows_of(
        &renderer,
        &format!("<body>{BODY}</body>"),
        "Shipped",
        &clients,
    )
    .await;
    let w = report
        .warnings
        .iter()
        .find(|w| w.id == "no-preheader")
        .expect("no-preheader");
    assert!(
        w.message
            .contains("“View in browser Your order is on its way"),
        "{}",
        w.message
    );
    for r in &report.rows {
        assert!(
            inbox::readable(&r.preview.drawn).starts_with("View in"),
            "{}: {:?}",
            r.id,
            r.preview
        );
    }

    // Too short: every family whose row has room names the body text that fills it.
    let (report, _) = rows_of(
        &renderer,
        &format!("<body>{}{BODY}</body>", hidden("Big news!!!!")),
        "Shipped",
        &clients,
    )
    .await;
    let short: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.id == "short-preheader")
        .collect();
    assert_eq!(short.len(), report.rows.len(), "{:?}", report.warnings);
    let gmail = short
        .iter()
        .find(|w| w.row.as_deref() == Some("gmail_iphone"))
        .expect("Gmail (iPhone)");
    assert!(
        gmail.message.starts_with(
            "the preheader is 12 characters: Gmail (iPhone) fills the row with “View in"
        ),
        "{}",
        gmail.message
    );

    // Hidden padding after the same short preheader keeps body text out of every row.
    let padded = format!("Big news!!!!{}", "&zwnj;&nbsp;".repeat(120));
    let (report, _) = rows_of(
        &renderer,
        &format!("<body>{}{BODY}</body>", hidden(&padded)),
        "Shipped",
        &clients,
    )
    .await;
    assert!(report.preview.padded);
    for r in &report.rows {
        assert_eq!(r.body_text, None, "{}: {:?}", r.id, r.preview);
        assert_eq!(
            r.preview.text.trim_end_matches('…').trim(),
            "Big news!!!!",
            "{}",
            r.id
        );
    }
    assert!(!report.warnings.iter().any(|w| w.id == "short-preheader"));

    // Emoji in the subject: cut between whole characters, never inside one.
    let subject =
        "🎉🎁 Our biggest sale of the year starts now 🛍️ — up to 70% off everything in store 🎉";
    let (report, pictures) = rows_of(
        &renderer,
        &format!("<body>{}{BODY}</body>", hidden(proper)),
        subject,
        &clients,
    )
    .await;
    for r in &report.rows {
        let drawn = &r.subject.drawn;
        assert!(subject.starts_with(drawn.as_str()), "{}: {drawn:?}", r.id);
        assert!(!drawn.contains('\u{fffd}'), "{}", r.id);
        assert!(drawn.starts_with("🎉🎁"), "{}", r.id);
    }
    assert!(report.warnings.iter().any(|w| w.id == "subject-cut"));
    keep(&pictures, "emoji");
    // The emoji are drawn in colour (Noto Color Emoji), not as empty boxes.
    let apple = pictures
        .iter()
        .find(|p| p.row == "apple_mail_iphone")
        .expect("apple picture");
    let img = image::load_from_memory(&apple.png).expect("png").to_rgb8();
    let coloured = img
        .pixels()
        .filter(|p| {
            let [r, g, b] = p.0;
            r.max(g).max(b) - r.min(g).min(b) > 80
        })
        .count();
    assert!(
        coloured > 100,
        "only {coloured} coloured pixels in the Apple row"
    );

    // Corpus emails: every row's preview is the start of the email's preview, within bounds.
    for name in [
        "cerberus--responsive.html",
        "postmark--welcome-basic-full.html",
        "mailgun--action.html",
        "leemunroe--email.html",
        "colorlib--22-order-receipt.html",
    ] {
        let html = std::fs::read_to_string(repo().join("../shared/corpus").join(name))
            .unwrap_or_else(|e| panic!("{name}: {e} (the shared corpus sits beside the checkout)"));
        let (report, pictures) = rows_of(&renderer, &html, name, &clients).await;
        assert!(
            within_bounds(&report).is_empty(),
            "{name}: {:?}",
            within_bounds(&report)
        );
        assert!(!pictures.is_empty());
        keep(&pictures, name.trim_end_matches(".html"));
        for r in &report.rows {
            assert!(
                report.preview.text.starts_with(r.preview.drawn.as_str()),
                "{name} {}: {:?} does not start {:?}",
                r.id,
                r.preview.drawn,
                report.preview.text
            );
        }
        println!(
            "{name}: preheader {:?}, padded {}, warnings {:?}",
            report.preview.preheader,
            report.preview.padded,
            report
                .warnings
                .iter()
                .map(|w| &w.message)
                .collect::<Vec<_>>()
        );
    }
    renderer.shutdown().await;
}
