//! The JUnit XML report (`--format junit`), the form CI systems show as test results: one
//! `<testsuite>` per phase (screenshots, spam, sender requirements), one `<testcase>` per client,
//! filter or mailbox provider, a
//! `<failure>` with the reason for each that fails the check.

use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;

use crate::report::{Comparison, Report};
use crate::threshold::percent;

struct Case {
    name: String,
    failures: Vec<String>,
    /// Said in `<system-out>`: the figures of a case that passed, or why it was not compared.
    out: String,
}

pub fn write(report: &Report) -> String {
    let shots: Vec<Case> = report
        .clients
        .iter()
        .map(|c| Case {
            name: c.id.clone(),
            failures: report.client_failures(c),
            out: match &c.comparison {
                Some(Comparison::Compared { variants }) => variants
                    .iter()
                    .map(|v| format!("{}: {} changed", v.variant, percent(v.changed_share)))
                    .collect::<Vec<_>>()
                    .join("\n"),
                Some(Comparison::NotCompared { reason }) => format!("not compared: {reason}"),
                None => c.status.clone(),
            },
        })
        .collect();
    let mut suites = vec![(
        "screenshots",
        report.timings.screenshots + report.timings.compare,
        shots,
    )];
    if let Some(spam) = &report.spam {
        let cases = spam
            .filters
            .iter()
            .map(|v| Case {
                name: v.client.clone(),
                failures: report.spam_failure(v).into_iter().collect(),
                out: format!(
                    "spam={} {}",
                    v.spam.map_or("none".into(), |n| n.to_string()),
                    v.details
                ),
            })
            .collect();
        suites.push(("spam", report.timings.spam, cases));
        if let Some(r) = &spam.requirements {
            let cases = r
                .providers
                .iter()
                .map(|p| Case {
                    name: p.name.clone(),
                    failures: report.requirement_failures(p),
                    out: p.summary.clone(),
                })
                .collect();
            suites.push(("requirements", 0.0, cases));
        }
    }
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing to a Vec cannot fail; the results are io::Result only because Writer is generic.
    let _ = write_all(&mut w, report, &suites);
    String::from_utf8_lossy(&w.into_inner()).into_owned() + "\n"
}

fn write_all(
    w: &mut Writer<Vec<u8>>,
    report: &Report,
    suites: &[(&str, f64, Vec<Case>)],
) -> std::io::Result<()> {
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let total: usize = suites.iter().map(|s| s.2.len()).sum();
    let failed: usize = suites
        .iter()
        .map(|s| s.2.iter().filter(|c| !c.failures.is_empty()).count())
        .sum();
    let title = format!("mailproof check {}", report.subject);
    w.create_element("testsuites")
        .with_attribute(("name", title.as_str()))
        .with_attribute(("tests", total.to_string().as_str()))
        .with_attribute(("failures", failed.to_string().as_str()))
        .write_inner_content(|w| {
            for (name, time, cases) in suites {
                let failures = cases.iter().filter(|c| !c.failures.is_empty()).count();
                let suite = format!("mailproof.{name}");
                w.create_element("testsuite")
                    .with_attribute(("name", suite.as_str()))
                    .with_attribute(("tests", cases.len().to_string().as_str()))
                    .with_attribute(("failures", failures.to_string().as_str()))
                    .with_attribute(("errors", "0"))
                    .with_attribute(("time", format!("{time:.3}").as_str()))
                    .write_inner_content(|w| {
                        w.create_element("properties").write_inner_content(|w| {
                            for (k, v) in [
                                ("test_id", report.test_id.as_str()),
                                ("server", report.server.as_str()),
                            ] {
                                w.create_element("property")
                                    .with_attribute(("name", k))
                                    .with_attribute(("value", v))
                                    .write_empty()?;
                            }
                            Ok(())
                        })?;
                        for case in cases {
                            w.create_element("testcase")
                                .with_attribute(("classname", suite.as_str()))
                                .with_attribute(("name", case.name.as_str()))
                                .write_inner_content(|w| {
                                    for f in &case.failures {
                                        w.create_element("failure")
                                            .with_attribute(("message", f.as_str()))
                                            .write_text_content(BytesText::new(f))?;
                                    }
                                    if !case.out.is_empty() {
                                        w.create_element("system-out")
                                            .write_text_content(BytesText::new(&case.out))?;
                                    }
                                    Ok(())
                                })?;
                        }
                        Ok(())
                    })?;
            }
            Ok(())
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use quick_xml::events::Event;
    use quick_xml::Reader;

    use super::*;
    use crate::report::tests::sample;

    /// (suite, case, failure messages) read back with an XML parser, which also proves the
    /// document is well-formed.
    fn parse(xml: &str) -> Vec<(String, String, Vec<String>)> {
        let mut r = Reader::from_str(xml);
        let mut out = Vec::new();
        let mut suite = String::new();
        let mut depth_ok = 0;
        loop {
            match r.read_event().expect("well-formed XML") {
                Event::Eof => break,
                Event::Start(e) | Event::Empty(e) => {
                    let attr = |k: &str| {
                        e.try_get_attribute(k)
                            .expect("attribute")
                            .map(|a| a.unescape_value().expect("unescaped").into_owned())
                            .unwrap_or_default()
                    };
                    match e.name().as_ref() {
                        b"testsuites" => depth_ok += 1,
                        b"testsuite" => suite = attr("name"),
                        b"testcase" => out.push((suite.clone(), attr("name"), Vec::new())),
                        b"failure" => out
                            .last_mut()
                            .expect("a failure inside a testcase")
                            .2
                            .push(attr("message")),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        assert_eq!(depth_ok, 1, "one <testsuites> root");
        out
    }

    #[test]
    fn one_suite_per_phase_one_case_per_client_or_filter_failures_escaped() {
        let mut report = sample();
        report.subject = "<b>&'\"".into();
        let xml = write(&report);
        assert!(
            xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
            "{xml}"
        );
        let cases = parse(&xml);
        let names: Vec<(&str, &str, usize)> = cases
            .iter()
            .map(|(s, c, f)| (s.as_str(), c.as_str(), f.len()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("mailproof.screenshots", "same_client", 0),
                ("mailproof.screenshots", "changed_client", 1),
                ("mailproof.screenshots", "taller_client", 1),
                ("mailproof.screenshots", "new_client", 0),
                ("mailproof.screenshots", "bounced_client", 1),
                ("mailproof.spam", "SpamAssassin", 0),
                ("mailproof.spam", "rspamd", 1),
                ("mailproof.requirements", "Gmail", 1),
                ("mailproof.requirements", "Outlook.com", 0),
            ]
        );
        assert_eq!(
            cases[7].2[0],
            "Gmail would reject it: The message was sent over TLS: received from 192.0.2.1 without TLS. Fix: Enable STARTTLS."
        );
        // The bounce message holds `<`, `>` and `&`: it must come back exactly.
        assert_eq!(
            cases[4].2[0],
            "bounced_client: bounced (550 <mailbox> & unavailable)"
        );
        assert!(xml.contains("failures=\"5\""), "{xml}");
    }

    #[test]
    fn a_report_without_spam_has_only_the_screenshot_suite() {
        let mut report = sample();
        report.spam = None;
        let cases = parse(&write(&report));
        assert!(cases.iter().all(|(s, _, _)| s == "mailproof.screenshots"));
        assert_eq!(cases.len(), 5);
    }
}
