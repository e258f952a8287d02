//! The inbox-row worker: claims a test's requested inbox rows under a lease, lays each client
//! family's row out in Chromium to find where its fields are cut (`content::inbox::CUT_PROBE`),
//! draws each row with exactly that text in the engine of the family's clients, stores the
//! pictures beside the screenshots and the report as JSON. A failed engine pass is retried with
//! a pause; after the last attempt (or with no engine at all) the report says why no row was
//! drawn, and still names the preview and the missing preheader.

use std::sync::Arc;

use background::{Held, Slot};
use content::inbox::{self, InboxReport, InboxRows, MeasuredField, Preview, RowProfile, Sender};
use domain::catalog::Viewport;
use domain::{Catalog, ColorScheme, Engine};
use render::{RenderError, RenderRequest, Renderer};
use store::{Blobs, Store, INBOX_ROWS};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::JobError;

/// A drawn row's picture, to store as [`domain::Picture::InboxRow`].
pub struct RowPicture {
    pub row: String,
    pub scheme: ColorScheme,
    pub engine: Engine,
    pub png: Vec<u8>,
}

/// Why no row was drawn.
#[derive(Debug)]
pub enum RowsFailure {
    /// The engine may do better on another attempt (a crash, a hang).
    Retry(String),
    /// Another attempt would fail the same way.
    Final(String),
}

impl std::fmt::Display for RowsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowsFailure::Retry(s) | RowsFailure::Final(s) => f.write_str(s),
        }
    }
}

fn failure(e: RenderError) -> RowsFailure {
    if e.is_retryable() {
        RowsFailure::Retry(e.to_string())
    } else {
        RowsFailure::Final(e.to_string())
    }
}

/// What the rows are drawn from: the email's subject and sender and its test's clients (the
/// body's part, the [`Preview`], is read once by the caller).
pub struct RowsInput<'a> {
    pub subject: &'a str,
    /// The `From` header's value, when the test has one.
    pub from: Option<&'a str>,
    pub clients: &'a [String],
}

/// The report of `input` with no row drawn, saying `why`: the preview and the preheader warning
/// still hold, since they come from the HTML alone.
pub fn undrawn(input: &RowsInput<'_>, preview: Preview, why: String) -> InboxReport {
    let mut report = inbox::report(
        &[],
        &[],
        Sender::from_header(input.from),
        input.subject,
        preview,
        &[],
    )
    .unwrap_or_default();
    report.not_drawn = Some(why);
    report
}

/// The profiles of `clients`, in the data file's order, with each client's colour scheme.
fn profiles_of<'r>(
    rows: &'r InboxRows,
    catalog: &Catalog,
    clients: &[String],
) -> (Vec<&'r RowProfile>, Vec<(String, ColorScheme)>) {
    let schemes: Vec<(String, ColorScheme)> = clients
        .iter()
        .filter_map(|c| Some((c.clone(), catalog.get(c)?.color_scheme)))
        .collect();
    let profiles = rows
        .rows
        .iter()
        .filter(|r| schemes.iter().any(|(c, _)| r.clients.contains(c)))
        .collect();
    (profiles, schemes)
}

/// Lays out and draws the inbox rows of `input` for its clients' families.
pub async fn draw_rows(
    renderer: &Renderer,
    rows: &InboxRows,
    catalog: &Catalog,
    input: &RowsInput<'_>,
    preview: Preview,
) -> Result<(InboxReport, Vec<RowPicture>), RowsFailure> {
    let (profiles, schemes) = profiles_of(rows, catalog, input.clients);
    let sender = Sender::from_header(input.from);
    let page = inbox::measure_page(&profiles, &sender, input.subject, &preview);
    let measured = renderer
        .evaluate(measure_request(page), inbox::CUT_PROBE)
        .await
        .map_err(failure)?;
    let measured: Vec<MeasuredField> = serde_json::from_str(&measured)
        .map_err(|e| RowsFailure::Final(format!("the cut probe answered {e}")))?;
    let report = inbox::report(
        &profiles,
        &schemes,
        sender,
        input.subject,
        preview,
        &measured,
    )
    .map_err(RowsFailure::Final)?;
    let mut pictures = Vec::new();
    for (profile, row) in profiles.iter().zip(&report.rows) {
        for scheme in &row.schemes {
            let engine = row
                .clients
                .iter()
                .filter_map(|c| catalog.get(c))
                .find(|c| c.color_scheme == *scheme)
                .map_or(Engine::Blink, |c| c.engine);
            let (engine, png) = draw(renderer, profile, row, *scheme, engine).await?;
            pictures.push(RowPicture {
                row: row.id.clone(),
                scheme: *scheme,
                engine,
                png,
            });
        }
    }
    Ok((report, pictures))
}

/// Draws one row in `engine`, or in Chromium when this service does not run `engine` (the text
/// is the same: it was cut before).
async fn draw(
    renderer: &Renderer,
    profile: &RowProfile,
    row: &inbox::InboxRow,
    scheme: ColorScheme,
    engine: Engine,
) -> Result<(Engine, Vec<u8>), RowsFailure> {
    let page = inbox::picture_page(profile, row, scheme);
    let request = |engine| RenderRequest {
        html: page.clone(),
        engine,
        viewport: Viewport {
            width: profile.picture_width(),
            height: 120,
        },
        scale: profile.scale,
        mobile: false,
        color_scheme: scheme,
        block_images: true,
    };
    match renderer.render(request(engine)).await {
        Ok(r) => Ok((engine, r.png)),
        Err(RenderError::EngineUnavailable(_)) if engine != Engine::Blink => renderer
            .render(request(Engine::Blink))
            .await
            .map(|r| (Engine::Blink, r.png))
            .map_err(failure),
        Err(e) => Err(failure(e)),
    }
}

/// What Chromium loads to measure the rows: our page, wide enough for any row, no images.
fn measure_request(page: String) -> RenderRequest {
    RenderRequest {
        html: page,
        engine: Engine::Blink,
        viewport: Viewport {
            width: 1280,
            height: 800,
        },
        scale: 1.0,
        mobile: false,
        color_scheme: ColorScheme::Light,
        block_images: true,
    }
}

pub struct InboxRowWorker {
    pub store: Store,
    pub blobs: Blobs,
    pub catalog: Arc<Catalog>,
    pub rows: Arc<InboxRows>,
    /// The engines; `None` when none run, and then the report says no row was drawn.
    pub renderer: Option<Arc<Renderer>>,
}

impl InboxRowWorker {
    /// Runs `workers` claim loops at once.
    pub async fn run(self, ready: Arc<Notify>, cancel: CancellationToken, workers: usize) {
        crate::check_loops(&self, &self.store, workers, ready, cancel).await;
    }

    /// Runs one due request as `worker`; false when none is due.
    pub async fn run_one(&self, worker: &str, ready: &Notify) -> Result<bool, JobError> {
        crate::check_one(self, &self.store, worker, ready).await
    }

    async fn draw_claimed(
        &self,
        worker: &str,
        held: &Held,
        test_id: String,
        attempt: i64,
    ) -> Result<(), JobError> {
        tracing::info!(%test_id, attempt, "drawing inbox rows");
        let html = self.store.test_content(&test_id).await?.unwrap_or_default();
        let Some(test) = self.store.test_any_account(&test_id).await? else {
            return Ok(());
        };
        let from = self.store.test_sender(&test_id).await?;
        let preview = {
            let html = html.clone();
            tokio::task::spawn_blocking(move || inbox::preview(&html))
                .await
                .unwrap_or_default()
        };
        let clients: Vec<String> = self
            .store
            .test_clients(&test_id)
            .await?
            .into_iter()
            .map(|c| c.client_id)
            .collect();
        let input = RowsInput {
            subject: &test.subject,
            from: from.as_deref(),
            clients: &clients,
        };
        let outcome = match &self.renderer {
            Some(r) => draw_rows(r, &self.rows, &self.catalog, &input, preview.clone()).await,
            None => Err(RowsFailure::Final(
                "no rendering engine runs in this service ([render] engines is empty); inbox \
                 rows need Chromium (blink)"
                    .into(),
            )),
        };
        let report = match outcome {
            Ok((report, pictures)) => {
                if !held.confirm().await? {
                    return Ok(());
                }
                for p in pictures {
                    let picture = domain::Picture::InboxRow {
                        row: p.row,
                        scheme: p.scheme,
                    };
                    let key = store::screenshot_key(&test_id, domain::INBOX_ROWS_CLIENT, &picture);
                    if let Err(e) = self.blobs.put(&key, p.png).await {
                        // The storage failed, not the drawing: drawn again later without counting
                        // an attempt, as the render worker releases a job.
                        tracing::warn!(%test_id, error = %e, "storing an inbox row failed; retrying");
                        self.retry(worker, held, &test_id, attempt, &e.to_string(), false)
                            .await?;
                        return Ok(());
                    }
                }
                report
            }
            Err(RowsFailure::Retry(reason)) if !INBOX_ROWS.gives_up(attempt) => {
                tracing::warn!(%test_id, attempt, %reason, "drawing inbox rows failed; retrying");
                self.retry(worker, held, &test_id, attempt, &reason, true)
                    .await?;
                return Ok(());
            }
            Err(e) => undrawn(&input, preview, e.to_string()),
        };
        let stored = self
            .store
            .finish_report(
                &INBOX_ROWS,
                &test_id,
                worker,
                &serde_json::to_string(&report)?,
                chrono::Utc::now().timestamp(),
            )
            .await?;
        if !stored {
            held.refused();
            tracing::warn!(%test_id, "inbox rows not stored: their lease was taken over");
        }
        Ok(())
    }

    async fn retry(
        &self,
        worker: &str,
        held: &Held,
        test_id: &str,
        attempt: i64,
        reason: &str,
        counted: bool,
    ) -> Result<(), JobError> {
        let later = INBOX_ROWS
            .backoff
            .retry_at(chrono::Utc::now().timestamp(), attempt);
        if !self
            .store
            .retry_report(&INBOX_ROWS, test_id, worker, reason, later, counted)
            .await?
        {
            held.refused();
            tracing::warn!(%test_id, "inbox rows retry not recorded: their lease was taken over");
        }
        Ok(())
    }
}

impl crate::CheckWorker for InboxRowWorker {
    const QUEUE: &'static store::Queue = &INBOX_ROWS;

    async fn claim(&self, slot: &Slot) -> Result<Option<(String, i64)>, JobError> {
        let now = chrono::Utc::now().timestamp();
        Ok(self
            .store
            .claim_report(&INBOX_ROWS, &slot.owner, now, slot.lease_secs())
            .await?)
    }

    async fn check(
        &self,
        slot: &Slot,
        held: &Held,
        test_id: String,
        attempt: i64,
    ) -> Result<(), JobError> {
        self.draw_claimed(&slot.owner, held, test_id, attempt).await
    }
}
