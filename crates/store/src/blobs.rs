//! Screenshot blobs behind object_store: local files by default, S3-compatible storage by
//! configuration, so several machines can share one store.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use domain::Picture;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// An operation the store refused or could not reach; `place` names the bucket and endpoint
    /// (or the directory), `hint` the settings to check when the cause is clear. `cause` is not
    /// marked as the error's source: its text is already in the message, and error reports that
    /// print the whole chain would repeat it.
    #[error("blob store ({place}): {action} failed: {cause}{hint}")]
    Store {
        place: Arc<str>,
        action: String,
        cause: Box<object_store::Error>,
        hint: &'static str,
    },
    #[error("blob store: cannot create {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("blob store: invalid key {0:?}")]
    Key(String),
    #[error("blob store: {0}")]
    Config(String),
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
    /// Where the blobs live, for error messages: `S3 bucket "b" at <endpoint>` or the directory.
    place: Arc<str>,
    s3: bool,
}

impl Blobs {
    pub fn open(cfg: &BlobsConfig, data_dir: &std::path::Path) -> Result<Blobs, BlobError> {
        match cfg {
            BlobsConfig::Local => {
                let dir = data_dir.join("blobs");
                std::fs::create_dir_all(&dir).map_err(|source| BlobError::Dir {
                    path: dir.clone(),
                    source,
                })?;
                let place: Arc<str> = format!("local files in {}", dir.display()).into();
                let inner =
                    LocalFileSystem::new_with_prefix(&dir).map_err(|cause| BlobError::Store {
                        place: place.clone(),
                        action: "opening the directory".into(),
                        cause: Box::new(cause),
                        hint: "",
                    })?;
                Ok(Blobs {
                    inner: Arc::new(inner),
                    place,
                    s3: false,
                })
            }
            BlobsConfig::S3 {
                bucket,
                endpoint,
                region,
                access_key_id,
                secret_access_key,
                allow_http,
            } => {
                let place: Arc<str> = match endpoint {
                    Some(e) => format!("S3 bucket {bucket:?} at {e}"),
                    None => format!("S3 bucket {bucket:?} in AWS region {region}"),
                }
                .into();
                if let Some(e) = endpoint.as_deref() {
                    // object_store would only fail at the first request, with "builder error".
                    if e.get(..7)
                        .is_some_and(|s| s.eq_ignore_ascii_case("http://"))
                        && !allow_http
                    {
                        return Err(BlobError::Config(format!(
                            "the S3 endpoint {e} is plain HTTP, which [blobs] refuses while \
                             allow_http is off: set allow_http = true (only where the network \
                             between mailproof and the server is trusted) or use an https:// endpoint"
                        )));
                    }
                }
                let mut b = AmazonS3Builder::new()
                    .with_bucket_name(bucket)
                    .with_region(region)
                    .with_access_key_id(access_key_id)
                    .with_secret_access_key(secret_access_key)
                    .with_allow_http(*allow_http);
                if let Some(e) = endpoint {
                    b = b.with_endpoint(e);
                }
                // object_store retries a failed request for up to 3 minutes by default, holding a
                // render slot and hiding the outage from /healthz all that time. A short bound
                // lets the worker release the job (a storage fault is not an attempt) and say so.
                b = b.with_retry(object_store::RetryConfig {
                    backoff: object_store::BackoffConfig::default(),
                    max_retries: 3,
                    retry_timeout: std::time::Duration::from_secs(10),
                });
                let inner = b.build().map_err(|cause| BlobError::Store {
                    place: place.clone(),
                    action: "reading the [blobs] settings".into(),
                    cause: Box::new(cause),
                    hint: "",
                })?;
                Ok(Blobs {
                    inner: Arc::new(inner),
                    place,
                    s3: true,
                })
            }
        }
    }

    /// Whether the store answers with the configured bucket and credentials: one listing request,
    /// made at startup so that a wrong setting stops the service instead of failing every
    /// screenshot later (and a missing bucket is otherwise taken for a missing screenshot, since
    /// S3 answers both with 404).
    pub async fn check(&self) -> Result<(), BlobError> {
        let prefix = ObjectPath::from("shots");
        // The listing is paged lazily: the first entry costs one request, however full the bucket.
        match self.inner.list(Some(&prefix)).next().await {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(self.fail("listing shots/", e)),
        }
    }

    /// The error of `action`, with where it happened and, for S3, the settings that cause it.
    fn fail(&self, action: impl Into<String>, cause: object_store::Error) -> BlobError {
        // object_store gives the status a kind only for single-object requests; a refused listing
        // is `Generic` with the status in its text (the typed error is private to the crate).
        let text = cause.to_string();
        let refused = matches!(
            cause,
            object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
        ) || text.contains(" 403 Forbidden")
            || text.contains(" 401 Unauthorized");
        let hint = if !self.s3 {
            ""
        } else if refused {
            "; check access_key_id and secret_access_key in [blobs], and that they may read, write \
             and list the bucket"
        } else if text.contains("NoSuchBucket") {
            "; create the bucket, or correct bucket (and endpoint) in [blobs]"
        } else if unreachable(&cause) {
            "; is an S3 server listening at that endpoint, and is endpoint in [blobs] right?"
        } else {
            ""
        };
        BlobError::Store {
            place: self.place.clone(),
            action: action.into(),
            cause: Box::new(cause),
            hint,
        }
    }

    fn path(key: &str) -> Result<ObjectPath, BlobError> {
        ObjectPath::parse(key).map_err(|_| BlobError::Key(key.to_string()))
    }

    /// Writes (or replaces) a blob. Local writes go to a temporary file renamed into place, so a
    /// reader never sees half a screenshot.
    pub async fn put(&self, key: &str, data: Vec<u8>) -> Result<(), BlobError> {
        self.inner
            .put(&Self::path(key)?, PutPayload::from(Bytes::from(data)))
            .await
            .map_err(|e| self.fail(format!("writing {key}"), e))?;
        Ok(())
    }

    /// `None` when the blob does not exist.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> {
        let read = |e| self.fail(format!("reading {key}"), e);
        match self.inner.get(&Self::path(key)?).await {
            Ok(r) => Ok(Some(r.bytes().await.map_err(read)?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(read(e)),
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
            .await
            .map_err(|e| self.fail(format!("listing {prefix}/"), e))?;
        for k in keys {
            match self.inner.delete(&k).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.fail(format!("deleting {k}"), e)),
            }
        }
        Ok(())
    }
}

/// Whether `e` comes from failing to reach the server at all (refused, reset, timed out, no route),
/// found by the I/O error at the bottom of its chain.
fn unreachable(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::*;
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                ConnectionRefused
                    | ConnectionReset
                    | ConnectionAborted
                    | NotConnected
                    | TimedOut
                    | AddrNotAvailable
                    | HostUnreachable
                    | NetworkUnreachable
            );
        }
        next = err.source();
    }
    false
}

/// Where a picture of `client_id` in `test_id` lives: `shots/<test>/<client>/<name>.png`. A
/// visual diff's highlight ([`Picture::Diff`]) is stored beside the newer test's screenshots, so
/// that deleting that test (or its retention) removes it too.
pub fn screenshot_key(test_id: &str, client_id: &str, picture: &Picture) -> String {
    format!("{}/{client_id}/{picture}.png", test_prefix(test_id))
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
    fn a_diff_lies_beside_the_new_tests_screenshots() {
        let base = domain::TestId::generate().to_string();
        let diff = Picture::Diff {
            base: base.clone(),
            variant: domain::Variant::NoImages,
        };
        let key = screenshot_key("newtest", "gmail_chrome_web", &diff);
        assert_eq!(
            key,
            format!("shots/newtest/gmail_chrome_web/diff-{base}-no_images.png")
        );
        assert!(key.starts_with(&test_prefix("newtest")));
    }
}
