-- PostgreSQL twin of SQLite's 0015 (times BIGINT).
-- The mailbox providers' sender requirements checked on the mail a spam test received (issue 30):
-- one report per test, as JSON (spam::requirements::Report), written by the first message
-- processed for the test and never changed after. Purged with the test's content.
CREATE TABLE sender_requirements (
    test_id    TEXT    PRIMARY KEY REFERENCES tests(id) ON DELETE CASCADE,
    report     TEXT    NOT NULL,
    checked_at BIGINT  NOT NULL
);
