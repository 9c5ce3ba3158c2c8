-- What retention and eviction deleted, per minute and queue, for
-- GET /api/v1/analytics/retention: messages deleted by retentionSeconds,
-- by completedRetentionSeconds and by maxWaitTimeSeconds eviction, and
-- the runs that deleted any (each purge function's call that deleted
-- something from the queue counts one). Written by the purge functions
-- themselves (sql/80_retention.sql), so a purge run from psql counts as
-- one housekeeping runs. Kept 24 hours, as gateway_minutes.
CREATE TABLE pgcursor.retention_minutes (
    minute                       timestamptz NOT NULL,
    queue                        text NOT NULL,
    retention_messages           bigint NOT NULL DEFAULT 0,
    completed_retention_messages bigint NOT NULL DEFAULT 0,
    eviction_messages            bigint NOT NULL DEFAULT 0,
    runs                         bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
);
