//! Fidelity probes agree with the transformation: a probe expected red for a client is one whose
//! deciding markup the transformation removes for that client, and the reverse.

use emulate::probes::{expected, ProbeColour, PROBES};
use emulate::transform;

use super::shipped;

#[test]
fn every_probe_decides_a_known_feature_and_marks_its_sample_element() {
    for p in PROBES {
        assert!(emulate::features::effect(p.slug).is_some(), "{}", p.slug);
        assert!(
            p.html.contains(&format!("data-probe=\"{}\"", p.slug)),
            "{} lacks its data-probe element",
            p.slug
        );
        assert!(
            p.html.contains("#00ff00") && p.html.contains("#ff0000"),
            "{}",
            p.slug
        );
    }
}

#[test]
fn expected_colours_follow_what_the_transformation_removes() {
    let (catalog, book) = shipped();
    let mut red = 0;
    for c in catalog.clients() {
        let set = book.get(&c.rules).expect("rule set");
        for p in PROBES {
            let exp = expected(p, set);
            let out = transform(p.html, c, &book).expect("probe transforms");
            let noted = std::iter::once(p.slug)
                .chain(p.requires.iter().copied())
                .any(|slug| {
                    out.removed
                        .iter()
                        .any(|r| r.starts_with(&format!("{slug} x")))
                });
            assert_eq!(
                exp.colour == ProbeColour::Red,
                noted,
                "{} on {}: expected {:?}, transformation noted {:?}",
                p.slug,
                c.id,
                exp,
                out.removed
            );
            assert!(
                out.html.contains(&format!("data-probe=\"{}\"", p.slug)),
                "{} on {}: the sample element must survive",
                p.slug,
                c.id
            );
            if exp.colour == ProbeColour::Red {
                red += 1;
            }
        }
    }
    assert!(red > 0, "some clients lack some probed features");
}

#[test]
fn known_answers_hold() {
    let (catalog, book) = shipped();
    let rules = |id: &str| {
        let c = catalog.get(id).expect("client");
        book.get(&c.rules).expect("rules")
    };
    let by_slug = |slug: &str| PROBES.iter().find(|p| p.slug == slug).expect("probe");
    assert_eq!(
        expected(by_slug("css-position"), rules("gmail_chrome_web")).colour,
        ProbeColour::Red
    );
    assert_eq!(
        expected(by_slug("css-position"), rules("applemail_macos")).colour,
        ProbeColour::Green
    );
    assert_eq!(
        expected(by_slug("css-at-media"), rules("outlook2016_win")).colour,
        ProbeColour::Red
    );
    assert_eq!(
        expected(by_slug("html-style"), rules("gmx_chrome_web")).colour,
        ProbeColour::Red
    );
    assert_eq!(
        expected(by_slug("css-display-flex"), rules("applemail_macos")).colour,
        ProbeColour::Green
    );
}
