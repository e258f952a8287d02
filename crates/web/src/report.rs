//! A campaign's report as the campaign page draws it: the typed `analytics::CampaignReport`
//! (`Store::campaign_report`, the value `getcampaignstats` serialises), as tables with
//! server-drawn bars (no chart script). Every figure a person reads is also in a `data-` attribute
//! of its cell, so the browser walk compares them with the API's.

use analytics::classify::{Client, Device, Source};
use analytics::report::{share, CampaignReport, Period, Tally};
use maud::{html, Markup};

use crate::date;

fn source_label(s: Source) -> &'static str {
    match s {
        Source::Direct => "The reader's own client",
        Source::AppleMpp => "Apple Mail Privacy Protection",
        Source::GmailProxy => "Gmail's image proxy",
        Source::YahooProxy => "Yahoo's image proxy",
        Source::Scanner => "Link or security scanner",
        Source::Unknown => "Unknown",
    }
}

fn client_label(c: Client) -> &'static str {
    match c {
        Client::OutlookWindows => "Outlook for Windows",
        Client::OutlookMac => "Outlook for Mac",
        Client::Thunderbird => "Thunderbird",
        Client::AppleMailMacos => "Apple Mail (macOS)",
        Client::AppleMailIos => "Apple Mail (iOS)",
        Client::Android => "Android mail app",
        Client::Gmail => "Gmail",
        Client::YahooAol => "Yahoo / AOL",
        Client::Webmail => "Webmail in a browser",
        Client::Other => "Other",
        Client::Unknown => "Unknown",
    }
}

fn device_label(d: Device) -> &'static str {
    match d {
        Device::Desktop => "Desktop",
        Device::Mobile => "Phone",
        Device::Tablet => "Tablet",
        Device::Unknown => "Unknown",
    }
}

pub(crate) fn percent(part: i64, whole: i64) -> String {
    shown_share(share(part, whole), part)
}

/// A share to one decimal; one that is not nothing never reads "0.0 %".
fn shown_share(s: Option<f64>, part: i64) -> String {
    match s {
        None => "—".to_string(),
        Some(s) if part > 0 && s * 100.0 < 0.05 => "< 0.1 %".to_string(),
        Some(s) => format!("{:.1} %", s * 100.0),
    }
}

/// A bar `value / max` of the cell's width; the number beside it is what is read.
fn bar(value: i64, max: i64, class: &str) -> Markup {
    let width = if max > 0 {
        value as f64 * 100.0 / max as f64
    } else {
        0.0
    };
    html! { span class={ "bar " (class) } style={ "width:" (format!("{width:.2}")) "%" } aria-hidden="true" {} }
}

/// One row of a bar table: label, bar, count.
fn bar_row(key: &str, label: &str, value: i64, max: i64) -> Markup {
    html! {
        tr data-key=(key) {
            th scope="row" { (label) }
            td.bar-cell { (bar(value, max, "reliable")) }
            td.num data-value=(value) { (value) }
        }
    }
}

fn tally_cells(t: &Tally) -> Markup {
    html! {
        td.num data-hits=(t.hits) { (t.hits) }
        td.num data-unique=(t.unique) { (t.unique) }
    }
}

fn periods(id: &str, caption: &str, rows: &[Period], hourly: bool) -> Markup {
    let max = rows.iter().map(|p| p.opens).max().unwrap_or(0);
    html! {
        div.scroll tabindex="0" role="region" aria-label=(caption) { table.list.chart id=(id) {
            caption { (caption) }
            thead { tr { th scope="col" { "From" } th scope="col" { "Reliable and machine" } th scope="col" { "Reliable" } th scope="col" { "Machine" } th scope="col" { "All opens" } } }
            tbody {
                @for p in rows {
                    tr data-start=(p.start) {
                        th scope="row" {
                            @if hourly { (date(p.start)) } @else { (date(p.start).split(' ').next().unwrap_or_default()) }
                        }
                        td.bar-cell { (bar(p.reliable, max, "reliable")) (bar(p.machine, max, "machine")) }
                        td.num data-reliable=(p.reliable) { (p.reliable) }
                        td.num data-machine=(p.machine) { (p.machine) }
                        td.num data-opens=(p.opens) { (p.opens) }
                    }
                }
            }
        } }
    }
}

pub fn section(r: &CampaignReport) -> Markup {
    let o = &r.opens;
    let subs = r.total_subscribers;
    let e = &r.engagement;
    let engaged_max = [e.read, e.skim, e.glance, e.not_measurable]
        .into_iter()
        .max()
        .unwrap_or(0);
    let client_max = r.clients.iter().map(|c| c.opens).max().unwrap_or(0);
    let device_max = r.devices.iter().map(|d| d.opens).max().unwrap_or(0);
    html! {
        section #report aria-labelledby="report-h" {
            h2 #report-h { "Report" }
            @if r.test_mode {
                p.note role="note" { "Test mode: these are test hits. Activating the campaign clears them." }
            }
            @if !r.apple_mpp.ranges_configured {
                p.note role="note" { "Apple's relay ranges are not configured: Apple's opens were recognised by the user agent alone." }
            } @else if r.apple_mpp.by_agent_only > 0 {
                p.note role="note" { (r.apple_mpp.by_agent_only) " of Apple's opens were recognised by the user agent alone (recorded while no relay ranges were configured)." }
            }
            h3 { "Opens: readers and machines" }
            p.help { "Reliable opens are fetched when a reader opens the email (their own client, or Gmail's and Yahoo's proxies); machine opens are Apple's prefetching relays and scanners. Percentages are of " (subs) " subscribers." }
            table.list #opens {
                caption { "Opens" }
                thead { tr { th scope="col" { "" } th scope="col" { "Opens" } th scope="col" { "Recipients" } th scope="col" { "Of subscribers" } } }
                tbody {
                    @for (key, label, t) in [("reliable", "Reliable", &o.reliable), ("machine", "Machine", &o.machine), ("unknown", "Unknown", &o.unknown), ("total", "All", &o.total)] {
                        tr data-key=(key) { th scope="row" { (label) } (tally_cells(t)) td.num { (percent(t.unique, subs)) } }
                    }
                }
            }
            table.list #sources {
                caption { "Opens by source" }
                thead { tr { th scope="col" { "Source" } th scope="col" { "Opens" } th scope="col" { "Recipients" } } }
                tbody {
                    @for s in &r.sources {
                        tr data-key=(s.source.as_str()) { th scope="row" { (source_label(s.source)) } (tally_cells(&s.opens)) }
                    }
                }
            }
            h3 { "Opens over time" }
            (periods("per-hour", "Opens per hour (UTC)", &r.per_hour, true))
            (periods("per-day", "Opens per day (UTC)", &r.per_day, false))
            div.legend aria-hidden="true" { span.bar.reliable {} " reliable " span.bar.machine {} " machine" }
            h3 { "Engagement (reliable opens only)" }
            p.help { "Read: open more than " (r.thresholds.skim) " s; skim: more than " (r.thresholds.delete) " s; glance: " (r.thresholds.delete) " s or less. Opens through a proxy that hides timing, and opens whose client sent no timing, are not measurable." }
            table.list.chart #engagement {
                caption { "Reliable opens by time open" }
                tbody {
                    (bar_row("read", "Read", e.read, engaged_max))
                    (bar_row("skim", "Skim", e.skim, engaged_max))
                    (bar_row("glance", "Glance", e.glance, engaged_max))
                    (bar_row("not_measurable", "Not measurable", e.not_measurable, engaged_max))
                }
            }
            h3 { "Clients and devices (reliable opens)" }
            table.list.chart #clients {
                caption { "Clients" }
                tbody { @for c in &r.clients { (bar_row(c.client.as_str(), client_label(c.client), c.opens, client_max)) } }
            }
            table.list.chart #devices {
                caption { "Devices" }
                tbody { @for d in &r.devices { (bar_row(d.device.as_str(), device_label(d.device), d.opens, device_max)) } }
            }
            h3 { "Prints, forwards, dark mode" }
            table.list #signals {
                caption { "Other signals" }
                thead { tr { th scope="col" { "" } th scope="col" { "Hits" } th scope="col" { "Recipients" } } }
                tbody {
                    tr data-key="prints" { th scope="row" { "Printed" } (tally_cells(&r.prints)) }
                    tr data-key="forwards" { th scope="row" { "Forwarded" } (tally_cells(&r.forwards)) }
                    tr data-key="dark" { th scope="row" { "Read in dark mode" } (tally_cells(&r.dark)) }
                }
            }
            p #dark-share { "Dark mode: " (shown_share(r.dark_share, r.dark.unique)) " of recipients who opened (Apple's relays included: they fetch with the device's scheme)." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_that_is_not_nothing_never_reads_zero() {
        assert_eq!(percent(1, 5_000), "< 0.1 %");
        assert_eq!(percent(3, 5_000), "0.1 %");
        assert_eq!(percent(0, 5_000), "0.0 %");
        assert_eq!(percent(1, 0), "—");
        assert_eq!(percent(1, 4), "25.0 %");
    }
}
