-- The svc method sends each seed address its own message (issue 30): when the one for this row's
-- filter was delivered, so that a send taken up again after a failure or a crash goes only to the
-- addresses still missing. NULL = not sent by svc (yet), or another method.
ALTER TABLE spam_results ADD COLUMN svc_sent_at INTEGER;
