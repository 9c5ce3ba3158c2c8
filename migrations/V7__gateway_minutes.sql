-- What only the gateways see, per minute and queue: requests, pops, empty
-- pops, acked items and failed acks, transactions and the age of messages
-- at pop. Each gateway counts in memory and adds its figures here through
-- pgcursor.record_gateway_minutes() (sql/67_gateway_minutes.sql) every
-- PGCURSOR_STATS_FLUSH_SECONDS; rows of several gateways for one minute add
-- up. Kept for a bounded time, as stats_snapshots. queue is null for what
-- no queue can be named for (an empty namespace/task pop, an ack of a
-- partition deleted since).
CREATE TABLE pgcursor.gateway_minutes (
    minute        timestamptz NOT NULL,
    queue         text,
    push_requests bigint NOT NULL DEFAULT 0,
    pop_requests  bigint NOT NULL DEFAULT 0,
    pop_messages  bigint NOT NULL DEFAULT 0,
    pop_empty     bigint NOT NULL DEFAULT 0,
    ack_requests  bigint NOT NULL DEFAULT 0,
    ack_failed    bigint NOT NULL DEFAULT 0,
    ack_messages  bigint NOT NULL DEFAULT 0,
    transactions  bigint NOT NULL DEFAULT 0,
    -- Message age at pop (now - createdAt), over the pop_messages: the sum
    -- gives the average, the max the worst.
    age_sum_ms    bigint NOT NULL DEFAULT 0,
    age_max_ms    bigint NOT NULL DEFAULT 0,
    CONSTRAINT gateway_minutes_minute_queue UNIQUE NULLS NOT DISTINCT (minute, queue)
);
