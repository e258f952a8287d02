-- When the service sent a spam test's message itself (the svc method) or through the caller's
-- server (smtp). NULL = still to send (svc) or not applicable.
ALTER TABLE tests ADD COLUMN spam_sent_at INTEGER;
ALTER TABLE tests ADD COLUMN spam_send_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tests ADD COLUMN spam_send_error TEXT;
