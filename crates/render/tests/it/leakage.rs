//! A picture is of the document asked for and of no other: two accounts take turns on every
//! profile of the catalog (its engine, viewport, scale and orientation), with heavy documents
//! that hold their load open and viewport changes between requests — the recipe that once
//! showed one account's email in another's WebKit screenshot — and every picture must show its
//! own account's colour and none of the other's.

use std::sync::Arc;

use domain::catalog::Viewport;
use domain::{Catalog, ColorScheme, Engine};
use render::{RenderRequest, Rendered, Renderer};

use crate::support::{config, run, start, Behaviour, ImageServer, ENGINES};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Account {
    A,
    B,
}

impl Account {
    fn colour(self) -> [u8; 3] {
        match self {
            Account::A => [0xd0, 0x10, 0x60],
            Account::B => [0x10, 0x90, 0x30],
        }
    }

    fn other(self) -> Account {
        match self {
            Account::A => Account::B,
            Account::B => Account::A,
        }
    }

    fn css(self) -> String {
        let [r, g, b] = self.colour();
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

/// An ordinary email of `account`: its colour over the whole page, and its name.
fn email(account: Account) -> String {
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="margin:0;background:{c}"><p style="margin:0;padding:24px;color:#ffffff;font:20px Arial">Account {account:?}</p></body></html>"#,
        c = account.css()
    )
}

/// A heavy email of `account`: a long table to lay out again at every viewport change,
/// animations, and an image whose server never answers, so the load never finishes by itself and
/// the engine shoots it when its resource wait runs out. The image stands clear of the corner
/// the check reads: an image cut off under load is drawn broken, with Chromium's grey frame.
fn heavy_email(account: Account, hanging_image: &str) -> String {
    let rows: String = (0..60)
        .map(|i| {
            format!(
                "<tr><td style=\"padding:4px;border:1px solid #fff\">row {i}</td>\
                 <td class=\"spin\" style=\"padding:4px\">{i}</td></tr>"
            )
        })
        .collect();
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><style>
@keyframes spin {{ from {{ transform: rotate(0deg); }} to {{ transform: rotate(360deg); }} }}
.spin {{ animation: spin 0.2s linear infinite; }}
</style></head>
<body style="margin:0;background:{c};color:#ffffff;font:14px Arial">
<div style="padding:24px"><img src="{hanging_image}" width="300" height="100" alt=""></div>
<table style="width:100%;background:{c}">{rows}</table></body></html>"#,
        c = account.css()
    )
}

/// Every profile of the catalog as the engine sees it, portrait, and landscape where the client
/// has a landscape variant.
fn profiles() -> Vec<(String, Engine, Viewport, f32, bool)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/clients.toml");
    let text = std::fs::read_to_string(path).expect("the client catalog is readable");
    let catalog = Catalog::parse(&text).expect("the client catalog parses");
    let mut all = Vec::new();
    for client in catalog.clients() {
        all.push((
            client.id.clone(),
            client.engine,
            client.viewport,
            client.scale,
            client.mobile,
        ));
        if client.rotate {
            let turned = Viewport {
                width: client.viewport.height,
                height: client.viewport.width,
            };
            all.push((
                format!("{} (landscape)", client.id),
                client.engine,
                turned,
                client.scale,
                client.mobile,
            ));
        }
    }
    all
}

fn request(
    html: String,
    engine: Engine,
    viewport: Viewport,
    scale: f32,
    mobile: bool,
) -> RenderRequest {
    RenderRequest {
        html,
        engine,
        viewport,
        scale,
        mobile,
        color_scheme: ColorScheme::Light,
        block_images: false,
    }
}

fn near(p: &[u8], colour: [u8; 3]) -> bool {
    p.iter()
        .zip(colour)
        .all(|(&a, b)| (i16::from(a) - i16::from(b)).abs() <= 6)
}

/// What is wrong with `shot` as a picture of `account`'s email, if anything: its top-left corner
/// must be the account's colour, and no pixel may be the other account's.
fn foreign(shot: &Rendered, account: Account) -> Option<String> {
    let image = image::load_from_memory(&shot.png)
        .expect("a screenshot is a PNG")
        .to_rgba8();
    let corner = image.get_pixel(2, 2).0;
    if !near(&corner[..3], account.colour()) {
        return Some(format!(
            "its corner is {corner:?}, not {:?}",
            account.colour()
        ));
    }
    let other = account.other().colour();
    let seen = image.pixels().filter(|p| near(&p.0[..3], other)).count();
    (seen > 0).then(|| format!("{seen} pixels of account {:?}'s colour", account.other()))
}

/// One engine's turn: for each of its profiles, a heavy email of one account, then ordinary
/// emails of both accounts, each at a viewport other than the request before it.
async fn take_turns(
    renderer: Arc<Renderer>,
    engine: Engine,
    hanging_image: String,
) -> (usize, Vec<String>) {
    let mine: Vec<_> = profiles()
        .into_iter()
        .filter(|(_, e, ..)| *e == engine)
        .collect();
    let mut shots = 0;
    let mut wrong = Vec::new();
    for (i, (id, _, viewport, scale, mobile)) in mine.iter().enumerate() {
        let heavy_account = if i % 2 == 0 { Account::A } else { Account::B };
        // The next request comes at another viewport, as a client's landscape variant or the
        // next profile does.
        let (_, _, next_viewport, next_scale, next_mobile) = &mine[(i + 1) % mine.len()];
        let steps = [
            (
                heavy_email(heavy_account, &hanging_image),
                heavy_account,
                *viewport,
                *scale,
                *mobile,
            ),
            (
                email(heavy_account.other()),
                heavy_account.other(),
                Viewport {
                    width: viewport.width.max(320) - 20,
                    height: viewport.height,
                },
                *scale,
                *mobile,
            ),
            (
                email(heavy_account),
                heavy_account,
                *next_viewport,
                *next_scale,
                *next_mobile,
            ),
            (
                email(heavy_account.other()),
                heavy_account.other(),
                *viewport,
                *scale,
                *mobile,
            ),
        ];
        // Two requests at a time, as the engine's two slots take them.
        for pair in steps.chunks(2) {
            let results = futures::future::join_all(pair.iter().map(
                |(html, account, viewport, scale, mobile)| {
                    let renderer = renderer.clone();
                    let req = request(html.clone(), engine, *viewport, *scale, *mobile);
                    let account = *account;
                    async move {
                        let t = std::time::Instant::now();
                        let result = renderer.render(req).await;
                        if std::env::var_os("MAILPROOF_TEST_VERBOSE").is_some() {
                            eprintln!(
                                "{engine} {account:?} {:?} {}",
                                t.elapsed(),
                                result.as_ref().map_or_else(
                                    |e| e.to_string(),
                                    |s| format!("{}x{}", s.width, s.height)
                                )
                            );
                        }
                        (account, result)
                    }
                },
            ))
            .await;
            for (step, (account, result)) in results.into_iter().enumerate() {
                let heavy = step == 0 && pair.len() == 2 && pair[0].0.contains("held-open");
                match result {
                    Ok(shot) => {
                        shots += 1;
                        if let Some(why) = foreign(&shot, account) {
                            wrong.push(format!("{engine} {id}, account {account:?}: {why}"));
                        }
                    }
                    // A heavy email may spend its time budget; it must never come back as
                    // another's, and the ordinary ones beside it must all be drawn.
                    Err(e) if heavy && e.is_retryable() => {}
                    Err(e) => wrong.push(format!("{engine} {id}, account {account:?}: {e}")),
                }
            }
        }
    }
    (shots, wrong)
}

#[test]
fn alternating_accounts_on_every_profile_never_see_each_others_email() {
    run(async {
        let hang = ImageServer::start("127.0.0.1", Behaviour::Hang).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let renderer = Arc::new(start(config(dir.path().to_path_buf(), &ENGINES)).await);
        let turns = ENGINES.map(|engine| {
            tokio::spawn(take_turns(
                renderer.clone(),
                engine,
                hang.url("/held-open.png"),
            ))
        });
        let mut shots = 0;
        let mut wrong = Vec::new();
        for turn in turns {
            let (n, w) = turn.await.expect("an engine's turn ran to its end");
            shots += n;
            wrong.extend(w);
        }
        assert!(
            wrong.is_empty(),
            "{} of {shots} screenshots are not their own account's email:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
        assert!(
            shots >= 200,
            "hundreds of screenshots were compared, not {shots}"
        );
        match Arc::try_unwrap(renderer) {
            Ok(renderer) => renderer.shutdown().await,
            Err(_) => panic!("the renderer is still shared"),
        }
    });
}
