-- PostgreSQL twin of SQLite's 0020.
-- Who an email test's email is from, as an inbox row names it (issue 32): the message's `From` for
-- mail sent to the auto-inbox. Tests made through the API name theirs in `spam_from_address`
-- when they give one; older tests have none.
ALTER TABLE tests ADD COLUMN sender TEXT;
