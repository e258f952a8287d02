//! Process-wide metrics, exposed by the API as `GET /metrics` in Prometheus text format.
//!
//! Each layer records what only it sees (the API its requests, `render` its screenshots and engine
//! restarts, `spam` its scans, `smtp` its messages) into the one [`global`] set; figures that live
//! in the database (queue depth and age) are read at scrape time and passed to [`encode`], so a
//! process reports the shared queues whatever its role.
//!
//! Invariant: no IO and no dependency on other mailproof crates; labels are small closed sets
//! (route templates, never raw paths) so a caller cannot grow the series without bound.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::text;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub method: String,
    /// The route template (`/v5/email/tests/{test_id}`), or `unmatched`.
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EngineLabels {
    pub engine: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// The engine or filter.
    pub engine: String,
    /// `ok` or `failed`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SmtpLabels {
    /// `accepted` or `refused`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckLabels {
    pub engine: String,
    pub check: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// A bounce code (`render_failed`, `engine_failure`, `emulation`, ...), an unrecorded hit's
    /// [`HitUnrecorded`] or a refused connection's reason, by family.
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaultLabels {
    /// `storage` (the object store) or `database`.
    pub dependency: &'static str,
    pub queue: &'static str,
}

/// Why a tracking hit was answered without being recorded: the `reason` of
/// `mailproof_hits_unrecorded_total`. The hit path (`api::hits`) decides it; every hit it answers
/// is either recorded or counted under one of these.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "snake_case")]
pub enum HitUnrecorded {
    /// Over the per-address hit rate.
    RateAddress,
    /// Over the campaign's hit rate.
    RateCampaign,
    /// The campaign holds its storage budget.
    BudgetCampaign,
    /// The campaign's account holds its storage budget.
    BudgetAccount,
    /// The writer's queue stayed full for the hit's whole wait.
    QueueFull,
    /// The database did not read the campaign or take the hit's batch within the hit's wait.
    Database,
}

impl HitUnrecorded {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    /// `http` or `smtp`.
    pub listener: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    pub queue: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 25 ms .. ~51 s: a warm screenshot takes tens of milliseconds, a long email tens of seconds.
    Histogram::new(exponential_buckets(0.025, 2.0, 12))
}

/// Every metric the process records.
pub struct Metrics {
    http_requests: Family<HttpLabels, Counter>,
    screenshots: Family<OutcomeLabels, Counter>,
    screenshot_seconds: HistogramFamily<EngineLabels>,
    engine_restarts: Family<EngineLabels, Counter>,
    page_replacements: Family<EngineLabels, Counter>,
    drawn_refused: Family<CheckLabels, Counter>,
    filter_scans: Family<OutcomeLabels, Counter>,
    smtp_messages: Family<SmtpLabels, Counter>,
    screenshots_stored: Family<EngineLabels, Counter>,
    bounces: Family<ReasonLabels, Counter>,
    dependency_errors: Family<FaultLabels, Counter>,
    lease_renewals: Family<LeaseLabels, Counter>,
    lease_takeovers: Family<LeaseLabels, Counter>,
    leases_lost: Family<LeaseLabels, Counter>,
    hits_recorded: Counter,
    hits_unrecorded: Family<ReasonLabels, Counter>,
    hit_batches: Counter,
    connections_refused: Family<ReasonLabels, Counter>,
    pushed_out: Family<ListenerLabels, Counter>,
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

fn outcome(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "failed"
    }
}

impl Metrics {
    fn new() -> Metrics {
        Metrics {
            http_requests: Family::default(),
            screenshots: Family::default(),
            screenshot_seconds: Family::new_with_constructor(latency_histogram),
            engine_restarts: Family::default(),
            page_replacements: Family::default(),
            drawn_refused: Family::default(),
            filter_scans: Family::default(),
            smtp_messages: Family::default(),
            screenshots_stored: Family::default(),
            bounces: Family::default(),
            dependency_errors: Family::default(),
            lease_renewals: Family::default(),
            lease_takeovers: Family::default(),
            leases_lost: Family::default(),
            hits_recorded: Counter::default(),
            hits_unrecorded: Family::default(),
            hit_batches: Counter::default(),
            connections_refused: Family::default(),
            pushed_out: Family::default(),
        }
        .with_zero_series()
    }

    /// Every unrecorded-hit reason is a series from the start, so that a sum over reasons (and
    /// an alert on one) sees 0 rather than nothing.
    fn with_zero_series(self) -> Metrics {
        use strum::IntoEnumIterator as _;
        for reason in HitUnrecorded::iter() {
            self.hits_unrecorded
                .get_or_create(&ReasonLabels {
                    reason: reason.as_str(),
                })
                .inc_by(0);
        }
        self
    }

    /// A screenshot whose images are in the object store and whose job is recorded done.
    pub fn screenshot_stored(&self, engine: &str) {
        self.screenshots_stored
            .get_or_create(&EngineLabels {
                engine: engine.to_owned(),
            })
            .inc();
    }

    /// A job given up for a fault of the email itself, by bounce code.
    pub fn bounce(&self, reason: &'static str) {
        self.bounces.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// A failure of something the service runs on (`storage`, `database`) met by `queue`'s
    /// worker; the job is released, not counted as an attempt.
    pub fn dependency_error(&self, dependency: &'static str, queue: &'static str) {
        self.dependency_errors
            .get_or_create(&FaultLabels { dependency, queue })
            .inc();
    }

    /// A lease extended by the worker holding it (heartbeat).
    pub fn lease_renewal(&self, queue: &'static str) {
        self.lease_renewals
            .get_or_create(&LeaseLabels { queue })
            .inc();
    }

    /// A job claimed after its previous owner's lease expired.
    pub fn lease_takeover(&self, queue: &'static str) {
        self.lease_takeovers
            .get_or_create(&LeaseLabels { queue })
            .inc();
    }

    /// A worker's finish (or its write of the work's result) refused because its lease was no
    /// longer its own: the row was taken over and is finished by the worker that holds it now.
    pub fn lease_lost(&self, queue: &'static str) {
        self.leases_lost.get_or_create(&LeaseLabels { queue }).inc();
    }

    /// One committed batch of tracking hits and the hits it recorded.
    pub fn hit_batch(&self, recorded: usize) {
        self.hit_batches.inc();
        self.hits_recorded.inc_by(recorded as u64);
    }

    /// `n` tracking hits answered without being recorded, by reason.
    pub fn hits_unrecorded(&self, reason: HitUnrecorded, n: usize) {
        self.hits_unrecorded
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc_by(n as u64);
    }

    /// An HTTP connection refused before its request was read: its address held
    /// `max_connections_per_address` already (answered 429 when the refusal could be written).
    /// A connection refused because the listener was full and its address held its share.
    pub fn connection_refused_full(&self) {
        self.connections_refused
            .get_or_create(&ReasonLabels { reason: "full" })
            .inc();
    }

    pub fn connection_refused_per_address(&self) {
        self.connections_refused
            .get_or_create(&ReasonLabels {
                reason: "per_address",
            })
            .inc();
    }

    /// Counts one request. A method outside HTTP's registered set is counted as `OTHER`: the
    /// method is the client's choice, and each new name would be a new series kept for good.
    pub fn http_request(&self, method: &str, route: &str, status: u16) {
        const KNOWN: [&str; 9] = [
            "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
        ];
        let method = KNOWN
            .iter()
            .find(|m| **m == method)
            .copied()
            .unwrap_or("OTHER");
        self.http_requests
            .get_or_create(&HttpLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status,
            })
            .inc();
    }

    /// One screenshot attempt: its engine, whether it produced a picture, and how long it took.
    pub fn screenshot(&self, engine: &str, ok: bool, took: Duration) {
        self.screenshots
            .get_or_create(&OutcomeLabels {
                engine: engine.to_owned(),
                outcome: outcome(ok),
            })
            .inc();
        if ok {
            self.screenshot_seconds
                .get_or_create(&EngineLabels {
                    engine: engine.to_owned(),
                })
                .observe(took.as_secs_f64());
        }
    }

    pub fn engine_restart(&self, engine: &str) {
        self.engine_restarts
            .get_or_create(&EngineLabels {
                engine: engine.to_owned(),
            })
            .inc();
    }

    /// One page (a browser tab, WebKit's helper) replaced alone because a render hung or crashed
    /// in it, while the rest of its engine kept drawing.
    pub fn page_replacement(&self, engine: &str) {
        self.page_replacements
            .get_or_create(&EngineLabels {
                engine: engine.to_owned(),
            })
            .inc();
    }

    /// One drawn picture refused before it was returned: `check` is `wrong_document` (the engine
    /// held another document than the one asked for) or `blank` (a blank picture of a page with
    /// visible text).
    pub fn drawn_refused(&self, engine: &str, check: &'static str) {
        self.drawn_refused
            .get_or_create(&CheckLabels {
                engine: engine.to_owned(),
                check,
            })
            .inc();
    }

    /// One scan by a spam filter engine (`spamassassin`, `rspamd`, `builtin`).
    pub fn filter_scan(&self, engine: &str, ok: bool) {
        self.filter_scans
            .get_or_create(&OutcomeLabels {
                engine: engine.to_owned(),
                outcome: outcome(ok),
            })
            .inc();
    }

    /// One connection closed by a full listener (`http`, `smtp`) to make room for a client that
    /// held fewer (`admission`).
    pub fn connection_pushed_out(&self, listener: &'static str) {
        self.pushed_out
            .get_or_create(&ListenerLabels { listener })
            .inc();
    }

    /// One message at the SMTP listener: stored and answered 250, or refused.
    pub fn smtp_message(&self, accepted: bool) {
        self.smtp_messages
            .get_or_create(&SmtpLabels {
                outcome: if accepted { "accepted" } else { "refused" },
            })
            .inc();
    }
}

/// A queue's state read from the database at scrape time.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueFigures {
    pub queue: String,
    /// Jobs waiting to be claimed (due now or later) and jobs under a live lease.
    pub waiting: i64,
    pub leased: i64,
    /// Seconds since the oldest waiting job was queued; 0 when none waits.
    pub oldest_age_secs: i64,
    /// Jobs whose holder stopped renewing their lease and that no one has taken over yet, and
    /// how long ago the longest-expired of those leases ran out.
    pub expired_leases: i64,
    pub expired_lease_secs: i64,
}

/// The Prometheus text exposition of `metrics` plus the queue figures.
///
/// `queues_age_secs` is how old `queues` is: 0 when read for this scrape, more when the database
/// did not answer in time and the last figures read are shown, -1 when none was ever read.
pub fn encode(
    metrics: &Metrics,
    queues: &[QueueFigures],
    queues_age_secs: i64,
) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix("mailproof");
    registry.register(
        "http_requests",
        "HTTP requests answered, by method, route template and status",
        metrics.http_requests.clone(),
    );
    registry.register(
        "screenshots",
        "Screenshot attempts by engine and outcome",
        metrics.screenshots.clone(),
    );
    registry.register(
        "screenshot_seconds",
        "Time to take a screenshot, by engine (successful attempts)",
        metrics.screenshot_seconds.clone(),
    );
    registry.register(
        "engine_restarts",
        "Browser engine restarts after a crash or hang",
        metrics.engine_restarts.clone(),
    );
    registry.register(
        "engine_page_replacements",
        "Tabs (WebKit: helpers) replaced alone after a render hung or crashed in them",
        metrics.page_replacements.clone(),
    );
    registry.register(
        "drawn_refused",
        "Pictures refused by the renderer's checks before storing, by engine and check \
         (wrong_document, blank)",
        metrics.drawn_refused.clone(),
    );
    registry.register(
        "filter_scans",
        "Spam filter scans by engine and outcome",
        metrics.filter_scans.clone(),
    );
    registry.register(
        "smtp_messages",
        "Messages at the SMTP listener, accepted (stored, 250) or refused",
        metrics.smtp_messages.clone(),
    );
    registry.register(
        "screenshots_stored",
        "Screenshots whose images were stored and whose job was recorded done, by engine",
        metrics.screenshots_stored.clone(),
    );
    registry.register(
        "bounces",
        "Screenshots bounced for a fault of the email, by reason (bounce code)",
        metrics.bounces.clone(),
    );
    registry.register(
        "dependency_errors",
        "Failures of storage or the database met by a queue's worker (the job is released, not bounced)",
        metrics.dependency_errors.clone(),
    );
    registry.register(
        "lease_renewals",
        "Leases extended by the worker holding them, by queue",
        metrics.lease_renewals.clone(),
    );
    registry.register(
        "lease_takeovers",
        "Jobs claimed after their previous owner's lease expired, by queue",
        metrics.lease_takeovers.clone(),
    );
    registry.register(
        "leases_lost",
        "Results not written because the worker's lease was no longer its own (taken over, or the row requested again): each row is finished once, by its holder; by queue",
        metrics.leases_lost.clone(),
    );
    registry.register(
        "hits_recorded",
        "Tracking hits recorded (committed before they were answered)",
        metrics.hits_recorded.clone(),
    );
    registry.register(
        "hit_batches",
        "Transactions that recorded tracking hits (hits_recorded / hit_batches is the mean batch)",
        metrics.hit_batches.clone(),
    );
    registry.register(
        "hits_unrecorded",
        "Tracking hits answered without being recorded, by reason (rate_address, rate_campaign: over a hit rate limit; budget_campaign, budget_account: the campaign or its account holds its storage budget; queue_full: no room in the writer's queue within the hit's wait; database: the campaign could not be read or the hit's batch not written within the hit's wait)",
        metrics.hits_unrecorded.clone(),
    );
    registry.register(
        "http_connections_refused",
        "HTTP connections refused before their request was read, by reason (per_address: the client address held max_connections_per_address; full: every place was taken, this address held its share, and none came back within header_timeout)",
        metrics.connections_refused.clone(),
    );
    registry.register(
        "connections_pushed_out",
        "Connections a full listener (http, smtp) closed to admit a client holding fewer: one of \
         the largest holder's, idle ones first",
        metrics.pushed_out.clone(),
    );
    let waiting = Family::<QueueLabels, Gauge>::default();
    let leased = Family::<QueueLabels, Gauge>::default();
    let age = Family::<QueueLabels, Gauge>::default();
    let expired = Family::<QueueLabels, Gauge>::default();
    let expired_age = Family::<QueueLabels, Gauge>::default();
    for q in queues {
        let labels = QueueLabels {
            queue: q.queue.clone(),
        };
        waiting.get_or_create(&labels).set(q.waiting);
        leased.get_or_create(&labels).set(q.leased);
        age.get_or_create(&labels).set(q.oldest_age_secs);
        expired.get_or_create(&labels).set(q.expired_leases);
        expired_age.get_or_create(&labels).set(q.expired_lease_secs);
    }
    registry.register(
        "queue_waiting",
        "Jobs waiting to be claimed, by queue",
        waiting,
    );
    registry.register("queue_leased", "Jobs under a live lease, by queue", leased);
    registry.register(
        "queue_oldest_age_seconds",
        "Age of the oldest waiting job, by queue",
        age,
    );
    registry.register(
        "queue_leases_expired",
        "Jobs whose holder stopped renewing their lease (a dead or cut-off process) and that no worker has taken over yet, by queue",
        expired,
    );
    registry.register(
        "queue_lease_expired_seconds",
        "How long ago the longest-expired of those leases ran out, by queue; 0 when none has",
        expired_age,
    );
    let figures_age = Gauge::<i64>::default();
    figures_age.set(queues_age_secs);
    registry.register(
        "queue_figures_age_seconds",
        "How old the queue figures are: 0 when read from the database for this scrape, more when the database did not answer in time (the last figures read are shown), -1 when none was ever read",
        figures_age,
    );
    let mut out = String::new();
    text::encode(&mut out, &registry)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_figures_appear_in_the_exposition() {
        let m = Metrics::new();
        m.http_request("GET", "/v5/email/tests/{test_id}", 200);
        m.http_request("GET", "/v5/email/tests/{test_id}", 200);
        m.screenshot("chromium", true, Duration::from_millis(80));
        m.screenshot("gecko", false, Duration::from_secs(3));
        m.filter_scan("rspamd", false);
        m.smtp_message(true);
        m.screenshot_stored("chromium");
        m.bounce("render_failed");
        m.dependency_error("storage", "render");
        m.lease_renewal("render");
        m.lease_takeover("render");
        m.lease_lost("callbacks");
        m.connection_pushed_out("http");
        let text = encode(
            &m,
            &[QueueFigures {
                queue: "render".into(),
                waiting: 7,
                leased: 2,
                oldest_age_secs: 12,
                expired_leases: 1,
                expired_lease_secs: 4,
            }],
            0,
        )
        .expect("encodes");
        for line in [
            r#"mailproof_http_requests_total{method="GET",route="/v5/email/tests/{test_id}",status="200"} 2"#,
            r#"mailproof_screenshots_total{engine="chromium",outcome="ok"} 1"#,
            r#"mailproof_screenshots_total{engine="gecko",outcome="failed"} 1"#,
            r#"mailproof_screenshot_seconds_count{engine="chromium"} 1"#,
            r#"mailproof_filter_scans_total{engine="rspamd",outcome="failed"} 1"#,
            r#"mailproof_smtp_messages_total{outcome="accepted"} 1"#,
            r#"mailproof_screenshots_stored_total{engine="chromium"} 1"#,
            r#"mailproof_bounces_total{reason="render_failed"} 1"#,
            r#"mailproof_dependency_errors_total{dependency="storage",queue="render"} 1"#,
            r#"mailproof_lease_renewals_total{queue="render"} 1"#,
            r#"mailproof_lease_takeovers_total{queue="render"} 1"#,
            r#"mailproof_leases_lost_total{queue="callbacks"} 1"#,
            r#"mailproof_connections_pushed_out_total{listener="http"} 1"#,
            r#"mailproof_queue_waiting{queue="render"} 7"#,
            r#"mailproof_queue_leased{queue="render"} 2"#,
            r#"mailproof_queue_oldest_age_seconds{queue="render"} 12"#,
            r#"mailproof_queue_leases_expired{queue="render"} 1"#,
            r#"mailproof_queue_lease_expired_seconds{queue="render"} 4"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    /// Invented method names share one series, however many a client sends.
    #[test]
    fn unknown_methods_fold_into_one_series() {
        let m = Metrics::new();
        for i in 0..50 {
            m.http_request(&format!("X{i}"), "unmatched", 405);
        }
        m.http_request("PATCH", "unmatched", 405);
        let text = encode(&m, &[], 0).expect("encodes");
        let series = text
            .lines()
            .filter(|l| l.starts_with("mailproof_http_requests_total{"))
            .count();
        assert_eq!(series, 2, "{text}");
        assert!(
            text.contains(r#"method="OTHER",route="unmatched",status="405"} 50"#),
            "{text}"
        );
    }
}
