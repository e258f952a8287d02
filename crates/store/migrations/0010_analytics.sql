-- Analytics campaigns (issue 22): a tracking code pasted into a real mailing, and its hits.
CREATE TABLE analytics_campaigns (
    guid              TEXT    PRIMARY KEY,
    account_id        INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name              TEXT    NOT NULL,
    customer_id       TEXT,
    total_subscribers INTEGER NOT NULL,
    merge_tag         TEXT,
    read_threshold    INTEGER NOT NULL,
    skim_threshold    INTEGER NOT NULL,
    delete_threshold  INTEGER NOT NULL,
    google_analytics  INTEGER NOT NULL DEFAULT 0,
    -- The sender's click-tracking HTML as sent, and its web links in link-number order (JSON).
    click_html        TEXT,
    click_links       TEXT    NOT NULL DEFAULT '[]',
    created_at        INTEGER NOT NULL,
    -- NULL while in test mode.
    activated_at      INTEGER,
    expires_at        INTEGER
);
CREATE INDEX analytics_campaigns_by_account ON analytics_campaigns (account_id, created_at);
-- One row per answered hit. No client address is stored, only the class of its user agent.
CREATE TABLE analytics_hits (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    guid        TEXT    NOT NULL REFERENCES analytics_campaigns(guid) ON DELETE CASCADE,
    at          INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    -- Seconds of a reading step, the link number of a click, else 0.
    number      INTEGER NOT NULL DEFAULT 0,
    merge_value TEXT,
    agent_class TEXT    NOT NULL,
    -- 1 for hits recorded before activation (test data, cleared on activation).
    test        INTEGER NOT NULL
);
CREATE INDEX analytics_hits_by_campaign ON analytics_hits (guid, at);
