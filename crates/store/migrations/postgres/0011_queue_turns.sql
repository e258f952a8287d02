-- Fair queues: per queue and account, the number of the account's latest claim (a counter per
-- queue). Claims serve the account whose turn is oldest first, so one account's many or slow jobs
-- delay another account's by at most one job (see store::fair).
CREATE TABLE queue_turns (
    queue      TEXT   NOT NULL,
    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    turn       BIGINT NOT NULL,
    PRIMARY KEY (queue, account_id)
);
