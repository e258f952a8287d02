-- Completion webhooks. A test may carry its own callback URL; an account may set a default one and
-- has a secret that signs every callback. When a test completes (every client Complete or Bounced,
-- every spam filter answered) one `callbacks` row is written in the transaction that records the
-- last outcome; the delivery worker leases it like a render job, so a crash loses no callback.

ALTER TABLE tests ADD COLUMN callback_url TEXT;
ALTER TABLE accounts ADD COLUMN webhook_url TEXT;
ALTER TABLE accounts ADD COLUMN webhook_secret TEXT;

CREATE TABLE callbacks (
    test_id       TEXT    PRIMARY KEY REFERENCES tests(id) ON DELETE CASCADE, -- once per test
    delivery_id   TEXT    NOT NULL UNIQUE,   -- the same in every attempt, for receivers to dedupe
    url           TEXT    NOT NULL,
    state         TEXT    NOT NULL,          -- queued | leased | delivered | failed
    completed_at  INTEGER NOT NULL,          -- when the test completed
    not_before    INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    lease_owner   TEXT,
    lease_expires INTEGER,
    last_error    TEXT,
    last_status   INTEGER,                   -- HTTP status of the last answer, if any
    finished_at   INTEGER                    -- delivered or given up
);
CREATE INDEX callbacks_due ON callbacks(state, not_before);
