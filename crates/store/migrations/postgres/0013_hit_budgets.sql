-- Storage budgets for tracking hits (issue 27): each campaign keeps how many hits it has stored,
-- changed in the transaction that writes or removes them, so that a batch checks the
-- per-campaign and per-account budgets without counting rows.
ALTER TABLE analytics_campaigns ADD COLUMN stored_hits BIGINT NOT NULL DEFAULT 0;
UPDATE analytics_campaigns SET stored_hits =
    (SELECT COUNT(*) FROM analytics_hits h WHERE h.guid = analytics_campaigns.guid);
