//! Every blob test runs against both backends: local files, and a real S3-compatible server
//! (`s3s-fs` on loopback, see `crate::test_s3`), checking what each keeps on disk too.

use domain::Variant;

use super::*;
use crate::test_s3::{files_under, S3Server};

/// One backend under test, with what keeps it alive.
struct Backend {
    name: &'static str,
    blobs: Blobs,
    /// Where the objects end up on disk: `<data dir>/blobs`, or the S3 server's bucket directory.
    disk: PathBuf,
    _data_dir: tempfile::TempDir,
    _server: Option<S3Server>,
}

impl Backend {
    /// The keys the backend holds on disk, sorted.
    fn on_disk(&self) -> Vec<String> {
        files_under(&self.disk)
    }
}

/// Local files and S3, each fresh.
async fn backends() -> Vec<Backend> {
    let local_dir = tempfile::tempdir().expect("temp dir");
    let local = Backend {
        name: "local",
        blobs: Blobs::open(&BlobsConfig::Local, local_dir.path()).expect("open local blobs"),
        disk: local_dir.path().join("blobs"),
        _data_dir: local_dir,
        _server: None,
    };
    let server = S3Server::start().await;
    let s3_dir = tempfile::tempdir().expect("temp dir");
    let s3 = Backend {
        name: "s3",
        blobs: Blobs::open(&server.config(), s3_dir.path()).expect("open S3 blobs"),
        disk: server.bucket_dir(),
        _data_dir: s3_dir,
        _server: Some(server),
    };
    vec![local, s3]
}

/// Bytes that no layer could mistake for another blob: a PNG signature, then `len` varied bytes.
fn blob(seed: u8, len: usize) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut x = u32::from(seed).wrapping_mul(2_654_435_761).wrapping_add(1);
    out.extend((0..len).map(|_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x.to_le_bytes()[0]
    }));
    out
}

#[tokio::test]
async fn a_blob_reads_back_as_written_and_a_missing_one_is_none() {
    for b in backends().await {
        let key = screenshot_key("t1", "gmail_chrome_web", &Picture::Shot(Variant::Default));
        let data = blob(1, 4_000);
        b.blobs.put(&key, data.clone()).await.expect("put");
        let got = b.blobs.get(&key).await.expect("get");
        assert_eq!(
            got.as_deref(),
            Some(&data[..]),
            "{}: bytes read back",
            b.name
        );
        assert_eq!(
            b.on_disk(),
            vec![key.clone()],
            "{}: one object on disk",
            b.name
        );
        let stored = std::fs::read(b.disk.join(&key)).expect("the object's file");
        assert_eq!(stored, data, "{}: the file holds the bytes", b.name);

        for missing in [
            screenshot_key("t1", "gmail_chrome_web", &Picture::Shot(Variant::NoImages)),
            screenshot_key(
                "nosuchtest",
                "gmail_chrome_web",
                &Picture::Shot(Variant::Default),
            ),
        ] {
            let got = b.blobs.get(&missing).await;
            assert!(
                matches!(got, Ok(None)),
                "{}: {missing} is missing, not an error: {got:?}",
                b.name
            );
        }
    }
}

#[tokio::test]
async fn a_put_replaces_the_blob() {
    for b in backends().await {
        let key = screenshot_key("t1", "outlook_win", &Picture::Shot(Variant::Default));
        b.blobs.put(&key, blob(1, 3_000)).await.expect("first put");
        let second = blob(2, 1_000);
        b.blobs.put(&key, second.clone()).await.expect("second put");
        let got = b.blobs.get(&key).await.expect("get");
        assert_eq!(
            got.as_deref(),
            Some(&second[..]),
            "{}: the newer bytes",
            b.name
        );
        assert_eq!(b.on_disk(), vec![key], "{}: still one object", b.name);
    }
}

#[tokio::test]
async fn deleting_a_test_removes_every_blob_of_it_and_nothing_else() {
    for b in backends().await {
        // `t10` shares `t1`'s leading characters: deleting `t1` must not reach it.
        let doomed = [
            screenshot_key("t1", "gmail_chrome_web", &Picture::Shot(Variant::Default)),
            screenshot_key("t1", "gmail_chrome_web", &Picture::Thumbnail),
            screenshot_key("t1", "gmail_chrome_web", &Picture::FullThumbnail),
            screenshot_key("t1", "iphone15_ios", &Picture::Shot(Variant::NoImages)),
            screenshot_key(
                "t1",
                "gmail_chrome_web",
                &Picture::Diff {
                    base: "t0".into(),
                    variant: Variant::Default,
                },
            ),
        ];
        let kept = [
            screenshot_key("t10", "gmail_chrome_web", &Picture::Shot(Variant::Default)),
            screenshot_key("t2", "gmail_chrome_web", &Picture::Shot(Variant::Default)),
        ];
        for (i, key) in doomed.iter().chain(&kept).enumerate() {
            let seed = u8::try_from(i).expect("a few keys");
            b.blobs.put(key, blob(seed, 500)).await.expect("put");
        }

        b.blobs.delete_test("t1").await.expect("delete_test");
        for key in &doomed {
            assert!(
                matches!(b.blobs.get(key).await, Ok(None)),
                "{}: {key} is gone",
                b.name
            );
        }
        for key in &kept {
            assert!(
                matches!(b.blobs.get(key).await, Ok(Some(_))),
                "{}: {key} is kept",
                b.name
            );
        }
        let mut want: Vec<String> = kept.to_vec();
        want.sort();
        assert_eq!(
            b.on_disk(),
            want,
            "{}: only the other tests' files remain",
            b.name
        );

        b.blobs
            .delete_test("t1")
            .await
            .expect("deleting a test without blobs succeeds");
    }
}

#[tokio::test]
async fn a_large_screenshot_round_trips_intact() {
    // A full-length screenshot of a long email at scale 3 runs to several megabytes.
    for b in backends().await {
        let key = screenshot_key("t1", "iphone15_ios", &Picture::Shot(Variant::Default));
        let data = blob(7, 12 * 1024 * 1024);
        b.blobs.put(&key, data.clone()).await.expect("put");
        let got = b.blobs.get(&key).await.expect("get").expect("present");
        assert!(got[..] == data[..], "{}: 12 MiB read back intact", b.name);
    }
}

#[tokio::test]
async fn a_key_that_is_not_a_path_is_refused_by_both() {
    for b in backends().await {
        for key in ["shots//x.png", "shots/../x.png"] {
            let put = b.blobs.put(key, blob(1, 10)).await;
            assert!(
                matches!(put, Err(BlobError::Key(_))),
                "{}: {key} refused: {put:?}",
                b.name
            );
        }
        assert!(b.on_disk().is_empty(), "{}: nothing written", b.name);
    }
}

/// `server`'s configuration with `change` applied.
fn s3_config(
    server: &S3Server,
    change: impl FnOnce(&mut String, &mut String, &mut bool),
) -> BlobsConfig {
    let mut cfg = server.config();
    if let BlobsConfig::S3 {
        bucket,
        secret_access_key,
        allow_http,
        ..
    } = &mut cfg
    {
        change(bucket, secret_access_key, allow_http);
    }
    cfg
}

#[tokio::test]
async fn a_plain_http_endpoint_without_allow_http_is_refused_when_opened() {
    let server = S3Server::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = s3_config(&server, |_, _, allow_http| *allow_http = false);
    let err = Blobs::open(&cfg, dir.path())
        .expect_err("an http:// endpoint with allow_http off cannot work")
        .to_string();
    assert!(
        err.contains("allow_http = true") && err.contains(server.endpoint()),
        "the error names the endpoint and the setting: {err}"
    );
}

#[tokio::test]
async fn wrong_credentials_fail_naming_bucket_endpoint_and_the_settings_to_check() {
    let server = S3Server::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = s3_config(&server, |_, secret, _| *secret = "not-the-secret".into());
    let blobs = Blobs::open(&cfg, dir.path()).expect("open");
    let key = screenshot_key("t1", "gmail_chrome_web", &Picture::Shot(Variant::Default));
    let errors = [
        blobs.put(&key, blob(1, 10)).await.err(),
        blobs.get(&key).await.err(),
        blobs.delete_test("t1").await.err(),
        blobs.check().await.err(),
    ];
    for err in errors {
        let err = err.expect("refused by the server").to_string();
        for part in [server.bucket(), server.endpoint(), "secret_access_key"] {
            assert!(err.contains(part), "{part:?} in: {err}");
        }
    }
}

#[tokio::test]
async fn check_passes_on_a_reachable_bucket_and_names_a_missing_one() {
    let server = S3Server::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    Blobs::open(&server.config(), dir.path())
        .expect("open")
        .check()
        .await
        .expect("the test server's bucket is reachable");
    Blobs::open(&BlobsConfig::Local, dir.path())
        .expect("open local")
        .check()
        .await
        .expect("local files are always reachable");

    let cfg = s3_config(&server, |bucket, _, _| *bucket = "no-such-bucket".into());
    let err = Blobs::open(&cfg, dir.path())
        .expect("open")
        .check()
        .await
        .expect_err("a missing bucket fails the check")
        .to_string();
    for part in [
        "no-such-bucket",
        server.endpoint(),
        "NoSuchBucket",
        "create the bucket",
    ] {
        assert!(err.contains(part), "{part:?} in: {err}");
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_the_check_naming_it() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let dead = format!("http://127.0.0.1:{port}");
    let cfg = BlobsConfig::S3 {
        bucket: "mailproof".into(),
        endpoint: Some(dead.clone()),
        region: "us-east-1".into(),
        access_key_id: "k".into(),
        secret_access_key: "s".into(),
        allow_http: true,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let err = Blobs::open(&cfg, dir.path())
        .expect("open")
        .check()
        .await
        .expect_err("nothing listens there")
        .to_string();
    for part in [dead.as_str(), "\"mailproof\"", "is an S3 server listening"] {
        assert!(err.contains(part), "{part:?} in: {err}");
    }
}
