//! Page-load benchmark of the web interface: a test with all 57 clients of the catalog, its page
//! loaded N times by a signed-in session.
//!
//! `cargo build --release -p mailproof --bins --examples && target/release/examples/web_bench [--loads 200]`
//! (or the same with the debug profile).
//!
//! Starts the sibling `mailproof` binary (no browsers, no filter daemons: the screenshots stay
//! Pending, which draws the same page minus the thumbnail URLs), creates the test over the API,
//! signs in through the sign-in form, then times `GET /tests/<id>` end to end over loopback and
//! prints the median, p95 and maximum.

use std::time::{Duration, Instant};

#[path = "bench_service/mod.rs"]
mod bench_service;

use bench_service::{BenchService, BoxError};

const KEY: &str = "bench-key";
const PASS: &str = "bench-password";

fn start_service() -> Result<BenchService, BoxError> {
    BenchService::start(
        "[render]\nengines = []\n[spam]\ndaemons = false\n",
        KEY,
        PASS,
        "warn",
    )
}

fn hidden_csrf(page: &str) -> Option<String> {
    let at = page.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
    Some(page[at..].split('"').next()?.to_string())
}

/// The value a response sets for cookie `name`.
fn cookie(resp: &reqwest::Response, name: &str) -> Result<String, BoxError> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next()?.split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_string())
        .ok_or_else(|| format!("the response set no {name} cookie").into())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut loads = 200usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--loads" => loads = args.next().ok_or("--loads needs a number")?.parse()?,
            other => return Err(format!("unknown argument {other:?}; use --loads N").into()),
        }
    }
    let svc = start_service()?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let clients: serde_json::Value = http
        .get(format!("{}/v5/email/clients", svc.base))
        .basic_auth(KEY, Some(PASS))
        .send()
        .await?
        .json()
        .await?;
    let ids: Vec<String> = clients["clients"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .ok_or("the client catalog is not an object")?;
    let created: serde_json::Value = http
        .post(format!("{}/v5/email/tests", svc.base))
        .basic_auth(KEY, Some(PASS))
        .json(&serde_json::json!({"subject": "Benchmark", "html": "<p>Hello</p>", "clients": ids, "image_blocking": true}))
        .send()
        .await?
        .json()
        .await?;
    let id = created["id"]
        .as_str()
        .ok_or("no test id in the answer")?
        .to_string();
    let signin = http.get(format!("{}/signin", svc.base)).send().await?;
    let signin_cookie = cookie(&signin, "mp_signin")?;
    let signin = signin.text().await?;
    let csrf = hidden_csrf(&signin).ok_or("no CSRF token on the sign-in page")?;
    let resp = http
        .post(format!("{}/signin", svc.base))
        .header("Cookie", format!("mp_signin={signin_cookie}"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("next", "/tests"),
            ("api_key", KEY),
            ("password", PASS),
        ])
        .send()
        .await?;
    if resp.status() != reqwest::StatusCode::SEE_OTHER {
        return Err(format!("sign-in answered {}", resp.status()).into());
    }
    let session = format!("mp_session={}", cookie(&resp, "mp_session")?);
    let url = format!("{}/tests/{id}", svc.base);
    let mut times = Vec::with_capacity(loads);
    let mut bytes = 0;
    for i in 0..loads + 10 {
        let start = Instant::now();
        let r = http.get(&url).header("Cookie", &session).send().await?;
        if r.status() != reqwest::StatusCode::OK {
            return Err(format!("the test page answered {}", r.status()).into());
        }
        let body = r.bytes().await?;
        let took = start.elapsed();
        // The first loads warm the connection pool and SQLite's page cache.
        if i >= 10 {
            times.push(took);
            bytes = body.len();
        }
    }
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p).ceil() as usize).clamp(1, times.len()) - 1];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "test page with {} clients ({} KB): {} loads, median {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        ids.len(),
        bytes / 1024,
        times.len(),
        ms(pct(0.5)),
        ms(pct(0.95)),
        ms(times[times.len() - 1])
    );
    Ok(())
}
