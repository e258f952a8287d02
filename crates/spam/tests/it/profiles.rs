//! Profile file loading and validation.

use spam::{EngineKind, FilterProfiles, FilterType, SpamError};

use crate::{shipped_profiles, Harness, Outcome, TestFn};

pub fn tests() -> Vec<(&'static str, TestFn)> {
    vec![
        (
            "profiles::shipped_file_has_a_strict_b2b_and_a_lenient_b2c_profile_per_engine",
            shipped_file_has_a_strict_b2b_and_a_lenient_b2c_profile_per_engine,
        ),
        (
            "profiles::duplicate_names_are_rejected",
            duplicate_names_are_rejected,
        ),
        (
            "profiles::names_too_long_for_a_seed_address_are_rejected",
            names_too_long_for_a_seed_address_are_rejected,
        ),
        (
            "profiles::thresholds_in_the_wrong_order_are_rejected",
            thresholds_in_the_wrong_order_are_rejected,
        ),
        (
            "profiles::unknown_engines_and_fields_are_rejected",
            unknown_engines_and_fields_are_rejected,
        ),
        (
            "profiles::a_missing_file_names_its_path",
            a_missing_file_names_its_path,
        ),
    ]
}

const ONE: &str = r#"
[[filter]]
client = "A"
type = "b2b"
description = "a"
engine = "builtin"
spam_at = 5.0
ham_below = 2.0
"#;

fn invalid(text: &str) -> String {
    match FilterProfiles::parse(text) {
        Err(SpamError::ProfilesInvalid(why)) => why,
        other => panic!("expected ProfilesInvalid, got {other:?}"),
    }
}

fn shipped_file_has_a_strict_b2b_and_a_lenient_b2c_profile_per_engine(_: &Harness) -> Outcome {
    let profiles = shipped_profiles();
    for engine in EngineKind::ALL {
        let of = |kind| {
            profiles
                .all()
                .iter()
                .find(|p| p.engine == engine && p.kind == kind)
                .unwrap_or_else(|| panic!("{engine:?} has a {kind:?} profile"))
        };
        let (b2b, b2c) = (of(FilterType::B2b), of(FilterType::B2c));
        assert!(
            b2b.spam_at <= b2c.spam_at,
            "{engine:?}: b2b is the stricter one"
        );
    }
    Ok(())
}

fn duplicate_names_are_rejected(_: &Harness) -> Outcome {
    let why = invalid(&format!("{ONE}{}", ONE.replace("\"A\"", "\"a\"")));
    assert!(why.contains("defined twice"), "{why}");
    Ok(())
}

/// A seed address is `<16-character key>.<profile slug>@domain`, and SMTP allows 64 octets before
/// the `@`: a longer profile name would make its filter unreachable by mail.
fn names_too_long_for_a_seed_address_are_rejected(_: &Harness) -> Outcome {
    let long = "mailproof authentication & content (corporate gateway)";
    let why = invalid(&ONE.replace("\"A\"", &format!("{long:?}")));
    assert!(why.contains("more than the 64 SMTP allows"), "{why}");
    Ok(())
}

fn thresholds_in_the_wrong_order_are_rejected(_: &Harness) -> Outcome {
    let why = invalid(&ONE.replace("ham_below = 2.0", "ham_below = 9.0"));
    assert!(
        why.contains("ham_below (9) must not be above spam_at (5)"),
        "{why}"
    );
    Ok(())
}

fn unknown_engines_and_fields_are_rejected(_: &Harness) -> Outcome {
    let why = invalid(&ONE.replace("builtin", "bogofilter"));
    assert!(why.contains("bogofilter"), "{why}");
    let why = invalid(&ONE.replace("spam_at", "spam_above"));
    assert!(why.contains("spam_above"), "{why}");
    let why = invalid("");
    assert!(why.contains("no [[filter]]"), "{why}");
    Ok(())
}

fn a_missing_file_names_its_path(_: &Harness) -> Outcome {
    let err = FilterProfiles::load(std::path::Path::new("/nonexistent/spam-filters.toml"))
        .expect_err("missing file");
    assert!(
        err.to_string().contains("/nonexistent/spam-filters.toml"),
        "{err}"
    );
    Ok(())
}
