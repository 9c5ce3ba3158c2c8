-- A new consumer group's first pop no longer writes a cursor row on every
-- partition of the queue (5,000 partitions cost 200-360 ms): it records the
-- subscription, creates rows only for the partitions it claims, and the
-- rest are written later by pgcursor_internal.materialize_cursors() (run by
-- housekeeping, the purges and every reader of cursor figures).
--
-- subscriptions.cursor_rows says how far the group's rows on the queue are:
--   'complete'  a row on every partition
--   'pending'   partitions may lack one: materialize_cursors() writes them
--               where the subscription says, a pop claims them directly
--   'none'      the rows were deleted and the subscription kept
--               (deleteMetadata=false): nothing is written until the group
--               pops the queue again
ALTER TABLE pgcursor.subscriptions
    ADD COLUMN cursor_rows text NOT NULL DEFAULT 'complete'
        CHECK (cursor_rows IN ('complete', 'pending', 'none'));

-- Before this release a subscription without rows was one kept by a delete.
-- Every other one is 'pending' once, so partitions created since the
-- group's last pop get their rows.
UPDATE pgcursor.subscriptions s
   SET cursor_rows = CASE WHEN EXISTS (SELECT 1 FROM pgcursor.cursors c
                                         JOIN pgcursor.partitions p ON p.id = c.partition_id
                                        WHERE c.consumer_group = s.consumer_group AND p.queue = s.queue)
                          THEN 'pending' ELSE 'none' END;

CREATE INDEX subscriptions_pending ON pgcursor.subscriptions (consumer_group, queue)
    WHERE cursor_rows = 'pending';

-- A pop reads the group's own rows: with only the primary key
-- (partition_id, consumer_group) that is one probe per selected partition
-- even for a group that has two rows.
CREATE INDEX cursors_group ON pgcursor.cursors (consumer_group, partition_id);

-- A group new to a queue walks its partitions in id order until it finds
-- what it can claim (sql/30_pop.sql, add_claimable_cursors).
CREATE INDEX partitions_queue_id ON pgcursor.partitions (queue, id);
