//! The render worker: one claimed job = one screenshot variant of one client of one test.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use background::{Held, Loops, Slot};
use domain::catalog::Viewport;
use domain::{Catalog, Picture, QueueState, Variant};
use emulate::RuleBook;
use rand::Rng;
use render::RenderRequest;
use store::{screenshot_key, Blobs, ClaimedJob, JobOutcome, Key, Store, RENDER};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::RenderEngine;

#[derive(Clone, Debug)]
pub struct RenderWorkerConfig {
    /// Names the leases of [`RenderWorker::run_one`] (called directly, by tests); the loops of
    /// [`RenderWorker::run`] name theirs with `background::lease_owner`.
    pub worker_id: String,
    /// Jobs in flight at once. (Their lease and its renewal are the render queue's,
    /// [`store::RENDER`]`.lease`, renewed by the loops' heartbeat.)
    pub concurrency: usize,
    /// Attempts before a screenshot is Bounced. Only the email's own failures count (an engine
    /// that crashes or hangs on it); faults of storage or the database do not.
    pub max_attempts: i64,
    /// Rescan interval for jobs whose lease expired or whose retry time came.
    pub rescan: Duration,
    /// The longest wait before a job released for a storage or database fault is tried again.
    pub max_fault_backoff: Duration,
    /// The engines this process runs: it claims only the jobs of clients they draw.
    pub engines: Vec<domain::Engine>,
}

impl Default for RenderWorkerConfig {
    fn default() -> Self {
        RenderWorkerConfig {
            worker_id: format!("worker-{}", std::process::id()),
            concurrency: 2,
            max_attempts: 3,
            rescan: Duration::from_secs(2),
            max_fault_backoff: Duration::from_secs(15),
            engines: domain::Engine::ALL.to_vec(),
        }
    }
}

#[derive(Clone)]
pub struct RenderWorker {
    pub store: Store,
    pub blobs: Blobs,
    pub catalog: Arc<Catalog>,
    pub rules: Arc<RuleBook>,
    pub renderer: Arc<dyn RenderEngine>,
    pub config: RenderWorkerConfig,
    /// Storage or database faults in a row, shared by the worker's loops: the backoff before a
    /// released job is due again grows with it and resets once a screenshot is stored.
    pub faults_in_a_row: Arc<AtomicU32>,
}

/// What the engine is asked to draw for one variant of a client, once the email has been turned
/// into what that client shows. Shared with the fidelity report so that it measures the same path
/// the service takes.
pub fn render_request(
    client: &domain::Client,
    variant: Variant,
    transformed: emulate::Transformed,
) -> RenderRequest {
    let viewport = if variant.is_rotated() {
        Viewport {
            width: client.viewport.height,
            height: client.viewport.width,
        }
    } else {
        client.viewport
    };
    // A client that lays a wide email out wider than its screen and zooms it out (auto fit):
    // the engine lays it out at that width, drawn at the scale that fits it to the screen.
    let (viewport, scale) = match transformed.layout_width {
        Some(w) if w > viewport.width => {
            let fit = viewport.width as f32 / w as f32;
            let height = (viewport.height as f32 / fit).round() as u32;
            (Viewport { width: w, height }, client.scale * fit)
        }
        _ => (viewport, client.scale),
    };
    RenderRequest {
        html: transformed.html,
        engine: client.engine,
        viewport,
        scale,
        // Never Chromium's mobile emulation: it lays a page without a viewport meta tag out 980
        // px wide, and the picture (the window's width) then cut every paragraph of such an
        // email at the right. A mail app shows the email in a view as wide as its screen (the
        // webmails in a page that sets that viewport), which is what a plain viewport of the
        // screen's width lays out; a wider email's zoom-out is emulated above, measured.
        mobile: false,
        color_scheme: transformed.color_scheme,
        block_images: variant.blocks_images(),
    }
}

/// What the engine is asked to draw, with what the client did to the email to get there.
pub struct Prepared {
    pub request: RenderRequest,
    /// [`emulate::Transformed::rule_set`], the zoom-out named when it applies.
    pub rule_set: String,
    /// [`emulate::Transformed::behaviours`], likewise.
    pub behaviours: Vec<String>,
}

/// [`render_request`], after what the client decides on the loaded page: its zoom-out of a page
/// wider than the screen (measured laid out at the screen, in Chromium) and its dark-mode
/// recolouring (computed on the page loaded in Chromium at the width it is drawn at).
pub async fn prepared_request(
    renderer: &dyn RenderEngine,
    client: &domain::Client,
    variant: Variant,
    mut transformed: emulate::Transformed,
) -> Result<Prepared, render::RenderError> {
    if transformed.zoom_to_fit.is_some() {
        // Laid out at the screen's width as the client does and as it is drawn
        // (`render_request`), whatever the email's viewport meta says.
        let at_screen = render_request(client, variant, transformed.clone());
        let width = renderer.page_width(&at_screen).await?;
        transformed.measured(width, at_screen.viewport.width);
    }
    let pass = transformed.dark_pass;
    let rule_set = transformed.rule_set.clone();
    let behaviours = std::mem::take(&mut transformed.behaviours);
    let mut request = render_request(client, variant, transformed);
    if let Some(pass) = pass {
        request.html = renderer.recolour_dark(&request, pass).await?;
    }
    Ok(Prepared {
        request,
        rule_set,
        behaviours,
    })
}

/// How a job failed, in the words the results will show (§2.5 bounce code and message).
struct Failure {
    code: &'static str,
    message: String,
    cause: Cause,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// The email (or the engine on it): counts as an attempt; `retryable` when another attempt
    /// may succeed (the engine crashed or hung).
    Email { retryable: bool },
    /// Something the service runs on failed (`storage`, `database`): the job is released
    /// without counting the attempt, however long the fault lasts.
    Dependency(&'static str),
    /// The lease was someone else's before the picture was written: nothing is written or
    /// recorded, the job's holder does it.
    LeaseLost,
}

/// Why the store refused a worker's renewal or finish of `job`, from what the job's row says now.
async fn refusal(store: &Store, job: &ClaimedJob) -> String {
    match store.job_holder(job.id).await {
        Ok(Some((state @ (QueueState::Done | QueueState::Failed), _))) => format!(
            "the job is already {state} (a finish whose answer was lost to a database fault, or another worker's)"
        ),
        Ok(Some((QueueState::Leased, Some(owner)))) => {
            format!("its lease expired and {owner} took the job over")
        }
        Ok(Some((state, _))) => format!(
            "the job is {state} again (released or retried by a finish whose answer was lost to a database fault, or requeued as stalled)"
        ),
        Ok(None) => "the job is gone (its test was deleted)".to_string(),
        Err(e) => format!("the lease is no longer this worker's (its state cannot be read: {e})"),
    }
}

impl RenderWorker {
    /// A worker with no fault seen yet.
    pub fn new(
        store: Store,
        blobs: Blobs,
        catalog: Arc<Catalog>,
        rules: Arc<RuleBook>,
        renderer: Arc<dyn RenderEngine>,
        config: RenderWorkerConfig,
    ) -> RenderWorker {
        RenderWorker {
            store,
            blobs,
            catalog,
            rules,
            renderer,
            config,
            faults_in_a_row: Arc::new(AtomicU32::new(0)),
        }
    }

    /// The clients whose jobs this worker may claim: those drawn by its engines; `None` (any)
    /// when it runs every engine the catalog uses.
    fn claimable_clients(&self) -> Option<Vec<String>> {
        let clients = self.catalog.clients();
        // A dark-mode recolouring is computed, and a zoom-out's page measured, in Chromium,
        // whatever engine draws the result.
        let drawable = |c: &domain::Client| {
            let applied = self.rules.behaviours().of(c);
            let in_chromium = (c.color_scheme == domain::ColorScheme::Dark
                && applied.dark_pass().is_some())
                || applied.zoom_out().is_some();
            self.config.engines.contains(&c.engine)
                && (!in_chromium || self.config.engines.contains(&domain::Engine::Blink))
        };
        if clients.iter().all(drawable) {
            return None;
        }
        Some(
            clients
                .iter()
                .filter(|c| drawable(c))
                .map(|c| c.id.clone())
                .collect(),
        )
    }

    /// When a job released for a fault is due again: exponential in the faults in a row, capped,
    /// with jitter so that the jobs released during one outage do not all return at once.
    fn fault_retry_at(&self) -> i64 {
        let faults = self.faults_in_a_row.fetch_add(1, Ordering::Relaxed);
        let cap = i64::try_from(self.config.max_fault_backoff.as_secs()).unwrap_or(i64::MAX);
        store::Backoff::doubling(1, cap)
            .retry_at(chrono::Utc::now().timestamp(), i64::from(faults) + 1)
    }

    /// The render queue's loops for this worker.
    fn loops(&self, wake: Option<Arc<Notify>>) -> Loops {
        Loops::new(
            &self.store,
            &RENDER,
            self.config.concurrency,
            wake,
            self.config.rescan,
        )
    }

    /// Claims and runs one job (under the loops' heartbeat, as [`RenderWorker::run`] does).
    /// Returns false when nothing was due. Public so tests can drain the queue deterministically.
    pub async fn run_one(&self) -> Result<bool, store::StoreError> {
        self.loops(None)
            .turn_as(
                &self.config.worker_id,
                |slot| self.claim(slot),
                |slot, held, job| self.work(slot, held, job),
            )
            .await
    }

    /// Claims the next job this worker's engines draw for `slot`.
    async fn claim(&self, slot: Slot) -> Result<Option<(Key, ClaimedJob)>, store::StoreError> {
        let now = chrono::Utc::now().timestamp();
        let clients = self.claimable_clients();
        let Some(job) = self
            .store
            .claim_job_for(&slot.owner, now, slot.lease_secs(), clients.as_deref())
            .await?
        else {
            return Ok(None);
        };
        if job.taken_over_from.as_deref() == Some(slot.owner.as_str()) {
            tracing::info!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                "claimed again a render job whose first claim was lost to a database fault");
        } else if let Some(previous) = &job.taken_over_from {
            telemetry::global().lease_takeover("render");
            tracing::info!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                previous_owner = %previous, "took over a render job whose lease expired");
        }
        Ok(Some((Key::Int(job.id), job)))
    }

    /// Draws a claimed job and records the outcome; a database fault while recording it is
    /// retried until it is recorded, refused, or the slot is cancelled.
    async fn work(&self, slot: Slot, held: Held, job: ClaimedJob) -> Result<(), store::StoreError> {
        let started = std::time::Instant::now();
        let outcome = match self.render(&job, &held).await {
            Ok(done) => done,
            Err(Failure {
                cause: Cause::LeaseLost,
                ..
            }) => {
                held.refused();
                tracing::warn!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    "render lease lost before the picture was written; not written (its holder draws it)");
                return Ok(());
            }
            Err(Failure {
                code,
                message,
                cause: Cause::Dependency(dependency),
            }) => {
                telemetry::global().dependency_error(dependency, "render");
                let retry_at = self.fault_retry_at();
                tracing::warn!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    code, error = %message, retry_in_s = retry_at - chrono::Utc::now().timestamp(),
                    "{dependency} failed; job released for a retry (not counted as an attempt)");
                JobOutcome::Release {
                    error: message,
                    retry_at,
                }
            }
            Err(Failure {
                message,
                cause: Cause::Email { retryable: true },
                ..
            }) if job.attempts < self.config.max_attempts => {
                let now = chrono::Utc::now().timestamp();
                let retry_at = RENDER.backoff.retry_at(now, job.attempts);
                tracing::warn!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    attempt = job.attempts, error = %message, retry_in_s = retry_at - now, "render failed; will retry");
                JobOutcome::Retry {
                    error: message,
                    retry_at,
                }
            }
            Err(Failure { code, message, .. }) => {
                telemetry::global().bounce(code);
                tracing::warn!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    attempt = job.attempts, code, error = %message, "screenshot bounced");
                JobOutcome::Bounce {
                    code: code.to_string(),
                    message,
                }
            }
        };
        let recorded = self.finish(&job, &outcome, &slot).await;
        if recorded == Some(false) {
            held.refused();
        }
        if recorded == Some(true) {
            if let JobOutcome::Done { engine, .. } = &outcome {
                self.faults_in_a_row.store(0, Ordering::Relaxed);
                telemetry::global().screenshot_stored(engine);
                tracing::info!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    attempt = job.attempts, ms = started.elapsed().as_millis() as u64, "screenshot stored");
            }
        }
        Ok(())
    }

    /// Records `outcome`, retrying while the database fails (the heartbeat keeps the lease
    /// meanwhile): a blip must not strand the job for a whole lease nor have it drawn twice.
    /// `Some(false)` when refused because the lease is someone else's now; `None` when stopped
    /// before the database came back (the lease then expires and another claim takes the job).
    async fn finish(&self, job: &ClaimedJob, outcome: &JobOutcome, slot: &Slot) -> Option<bool> {
        let mut wait = Duration::from_millis(250);
        loop {
            let now = chrono::Utc::now().timestamp();
            match self.store.finish_job(job, &slot.owner, now, outcome).await {
                Ok(true) => return Some(true),
                Ok(false) => {
                    let why = refusal(&self.store, job).await;
                    tracing::warn!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                        "render outcome not recorded (a job is finished once): {why}");
                    return Some(false);
                }
                Err(e) => {
                    telemetry::global().dependency_error("database", "render");
                    tracing::warn!(test_id = %job.test_id, client = %job.client_id, error = %e,
                        retry_in_ms = wait.as_millis() as u64,
                        "database error recording a render outcome; retrying");
                }
            }
            let jittered = wait.mul_f64(rand::thread_rng().gen_range(0.5..=1.0));
            tokio::select! {
                _ = tokio::time::sleep(jittered) => {}
                () = slot.cancel.cancelled() => return None,
            }
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    async fn render(&self, job: &ClaimedJob, held: &Held) -> Result<JobOutcome, Failure> {
        let Some(client) = self.catalog.get(&job.client_id) else {
            return Err(Failure {
                code: "unknown_client",
                message: format!("client {:?} is no longer in the catalog", job.client_id),
                cause: Cause::Email { retryable: false },
            });
        };
        let html = match self.store.test_content(&job.test_id).await {
            Ok(Some(h)) => h,
            Ok(None) => {
                return Err(Failure {
                    code: "no_content",
                    message: "the test's content is gone (deleted or past retention)".into(),
                    cause: Cause::Email { retryable: false },
                })
            }
            Err(e) => {
                return Err(Failure {
                    code: "database",
                    message: format!("reading the test's content failed: {e}"),
                    cause: Cause::Dependency("database"),
                })
            }
        };
        let catalog_client = client.clone();
        let rules = self.rules.clone();
        let variant = job.variant;
        let transformed = tokio::task::spawn_blocking(move || {
            emulate::transform_variant(&html, &catalog_client, &rules, variant)
        })
        .await
        .map_err(|e| Failure {
            code: "emulation",
            message: format!("the client transformation panicked: {e}"),
            cause: Cause::Email { retryable: false },
        })?
        .map_err(|e| Failure {
            code: "emulation",
            message: format!("the email could not be transformed for {}: {e}", client.id),
            cause: Cause::Email { retryable: false },
        })?;
        let render_failure = |e: render::RenderError| Failure {
            code: e.bounce_code(),
            message: e.to_string(),
            cause: Cause::Email {
                retryable: e.is_retryable(),
            },
        };
        let Prepared {
            request, rule_set, ..
        } = prepared_request(self.renderer.as_ref(), client, job.variant, transformed)
            .await
            .map_err(render_failure)?;
        let window = request.viewport.width;
        let rendered = self
            .renderer
            .render(request)
            .await
            .map_err(render_failure)?;
        // A picture in the object store cannot be taken back by a refused finish: a job taken
        // over (this worker's renewals failed through a database outage) is drawn by its holder.
        match held.confirm().await {
            Ok(true) => {}
            Ok(false) => {
                return Err(Failure {
                    code: "lease_lost",
                    message: "the job's lease is another worker's".into(),
                    cause: Cause::LeaseLost,
                })
            }
            Err(e) => {
                return Err(Failure {
                    code: "database",
                    message: format!("confirming the job's lease before storing failed: {e}"),
                    cause: Cause::Dependency("database"),
                })
            }
        }
        let store_err = |e: store::BlobError| Failure {
            code: "storage",
            message: format!("storing the screenshot failed: {e}"),
            cause: Cause::Dependency("storage"),
        };
        // The variant's screenshot, and thumbnails where something shows them: the default's are
        // the spec's, the images-off one's the gallery's images-off view; the landscape ones have
        // none.
        let mut files = vec![(Picture::Shot(job.variant), rendered.png)];
        if matches!(job.variant, Variant::Default | Variant::NoImages) {
            files.push((Picture::thumbnail(job.variant), rendered.thumbnail));
            files.push((
                Picture::full_thumbnail(job.variant),
                rendered.full_thumbnail,
            ));
        }
        for (picture, bytes) in files {
            self.blobs
                .put(
                    &screenshot_key(&job.test_id, &job.client_id, &picture),
                    bytes,
                )
                .await
                .map_err(store_err)?;
        }
        Ok(JobOutcome::Done {
            engine: client.engine.as_str().to_string(),
            shot: store::ShotFacts {
                rule_set: Some(rule_set),
                failed: rendered.failed,
                // A zoomed-out client draws at the email's measured width, so only an email its
                // window really cuts counts.
                overflow_width: (rendered.content_width > window + 1)
                    .then_some(rendered.content_width),
            },
        })
    }

    /// Runs `concurrency` loops until `cancel`. Each loop drains due jobs, then sleeps until woken
    /// or until the rescan interval passes.
    pub async fn run(self, wake: Arc<Notify>, cancel: CancellationToken) {
        let this = &self;
        this.loops(Some(wake))
            .run(
                cancel,
                |slot| async move {
                    let claimed = this.claim(slot).await;
                    if claimed.is_err() {
                        telemetry::global().dependency_error("database", "render");
                    }
                    claimed
                },
                |slot, held, job| this.work(slot, held, job),
            )
            .await;
    }
}
