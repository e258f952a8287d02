//! The OpenAPI 3 description served at `/openapi.json`, built from the operation table below and
//! the error table in [`crate::error`]. An integration test calls every operation listed here, so
//! the table cannot name a path the router lacks.

use serde_json::{json, Map, Value};

use crate::error::ErrorName;

/// `(method, path, summary, request body fields)`.
pub const OPERATIONS: &[(&str, &str, &str, &[&str])] = &[
    ("get", "/v5/auth", "Check credentials", &[]),
    (
        "get",
        "/v5/analytics/analytics_auth",
        "Check credentials (analytics)",
        &[],
    ),
    (
        "post",
        "/v5/analytics/createcampaign",
        "Create an analytics campaign: answers {guid, tracking_code} (the HTML to paste before </body>); with click tracking also click_tracking.html, the sender's HTML with every web link going through the service. `name` is decoded per transfer_encoding and charset. Starts in test mode.",
        &[
            "name",
            "transfer_encoding",
            "charset",
            "total_subscribers",
            "merge_tag",
            "read_threshold",
            "skim_threshold",
            "delete_threshold",
            "click_tracking",
            "customer_id",
        ],
    ),
    (
        "get",
        "/v5/analytics/gettrackingcode/{guid}",
        "A campaign's tracking code: {tracking_code, guid}",
        &[],
    ),
    (
        "get",
        "/v5/analytics/getcampaigninfo/{guid}",
        "A campaign's settings and state: status testing, current or expired; dates YYYY-MM-DD HH:MM:SS (UTC); days_remaining (null in test mode); click_tracking {google, html}",
        &[],
    ),
    (
        "get",
        "/v5/analytics/campaigns",
        "List and search campaigns: [{id, date, type: \"analytics\", subject}] by the rules of /v5/tests (`subject` matches the campaign name)",
        &[],
    ),
    (
        "get",
        "/v5/analytics/getcampaignexport/{guid}",
        "mailproof's own: every recorded hit as CSV (text/csv), oldest first: time, kind, number (reading seconds, link number, or seconds held), merge_value, agent_class, test, source, client, device",
        &[],
    ),
    (
        "get",
        "/v5/analytics/getcampaignstats/{guid}",
        "mailproof's own: the campaign's report. opens {total, reliable, machine, unknown} each {hits, unique} (unique by merge value); sources: opens per class (direct, apple_mpp, gmail_proxy, yahoo_proxy, scanner, unknown); per_hour and per_day [{start, opens, reliable, machine}] (UTC, unix start); engagement {read, skim, glance, not_measurable} from reliable opens only (proxied opens and direct opens that sent no timing are not_measurable); clients and devices of reliable opens; prints, forwards, dark {hits, unique} and dark_share; clicks per link [{number, url, clicks {hits, unique}, machine}]; apple_mpp {by_agent_only, ranges_configured}: how Apple's relays were recognised; client_matrix: for every client profile, which of these signals it lets through [{id, engine, open (counted, blocked-by-default, never), read, print, forward, dark (always, when-opted-in: only for an email whose CSS declares color-scheme, never), measured_at, image_proxy, proxy_hides_timing}] (data/analytics-matrix.toml). Test hits while the campaign is in test mode (test_mode: true)",
        &[],
    ),
    (
        "post",
        "/v5/analytics/activatecampaign/{guid}",
        "mailproof's own: end test mode; test hits are cleared and the campaign runs for 90 days (see setcampaignexpiration)",
        &[],
    ),
    (
        "post",
        "/v5/analytics/setcampaignexpiration/{guid}",
        "mailproof's own: set an active campaign's last day (UTC), at least 30 days and at most 3 years after its start",
        &["date"],
    ),
    (
        "post",
        "/v5/analytics/clearcampaigndata/{guid}",
        "mailproof's own: remove the hits of a campaign still in test mode; answers how many were cleared",
        &[],
    ),
    (
        "put",
        "/v5/analytics/updatecampaign/{guid}",
        "mailproof's own: change total_subscribers and the thresholds (also as POST); answers the campaign info",
        &[
            "total_subscribers",
            "read_threshold",
            "skim_threshold",
            "delete_threshold",
        ],
    ),
    (
        "delete",
        "/v5/analytics/campaigns/{guid}",
        "mailproof's own: delete a campaign and all its hits",
        &[],
    ),
    (
        "get",
        "/t/{guid}/{file}",
        "mailproof's own, no credentials: a tracking hit from the tracking code (o.gif open, p.gif print, f.gif forward, dm.gif dark mode, r2.gif…r20.gif reading time, h.gif the held-open image, held until the client closes it (at most 20 s) to time reading where animations do not run, a number for the n-th tracked link; `d` is the merge value). Answers a 1x1 GIF, or a 302 to the link, with Cache-Control: no-store, private and no cookies; never an error",
        &[],
    ),
    (
        "post",
        "/v5/email/tests",
        "Create an email test",
        &[
            "subject",
            "html",
            "url",
            "transfer_encoding",
            "charset",
            "free_test",
            "sandbox",
            "reference_id",
            "customer_id",
            "headers",
            "clients",
            "image_blocking",
            "spam",
            "callback_url",
        ],
    ),
    ("get", "/v5/email/tests", "List and search email tests", &[]),
    ("get", "/v5/email/tests/{test_id}", "Test info", &[]),
    (
        "delete",
        "/v5/email/tests/{test_id}",
        "Delete an email test",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/results",
        "Results of every client (micro-version aware)",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/results/{client_id}",
        "Results of one client",
        &[],
    ),
    (
        "put",
        "/v5/email/tests/{test_id}/results/reprocess",
        "Reprocess screenshots",
        &["clients"],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/codeanalysis/{client_id}",
        "Code analysis of the email for one client: unsupported (error), partly supported (warning) and client behaviours (info), with line numbers",
        &[],
    ),
    (
        "put",
        "/v5/email/tests/{test_id}/links",
        "Start link validation: every link and image followed through its redirects under the network policy; answers a pending report in the report's shape",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/links",
        "Link validation report: per link and image `status` (integer, 0 without a response), `mime` (string), `redirects`, `alt` and `warning` (booleans; texts in `alt_text`, `warnings`, `warning_text`), `error` (string or false), and URI blocklist hits",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/checks",
        "Accessibility and content checks (extension), started by the first call: lang, image alt, link text, heading order, layout tables, title, preheader, colour contrast judged in Chromium (WCAG AA), image and email weight, Gmail clipping; each finding with id, severity, message and line",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/inbox",
        "Inbox rows (extension), started by the first call: per client family the row its inbox list shows (sender, subject and preview as cut, `cut`, widths and lines), the body text that fills a row after a short preheader, the source of the row's figures, pictures per colour scheme as presigned URLs, and warnings (`no-preheader`, `short-preheader`, `subject-cut`)",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/versions",
        "Versions (extension): the email tests of this test's email, oldest first (a new test joins the account's latest email test with its subject), each with `version`, `approval` (`awaiting`, `approved`, `changes_requested`) and `content_sha256`",
        &[],
    ),
    (
        "put",
        "/v5/email/tests/{test_id}/versions",
        "Make this test a version of another email test of the account: `{\"version_of\": \"<test id>\"}`; answers the versions",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/approvals",
        "Approvals (extension): each reviewer's latest decision (`name`, `via` owner or share_link, `decision`, `note`, `decided_at`) and the test's `approval`",
        &[],
    ),
    (
        "put",
        "/v5/email/tests/{test_id}/approval",
        "The owner's decision: `{\"decision\": \"approved\" | \"changes_requested\", \"note\": \"..\"}` (a note of at most 2000 characters); answers the approvals",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/diff/{other_test_id}",
        "Visual diff (extension): per client and variant Complete in both tests, the share of changed pixels, the changed regions, the extra height and a highlight image over the other test's screenshot",
        &[],
    ),
    (
        "get",
        "/v5/email/tips/{client_id}",
        "Practical tips for one client, from its rule set",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/content",
        "The submitted HTML",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/content/inlinecss",
        "The HTML with CSS inlined",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/content/textonly",
        "A plain-text approximation",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/spam/results",
        "Spam results of an email test",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/spam/seedlist",
        "Seed list of an email test",
        &[],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/spam/requirements",
        "Sender requirements (extension): one card per mailbox provider (Gmail, Yahoo/AOL, Microsoft consumer domains) with its verdict (meets, would_reject, not_checked) and each rule's status (pass, fail, not_applicable, not_checked), what was seen, the fix and the provider's source; status pending until the first message reaches a seed address",
        &[],
    ),
    (
        "get",
        "/v5/email/clients",
        "Email clients: every profile, and every alias id of existing v5 tools as its own entry with `alias_of` naming its profile",
        &[],
    ),
    ("get", "/v5/email/clients/default", "Default clients", &[]),
    (
        "put",
        "/v5/email/clients/default",
        "Set default clients",
        &["clients"],
    ),
    ("get", "/v5/spam/clients", "Spam filters", &[]),
    (
        "post",
        "/v5/spam/tests",
        "Create a spam test",
        &[
            "subject",
            "html",
            "url",
            "transfer_encoding",
            "charset",
            "sandbox",
            "reference_id",
            "customer_id",
            "test_method",
            "smtp_info",
            "from_address",
            "key",
            "callback_url",
        ],
    ),
    ("get", "/v5/spam/tests", "List and search spam tests", &[]),
    ("get", "/v5/spam/tests/{test_id}", "Spam results", &[]),
    (
        "delete",
        "/v5/spam/tests/{test_id}",
        "Delete a spam test",
        &[],
    ),
    (
        "get",
        "/v5/spam/tests/{test_id}/seedlist",
        "Seed list of a spam test",
        &[],
    ),
    (
        "get",
        "/v5/spam/tests/{test_id}/requirements",
        "Sender requirements (extension): one card per mailbox provider (Gmail, Yahoo/AOL, Microsoft consumer domains) with its verdict (meets, would_reject, not_checked) and each rule's status (pass, fail, not_applicable, not_checked), what was seen, the fix and the provider's source; status pending until the first message reaches a seed address",
        &[],
    ),
    ("get", "/v5/spam/seedlist", "Reserve a seed list", &[]),
    ("get", "/v5/tests", "List and search all tests", &[]),
    (
        "get",
        "/v5/account/webhook",
        "Webhook settings (extension): the account's default callback URL and the secret that signs callbacks (X-Mailproof-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">)",
        &[],
    ),
    (
        "put",
        "/v5/account/webhook",
        "Set the default callback URL (extension) for tests that carry no `callback_url`; null or \"\" clears it",
        &["callback_url"],
    ),
    (
        "get",
        "/v5/email/tests/{test_id}/callback",
        "State of the test's completion callback (extension): none, waiting, queued, leased, delivered or failed, with attempts and the last error",
        &[],
    ),
    (
        "get",
        "/v5/spam/tests/{test_id}/callback",
        "State of the spam test's completion callback (extension)",
        &[],
    ),
];

/// Request fields whose behaviour needs saying, with their JSON type and what they do.
const FIELD_DESCRIPTIONS: &[(&str, &str, &str)] = &[
    (
        "total_subscribers",
        "integer",
        "Analytics: the number of recipients, the denominator of every percentage; at least 1.",
    ),
    (
        "merge_tag",
        "string",
        "Analytics: the sender's mail-service placeholder for a per-recipient id (e.g. *|EMAIL|*), put verbatim in every tracking URL as d=. Quotes, angle brackets, backslashes, parentheses and control characters are refused.",
    ),
    (
        "read_threshold",
        "integer",
        "Analytics: seconds open from which an open counts as read (default 15); delete_threshold ≤ skim_threshold ≤ read_threshold.",
    ),
    (
        "skim_threshold",
        "integer",
        "Analytics: seconds open from which an open counts as skimmed (default 7).",
    ),
    (
        "delete_threshold",
        "integer",
        "Analytics: seconds open up to which an open counts as deleted (default 2).",
    ),
    (
        "click_tracking",
        "object",
        "Analytics: {google_analytics: boolean (adds utm_source, utm_medium, utm_campaign to each redirect), html: the email's HTML, or url: where to fetch it}. Every http(s) link of a/area elements is rewritten through /t/<guid>/<n>.",
    ),
    (
        "date",
        "string",
        "Analytics: the campaign's last day, YYYY-MM-DD (UTC).",
    ),
    (
        "callback_url",
        "string",
        "Extension: an http(s) URL that receives one signed JSON summary (POST) when the test completes: every client Complete or Bounced and every spam filter answered. Falls back to the account's default (PUT /v5/account/webhook). Delivered at least once, with retries and backoff; dedupe on `delivery_id`. At most 2048 bytes; private and loopback targets are refused.",
    ),
    (
        "url",
        "string",
        "Where the service fetches the email's HTML (http or https). In a sandbox request (the sandbox credentials or `sandbox: true`) it is checked for form only and never fetched.",
    ),
    (
        "sandbox",
        "boolean",
        "true: the request is validated and answered, and nothing is created, fetched or stored. Always so for the sandbox credentials.",
    ),
];

const LIST_PARAMS: &[&str] = &[
    "from",
    "to",
    "subject",
    "type",
    "results",
    "page",
    "customer_id",
    "reference_id",
];

pub fn document() -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for (method, path, summary, body) in OPERATIONS {
        let mut op = Map::new();
        op.insert("summary".into(), json!(summary));
        op.insert(
            "operationId".into(),
            json!(format!("{method}{}", path.replace(['/', '{', '}'], "_"))),
        );
        let mut parameters: Vec<Value> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        if *method == "get" && (path.ends_with("/tests") || path.ends_with("/analytics/campaigns"))
        {
            parameters.extend(LIST_PARAMS.iter().map(|name| {
                json!({"name": name, "in": "query", "required": false, "schema": {"type": "string"}})
            }));
        }
        if !parameters.is_empty() {
            op.insert("parameters".into(), Value::Array(parameters));
        }
        if !body.is_empty() {
            let props: Map<String, Value> = body
                .iter()
                .map(|f| {
                    let doc = FIELD_DESCRIPTIONS.iter().find(|(name, _, _)| name == f);
                    let schema = match doc {
                        Some((_, kind, text)) => json!({"type": kind, "description": text}),
                        None => json!({}),
                    };
                    (f.to_string(), schema)
                })
                .collect();
            op.insert(
                "requestBody".into(),
                json!({"content": {"application/json": {"schema": {"type": "object", "properties": props}}}}),
            );
        }
        op.insert(
            "responses".into(),
            json!({
                "200": {"description": "Success", "content": {"application/json": {}}},
                "default": {"description": "Error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            }),
        );
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        if let Value::Object(m) = entry {
            m.insert(method.to_string(), Value::Object(op));
        }
    }
    let names: Vec<&str> = ErrorName::ALL.iter().map(|n| n.as_str()).collect();
    json!({
        "openapi": "3.0.3",
        "info": {"title": "mailproof email testing API", "version": "5.0.1",
                 "description": "Implements the email-testing API v5. Every path also exists under /v5.0.1/; any other first path segment followed by more path is WrongVersion. The sandbox credentials (sandbox/sandbox) have a per-address request budget of their own and bodies of at most 1 MB; over it, and over an account's rate limit, too many failed logins or too many connections from one address, the answer is RateLimited (429) with Retry-After. A request body must arrive within the service's body time (408 otherwise)."},
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
            "schemas": {"Error": {"type": "object", "properties": {"error": {"type": "object", "properties": {
                "name": {"type": "string", "enum": names}, "message": {"type": "string"}}}}}}
        },
        "security": [{"basic": []}],
        "paths": paths,
    })
}
