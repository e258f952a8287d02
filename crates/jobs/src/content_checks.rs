//! The content-check worker: claims requested checks under a lease, runs the static checks of
//! `content::checks`, measures the images under the network policy and has Chromium judge the
//! colour contrast, then stores the report. It runs beside the engines; a failed engine pass is
//! retried with a pause, and after the last attempt the report says contrast was not judged.

use std::sync::Arc;

use background::{Held, Slot};
use content::checks::{self, CheckReport, Finding, Severity};
use content::NetPolicy;
use domain::catalog::Viewport;
use domain::{ColorScheme, Engine};
use render::{RenderError, RenderRequest, Renderer};
use store::Store;
use store::CONTENT_CHECKS;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::JobError;

pub struct ContentCheckWorker {
    pub store: Store,
    pub policy: NetPolicy,
    /// The engines; `None` when none run, and then contrast is reported as not judged.
    pub renderer: Option<Arc<Renderer>>,
}

impl ContentCheckWorker {
    /// A worker judging contrast with `renderer`'s Chromium (none: contrast is not judged).
    pub fn new(
        store: Store,
        policy: NetPolicy,
        renderer: Option<Arc<Renderer>>,
    ) -> ContentCheckWorker {
        ContentCheckWorker {
            store,
            policy,
            renderer,
        }
    }

    /// Runs `workers` claim loops at once.
    pub async fn run(self, ready: Arc<Notify>, cancel: CancellationToken, workers: usize) {
        crate::check_loops(&self, &self.store, workers, ready, cancel).await;
    }

    /// Runs one due check as `worker` (under the heartbeat, as the loops do); false when none is
    /// due.
    pub async fn run_one(&self, worker: &str, ready: &Notify) -> Result<bool, JobError> {
        crate::check_one(self, &self.store, worker, ready).await
    }

    async fn check_claimed(
        &self,
        worker: &str,
        held: &Held,
        test_id: String,
        attempt: i64,
    ) -> Result<(), JobError> {
        tracing::info!(%test_id, attempt, "checking content");
        let html = self.store.test_content(&test_id).await?.unwrap_or_default();
        let text_part = self.store.test_text_part(&test_id).await?;
        let mut findings = match checks::static_findings(&html, text_part) {
            Ok(findings) => findings,
            Err(reason) => vec![unreadable(&reason)],
        };
        let images = checks::measure_images(&html, &self.policy)
            .await
            .unwrap_or_default();
        let (summary, weight) = checks::weigh(&html, Some(images));
        findings.extend(weight);
        match self.contrast(&html).await {
            Ok(contrast) => findings.extend(contrast),
            Err(Failure::Final(reason)) => findings.push(not_judged(&reason)),
            // After the last attempt the report is stored without the engine's part.
            Err(Failure::Retry(reason)) if CONTENT_CHECKS.gives_up(attempt) => {
                findings.push(not_judged(&format!(
                    "the engine failed {attempt} times, last: {reason}"
                )))
            }
            Err(Failure::Retry(reason)) => {
                tracing::warn!(%test_id, attempt, %reason, "contrast check failed; retrying");
                let later = CONTENT_CHECKS
                    .backoff
                    .retry_at(chrono::Utc::now().timestamp(), attempt);
                if !self
                    .store
                    .retry_content_check(&test_id, worker, &reason, later)
                    .await?
                {
                    held.refused();
                    tracing::warn!(%test_id, "content check retry not recorded: its lease was taken over");
                }
                return Ok(());
            }
        }
        findings.sort_by_key(|f| (f.line, f.severity));
        let report = CheckReport { findings, summary };
        let stored = self
            .store
            .finish_content_check(
                &test_id,
                worker,
                &serde_json::to_string(&report)?,
                chrono::Utc::now().timestamp(),
            )
            .await?;
        if !stored {
            held.refused();
            tracing::warn!(%test_id, "content check result not stored (a check is finished once): requested again, or its lease was taken over");
        }
        Ok(())
    }

    /// The contrast findings of `html`, judged in Chromium on the page as authored.
    async fn contrast(&self, html: &str) -> Result<Vec<Finding>, Failure> {
        let Some(renderer) = &self.renderer else {
            return Err(Failure::Final(
                "no rendering engine runs in this service ([render] engines is empty); the \
                 contrast check needs Chromium (blink)"
                    .into(),
            ));
        };
        let tagged = checks::tag_lines(html).map_err(Failure::Final)?;
        let request = contrast_request(tagged);
        match renderer.evaluate(request, checks::CONTRAST_PROBE).await {
            Ok(json) => checks::contrast_findings(&json).map_err(Failure::Final),
            Err(e @ RenderError::EngineUnavailable(_)) => Err(Failure::Final(format!(
                "{e}; the contrast check needs Chromium (add blink to [render] engines)"
            ))),
            Err(e) if e.is_retryable() => Err(Failure::Retry(e.to_string())),
            Err(e) => Err(Failure::Final(e.to_string())),
        }
    }
}

/// What Chromium loads to judge contrast: the page as authored (with each element tagged with its
/// source line), at a desktop width, light, without images. Colours do not depend on images (text
/// over a background image is not judged at all), and the images were just downloaded once to be
/// weighed.
pub fn contrast_request(tagged_html: String) -> RenderRequest {
    RenderRequest {
        html: tagged_html,
        engine: Engine::Blink,
        viewport: Viewport {
            width: 600,
            height: 800,
        },
        scale: 1.0,
        mobile: false,
        color_scheme: ColorScheme::Light,
        block_images: true,
    }
}

enum Failure {
    /// The engine may do better on another attempt (a crash, a hang).
    Retry(String),
    /// Another attempt would fail the same way.
    Final(String),
}

fn not_judged(reason: &str) -> Finding {
    Finding {
        id: "contrast".into(),
        severity: Severity::Info,
        message: format!("colour contrast not judged: {reason}"),
        line: None,
        contrast: None,
    }
}

fn unreadable(reason: &str) -> Finding {
    Finding {
        id: "html".into(),
        severity: Severity::Error,
        message: format!("{reason}; the static checks could not run"),
        line: None,
        contrast: None,
    }
}

impl crate::CheckWorker for ContentCheckWorker {
    const QUEUE: &'static store::Queue = &CONTENT_CHECKS;

    async fn claim(&self, slot: &Slot) -> Result<Option<(String, i64)>, JobError> {
        let now = chrono::Utc::now().timestamp();
        Ok(self
            .store
            .claim_content_check(&slot.owner, now, slot.lease_secs())
            .await?)
    }

    async fn check(
        &self,
        slot: &Slot,
        held: &Held,
        test_id: String,
        attempt: i64,
    ) -> Result<(), JobError> {
        self.check_claimed(&slot.owner, held, test_id, attempt)
            .await
    }
}
