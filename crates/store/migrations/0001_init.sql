-- mailproof schema, version 1. Timestamps are UNIX seconds (UTC). JSON columns hold arrays/objects
-- that are only ever read whole.

CREATE TABLE accounts (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    api_key              TEXT    NOT NULL UNIQUE,
    password_hash        TEXT    NOT NULL,
    plan                 TEXT    NOT NULL,
    monthly_test_limit   INTEGER,
    rate_limit_per_minute INTEGER,
    allowed_clients      TEXT,            -- JSON array; NULL = every client the plan allows
    auto_inbox           TEXT UNIQUE,     -- auto-inbox local part
    default_clients      TEXT,            -- JSON array; NULL = catalog defaults; [] = all clients
    created_at           INTEGER NOT NULL
);

CREATE TABLE tests (
    id               TEXT    PRIMARY KEY,
    account_id       INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    kind             TEXT    NOT NULL,    -- email-test | spam-test
    subject          TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    reference_id     TEXT,
    customer_id      TEXT,
    image_blocking   INTEGER NOT NULL DEFAULT 0,
    free_test        INTEGER NOT NULL DEFAULT 0,
    source_url       TEXT,
    spam_method      TEXT,                -- NULL = no spam processing
    seed_key         TEXT,
    spam_request     TEXT,                -- JSON: what the spam sender needs (smtp_info, from_address)
    reprocesses_left INTEGER NOT NULL,
    purged_at        INTEGER              -- set when retention removed content and results
);
CREATE INDEX tests_by_account_date ON tests(account_id, created_at DESC);
CREATE INDEX tests_by_customer ON tests(account_id, customer_id);

CREATE TABLE test_content (
    test_id TEXT PRIMARY KEY REFERENCES tests(id) ON DELETE CASCADE,
    html    TEXT NOT NULL
);

CREATE TABLE test_headers (
    test_id    TEXT NOT NULL REFERENCES tests(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,             -- as submitted
    name_lower TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (test_id, name_lower)
);
CREATE INDEX test_headers_lookup ON test_headers(name_lower, value);

-- One row per client of an email test: the client's screenshot state (spec §2.5, §3).
CREATE TABLE test_clients (
    test_id        TEXT    NOT NULL REFERENCES tests(id) ON DELETE CASCADE,
    client_id      TEXT    NOT NULL,
    position       INTEGER NOT NULL,
    variants       TEXT    NOT NULL,      -- JSON array of variant names
    status         TEXT    NOT NULL,      -- Pending | Processing | Complete | Bounced
    submitted_at   INTEGER NOT NULL,
    processing_at  INTEGER,
    completed_at   INTEGER,
    attempts       INTEGER NOT NULL DEFAULT 0,
    bounce_code    TEXT,
    bounce_message TEXT,
    engine         TEXT,                  -- which engine and rule set made the picture
    rule_set       TEXT,
    PRIMARY KEY (test_id, client_id)
);

-- The durable render queue: one job per (test, client, variant). A job is claimed under a lease;
-- an expired lease makes it claimable again, so a crashed worker delays work but never drops it.
CREATE TABLE render_jobs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    test_id       TEXT    NOT NULL REFERENCES tests(id) ON DELETE CASCADE,
    client_id     TEXT    NOT NULL,
    variant       TEXT    NOT NULL,
    state         TEXT    NOT NULL,       -- queued | leased | done | failed
    attempts      INTEGER NOT NULL DEFAULT 0,
    not_before    INTEGER NOT NULL,
    lease_owner   TEXT,
    lease_expires INTEGER,
    last_error    TEXT,
    UNIQUE (test_id, client_id, variant)
);
CREATE INDEX render_jobs_due ON render_jobs(state, not_before);

-- One row per spam filter profile of a test; spam NULL = the filter has not returned (spec §2.8).
CREATE TABLE spam_results (
    test_id    TEXT    NOT NULL REFERENCES tests(id) ON DELETE CASCADE,
    client     TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    kind       TEXT    NOT NULL,          -- b2b | b2c
    spam       INTEGER,
    details    TEXT    NOT NULL DEFAULT '',
    updated_at INTEGER,
    PRIMARY KEY (test_id, client)
);

-- Seed-list keys: reserved ahead (test_id NULL) or bound to a test.
CREATE TABLE seed_keys (
    key        TEXT    PRIMARY KEY,
    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    test_id    TEXT    REFERENCES tests(id) ON DELETE SET NULL,
    created_at INTEGER NOT NULL
);

-- Messages accepted over SMTP, stored before the 250 reply and processed afterwards.
CREATE TABLE inbound_messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at INTEGER NOT NULL,
    mail_from   TEXT    NOT NULL,
    rcpt_to     TEXT    NOT NULL,         -- JSON array
    peer        TEXT    NOT NULL,
    helo        TEXT    NOT NULL,
    data        BLOB    NOT NULL,
    state       TEXT    NOT NULL DEFAULT 'new', -- new | done | failed
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT
);
CREATE INDEX inbound_due ON inbound_messages(state);

-- Tests created per customer per calendar month (reseller monthly limits). Counted at creation, so
-- deleting a test does not hand back its slot.
CREATE TABLE monthly_usage (
    account_id  INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    customer_id TEXT    NOT NULL,
    month       TEXT    NOT NULL,         -- YYYY-MM
    tests       INTEGER NOT NULL,
    PRIMARY KEY (account_id, customer_id, month)
);
