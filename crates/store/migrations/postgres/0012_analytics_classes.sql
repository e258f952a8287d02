-- Machine or person (issue 22): the classes of each hit, decided when it is answered
-- (analytics::classify). The client address that helped decide them is never stored.
ALTER TABLE analytics_hits ADD COLUMN source TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE analytics_hits ADD COLUMN client TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE analytics_hits ADD COLUMN device TEXT NOT NULL DEFAULT 'unknown';
-- 1: counted as Apple MPP on the bare user agent alone, no relay ranges being configured.
ALTER TABLE analytics_hits ADD COLUMN mpp_by_agent_only BIGINT NOT NULL DEFAULT 0;
-- Hits of the first slice carry only the agent class, which names the same proxies.
UPDATE analytics_hits SET source = agent_class
    WHERE agent_class IN ('direct', 'apple_mpp', 'gmail_proxy', 'yahoo_proxy');
UPDATE analytics_hits SET mpp_by_agent_only = 1 WHERE agent_class = 'apple_mpp';
CREATE INDEX analytics_hits_by_kind ON analytics_hits (guid, kind, source);
