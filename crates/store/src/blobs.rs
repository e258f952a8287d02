//! Screenshot blobs behind object_store: local files by default, S3-compatible storage by
//! configuration, so several machines can share one store.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob store: {0}")]
    Store(#[from] object_store::Error),
    #[error("blob store: cannot create {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("blob store: invalid key {0:?}")]
    Key(String),
}

/// Where blobs live. `local` is the default; `s3` needs a bucket and credentials.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BlobsConfig {
    /// Files under `<data dir>/blobs`.
    #[default]
    Local,
    S3 {
        bucket: String,
        #[serde(default)]
        endpoint: Option<String>,
        #[serde(default = "default_region")]
        region: String,
        access_key_id: String,
        secret_access_key: String,
        /// For S3-compatible servers on plain HTTP (e.g. a local MinIO).
        #[serde(default)]
        allow_http: bool,
    },
}

fn default_region() -> String {
    "us-east-1".to_string()
}

#[derive(Clone, Debug)]
pub struct Blobs {
    inner: Arc<dyn ObjectStore>,
}

impl Blobs {
    pub fn open(cfg: &BlobsConfig, data_dir: &std::path::Path) -> Result<Blobs, BlobError> {
        let inner: Arc<dyn ObjectStore> = match cfg {
            BlobsConfig::Local => {
                let dir = data_dir.join("blobs");
                std::fs::create_dir_all(&dir).map_err(|source| BlobError::Dir {
                    path: dir.clone(),
                    source,
                })?;
                Arc::new(LocalFileSystem::new_with_prefix(&dir)?)
            }
            BlobsConfig::S3 {
                bucket,
                endpoint,
                region,
                access_key_id,
                secret_access_key,
                allow_http,
            } => {
                let mut b = AmazonS3Builder::new()
                    .with_bucket_name(bucket)
                    .with_region(region)
                    .with_access_key_id(access_key_id)
                    .with_secret_access_key(secret_access_key)
                    .with_allow_http(*allow_http);
                if let Some(e) = endpoint {
                    b = b.with_endpoint(e);
                }
                Arc::new(b.build()?)
            }
        };
        Ok(Blobs { inner })
    }

    fn path(key: &str) -> Result<ObjectPath, BlobError> {
        ObjectPath::parse(key).map_err(|_| BlobError::Key(key.to_string()))
    }

    /// Writes (or replaces) a blob. Local writes go to a temporary file renamed into place, so a
    /// reader never sees half a screenshot.
    pub async fn put(&self, key: &str, data: Vec<u8>) -> Result<(), BlobError> {
        self.inner
            .put(&Self::path(key)?, PutPayload::from(Bytes::from(data)))
            .await?;
        Ok(())
    }

    /// `None` when the blob does not exist.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> {
        match self.inner.get(&Self::path(key)?).await {
            Ok(r) => Ok(Some(r.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes every screenshot and thumbnail of a test (deletion, retention).
    pub async fn delete_test(&self, test_id: &str) -> Result<(), BlobError> {
        let prefix = Self::path(&test_prefix(test_id))?;
        let keys: Vec<_> = self
            .inner
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await?;
        for k in keys {
            match self.inner.delete(&k).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Where a screenshot lives: `shots/<test>/<client>/<variant>.png`, and beside it the thumbnails.
pub fn screenshot_key(test_id: &str, client_id: &str, name: &str) -> String {
    format!("{}/{client_id}/{name}.png", test_prefix(test_id))
}

/// The file name (without `.png`) of the visual diff of `base_test`'s `variant` screenshot against
/// the same screenshot of the test it lies beside: `diff-<base test>-<variant>`.
pub fn diff_name(base_test: &str, variant: &str) -> String {
    format!("diff-{base_test}-{variant}")
}

/// `(base test, variant)` of a name [`diff_name`] made, or `None`.
pub fn parse_diff_name(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("diff-")?.split_once('-')
}

/// Where the highlight image of a visual diff lives: beside the newer test's screenshots, so that
/// deleting that test (or its retention) removes it too.
pub fn diff_key(new_test: &str, base_test: &str, client_id: &str, variant: &str) -> String {
    screenshot_key(new_test, client_id, &diff_name(base_test, variant))
}

/// The folder of every blob of one test.
fn test_prefix(test_id: &str) -> String {
    format!("shots/{test_id}")
}

#[cfg(test)]
mod backend_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_lies_beside_the_new_tests_screenshots_and_its_name_parses_back() {
        let key = diff_key("newtest", "basetest", "gmail_chrome_web", "no_images");
        assert_eq!(
            key,
            screenshot_key("newtest", "gmail_chrome_web", "diff-basetest-no_images")
        );
        assert!(key.starts_with(&test_prefix("newtest")));
        assert_eq!(
            parse_diff_name(&diff_name("basetest", "horizontal_no_images")),
            Some(("basetest", "horizontal_no_images"))
        );
        assert_eq!(parse_diff_name("default"), None);
    }
}
