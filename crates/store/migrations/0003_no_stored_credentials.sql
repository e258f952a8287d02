-- A spam test keeps only the sender address it needs later (the svc method's From). The caller's
-- SMTP credentials (smtp_info) were sent once at creation and must not be kept: the old JSON column,
-- which held them, goes with its contents.
ALTER TABLE tests ADD COLUMN spam_from_address TEXT;
UPDATE tests SET spam_from_address = json_extract(spam_request, '$.from_address')
    WHERE spam_request IS NOT NULL AND json_valid(spam_request);
ALTER TABLE tests DROP COLUMN spam_request;
