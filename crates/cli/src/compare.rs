//! Comparing each client's screenshots with a baseline, two ways:
//! - `--baseline TEST_ID`: the server compares (`GET /v5/email/tests/<baseline>/diff/<test>`,
//!   mailproof's extension of v5); nothing is downloaded for it.
//! - `--baseline-file F`: a report.json of an earlier run, whose PNGs lie beside it, compared here
//!   with `shotdiff` against the screenshots just downloaded. This needs only the v5 interface,
//!   so it works against any v5 server, and the baseline survives the server's retention.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::api::Api;
use crate::error::CliError;
use crate::progress::Phase;
use crate::report::{ClientOutcome, Comparison, Report, VariantChange, REPORT_VERSION};

/// A report read back as a baseline; its screenshot paths are relative to `dir`.
pub struct BaselineFile {
    pub path: PathBuf,
    pub dir: PathBuf,
    pub report: Report,
}

impl BaselineFile {
    pub fn read(path: &Path) -> Result<BaselineFile, CliError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::io("cannot read the baseline file", path, e))?;
        let report: Report = serde_json::from_str(&text).map_err(|e| {
            CliError::Usage(format!(
                "the baseline file {} is not a report.json written by `mailproof check --out` ({e})",
                path.display()
            ))
        })?;
        if report.version != REPORT_VERSION {
            return Err(CliError::Usage(format!(
                "the baseline file {} has report version {}, this mailproof reads version {REPORT_VERSION}; make a new baseline",
                path.display(),
                report.version
            )));
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(BaselineFile {
            path: path.to_path_buf(),
            dir,
            report,
        })
    }
}

/// Fills each Complete client's comparison from the server's diff.
pub async fn by_server(
    api: &Api,
    baseline: &str,
    test_id: &str,
    clients: &mut [ClientOutcome],
) -> Result<(), CliError> {
    let what = "comparing with the baseline test (GET …/diff/…, a mailproof extension; with another v5 server use --baseline-file)";
    let diff = api
        .get(&format!("/v5/email/tests/{baseline}/diff/{test_id}"), what)
        .await?;
    let by_client = diff["clients"]
        .as_object()
        .ok_or_else(|| CliError::Protocol {
            what: what.into(),
            detail: "no `clients` object".into(),
        })?;
    for c in clients.iter_mut().filter(|c| c.status == "Complete") {
        c.comparison = Some(match by_client.get(&c.id) {
            None => Comparison::NotCompared {
                reason: "not in the baseline test".into(),
            },
            Some(entry) if entry["status"] == "Compared" => Comparison::Compared {
                variants: server_variants(&entry["variants"]),
            },
            Some(entry) => Comparison::NotCompared {
                reason: format!(
                    "{} (baseline: {}, this test: {})",
                    entry["message"].as_str().unwrap_or("not compared"),
                    entry["test_status"].as_str().unwrap_or("?"),
                    entry["other_status"].as_str().unwrap_or("?"),
                ),
            },
        });
    }
    Ok(())
}

fn server_variants(v: &Value) -> Vec<VariantChange> {
    let Some(map) = v.as_object() else {
        return Vec::new();
    };
    map.iter()
        .map(|(name, d)| VariantChange {
            variant: name.clone(),
            changed_share: d["changed_share"].as_f64().unwrap_or(0.0),
            extra_width: d["extra_width"].as_i64().unwrap_or(0),
            extra_height: d["extra_height"].as_i64().unwrap_or(0),
            highlight: d["diff_image"].as_str().map(str::to_owned),
            error: match (d["error"].as_str(), d["changed_share"].as_f64()) {
                (Some(e), _) => Some(e.to_string()),
                (None, None) => Some("the server gave no changed_share".into()),
                (None, Some(_)) => None,
            },
        })
        .collect()
}

/// Compares each Complete client's downloaded screenshots (under `out`) with the baseline's;
/// writes the highlight images beside the screenshots when `keep_highlights`.
pub async fn locally(
    baseline: &BaselineFile,
    out: &Path,
    keep_highlights: bool,
    clients: &mut [ClientOutcome],
    phase: &Phase,
) -> Result<(), CliError> {
    let old_by_id: BTreeMap<&str, &ClientOutcome> = baseline
        .report
        .clients
        .iter()
        .map(|c| (c.id.as_str(), c))
        .collect();
    let mut done = 0;
    for c in clients.iter_mut().filter(|c| c.status == "Complete") {
        let Some(old) = old_by_id
            .get(c.id.as_str())
            .filter(|o| o.status == "Complete")
        else {
            c.comparison = Some(Comparison::NotCompared {
                reason: format!(
                    "not Complete in the baseline test {}",
                    baseline.report.test_id
                ),
            });
            continue;
        };
        let mut variants = Vec::new();
        for (variant, new_rel) in &c.screenshots {
            let Some(old_rel) = old.screenshots.get(variant) else {
                continue;
            };
            let old_path = baseline.dir.join(old_rel);
            let new_path = out.join(new_rel);
            let old_png = std::fs::read(&old_path).map_err(|e| {
                CliError::io(
                    format!(
                        "the baseline {} names a screenshot that cannot be read (restore the directory saved with it):",
                        baseline.path.display()
                    ),
                    &old_path,
                    e,
                )
            })?;
            let new_png = std::fs::read(&new_path)
                .map_err(|e| CliError::io("cannot read the downloaded screenshot", &new_path, e))?;
            let result = tokio::task::spawn_blocking(move || {
                shotdiff::diff(&old_png, &new_png, &shotdiff::Options::default())
            })
            .await
            .map_err(|e| CliError::Usage(format!("the screenshot comparison stopped: {e}")))?;
            let change = match result {
                Ok(d) => {
                    let highlight = if keep_highlights && d.changed_pixels > 0 {
                        let rel = format!(
                            "{}.diff.png",
                            new_rel.strip_suffix(".png").unwrap_or(new_rel)
                        );
                        let path = out.join(&rel);
                        std::fs::write(&path, &d.highlight_png).map_err(|e| {
                            CliError::io("cannot write the highlight image", &path, e)
                        })?;
                        Some(rel)
                    } else {
                        None
                    };
                    VariantChange {
                        variant: variant.clone(),
                        changed_share: d.changed_share(),
                        extra_width: d.extra_width,
                        extra_height: d.extra_height,
                        highlight,
                        error: None,
                    }
                }
                Err(e) => VariantChange {
                    variant: variant.clone(),
                    changed_share: 0.0,
                    extra_width: 0,
                    extra_height: 0,
                    highlight: None,
                    error: Some(e.to_string()),
                },
            };
            variants.push(change);
        }
        c.comparison = Some(if variants.is_empty() {
            Comparison::NotCompared {
                reason: "no screenshot variant in common with the baseline".into(),
            }
        } else {
            Comparison::Compared { variants }
        });
        done += 1;
        phase.set_position(done);
    }
    Ok(())
}
