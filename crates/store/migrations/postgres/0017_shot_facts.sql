-- What each screenshot's page said beyond the picture (issue 29), per render job (one variant):
-- the email's laid-out width when it overflowed the client's window (the picture is cut at the
-- window's edge; NULL when it fitted), and the rule set with the behaviours that changed this
-- screenshot (a variant's own, such as a landscape zoom-out). NULL before and after a reprocess.
ALTER TABLE render_jobs ADD COLUMN overflow_width INTEGER;
ALTER TABLE render_jobs ADD COLUMN rule_set TEXT;
