//! The check itself: submit, follow the test (and its spam test) to the end within `--timeout`,
//! download the screenshots, compare with the baseline, build the report.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::api::{Api, Credentials};
use crate::compare::{self, BaselineFile};
use crate::error::CliError;
use crate::progress::{Phase, Progress};
use crate::report::{
    ApprovalOutcome, Baseline, ClientOutcome, Report, Requirements, SpamOutcome, SpamVerdict,
    Timings, REPORT_VERSION,
};
use crate::spam::{self, SmtpSettings};
use crate::{source, CheckArgs, RequirementsPolicy};

/// Polling starts fast (a short email renders in a second or two) and slows down while nothing
/// changes, so a long queue is not hammered.
const FIRST_POLL: Duration = Duration::from_millis(500);
const MAX_POLL: Duration = Duration::from_secs(5);

pub async fn check(args: &CheckArgs, progress: &Progress) -> Result<Report, CliError> {
    let started = Instant::now();
    let deadline = started + args.timeout;
    // Everything that can be wrong locally is found before a test is spent on the server.
    let creds = Credentials::from_env()?;
    let email = source::load(&args.email, args.subject.as_deref())?;
    let baseline_file = args
        .baseline_file
        .as_deref()
        .map(BaselineFile::read)
        .transpose()?;
    let smtp = match args.spam {
        Some(m) if m.needs_smtp() => Some(SmtpSettings::from_env(m)?),
        _ => None,
    };
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)
            .map_err(|e| CliError::io("cannot create the --out directory", out, e))?;
    }
    let api = Api::new(&args.server, creds)?;

    let phase = progress.phase("submit", None);
    phase.set_message("checking the credentials");
    api.get("/v5/auth", "checking the credentials").await?;
    if let Some(b) = &args.baseline {
        api.get(
            &format!("/v5/email/tests/{b}"),
            &format!("looking up the baseline test {b}"),
        )
        .await?;
    }
    phase.set_message("creating the test");
    let mut body = json!({"subject": email.subject, "html": email.html});
    if !args.clients.is_empty() {
        body["clients"] = json!(args.clients);
    }
    if let Some(m) = args.spam {
        body["spam"] = spam::request(m, smtp.as_ref());
    }
    let created = api
        .post("/v5/email/tests", &body, "creating the test")
        .await?;
    let test_id = created["id"]
        .as_str()
        .ok_or_else(|| CliError::Protocol {
            what: "creating the test".into(),
            detail: format!("no `id` in {created}"),
        })?
        .to_string();
    if args.spam == Some(crate::SpamMethod::Seed) {
        let addresses: Vec<String> = created["spam"]["address_list"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if addresses.is_empty() {
            return Err(CliError::Protocol {
                what: "creating the seed spam test".into(),
                detail: "no `spam.address_list` to send the email to".into(),
            });
        }
        phase.set_message(format!("sending to {} seed addresses", addresses.len()));
        if let Some(s) = &smtp {
            spam::send_seed(s, &email, &addresses).await?;
        }
    }
    phase.finish(format!("test {test_id}"));
    let submit_secs = started.elapsed().as_secs_f64();

    let shots_phase = progress.phase("screenshots", None);
    let spam_phase = args.spam.map(|_| progress.phase("spam filters", None));
    let shots_started = Instant::now();
    let (info, verdicts) = tokio::join!(
        wait_screenshots(&api, &test_id, deadline, args.timeout, &shots_phase),
        async {
            match &spam_phase {
                Some(p) => Some(wait_spam(&api, &test_id, deadline, args.timeout, p).await),
                None => None,
            }
        }
    );
    let info = info?;
    let screenshots_secs = shots_started.elapsed().as_secs_f64();
    let verdicts = verdicts.transpose()?;
    let spam_secs = if verdicts.is_some() {
        screenshots_secs
    } else {
        0.0
    };
    shots_phase.finish(format!(
        "{} complete, {} bounced",
        list(&info, "completed").len(),
        list(&info, "bounced").len()
    ));
    if let (Some(p), Some(v)) = (spam_phase, &verdicts) {
        let spam = v.iter().filter(|v| v.spam == Some(1)).count();
        p.finish(format!("{} filters answered, {spam} said spam", v.len()));
    }
    let requirements = match (verdicts.is_some(), args.requirements) {
        (false, _) | (_, RequirementsPolicy::Off) => None,
        (true, policy) => {
            let phase = progress.phase("sender requirements", None);
            let r = wait_requirements(&api, &test_id, deadline, policy).await?;
            phase.finish(match &r.note {
                Some(note) => note.clone(),
                None => {
                    let rejecting = r.providers.iter().filter(|p| p.verdict == "would_reject");
                    format!(
                        "{} providers checked, {} would reject",
                        r.providers.len(),
                        rejecting.count()
                    )
                }
            });
            Some(r)
        }
    };

    let results = api
        .get(
            &format!("/v5/email/tests/{test_id}/results"),
            "reading the results",
        )
        .await?;
    let mut clients = outcomes(&info, &results);

    // Screenshots are downloaded when asked for, or when they are to be compared here.
    let temp;
    let out_dir: Option<PathBuf> = match (&args.out, &baseline_file) {
        (Some(out), _) => Some(out.clone()),
        (None, Some(_)) => {
            temp = tempfile::tempdir().map_err(|e| {
                CliError::io("cannot make a temporary directory", std::env::temp_dir(), e)
            })?;
            Some(temp.path().to_path_buf())
        }
        (None, None) => None,
    };
    let compare_started = Instant::now();
    if let Some(out) = &out_dir {
        download(&api, &test_id, &results, out, &mut clients, progress).await?;
    }
    let baseline = match (&args.baseline, &baseline_file, &out_dir) {
        (Some(b), _, _) => {
            let phase = progress.phase("compare", None);
            compare::by_server(&api, b, &test_id, &mut clients).await?;
            phase.finish(format!("with test {b} on the server"));
            Some(Baseline {
                test_id: b.clone(),
                file: None,
            })
        }
        (None, Some(file), Some(out)) => {
            let phase = progress.phase("compare", Some(clients.len() as u64));
            compare::locally(file, out, args.out.is_some(), &mut clients, &phase).await?;
            phase.finish(format!("with {}", file.path.display()));
            Some(Baseline {
                test_id: file.report.test_id.clone(),
                file: Some(file.path.display().to_string()),
            })
        }
        _ => None,
    };
    let approval = if args.require_approval {
        Some(approval(&api, &test_id).await?)
    } else {
        None
    };
    let report = Report {
        approval,
        version: REPORT_VERSION,
        server: api.base().to_string(),
        test_id,
        subject: email.subject,
        max_diff: args.max_diff.fraction(),
        baseline,
        clients,
        spam: verdicts.map(|filters| SpamOutcome {
            method: args.spam.map_or("", |m| m.as_str()).to_string(),
            filters,
            requirements,
        }),
        timings: Timings {
            submit: submit_secs,
            screenshots: screenshots_secs,
            spam: spam_secs,
            compare: compare_started.elapsed().as_secs_f64(),
        },
    };
    if let Some(out) = &args.out {
        let path = out.join("report.json");
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::Usage(format!("writing the JSON report failed: {e}")))?;
        std::fs::write(&path, text + "\n")
            .map_err(|e| CliError::io("cannot write the report", &path, e))?;
    }
    Ok(report)
}

/// Whether a version of this test's email with its content is approved (mailproof's
/// `…/versions`). Asked at the end, so an approval given while the check ran counts.
async fn approval(api: &Api, test_id: &str) -> Result<ApprovalOutcome, CliError> {
    let versions = match api
        .get(
            &format!("/v5/email/tests/{test_id}/versions"),
            "reading the versions of the email",
        )
        .await
    {
        Ok(v) => v,
        Err(CliError::Server {
            status: 404, name, ..
        }) if name == "NotFound" => {
            return Ok(ApprovalOutcome {
                version: None,
                approved_test: None,
                approved_version: None,
                note: Some(
                    "the server does not report versions and approvals (a mailproof extension)"
                        .into(),
                ),
            })
        }
        Err(e) => return Err(e),
    };
    let list = versions["versions"].as_array().cloned().unwrap_or_default();
    let this = list.iter().find(|v| v["id"] == test_id);
    let digest = this.and_then(|v| v["content_sha256"].as_str());
    let approved = list.iter().rev().find(|v| {
        v["approval"] == "approved" && digest.is_some() && v["content_sha256"].as_str() == digest
    });
    Ok(ApprovalOutcome {
        version: this.and_then(|v| v["version"].as_i64()),
        approved_test: approved.and_then(|v| v["id"].as_str().map(str::to_owned)),
        approved_version: approved.and_then(|v| v["version"].as_i64()),
        note: None,
    })
}

fn list(info: &Value, key: &str) -> Vec<String> {
    info[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn next_delay(delay: Duration, progressed: bool) -> Duration {
    if progressed {
        FIRST_POLL
    } else {
        (delay * 3 / 2).min(MAX_POLL)
    }
}

async fn sleep_until_next(delay: Duration, deadline: Instant) -> bool {
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    tokio::time::sleep(delay.min(deadline - now)).await;
    true
}

/// Polls the test info (spec §2.4) until no client is processing.
async fn wait_screenshots(
    api: &Api,
    id: &str,
    deadline: Instant,
    timeout: Duration,
    phase: &Phase,
) -> Result<Value, CliError> {
    let mut delay = FIRST_POLL;
    let mut last_done = None;
    loop {
        let info = api
            .get(&format!("/v5/email/tests/{id}"), "following the test")
            .await?;
        let processing = list(&info, "processing");
        let done = list(&info, "completed").len() + list(&info, "bounced").len();
        phase.set_length((done + processing.len()) as u64);
        phase.set_position(done as u64);
        if processing.is_empty() {
            return Ok(info);
        }
        delay = next_delay(delay, last_done.is_some_and(|d| d != done));
        last_done = Some(done);
        if !sleep_until_next(delay, deadline).await {
            return Err(CliError::Timeout(format!(
                "test {id} did not finish within --timeout {}s: still processing {}; raise --timeout, \
                 or see whether the server's engines run (GET {}/healthz)",
                timeout.as_secs(),
                processing.join(", "),
                api.base()
            )));
        }
    }
}

/// Polls the spam results (spec §2.8) until every filter has answered.
async fn wait_spam(
    api: &Api,
    id: &str,
    deadline: Instant,
    timeout: Duration,
    phase: &Phase,
) -> Result<Vec<SpamVerdict>, CliError> {
    let mut delay = FIRST_POLL;
    let mut last_done = None;
    loop {
        let v = api
            .get(
                &format!("/v5/email/tests/{id}/spam/results"),
                "following the spam test",
            )
            .await?;
        let verdicts: Vec<SpamVerdict> =
            serde_json::from_value(v).map_err(|e| CliError::Protocol {
                what: "following the spam test".into(),
                detail: format!("the results are not spam result entries (§2.8): {e}"),
            })?;
        let done = verdicts.iter().filter(|v| v.spam.is_some()).count();
        phase.set_length(verdicts.len() as u64);
        phase.set_position(done as u64);
        if !verdicts.is_empty() && done == verdicts.len() {
            return Ok(verdicts);
        }
        delay = next_delay(delay, last_done.is_some_and(|d| d != done));
        last_done = Some(done);
        if !sleep_until_next(delay, deadline).await {
            let waiting: Vec<&str> = verdicts
                .iter()
                .filter(|v| v.spam.is_none())
                .map(|v| v.client.as_str())
                .collect();
            return Err(CliError::Timeout(format!(
                "the spam filters of test {id} did not all answer within --timeout {}s (waiting for: {}); \
                 for --spam seed, check that the mail reached the seed addresses",
                timeout.as_secs(),
                if waiting.is_empty() { "any result".to_string() } else { waiting.join(", ") }
            )));
        }
    }
}

/// Polls mailproof's sender requirements (`…/spam/requirements`) until they are checked. A
/// server without them (another v5 service) or a report that does not come before the deadline
/// is said in the report's note, not an error: the rest of the check stands.
async fn wait_requirements(
    api: &Api,
    id: &str,
    deadline: Instant,
    policy: RequirementsPolicy,
) -> Result<Requirements, CliError> {
    let fail = policy == RequirementsPolicy::Fail;
    let noted = |note: String| Requirements {
        fail,
        providers: Vec::new(),
        note: Some(note),
    };
    let mut delay = FIRST_POLL;
    loop {
        let body = match api
            .get(
                &format!("/v5/email/tests/{id}/spam/requirements"),
                "reading the sender requirements",
            )
            .await
        {
            Ok(body) => body,
            Err(CliError::Server { status: 404, .. }) => {
                return Ok(noted(
                    "not checked: the server does not report sender requirements (a mailproof extension)".into(),
                ))
            }
            Err(e) => return Err(e),
        };
        if body["status"] == "complete" {
            let providers = serde_json::from_value(body["providers"].clone()).map_err(|e| {
                CliError::Protocol {
                    what: "reading the sender requirements".into(),
                    detail: format!("the providers are not requirement cards: {e}"),
                }
            })?;
            return Ok(Requirements {
                fail,
                providers,
                note: None,
            });
        }
        delay = next_delay(delay, false);
        if !sleep_until_next(delay, deadline).await {
            return Ok(noted(
                "not checked: the sender requirements were still pending at --timeout".into(),
            ));
        }
    }
}

/// One outcome per client of the test info, with status and bounce details from the results.
fn outcomes(info: &Value, results: &Value) -> Vec<ClientOutcome> {
    let mut ids: Vec<String> = list(info, "completed");
    ids.extend(list(info, "bounced"));
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let r = &results[&id];
            let status = r["status"].as_str().map(str::to_owned).unwrap_or_else(|| {
                if list(info, "bounced").contains(&id) {
                    "Bounced".into()
                } else {
                    "Complete".into()
                }
            });
            let bounce = (status == "Bounced").then(|| {
                let d = &r["status_details"];
                let code = d["bounce_code"].as_str().unwrap_or("");
                let msg = d["bounce_message"].as_str().unwrap_or("");
                format!("{code} {msg}").trim().to_string()
            });
            ClientOutcome {
                id,
                status,
                bounce,
                screenshots: Default::default(),
                comparison: None,
            }
        })
        .collect()
}

/// A path component from a server-given id: letters, digits, `-`, `_` and `.` only.
fn safe(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.chars().all(|c| c == '.') {
        s.replace('.', "_")
    } else {
        s
    }
}

/// Downloads every Complete client's screenshots to `<out>/<test>/<client>/<variant>.png`.
async fn download(
    api: &Api,
    test_id: &str,
    results: &Value,
    out: &Path,
    clients: &mut [ClientOutcome],
    progress: &Progress,
) -> Result<(), CliError> {
    let mut todo: Vec<(usize, String, String)> = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        if c.status != "Complete" {
            continue;
        }
        if let Some(shots) = results[&c.id]["screenshots"].as_object() {
            for (variant, url) in shots {
                if let Some(url) = url.as_str() {
                    todo.push((i, variant.clone(), url.to_string()));
                }
            }
        }
    }
    let phase = progress.phase("download", Some(todo.len() as u64));
    for (n, (i, variant, url)) in todo.iter().enumerate() {
        let c = &mut clients[*i];
        let rel = format!("{}/{}/{}.png", safe(test_id), safe(&c.id), safe(variant));
        let path = out.join(&rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::io("cannot create the screenshot directory", dir, e))?;
        }
        let what = format!("downloading the {variant} screenshot of {}", c.id);
        let bytes = api.download(url, &what).await?;
        std::fs::write(&path, bytes).map_err(|e| CliError::io("cannot write", &path, e))?;
        c.screenshots.insert(variant.clone(), rel);
        phase.set_position(n as u64 + 1);
    }
    phase.finish(format!("{} screenshots to {}", todo.len(), out.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ids_cannot_leave_the_output_directory() {
        assert_eq!(safe("gmail_chrome_web"), "gmail_chrome_web");
        assert_eq!(safe("../x/y"), ".._x_y");
        assert_eq!(safe(".."), "__");
        assert_eq!(safe("a b"), "a_b");
    }

    #[test]
    fn polling_backs_off_while_nothing_changes_and_speeds_up_on_progress() {
        let mut d = FIRST_POLL;
        for _ in 0..20 {
            d = next_delay(d, false);
        }
        assert_eq!(d, MAX_POLL);
        assert_eq!(next_delay(d, true), FIRST_POLL);
    }

    #[test]
    fn outcomes_carry_status_and_bounce_details() {
        let info = json!({"completed": ["b"], "bounced": ["a"]});
        let results = json!({
            "a": {"status": "Bounced", "status_details": {"bounce_code": "500", "bounce_message": "engine crashed"}},
            "b": {"status": "Complete", "screenshots": {"default": "http://x/a.png"}},
        });
        let o = outcomes(&info, &results);
        assert_eq!(o.len(), 2);
        assert_eq!((o[0].id.as_str(), o[0].status.as_str()), ("a", "Bounced"));
        assert_eq!(o[0].bounce.as_deref(), Some("500 engine crashed"));
        assert_eq!((o[1].id.as_str(), o[1].bounce.as_deref()), ("b", None));
    }
}
