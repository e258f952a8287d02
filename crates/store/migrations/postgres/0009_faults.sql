-- The worker whose expired lease a render job's last claim took over (NULL when it was queued):
-- read back by the claim, so takeovers are counted and logged.
ALTER TABLE render_jobs ADD COLUMN taken_over_from TEXT;
-- Fingerprints of keys that every process of a kind must share (the URL-signing key of the api
-- processes): the first process publishes its own, later ones refuse to start with another.
CREATE TABLE service_keys (
    name         TEXT    PRIMARY KEY,
    fingerprint  TEXT    NOT NULL,
    published_at BIGINT  NOT NULL
);
