//! Issue 22 scope 6: the per-client analytics matrix in `data/analytics-matrix.toml` still says
//! what the engines do. One profile per engine (and Outlook's Word engine, and a webmail that
//! strips ids) is measured again in real engines by `analytics-matrix check`, which fails when
//! a signal differs from the file.

use std::process::Command;

const MATRIX: &str = env!("CARGO_BIN_EXE_analytics-matrix");

#[test]
fn the_stored_matrix_matches_a_fresh_measurement_in_each_engine() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data");
    let out = Command::new(MATRIX)
        .args([
            "check",
            data,
            "applemail_macos",
            "thunderbird_win",
            "outlook365_win",
            "gmail_chrome_web",
        ])
        .output()
        .expect("run analytics-matrix");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "analytics-matrix check failed (engines missing? run scripts/setup.sh):\n{stdout}\n{stderr}"
    );
    for id in [
        "applemail_macos",
        "thunderbird_win",
        "outlook365_win",
        "gmail_chrome_web",
    ] {
        assert!(
            stdout.contains(&format!("{id}: same as measured at")),
            "{id} not compared:\n{stdout}\n{stderr}"
        );
    }
}

#[test]
fn a_file_that_disagrees_with_the_engines_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let data = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data"));
    for f in ["clients.toml", "behaviours.toml"] {
        std::fs::copy(data.join(f), dir.path().join(f)).expect("copy");
    }
    std::os::unix::fs::symlink(data.join("rules"), dir.path().join("rules")).expect("link");
    let text = std::fs::read_to_string(data.join("analytics-matrix.toml")).expect("matrix");
    let mut matrix = analytics::matrix::Matrix::parse(&text).expect("parse");
    let row = matrix
        .clients
        .iter_mut()
        .find(|c| c.id == "applemail_macos")
        .expect("row");
    assert_eq!(
        row.dark,
        analytics::matrix::DarkSignal::WhenOptedIn,
        "Apple Mail applies prefers-color-scheme to emails that declare color-scheme"
    );
    row.dark = analytics::matrix::DarkSignal::Always;
    std::fs::write(
        dir.path().join("analytics-matrix.toml"),
        matrix.to_toml().expect("toml"),
    )
    .expect("write");
    let out = Command::new(MATRIX)
        .arg("check")
        .arg(dir.path())
        .arg("applemail_macos")
        .output()
        .expect("run analytics-matrix");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a wrong dark cell passed: {stderr}");
    assert!(stderr.contains("applemail_macos: file"), "{stderr}");
}
