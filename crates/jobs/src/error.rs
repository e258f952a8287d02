//! The one error of the check workers: what stops one row from being handled (the claim loop logs
//! it and backs off; the row's lease hands it on).

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("cannot encode the report: {0}")]
    Encode(#[from] serde_json::Error),
}
