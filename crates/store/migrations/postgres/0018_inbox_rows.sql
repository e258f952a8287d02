-- PostgreSQL twin of SQLite's 0018 (integers BIGINT).
-- The inbox rows of an email test (issue 32): the row each client's inbox list shows, laid out
-- and drawn in the engines. One row per test, inserted by the first request (the API's GET
-- /v5/email/tests/{id}/inbox or the test page); a worker where the engines run leases it like a
-- content check and stores the report as JSON (the pictures are blobs beside the screenshots).
CREATE TABLE inbox_rows (
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
CREATE INDEX inbox_rows_due ON inbox_rows(state, not_before, lease_expires);
