//! Machine or person: the class of one tracking hit, decided from what the hit itself shows (its
//! method, user agent, client address and how soon it followed the recipient's first open).
//!
//! The address is an input only: nothing here keeps it, and no class carries it.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use crate::egress::EgressSet;
use crate::HitKind;

/// A click this soon after the recipient's first open is a link scanner's: a person cannot read an
/// email and click in it within a few hundred milliseconds of it appearing.
pub const SCANNER_WINDOW: Duration = Duration::from_millis(300);

/// Who fetched a tracking URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// The reader's own mail client fetched it.
    Direct,
    /// Apple Mail Privacy Protection's relays, which fetch every image of every message on
    /// download, read or not.
    AppleMpp,
    /// Gmail's image proxy: fetched when the reader opens the email, but once per URL and all at
    /// once, so it shows no reading time.
    GmailProxy,
    /// Yahoo's and AOL's image proxy, likewise.
    YahooProxy,
    /// A link or security scanner: a HEAD request, a headless or scripted user agent, or a click
    /// within [`SCANNER_WINDOW`] of the recipient's first open.
    Scanner,
    /// No user agent, or the bare `Mozilla/5.0` from outside Apple's relay ranges.
    Unknown,
}

/// What kind of device a direct fetch came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    Desktop,
    Mobile,
    Tablet,
    Unknown,
}

/// The mail client behind a hit: from the user agent for direct fetches, from the proxy for
/// Gmail and Yahoo; unknown for Apple's relays and scanners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Client {
    OutlookWindows,
    OutlookMac,
    Thunderbird,
    AppleMailMacos,
    AppleMailIos,
    /// A mail app on Android (its web view, not a browser).
    Android,
    /// Gmail on the web or in its apps (one proxy for all of them).
    Gmail,
    /// Yahoo Mail and AOL Mail (one proxy since 2018).
    YahooAol,
    /// A web browser: a webmail the proxy does not hide (e.g. a self-hosted one).
    Webmail,
    /// A direct fetch from a user agent none of the above matches.
    Other,
    Unknown,
}

/// Implements `as_str`, `parse`, `ALL`, `Display` and `Serialize` for a class enum from one table, so the stored
/// spelling and the parsed one cannot drift apart.
macro_rules! spelled {
    ($ty:ident { $($variant:ident => $s:literal),+ $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The stored and serialised spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $s),+
                }
            }

            /// The class a stored spelling names; `None` for any other text.
            pub fn parse(s: &str) -> Option<$ty> {
                match s {
                    $($s => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

spelled!(Source {
    Direct => "direct",
    AppleMpp => "apple_mpp",
    GmailProxy => "gmail_proxy",
    YahooProxy => "yahoo_proxy",
    Scanner => "scanner",
    Unknown => "unknown",
});

spelled!(Device {
    Desktop => "desktop",
    Mobile => "mobile",
    Tablet => "tablet",
    Unknown => "unknown",
});

spelled!(Client {
    OutlookWindows => "outlook_windows",
    OutlookMac => "outlook_mac",
    Thunderbird => "thunderbird",
    AppleMailMacos => "apple_mail_macos",
    AppleMailIos => "apple_mail_ios",
    Android => "android",
    Gmail => "gmail",
    YahooAol => "yahoo_aol",
    Webmail => "webmail",
    Other => "other",
    Unknown => "unknown",
});

impl Source {
    /// A machine's fetch, not a reader's: reported apart from reliable opens.
    pub fn is_machine(self) -> bool {
        matches!(self, Source::AppleMpp | Source::Scanner)
    }

    /// A reader's open: a direct fetch, or a proxy that fetches when the reader opens.
    pub fn is_reliable(self) -> bool {
        matches!(
            self,
            Source::Direct | Source::GmailProxy | Source::YahooProxy
        )
    }

    /// The fetcher hides how long the email stayed open (it fetches every URL at once, or
    /// before anyone reads), so reading time is not measurable there.
    pub fn hides_timing(self) -> bool {
        !matches!(self, Source::Direct)
    }
}

/// What one hit shows about who made it.
#[derive(Clone, Copy, Debug)]
pub struct HitFacts<'a> {
    pub kind: HitKind,
    /// A HEAD request: only scanners check a URL without fetching it.
    pub head: bool,
    pub user_agent: &'a str,
    /// The client's address, used only to test it against Apple's relay ranges.
    pub address: Option<IpAddr>,
    /// How long after the same recipient's first open of this campaign this click came, when
    /// that open was seen (only clicks are judged by it).
    pub since_first_open: Option<Duration>,
}

/// The classes of one hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classified {
    pub source: Source,
    pub client: Client,
    pub device: Device,
    /// Counted as Apple MPP on the bare user agent alone, with no relay ranges configured to
    /// check the address against.
    pub mpp_by_agent_only: bool,
}

impl Classified {
    fn of(source: Source, client: Client) -> Classified {
        Classified {
            source,
            client,
            device: Device::Unknown,
            mpp_by_agent_only: false,
        }
    }
}

/// The user agent Apple's relays send, exactly.
const APPLE_RELAY_AGENT: &str = "Mozilla/5.0";

/// Lower-case fragments of the user agents of headless browsers, HTTP libraries, and security
/// and link scanners (which follow every URL of a message on delivery).
const SCANNER_AGENTS: &[&str] = &[
    "headlesschrome",
    "phantomjs",
    "python-requests",
    "python-urllib",
    "aiohttp",
    "curl/",
    "wget/",
    "go-http-client",
    "okhttp",
    "java/",
    "libwww-perl",
    "apache-httpclient",
    "bot/",
    "bot;",
    "bot)",
    "crawler",
    "spider",
    "barracuda",
    "mimecast",
    "proofpoint",
    "urlscan",
];

/// Decides the classes of one hit. `egress` is Apple's relay ranges when the operator configured
/// them; without them a bare `Mozilla/5.0` counts as Apple MPP on the agent alone (and says so).
pub fn classify(facts: &HitFacts<'_>, egress: Option<&EgressSet>) -> Classified {
    let ua = facts.user_agent.trim();
    let lower = ua.to_ascii_lowercase();
    let scripted = SCANNER_AGENTS.iter().any(|s| lower.contains(s));
    let hasty_click = matches!(facts.kind, HitKind::Click(_))
        && facts.since_first_open.is_some_and(|d| d < SCANNER_WINDOW);
    if facts.head || scripted || hasty_click {
        return Classified::of(Source::Scanner, Client::Unknown);
    }
    if ua.contains("GoogleImageProxy") {
        return Classified::of(Source::GmailProxy, Client::Gmail);
    }
    if ua.contains("YahooMailProxy") {
        return Classified::of(Source::YahooProxy, Client::YahooAol);
    }
    if ua == APPLE_RELAY_AGENT {
        return match egress {
            Some(set) if facts.address.is_some_and(|a| set.contains(a)) => {
                Classified::of(Source::AppleMpp, Client::Unknown)
            }
            Some(_) => Classified::of(Source::Unknown, Client::Unknown),
            None => Classified {
                mpp_by_agent_only: true,
                ..Classified::of(Source::AppleMpp, Client::Unknown)
            },
        };
    }
    if ua.is_empty() {
        return Classified::of(Source::Unknown, Client::Unknown);
    }
    Classified {
        source: Source::Direct,
        client: client_of(ua),
        device: device_of(ua),
        mpp_by_agent_only: false,
    }
}

/// The client a direct fetch's user agent names.
fn client_of(ua: &str) -> Client {
    let browser = ["Chrome/", "Firefox/", "Edg/", "Version/"]
        .iter()
        .any(|b| ua.contains(b))
        && ua.contains("Safari/")
        || ua.contains("Firefox/");
    if ua.contains("Thunderbird/") {
        Client::Thunderbird
    } else if ua.contains("Microsoft Outlook")
        || ua.contains("MSOffice")
        || ua.contains("ms-office")
    {
        if ua.contains("Macintosh") {
            Client::OutlookMac
        } else {
            Client::OutlookWindows
        }
    } else if ua.contains("Android") {
        // A mail app's web view says `wv`; a browser (a webmail) does not.
        if ua.contains("; wv)") || !browser {
            Client::Android
        } else {
            Client::Webmail
        }
    } else if (ua.contains("iPhone") || ua.contains("iPad")) && ua.contains("AppleWebKit/") {
        // Mail on iOS and iPadOS fetches with WebKit's agent without Safari's token.
        if ua.contains("Safari/") {
            Client::Webmail
        } else {
            Client::AppleMailIos
        }
    } else if ua.contains("Macintosh") && ua.contains("AppleWebKit/") && !ua.contains("Safari/") {
        Client::AppleMailMacos
    } else if browser {
        Client::Webmail
    } else {
        Client::Other
    }
}

/// The device a direct fetch's user agent names.
fn device_of(ua: &str) -> Device {
    if ua.contains("iPad") || ua.contains("Tablet") {
        Device::Tablet
    } else if ua.contains("Android") {
        // Android phones say `Mobile`; tablets do not.
        if ua.contains("Mobile") {
            Device::Mobile
        } else {
            Device::Tablet
        }
    } else if ua.contains("iPhone") || ua.contains("iPod") || ua.contains("Mobile") {
        Device::Mobile
    } else if ["Windows", "Macintosh", "X11", "Linux", "CrOS", "MSOffice"]
        .iter()
        .any(|d| ua.contains(d))
    {
        Device::Desktop
    } else {
        Device::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Agents from the reference (`../shared/reference/analytics.md` §3.3, §3.4) and as the
    // clients send them.
    const GMAIL: &str =
        "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)";
    const YAHOO: &str = "YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html";
    const OUTLOOK_WIN: &str =
        "Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17928; Pro)";
    const OUTLOOK_WORD: &str = "Mozilla/4.0 (compatible; ms-office; MSOffice 16)";
    const THUNDERBIRD: &str =
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Thunderbird/128.3.0";
    const APPLE_MAC: &str =
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)";
    const APPLE_IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148";
    const APPLE_IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148";
    const SAMSUNG_MAIL: &str = "Mozilla/5.0 (Linux; Android 13; SM-S911B Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/120.0.6099.230 Mobile Safari/537.36";
    const ANDROID_TABLET_APP: &str = "Mozilla/5.0 (Linux; Android 12; SM-X700 Build/SP1A.210812.016; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/119.0.6045.163 Safari/537.36";
    const CHROME_DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
    const HEADLESS: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36";

    fn facts(ua: &str) -> HitFacts<'_> {
        HitFacts {
            kind: HitKind::Open,
            head: false,
            user_agent: ua,
            address: None,
            since_first_open: None,
        }
    }

    fn direct(ua: &str) -> (Client, Device) {
        let c = classify(&facts(ua), None);
        assert_eq!(c.source, Source::Direct, "{ua}");
        (c.client, c.device)
    }

    #[test]
    fn direct_fetches_name_their_client_and_device() {
        assert_eq!(
            direct(OUTLOOK_WIN),
            (Client::OutlookWindows, Device::Desktop)
        );
        assert_eq!(
            direct(OUTLOOK_WORD),
            (Client::OutlookWindows, Device::Desktop)
        );
        assert_eq!(direct(THUNDERBIRD), (Client::Thunderbird, Device::Desktop));
        assert_eq!(direct(APPLE_MAC), (Client::AppleMailMacos, Device::Desktop));
        assert_eq!(direct(APPLE_IPHONE), (Client::AppleMailIos, Device::Mobile));
        assert_eq!(direct(APPLE_IPAD), (Client::AppleMailIos, Device::Tablet));
        assert_eq!(direct(SAMSUNG_MAIL), (Client::Android, Device::Mobile));
        assert_eq!(
            direct(ANDROID_TABLET_APP),
            (Client::Android, Device::Tablet)
        );
        assert_eq!(direct(CHROME_DESKTOP), (Client::Webmail, Device::Desktop));
        assert_eq!(direct("SomeMailer/1.0"), (Client::Other, Device::Unknown));
    }

    #[test]
    fn proxies_are_named_and_hide_timing() {
        let g = classify(&facts(GMAIL), None);
        assert_eq!((g.source, g.client), (Source::GmailProxy, Client::Gmail));
        let y = classify(&facts(YAHOO), None);
        assert_eq!((y.source, y.client), (Source::YahooProxy, Client::YahooAol));
        for s in [Source::GmailProxy, Source::YahooProxy] {
            assert!(s.is_reliable() && s.hides_timing() && !s.is_machine());
        }
        assert!(!Source::Direct.hides_timing());
    }

    #[test]
    fn apple_mpp_needs_the_relay_range_when_one_is_configured() {
        let set = EgressSet::parse("17.0.0.0/8,US,US-CA,Cupertino,\n").expect("set");
        let from = |ip: &str| HitFacts {
            address: ip.parse().ok(),
            ..facts("Mozilla/5.0")
        };
        let relay = classify(&from("17.1.2.3"), Some(&set));
        assert_eq!(relay.source, Source::AppleMpp);
        assert!(!relay.mpp_by_agent_only && relay.source.is_machine());
        assert_eq!(
            classify(&from("192.0.2.1"), Some(&set)).source,
            Source::Unknown
        );
        let by_agent = classify(&from("192.0.2.1"), None);
        assert_eq!(by_agent.source, Source::AppleMpp);
        assert!(by_agent.mpp_by_agent_only);
        // Only the bare agent: Apple Mail fetching directly is a reader.
        assert_eq!(
            classify(
                &HitFacts {
                    address: "17.1.2.3".parse().ok(),
                    ..facts(APPLE_MAC)
                },
                Some(&set)
            )
            .source,
            Source::Direct
        );
    }

    #[test]
    fn scanners_show_by_method_agent_or_haste() {
        let head = HitFacts {
            head: true,
            ..facts(CHROME_DESKTOP)
        };
        assert_eq!(classify(&head, None).source, Source::Scanner);
        for ua in [
            HEADLESS,
            "python-requests/2.31.0",
            "curl/8.5.0",
            "Mozilla/5.0 (compatible; Barracuda Sentinel)",
        ] {
            assert_eq!(classify(&facts(ua), None).source, Source::Scanner, "{ua}");
        }
        let click = |ms| HitFacts {
            kind: HitKind::Click(1),
            since_first_open: Some(Duration::from_millis(ms)),
            ..facts(CHROME_DESKTOP)
        };
        assert_eq!(classify(&click(120), None).source, Source::Scanner);
        assert_eq!(classify(&click(4_000), None).source, Source::Direct);
        // An open is fetched together with the other images of the email: haste says nothing.
        let open = HitFacts {
            since_first_open: Some(Duration::from_millis(5)),
            ..facts(CHROME_DESKTOP)
        };
        assert_eq!(classify(&open, None).source, Source::Direct);
        assert_eq!(classify(&facts(""), None).source, Source::Unknown);
    }

    #[test]
    fn every_class_parses_back_from_its_spelling() {
        for s in Source::ALL {
            assert_eq!(Source::parse(s.as_str()), Some(*s));
        }
        for c in Client::ALL {
            assert_eq!(Client::parse(c.as_str()), Some(*c));
        }
        for d in Device::ALL {
            assert_eq!(Device::parse(d.as_str()), Some(*d));
        }
        assert_eq!(Source::parse("Direct"), None);
    }
}
