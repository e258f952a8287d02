-- Every queue is leased: inbound mail and svc sends are claimed by one statement under a lease,
-- like render jobs, so several processes can share them and a dead process's claim expires.
-- Inbound mail: `not_before` replaces the processor's in-memory retry times; `done_rcpts` (JSON
-- array) the recipients of a deferred message that already had their outcome, so whichever process
-- takes the message up again does not scan or create a test for them twice.
ALTER TABLE inbound_messages ADD COLUMN not_before INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbound_messages ADD COLUMN lease_owner TEXT;
ALTER TABLE inbound_messages ADD COLUMN lease_expires INTEGER;
ALTER TABLE inbound_messages ADD COLUMN done_rcpts TEXT NOT NULL DEFAULT '[]';
-- The svc method's send of a spam test.
ALTER TABLE tests ADD COLUMN spam_send_not_before INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tests ADD COLUMN spam_send_lease_owner TEXT;
ALTER TABLE tests ADD COLUMN spam_send_lease_expires INTEGER;
