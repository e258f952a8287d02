//! The render worker: one claimed job = one screenshot variant of one client of one test.

use std::sync::Arc;
use std::time::Duration;

use domain::catalog::Viewport;
use domain::{Catalog, Variant};
use emulate::RuleBook;
use render::{RenderRequest, Renderer};
use store::{screenshot_key, Blobs, ClaimedJob, JobOutcome, Store};
use tokio::sync::{watch, Notify};

#[derive(Clone, Debug)]
pub struct RenderWorkerConfig {
    /// Names this worker's leases (host and process, so several processes can share a queue).
    pub worker_id: String,
    /// Jobs in flight at once.
    pub concurrency: usize,
    /// How long a claimed job is ours before others may take it over.
    pub lease: Duration,
    /// Attempts before a screenshot is Bounced.
    pub max_attempts: i64,
    /// Rescan interval for jobs whose lease expired or whose retry time came.
    pub rescan: Duration,
}

impl Default for RenderWorkerConfig {
    fn default() -> Self {
        RenderWorkerConfig {
            worker_id: format!("worker-{}", std::process::id()),
            concurrency: 2,
            lease: Duration::from_secs(120),
            max_attempts: 3,
            rescan: Duration::from_secs(2),
        }
    }
}

#[derive(Clone)]
pub struct RenderWorker {
    pub store: Store,
    pub blobs: Blobs,
    pub catalog: Arc<Catalog>,
    pub rules: Arc<RuleBook>,
    pub renderer: Arc<Renderer>,
    pub config: RenderWorkerConfig,
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
        mobile: client.mobile,
        color_scheme: transformed.color_scheme,
        block_images: variant.blocks_images(),
    }
}

/// How a job failed, in the words the results will show (§2.5 bounce code and message).
struct Failure {
    code: &'static str,
    message: String,
    retryable: bool,
}

impl RenderWorker {
    /// Claims and runs one job. Returns false when nothing was due. Public so tests can drain the
    /// queue deterministically.
    pub async fn run_one(&self) -> Result<bool, store::StoreError> {
        let now = chrono::Utc::now().timestamp();
        let lease = self.config.lease.as_secs() as i64;
        let Some(job) = self
            .store
            .claim_job(&self.config.worker_id, now, lease)
            .await?
        else {
            return Ok(false);
        };
        let started = std::time::Instant::now();
        let outcome = match self.render(&job).await {
            Ok((engine, rule_set)) => {
                tracing::info!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    attempt = job.attempts, ms = started.elapsed().as_millis() as u64, "screenshot stored");
                JobOutcome::Done { engine, rule_set }
            }
            Err(f) if f.retryable && job.attempts < self.config.max_attempts => {
                let backoff = 2_i64.pow(job.attempts.clamp(0, 6) as u32);
                tracing::warn!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    attempt = job.attempts, error = %f.message, retry_in_s = backoff, "render failed; will retry");
                JobOutcome::Retry {
                    error: f.message,
                    retry_at: chrono::Utc::now().timestamp() + backoff,
                }
            }
            Err(f) => {
                tracing::warn!(test_id = %job.test_id, client = %job.client_id, variant = %job.variant,
                    attempt = job.attempts, error = %f.message, "screenshot bounced");
                JobOutcome::Bounce {
                    code: f.code.to_string(),
                    message: f.message,
                }
            }
        };
        let now = chrono::Utc::now().timestamp();
        if !self
            .store
            .finish_job(&job, &self.config.worker_id, now, &outcome)
            .await?
        {
            tracing::info!(test_id = %job.test_id, client = %job.client_id, "lease lost meanwhile; result discarded");
        }
        Ok(true)
    }

    async fn render(&self, job: &ClaimedJob) -> Result<(String, String), Failure> {
        let Some(client) = self.catalog.get(&job.client_id) else {
            return Err(Failure {
                code: "unknown_client",
                message: format!("client {:?} is no longer in the catalog", job.client_id),
                retryable: false,
            });
        };
        let html = match self.store.test_content(&job.test_id).await {
            Ok(Some(h)) => h,
            Ok(None) => {
                return Err(Failure {
                    code: "no_content",
                    message: "the test's content is gone (deleted or past retention)".into(),
                    retryable: false,
                })
            }
            Err(e) => {
                return Err(Failure {
                    code: "storage",
                    message: format!("reading the test's content failed: {e}"),
                    retryable: true,
                })
            }
        };
        let catalog_client = client.clone();
        let rules = self.rules.clone();
        let transformed =
            tokio::task::spawn_blocking(move || emulate::transform(&html, &catalog_client, &rules))
                .await
                .map_err(|e| Failure {
                    code: "emulation",
                    message: format!("the client transformation panicked: {e}"),
                    retryable: false,
                })?
                .map_err(|e| Failure {
                    code: "emulation",
                    message: format!("the email could not be transformed for {}: {e}", client.id),
                    retryable: false,
                })?;
        let rule_set = transformed.rule_set.clone();
        let req = render_request(client, job.variant, transformed);
        let rendered = self.renderer.render(req).await.map_err(|e| Failure {
            code: if e.is_retryable() {
                "engine_failure"
            } else {
                "render_failed"
            },
            message: e.to_string(),
            retryable: e.is_retryable(),
        })?;
        let store_err = |e: store::BlobError| Failure {
            code: "storage",
            message: format!("storing the screenshot failed: {e}"),
            retryable: true,
        };
        self.blobs
            .put(
                &screenshot_key(&job.test_id, &job.client_id, job.variant.as_str()),
                rendered.png,
            )
            .await
            .map_err(store_err)?;
        if job.variant == Variant::Default {
            self.blobs
                .put(
                    &screenshot_key(&job.test_id, &job.client_id, "thumbnail"),
                    rendered.thumbnail,
                )
                .await
                .map_err(store_err)?;
            self.blobs
                .put(
                    &screenshot_key(&job.test_id, &job.client_id, "full_thumbnail"),
                    rendered.full_thumbnail,
                )
                .await
                .map_err(store_err)?;
        }
        Ok((client.engine.as_str().to_string(), rule_set))
    }

    /// Runs `concurrency` loops until `stop` turns true. Each loop drains due jobs, then sleeps
    /// until woken or until the rescan interval passes.
    pub async fn run(self, wake: Arc<Notify>, stop: watch::Receiver<bool>) {
        let mut loops = Vec::new();
        for n in 0..self.config.concurrency.max(1) {
            let w = self.clone();
            let wake = wake.clone();
            let mut stop = stop.clone();
            loops.push(tokio::spawn(async move {
                loop {
                    if *stop.borrow() {
                        return;
                    }
                    match w.run_one().await {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(e) => tracing::error!(worker = n, error = %e, "render queue unavailable; retrying"),
                    }
                    tokio::select! {
                        _ = wake.notified() => {}
                        _ = tokio::time::sleep(w.config.rescan) => {}
                        _ = stop.changed() => return,
                    }
                }
            }));
        }
        for l in loops {
            let _ = l.await;
        }
    }
}
