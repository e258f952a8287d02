//! The "why" panel beside a client's screenshot: that client's code analysis and tips, computed by
//! the operations the API calls too (`app::results::{client_analysis, client_tips}`), with each
//! line number linking to the line in the test's source view.

use std::collections::BTreeMap;

use emulate::{Analysis, Finding, Severity, Tip};
use maud::{html, Markup};
use store::TestRow;

use crate::session::Viewer;
use crate::WebState;

/// Line links shown per finding before the rest are summed up: an attribute used on every row of a
/// long email would otherwise fill the panel with numbers.
const MAX_LINE_LINKS: usize = 12;

/// Findings (or behaviour groups) listed open per severity; more are folded under "N more".
const SHOWN_FINDINGS: usize = 8;

/// The panel for `client` of `test`, for its signed-in owner. A failure of one part (the content
/// removed by retention, a client no longer on the plan) is said in that part; the screenshot
/// beside it still shows.
pub(crate) async fn panel(
    state: &WebState,
    viewer: &Viewer,
    test: &TestRow,
    client: &str,
) -> Markup {
    let analysis = app::results::client_analysis(&state.app, test, client).await;
    let tips = app::results::client_tips(&state.app, &viewer.caller, client);
    let source = format!("/tests/{}/content?view=source", test.id);
    html! {
        aside.why aria-labelledby="why-h" {
            h2 id="why-h" { "Why it looks like this" }
            @match &analysis {
                Ok(a) => (analysis_markup(a, &source)),
                Err(e) => p.error { "The code analysis is not available: " (e.message) }
            }
            // The checks judge the whole email, whatever the client: a pointer, not a copy.
            p.checks-link {
                "Accessibility and content (language, alt text, contrast, weight, Gmail clipping): "
                a href={ "/tests/" (test.id) "/checks" } { "see the checks" } "."
            }
            @match &tips {
                Ok((_, t)) => (tips_markup(t)),
                Err(e) => p.error { "Tips are not available: " (e.message) }
            }
        }
    }
}

fn severity_heading(s: Severity) -> (&'static str, &'static str) {
    match s {
        Severity::Error => (
            "Errors",
            "Dropped by this client: the screenshot shows the email without them.",
        ),
        Severity::Warning => ("Warnings", "Supported only partly by this client."),
        Severity::Info => (
            "Information",
            "Known behaviours of this client that apply to this email.",
        ),
    }
}

fn analysis_markup(a: &Analysis, source: &str) -> Markup {
    html! {
        section.analysis aria-labelledby="analysis-h" {
            h3 id="analysis-h" { "Code analysis" span.help { " (rule set " (a.rule_set) ")" } }
            @if a.findings.is_empty() {
                p.pass { "Nothing in this email is dropped, partly supported or changed by this client." }
            }
            @for s in [Severity::Error, Severity::Warning, Severity::Info] {
                @let found: Vec<&Finding> = a.of(s).collect();
                @if !found.is_empty() {
                    @let (title, help) = severity_heading(s);
                    section.severity data-severity=(s.name()) aria-labelledby={ "sev-" (s.name()) } {
                        h4 id={ "sev-" (s.name()) } { (title) " (" (found.len()) ")" }
                        p.help { (help) }
                        @let items: Vec<Markup> = if s == Severity::Info {
                            group_by_feature(&found).iter().map(|g| info_group(g, source)).collect()
                        } else {
                            found.iter().map(|f| finding(f, source)).collect()
                        };
                        ul.findings { @for item in items.iter().take(SHOWN_FINDINGS) { (item) } }
                        // A long list (Outlook's Word engine drops dozens of things) shows its
                        // first few; the rest are one click away, still in the page.
                        @if items.len() > SHOWN_FINDINGS {
                            details.more-findings {
                                summary { (items.len() - SHOWN_FINDINGS) " more " (title.to_lowercase()) }
                                ul.findings { @for item in items.iter().skip(SHOWN_FINDINGS) { (item) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn finding(f: &Finding, source: &str) -> Markup {
    html! {
        li.finding data-property=(f.property) {
            code { (f.property) } " — " (f.message) " " (line_links(&f.lines, source))
        }
    }
}

/// Info findings of one behaviour (`dark-mode`, `class-prefix`...), which an email triggers once
/// per property or attribute it uses.
struct InfoGroup<'a> {
    feature: &'a str,
    findings: Vec<&'a Finding>,
}

fn group_by_feature<'a>(found: &[&'a Finding]) -> Vec<InfoGroup<'a>> {
    let mut by: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for f in found {
        let list = by.entry(f.feature.as_str()).or_default();
        if list.is_empty() {
            order.push(f.feature.as_str());
        }
        list.push(f);
    }
    order
        .into_iter()
        .map(|feature| InfoGroup {
            feature,
            findings: by.remove(feature).unwrap_or_default(),
        })
        .collect()
}

fn info_group(g: &InfoGroup<'_>, source: &str) -> Markup {
    if let [only] = g.findings.as_slice() {
        return finding(only, source);
    }
    let mut lines: Vec<u32> = g
        .findings
        .iter()
        .flat_map(|f| f.lines.iter().copied())
        .collect();
    lines.sort_unstable();
    lines.dedup();
    let properties: Vec<&str> = g.findings.iter().map(|f| f.property.as_str()).collect();
    html! {
        li.finding.grouped data-feature=(g.feature) {
            details {
                summary {
                    code { (g.feature) } " — " (g.findings.len()) " properties: " (properties.join(", "))
                }
                ul { @for f in &g.findings { (finding(f, source)) } }
            }
            " " (line_links(&lines, source))
        }
    }
}

fn line_links(lines: &[u32], source: &str) -> Markup {
    let shown = &lines[..lines.len().min(MAX_LINE_LINKS)];
    html! {
        @if !lines.is_empty() {
            span.lines {
                (if lines.len() == 1 { "Line " } else { "Lines " })
                @for (i, n) in shown.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href={ (source) "#L" (n) } { span.vh { "line " } (n) }
                }
                @if lines.len() > shown.len() { " and " (lines.len() - shown.len()) " more" }
            }
        }
    }
}

fn tips_markup(tips: &[Tip]) -> Markup {
    html! {
        section.tips aria-labelledby="tips-h" {
            h3 id="tips-h" { "Tips for this client" }
            @if tips.is_empty() {
                p { "No advice: this client's rule set drops nothing a typical email relies on." }
            } @else {
                ol { @for t in tips { li data-feature=(t.feature) { strong { (t.name) } ": " (t.tip) } } }
            }
        }
    }
}

/// The source view with one anchor per line (`#L7`), which the panel's line links target.
pub(crate) fn numbered_source(src: &str) -> Markup {
    html! {
        @for (i, line) in src.lines().enumerate() {
            span.line id={ "L" (i + 1) } { span.no aria-hidden="true" { (i + 1) } (line) "\n" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(severity: Severity, feature: &str, property: &str, lines: &[u32]) -> Finding {
        Finding {
            severity,
            property: property.into(),
            feature: feature.into(),
            message: format!("about {property}"),
            lines: lines.to_vec(),
        }
    }

    #[test]
    fn repeated_info_findings_collapse_into_one_entry_per_behaviour() {
        let mut a = Analysis::default();
        a.client = "c".into();
        a.rule_set = "r".into();
        a.findings = vec![
            f(Severity::Error, "css-display-flex", "display:flex", &[7]),
            f(Severity::Info, "dark-mode", "color", &[3, 9]),
            f(Severity::Info, "class-prefix", "class attribute", &[4]),
            f(Severity::Info, "dark-mode", "background-color", &[3, 5]),
        ];
        let out = analysis_markup(&a, "/tests/x/content?view=source").into_string();
        assert_eq!(
            out.matches("data-feature=\"dark-mode\"").count(),
            1,
            "{out}"
        );
        assert!(
            out.contains("2 properties: color, background-color"),
            "{out}"
        );
        // The group's lines are the union, each once and in order.
        let group = &out[out.find("data-feature=\"dark-mode\"").unwrap_or(0)..];
        let tail = &group[group.find("</details>").unwrap_or(0)..];
        assert!(
            tail.starts_with("</details> <span class=\"lines\">Lines "),
            "{tail}"
        );
        assert_eq!(tail.matches("#L3\"").count(), 1, "{tail}");
        assert!(tail.find("#L5\"") < tail.find("#L9\""), "{tail}");
        // A behaviour seen once stays a plain finding; errors are never grouped.
        assert!(out.contains("data-property=\"class attribute\""), "{out}");
        assert!(
            out.contains("href=\"/tests/x/content?view=source#L7\""),
            "{out}"
        );
        assert!(out.contains("Information (3)"), "{out}");
    }

    #[test]
    fn a_long_list_of_findings_shows_its_first_few_and_folds_the_rest() {
        let mut a = Analysis::default();
        a.findings = (0..20)
            .map(|i| f(Severity::Error, "x", &format!("p{i}"), &[i]))
            .collect();
        let out = analysis_markup(&a, "/s").into_string();
        assert!(out.contains("Errors (20)"), "{out}");
        let (open, folded) =
            out.split_at(out.find("<details class=\"more-findings\">").unwrap_or(0));
        assert_eq!(
            open.matches("<li class=\"finding\"").count(),
            SHOWN_FINDINGS,
            "{out}"
        );
        assert!(
            folded.contains("<summary>12 more errors</summary>"),
            "{out}"
        );
        assert_eq!(folded.matches("<li class=\"finding\"").count(), 12);
        // Every finding is still in the page, in order.
        assert!(out.find("p7<") < out.find("p8<"));
    }

    #[test]
    fn long_line_lists_are_cut_with_a_count() {
        let lines: Vec<u32> = (1..=20).collect();
        let out = line_links(&lines, "/s").into_string();
        assert_eq!(out.matches("<a ").count(), MAX_LINE_LINKS);
        assert!(out.ends_with(" and 8 more</span>"), "{out}");
    }

    #[test]
    fn source_lines_get_anchors_and_keep_their_text_escaped() {
        let out = numbered_source("<p>\n  <b>x</b>").into_string();
        assert!(out.contains("id=\"L1\""), "{out}");
        assert!(out.contains("id=\"L2\""), "{out}");
        assert!(out.contains("&lt;b&gt;x&lt;/b&gt;"), "{out}");
        assert!(!out.contains("id=\"L3\""), "{out}");
    }
}
