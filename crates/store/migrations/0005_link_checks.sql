-- Link validation of an email test (PUT /v5/email/tests/{id}/links). One row per test: a PUT
-- (re)queues it, a worker leases it like a render job, and the result is the JSON report. A check
-- whose worker died is claimable again once its lease expires.

CREATE TABLE link_checks (
    test_id       TEXT    PRIMARY KEY REFERENCES tests(id) ON DELETE CASCADE,
    state         TEXT    NOT NULL,          -- 'queued', 'leased' or 'done'
    requested_at  INTEGER NOT NULL,
    lease_owner   TEXT,
    lease_expires INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0,
    result        TEXT,                      -- JSON, once done
    completed_at  INTEGER
);
CREATE INDEX link_checks_due ON link_checks(state, lease_expires);
