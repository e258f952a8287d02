-- The web interface: sign-in sessions and read-only share links. Both are bearer secrets (128-bit
-- random); only their SHA-256 is stored, so a copy of the database does not let anyone in.

CREATE TABLE web_sessions (
    id_hash    TEXT    PRIMARY KEY,          -- hex SHA-256 of the cookie value
    account_id INTEGER REFERENCES accounts(id) ON DELETE CASCADE, -- NULL = the sandbox credentials
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX web_sessions_expiry ON web_sessions(expires_at);

CREATE TABLE share_links (
    token_hash TEXT    PRIMARY KEY,          -- hex SHA-256 of the token in the link
    test_id    TEXT    NOT NULL REFERENCES tests(id) ON DELETE CASCADE,
    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX share_links_by_test ON share_links(test_id);
