-- PostgreSQL twin of SQLite's 0006 (integers BIGINT).
-- Accessibility and content checks of an email test (GET /v5/email/tests/{id}/checks). One row per
-- test, inserted by the first GET; a worker where the engines run leases it like a render job (the
-- contrast check needs Chromium) and stores the report as JSON. A check whose worker died is
-- claimable again once its lease expires; a failed attempt is queued again after `not_before`.

-- Whether the message a test came from had a text/plain part: 1 or 0 for mail (the auto-inbox),
-- NULL when only HTML was submitted and there was no message to look at.
ALTER TABLE test_content ADD COLUMN text_part BIGINT;

CREATE TABLE content_checks (
    test_id       TEXT    PRIMARY KEY REFERENCES tests(id) ON DELETE CASCADE,
    state         TEXT    NOT NULL,          -- 'queued', 'leased' or 'done'
    requested_at  BIGINT NOT NULL,
    not_before    BIGINT NOT NULL,
    lease_owner   TEXT,
    lease_expires BIGINT,
    attempts      BIGINT NOT NULL DEFAULT 0,
    last_error    TEXT,
    result        TEXT,                      -- JSON, once done
    completed_at  BIGINT
);
CREATE INDEX content_checks_due ON content_checks(state, not_before, lease_expires);
