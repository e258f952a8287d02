-- Versions and approvals of email tests (issue 32). An email test's versions are the tests of its
-- account in one `version_group` (the id of the group's first test), numbered by creation time;
-- a new email test joins the group of the account's latest email test with the same subject, and
-- a test can be moved into another's group. Tests made before this migration are grouped the same
-- way, by subject. Spam tests have none.
ALTER TABLE tests ADD COLUMN version_group TEXT;
UPDATE tests SET version_group = (
    SELECT t2.id FROM tests t2
    WHERE t2.account_id = tests.account_id AND t2.kind = tests.kind AND t2.subject = tests.subject
    ORDER BY t2.created_at, t2.id LIMIT 1
) WHERE kind = 'email-test';
CREATE INDEX tests_version_group ON tests(account_id, version_group);
-- SHA-256 of the stored HTML, hex: which versions are the same email (`mailproof check
-- --require-approval` passes when one with its content is approved). NULL for older tests.
ALTER TABLE tests ADD COLUMN content_sha256 TEXT;

-- Each reviewer's latest decision on a test: the owner (`reviewer` = 'owner') or someone who
-- opened a share link and gave a name (`reviewer` = 'share:' || the link's token hash || ':' ||
-- the name, lower-cased), so a revoked link's reviewer is known by the link.
CREATE TABLE approvals (
    test_id          TEXT    NOT NULL REFERENCES tests(id) ON DELETE CASCADE,
    reviewer         TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    share_token_hash TEXT,                     -- NULL for the owner
    decision         TEXT    NOT NULL,         -- 'approved' or 'changes_requested'
    note             TEXT,
    decided_at       INTEGER NOT NULL,
    PRIMARY KEY (test_id, reviewer)
);
