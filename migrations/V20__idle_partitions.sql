-- Partitions idle for 30 days go (pgcursor.purge_idle_partitions,
-- sql/80_retention.sql): one that holds nothing and saw no push, ack,
-- lease or trace since. The last push is the one thing no row kept once
-- its messages were deleted: each push that stores a message stamps its
-- partition's head. Partitions there before this migration count as
-- pushed to now (the default is evaluated once, here), so none is taken
-- for idle sooner than 30 days after it.
ALTER TABLE pgcursor.partition_heads ADD COLUMN pushed_at timestamptz NOT NULL DEFAULT now();

-- The partitions deleted so, per minute and queue, for the queue-ops
-- analytics (partitionsDeleted); kept 24 hours with the rest of the row.
ALTER TABLE pgcursor.retention_minutes ADD COLUMN partitions_deleted bigint NOT NULL DEFAULT 0;
