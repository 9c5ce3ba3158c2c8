-- Consumer groups as a whole (shared/spec/wire-admin.md §1): the list with
-- lag figures, the lagging partitions, deleting a group, and seeking a group
-- (to the end or to a time) on a queue or on one partition.
--
--   SELECT pgcursor.consumer_groups();
--   SELECT pgcursor.lagging_partitions(60);
--   SELECT pgcursor.delete_consumer_group('billing', 'orders');
--   SELECT pgcursor.seek_consumer_group('billing', 'orders', to_end => true);
--   SELECT pgcursor.seek_consumer_group('billing', 'orders', '2026-01-01T00:00:00Z');
--   SELECT pgcursor.seek_partition('billing', 'orders', 'Default');
--
-- pgcursor keeps no subscription record per (group, queue): a group's start
-- is fixed on every partition at its first pop (ensure_cursors), so the
-- subscription fields answer null and deleting a group deletes its rows only.

-- Every cursor row with its queue, partition and lag: offset_lag counts
-- offsets (retention gaps included); oldest_at is the createdAt of the oldest
-- unconsumed message still stored (the first one above the cursor, one
-- primary-key probe), null when none is; age_seconds its age in whole
-- seconds (§11.11: lag is the age of the OLDEST unconsumed message).
CREATE OR REPLACE FUNCTION pgcursor_internal.group_rows()
RETURNS TABLE (consumer_group text, queue text, partition text, partition_id uuid, lease_id uuid,
               last_ack_at timestamptz, offset_lag bigint, oldest_at timestamptz, age_seconds bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.consumer_group, p.queue, p.name, p.id, c.lease_id, c.last_ack_at, p.head - c.cursor,
           o.created_at, greatest(floor(extract(epoch FROM now() - o.created_at)), 0)::bigint
    FROM pgcursor.cursors c
    JOIN pgcursor.partitions p ON p.id = c.partition_id
    LEFT JOIN LATERAL (SELECT m.created_at FROM pgcursor.messages m
                        WHERE m.partition_id = c.partition_id AND m.msg_offset > c.cursor
                        ORDER BY m.msg_offset LIMIT 1) o ON true
$$;

-- consumer_groups: one element per (group, queue) with a cursor row there,
-- sorted by group, then queue, in Queen's list shape (§1.1). A row lags when
-- a stored message is after its cursor.
CREATE OR REPLACE FUNCTION pgcursor.consumer_groups()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', g.consumer_group, 'queueName', g.queue, 'queue', g.queue,
               'topics', jsonb_build_array(g.queue), 'members', g.members, 'partitions', g.members,
               'partitionsWithLag', g.lagging, 'maxTimeLag', g.max_age, 'lagSeconds', g.max_age,
               'totalLag', g.total_lag, 'lagMessages', g.total_lag,
               'state', CASE WHEN g.max_age > 300 THEN 'Lagging' WHEN g.acked THEN 'Stable' ELSE 'Dead' END,
               'subscriptionMode', NULL, 'subscriptionTimestamp', NULL, 'subscriptionCreatedAt', NULL)
             ORDER BY g.consumer_group, g.queue), '[]'::jsonb)
    FROM (SELECT r.consumer_group, r.queue, count(*) AS members,
                 count(*) FILTER (WHERE r.oldest_at IS NOT NULL) AS lagging,
                 coalesce(max(r.age_seconds), 0) AS max_age,
                 sum(r.offset_lag) AS total_lag, bool_or(r.last_ack_at IS NOT NULL) AS acked
          FROM pgcursor_internal.group_rows() r
          GROUP BY r.consumer_group, r.queue) g
$$;

-- lagging_partitions: the (group, partition) rows whose oldest unconsumed
-- message is more than min_lag_seconds old, oldest first (§1.2, snake_case).
CREATE OR REPLACE FUNCTION pgcursor.lagging_partitions(min_lag_seconds integer DEFAULT 3600)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'consumer_group', r.consumer_group, 'queue_name', r.queue, 'partition_name', r.partition,
               'partition_id', r.partition_id, 'worker_id', r.lease_id, 'offset_lag', r.offset_lag,
               'time_lag_seconds', r.age_seconds, 'lag_hours', round(r.age_seconds / 3600.0, 2),
               'oldest_unconsumed_at', pgcursor_internal.rfc3339_utc(r.oldest_at),
               'last_consumed_at', pgcursor_internal.rfc3339_utc(r.last_ack_at))
             ORDER BY r.age_seconds DESC, r.consumer_group, r.queue, r.partition), '[]'::jsonb)
    FROM pgcursor_internal.group_rows() r
    WHERE r.oldest_at IS NOT NULL AND r.age_seconds > min_lag_seconds
$$;

-- delete_consumer_group: deletes the group's cursor rows on every queue, or
-- on one (§1.4, §1.5); live leases go with them. Dead letters are kept. The
-- group's next pop there starts as a new group's (ensure_cursors). Rows are
-- locked in partition order first, as the seeks do, so the two never deadlock.
CREATE OR REPLACE FUNCTION pgcursor.delete_consumer_group(consumer_group text, queue text DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    deleted integer;
BEGIN
    PERFORM FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
     WHERE c.consumer_group = delete_consumer_group.consumer_group
       AND (delete_consumer_group.queue IS NULL OR p.queue = delete_consumer_group.queue)
     ORDER BY c.partition_id
       FOR UPDATE OF c;
    DELETE FROM pgcursor.cursors c USING pgcursor.partitions p
     WHERE p.id = c.partition_id AND c.consumer_group = delete_consumer_group.consumer_group
       AND (delete_consumer_group.queue IS NULL OR p.queue = delete_consumer_group.queue);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN jsonb_build_object('success', true, 'consumerGroup', delete_consumer_group.consumer_group,
                              'deletedPartitions', deleted, 'metadataDeleted', true)
        || CASE WHEN delete_consumer_group.queue IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('queueName', delete_consumer_group.queue) END;
END $$;

-- Moves one cursor row, which the caller holds locked, to `to_offset`: the
-- live lease is released (its holder's acks then fail) and the retry counter
-- reset (§11.7); last_ack_at becomes now; the totals stay.
CREATE OR REPLACE FUNCTION pgcursor_internal.seek_cursor(partition_id uuid, consumer_group text, to_offset bigint)
RETURNS void LANGUAGE sql AS $$
    UPDATE pgcursor.cursors c
       SET cursor = to_offset, lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL,
           retry_count = 0, last_ack_at = now()
     WHERE c.partition_id = seek_cursor.partition_id AND c.consumer_group = seek_cursor.consumer_group
$$;

-- seek_consumer_group: every existing cursor row of the group on the queue
-- (none is created) moves to the head (to_end; rows on partitions that never
-- had a message are left alone and not counted), or so that the first
-- message created at or after to_time is delivered next (§11.9; the head
-- when there is none). to_end wins when both are given. Rows are locked in
-- partition order: a concurrent ack or pop of a row waits or is waited for.
CREATE OR REPLACE FUNCTION pgcursor.seek_consumer_group(
    consumer_group text, queue text, to_time timestamptz DEFAULT NULL, to_end boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp     text := seek_consumer_group.consumer_group;
    end_    boolean := coalesce(seek_consumer_group.to_end, false);
    p       pgcursor.partitions;
    updated integer := 0;
BEGIN
    IF NOT end_ AND seek_consumer_group.to_time IS NULL THEN
        RAISE EXCEPTION 'Must specify either ''toEnd'': true or ''timestamp''' USING ERRCODE = '22023';
    END IF;
    FOR p IN SELECT x.* FROM pgcursor.cursors c JOIN pgcursor.partitions x ON x.id = c.partition_id
              WHERE c.consumer_group = grp AND x.queue = seek_consumer_group.queue
                AND (NOT end_ OR x.head > 0)
              ORDER BY c.partition_id
                FOR UPDATE OF c
    LOOP
        PERFORM pgcursor_internal.seek_cursor(p.id, grp, CASE WHEN end_ THEN p.head
                                                 ELSE pgcursor_internal.cursor_before(p, seek_consumer_group.to_time) END);
        updated := updated + 1;
    END LOOP;
    RETURN jsonb_build_object('success', true, 'consumerGroup', grp, 'queueName', seek_consumer_group.queue,
                              'seekToEnd', end_,
                              'targetTimestamp', CASE WHEN NOT end_ THEN pgcursor_internal.rfc3339_utc(seek_consumer_group.to_time) END,
                              'partitionsUpdated', updated);
END $$;

-- seek_partition: one partition of the group to its head (§1.8), as
-- seek_consumer_group's to_end. updated is false when the group has no
-- cursor there or the partition never had a message; cursorMovedTo is the
-- createdAt of the message at the head (null when not moved or not stored).
-- Unknown queue or partition -> P0002.
CREATE OR REPLACE FUNCTION pgcursor.seek_partition(consumer_group text, queue text, partition text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp   text := seek_partition.consumer_group;
    p     pgcursor.partitions;
    moved boolean;
BEGIN
    SELECT * INTO p FROM pgcursor.partitions x
     WHERE x.queue = seek_partition.queue AND x.name = seek_partition.partition;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'partition not found: % in queue %', seek_partition.partition, seek_partition.queue
            USING ERRCODE = 'P0002';
    END IF;
    PERFORM FROM pgcursor.cursors c WHERE c.partition_id = p.id AND c.consumer_group = grp FOR UPDATE;
    moved := FOUND AND p.head > 0;
    IF moved THEN
        PERFORM pgcursor_internal.seek_cursor(p.id, grp, p.head);
    END IF;
    RETURN jsonb_build_object(
        'success', true, 'consumerGroup', grp, 'queueName', p.queue, 'partitionName', p.name, 'updated', moved,
        'cursorMovedTo', CASE WHEN moved THEN
            (SELECT pgcursor_internal.rfc3339_utc(m.created_at) FROM pgcursor.messages m
              WHERE m.partition_id = p.id AND m.msg_offset = p.head) END);
END $$;
