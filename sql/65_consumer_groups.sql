-- Consumer groups as a whole (docs/sql-api.md "Consumer groups"): the list
-- with lag figures, the lagging partitions, deleting a group, and seeking a
-- group (to the end or to a time) on a queue or on one partition.
--
--   SELECT pgcursor.consumer_groups();
--   SELECT pgcursor.lagging_partitions(60);
--   SELECT pgcursor.consumer_group('billing');
--   SELECT pgcursor.update_subscription('billing', '2026-01-01T00:00:00Z');
--   SELECT pgcursor.delete_consumer_group('billing', 'orders');
--   SELECT pgcursor.seek_consumer_group('billing', 'orders', to_end => true);
--   SELECT pgcursor.seek_consumer_group('billing', 'orders', '2026-01-01T00:00:00Z');
--   SELECT pgcursor.seek_partition('billing', 'orders', 'Default');
--
-- A group's subscription on a queue (pgcursor.subscriptions, written at its
-- first pop there by sql/30_pop.sql's subscribe) says where cursor rows it
-- does not have yet start; the list shows it, update_subscription moves it, and deleting
-- a group deletes it unless told to keep it.

-- Every cursor row with its queue, partition and lag: offset_lag counts
-- offsets (retention gaps included); oldest_at is the createdAt of the oldest
-- unconsumed message still stored (the first one above the cursor, one
-- primary-key probe), null when none is; age_seconds its age in whole
-- seconds (lag is the age of the OLDEST unconsumed message).
CREATE OR REPLACE FUNCTION pgcursor_internal.group_cursor_rows()
RETURNS TABLE (consumer_group text, queue text, partition text, partition_id uuid, lease_id uuid,
               lease_expires_at timestamptz, completed_total bigint, last_ack_at timestamptz,
               offset_lag bigint, oldest_at timestamptz, age_seconds bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.consumer_group, p.queue, p.name, p.id, c.lease_id, c.lease_expires_at, c.completed_total,
           c.last_ack_at, h.head - c.cursor,
           o.created_at, greatest(floor(extract(epoch FROM now() - o.created_at)), 0)::bigint
    FROM pgcursor_internal.cursor_rows() c
    JOIN pgcursor.partitions p ON p.id = c.partition_id
    JOIN pgcursor.partition_heads h ON h.partition_id = c.partition_id
    LEFT JOIN LATERAL (SELECT m.created_at FROM pgcursor.messages m
                        WHERE m.partition_id = c.partition_id AND m.msg_offset > c.cursor
                        ORDER BY m.msg_offset LIMIT 1) o ON true
$$;

-- consumer_groups: one element per (group, queue) with a cursor row there,
-- sorted by group, then queue, in Queen's list shape (docs/sql-api.md
-- "consumer_groups"), with the group's subscription on the queue. A row
-- lags when a stored message is after its cursor. oldestPartition is the
-- lagging row with the oldest unconsumed message (null when none lags):
-- the row lagging_partitions lists first for the pair (when it lists any:
-- it leaves out rows under a second behind), without listing every other.
CREATE OR REPLACE FUNCTION pgcursor.consumer_groups()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', g.consumer_group, 'queueName', g.queue, 'queue', g.queue,
               'topics', jsonb_build_array(g.queue), 'members', g.members, 'partitions', g.members,
               'partitionsWithLag', g.lagging, 'maxTimeLag', g.max_age, 'lagSeconds', g.max_age,
               'totalLag', g.total_lag, 'lagMessages', g.total_lag,
               'state', CASE WHEN g.max_age > 300 THEN 'Lagging' WHEN g.acked THEN 'Stable' ELSE 'Dead' END,
               'subscriptionMode', nullif(s.mode, 'all'),  -- Queen's null: from the beginning
               'subscriptionTimestamp', pgcursor_internal.rfc3339_utc(s.since),
               'subscriptionCreatedAt', pgcursor_internal.rfc3339_utc(s.created_at),
               'oldestPartition', CASE WHEN g.oldest IS NOT NULL THEN jsonb_build_object(
                   'partition', g.oldest[2], 'partitionId', g.oldest[3]::uuid, 'offsetLag', g.oldest[4]::bigint,
                   'timeLagSeconds', g.oldest[5]::bigint, 'oldestUnconsumedAt', g.oldest[6]) END)
             ORDER BY g.consumer_group, g.queue), '[]'::jsonb)
    FROM (SELECT r.consumer_group, r.queue, count(*) AS members,
                 count(*) FILTER (WHERE r.oldest_at IS NOT NULL) AS lagging,
                 coalesce(max(r.age_seconds), 0) AS max_age,
                 sum(r.offset_lag) AS total_lag, bool_or(r.last_ack_at IS NOT NULL) AS acked,
                 -- The lagging row the lagging list puts first (age descending,
                 -- then partition), found without sorting the rows: the least
                 -- of these arrays, compared element by element (the age
                 -- counted down from bigint's top and zero-padded, so that
                 -- text compares as the number). A window ranking every row
                 -- cost 250 ms at 100,000 rows, lagging or not.
                 min(ARRAY[lpad((9223372036854775807 - r.age_seconds)::text, 19, '0'), r.partition,
                           r.partition_id::text, r.offset_lag::text, r.age_seconds::text,
                           pgcursor_internal.rfc3339_utc(r.oldest_at)])
                   FILTER (WHERE r.oldest_at IS NOT NULL) AS oldest
          FROM pgcursor_internal.group_cursor_rows() r
          GROUP BY r.consumer_group, r.queue) g
    LEFT JOIN pgcursor.subscriptions s ON s.consumer_group = g.consumer_group AND s.queue = g.queue
$$;

-- consumer_group: one group's rows, by queue, partitions sorted by name
-- (docs/sql-api.md "consumer_group"). An unknown group is {}.
CREATE OR REPLACE FUNCTION pgcursor.consumer_group(consumer_group text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_object_agg(q.queue, jsonb_build_object('partitions', q.partitions)), '{}'::jsonb)
    FROM (SELECT r.queue, jsonb_agg(jsonb_build_object(
                     'partition', r.partition, 'partitionId', r.partition_id, 'workerId', r.lease_id,
                     'lastConsumedAt', pgcursor_internal.rfc3339_utc(r.last_ack_at),
                     'totalConsumed', r.completed_total, 'offsetLag', r.offset_lag,
                     'timeLagSeconds', coalesce(r.age_seconds, 0),
                     'leaseActive', pgcursor_internal.lease_is_live(r.lease_expires_at))
                   ORDER BY r.partition) AS partitions
          FROM pgcursor_internal.group_cursor_rows() r
          WHERE r.consumer_group = consumer_group.consumer_group
          GROUP BY r.queue) q
$$;

-- Whether a cursor row has consumed nothing and may be moved by a
-- subscription update: nothing completed, dead-lettered or discarded, and no
-- live lease. A nack that charged the counter, or a seek, consumed nothing.
CREATE OR REPLACE FUNCTION pgcursor_internal.movable_by_subscription(c pgcursor.cursors)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT c.completed_total = 0 AND c.dead_lettered_total = 0 AND c.discarded_total = 0
       AND NOT pgcursor_internal.lease_is_live(c.lease_expires_at)
$$;

-- update_subscription: the group's subscriptions on every queue start at
-- since (mode timestamp; docs/http-api.md "Consumer groups"): rows made later
-- start before the first message created at or after it, and rows that never
-- completed anything and hold no live lease move there now, as a seek would.
-- Rows that consumed something stay. rowsUpdated counts the subscriptions; a
-- group that never popped has none (0), and then no row moves. A time still
-- to come counts as now, as a pop's subscriptionFrom does. Queue mode has
-- none to update (22023).
CREATE OR REPLACE FUNCTION pgcursor.update_subscription(consumer_group text, since timestamptz)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp     text := update_subscription.consumer_group;
    updated integer;
    pid     uuid;
    cur     pgcursor.cursors;
    p       pgcursor.partitions;
BEGIN
    IF since IS NULL THEN
        RAISE EXCEPTION 'Missing subscriptionTimestamp in request body' USING ERRCODE = '22023';
    END IF;
    PERFORM pgcursor_internal.time_within(since, 'subscriptionTimestamp');
    -- Queue mode has no subscription (its pops start at the beginning):
    -- moving its rows would leave a backlog nobody consumes.
    IF grp = '__QUEUE_MODE__' THEN
        RAISE EXCEPTION 'queue mode (__QUEUE_MODE__) has no subscription to update' USING ERRCODE = '22023';
    END IF;
    since := least(since, now());
    PERFORM pgcursor_internal.lock_subscriptions(grp, NULL, false);
    UPDATE pgcursor.subscriptions s SET mode = 'timestamp', since = update_subscription.since
     WHERE s.consumer_group = grp;
    GET DIAGNOSTICS updated = ROW_COUNT;
    -- Candidates first, then each row locked (a FOR UPDATE of its own) and
    -- looked at again, in partition order: Citus locks rows only in a
    -- statement routed to one shard, and a group's rows lie on every shard.
    -- (only on the queues it has a subscription on: rows an ack made on
    -- another queue stay, as its answer counts no subscription there)
    FOR pid IN SELECT c.partition_id FROM pgcursor.cursors c
                 JOIN pgcursor.partitions part ON part.id = c.partition_id
                 JOIN pgcursor.subscriptions sub ON sub.queue = part.queue AND sub.consumer_group = grp
                WHERE c.consumer_group = grp AND pgcursor_internal.movable_by_subscription(c)
                ORDER BY c.partition_id
    LOOP
        SELECT * INTO cur FROM pgcursor.cursors c WHERE c.partition_id = pid AND c.consumer_group = grp FOR UPDATE;
        CONTINUE WHEN NOT FOUND  -- deleted meanwhile (the group or its queue): not made again
                   OR NOT pgcursor_internal.movable_by_subscription(cur);
        SELECT * INTO p FROM pgcursor.partitions x WHERE x.id = pid;
        PERFORM pgcursor_internal.move_cursor(p, grp, pgcursor_internal.cursor_before(p, since), NULL);
    END LOOP;
    RETURN jsonb_build_object('success', true, 'consumerGroup', grp,
                              'newTimestamp', pgcursor_internal.rfc3339_utc(since), 'rowsUpdated', updated);
END $$;

-- lagging_partitions: the (group, partition) rows whose oldest unconsumed
-- message is more than min_lag_seconds old, oldest first (snake_case).
CREATE OR REPLACE FUNCTION pgcursor.lagging_partitions(min_lag_seconds integer DEFAULT 3600)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'consumer_group', r.consumer_group, 'queue_name', r.queue, 'partition_name', r.partition,
               'partition_id', r.partition_id, 'worker_id', r.lease_id, 'offset_lag', r.offset_lag,
               'time_lag_seconds', r.age_seconds, 'lag_hours', round(r.age_seconds / 3600.0, 2),
               'oldest_unconsumed_at', pgcursor_internal.rfc3339_utc(r.oldest_at),
               'last_consumed_at', pgcursor_internal.rfc3339_utc(r.last_ack_at))
             ORDER BY r.age_seconds DESC, r.consumer_group, r.queue, r.partition), '[]'::jsonb)
    FROM pgcursor_internal.group_cursor_rows() r
    WHERE r.oldest_at IS NOT NULL AND r.age_seconds > min_lag_seconds
$$;

-- delete_consumer_group: deletes the group's cursor rows on every queue, or
-- on one; live leases go with them. Dead letters are kept. With
-- delete_metadata (the default) its subscription records go too, and its next
-- pop there starts as a new group's; without, the next pop re-creates the
-- rows where the kept subscription says. The group's subscriptions are
-- locked first (lock_subscriptions), then its rows in partition order, as
-- the seeks lock them, so none of these deadlock with one another.
CREATE OR REPLACE FUNCTION pgcursor.delete_consumer_group(
    consumer_group text, queue text DEFAULT NULL, delete_metadata boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp     text := delete_consumer_group.consumer_group;
    qname   text := delete_consumer_group.queue;
    deleted integer;
BEGIN
    PERFORM pgcursor_internal.lock_subscriptions(grp, NULL, false);
    PERFORM pgcursor_internal.materialize_cursors(grp);  -- deletedPartitions counts where it stood
    PERFORM FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
     WHERE c.consumer_group = grp AND (qname IS NULL OR p.queue = qname)
     ORDER BY c.partition_id
       FOR UPDATE OF c;
    DELETE FROM pgcursor.cursors c USING pgcursor.partitions p
     WHERE p.id = c.partition_id AND c.consumer_group = grp AND (qname IS NULL OR p.queue = qname);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    IF coalesce(delete_metadata, true) THEN
        DELETE FROM pgcursor.subscriptions s
         WHERE s.consumer_group = grp AND (qname IS NULL OR s.queue = qname);
    ELSE  -- kept, but no rows until the group pops there again
        UPDATE pgcursor.subscriptions s SET cursor_rows = 'none'
         WHERE s.consumer_group = grp AND (qname IS NULL OR s.queue = qname);
    END IF;
    RETURN jsonb_build_object('success', true, 'consumerGroup', grp, 'deletedPartitions', deleted,
                              'metadataDeleted', coalesce(delete_metadata, true))
        || CASE WHEN qname IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('queueName', qname) END;
END $$;

-- Moves one cursor row, which the caller holds locked, to `to_offset`: the
-- live lease is released (its holder's acks then fail) and the retry counter
-- reset to 0; the totals stay. A seek sets last_ack_at (consumed_at = now());
-- an update of the subscription passes null and leaves it. Long polls of the
-- queue wake when the row has messages to deliver.
CREATE OR REPLACE FUNCTION pgcursor_internal.move_cursor(
    p pgcursor.partitions, consumer_group text, to_offset bigint, consumed_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgcursor.cursors c
       SET cursor = to_offset, lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL,
           retry_count = 0, last_ack_at = coalesce(consumed_at, c.last_ack_at)
     WHERE c.partition_id = p.id AND c.consumer_group = move_cursor.consumer_group;
    PERFORM pgcursor_internal.wake_waiters(p.id, p.queue, to_offset);
END $$;

-- seek_consumer_group: every cursor row of the group on the queue (rows its
-- subscription has not written yet are written first; none is created for
-- a group that never popped there) moves to the head (to_end; rows on partitions that never
-- had a message are left alone and not counted), or so that the first
-- message created at or after to_time is delivered next (as a subscription
-- from to_time would start; the head when there is none). to_end wins when
-- both are given. Rows are locked in partition order: a concurrent ack or pop
-- of a row waits or is waited for.
CREATE OR REPLACE FUNCTION pgcursor.seek_consumer_group(
    consumer_group text, queue text, to_time timestamptz DEFAULT NULL, to_end boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp     text := seek_consumer_group.consumer_group;
    end_    boolean := coalesce(seek_consumer_group.to_end, false);
    pid     uuid;
    p       pgcursor.partitions;
    updated integer := 0;
BEGIN
    IF NOT end_ AND seek_consumer_group.to_time IS NULL THEN
        RAISE EXCEPTION 'Must specify either ''toEnd'': true or ''timestamp''' USING ERRCODE = '22023';
    END IF;
    PERFORM pgcursor_internal.time_within(seek_consumer_group.to_time, 'timestamp');
    PERFORM pgcursor_internal.materialize_cursors(grp);  -- rows on every partition it subscribed to
    -- Each row locked on its own, as in update_subscription.
    FOR pid IN SELECT c.partition_id FROM pgcursor.cursors c JOIN pgcursor.partitions x ON x.id = c.partition_id
                WHERE c.consumer_group = grp AND x.queue = seek_consumer_group.queue
                ORDER BY c.partition_id
    LOOP
        PERFORM 1 FROM pgcursor.cursors c WHERE c.partition_id = pid AND c.consumer_group = grp FOR UPDATE;
        CONTINUE WHEN NOT FOUND  -- deleted meanwhile (the group or its queue): not made again
                   OR end_ AND pgcursor_internal.partition_head(pid) = 0;
        SELECT * INTO p FROM pgcursor.partitions x WHERE x.id = pid;
        PERFORM pgcursor_internal.move_cursor(p, grp, CASE WHEN end_ THEN pgcursor_internal.partition_head(p.id)
                                                 ELSE pgcursor_internal.cursor_before(p, seek_consumer_group.to_time) END,
                                              now());
        updated := updated + 1;
    END LOOP;
    RETURN jsonb_build_object('success', true, 'consumerGroup', grp, 'queueName', seek_consumer_group.queue,
                              'seekToEnd', end_,
                              'targetTimestamp', CASE WHEN NOT end_ THEN pgcursor_internal.rfc3339_utc(seek_consumer_group.to_time) END,
                              'partitionsUpdated', updated);
END $$;

-- seek_partition: one partition of the group to its head, as
-- seek_consumer_group's to_end. updated is false when the group has no cursor
-- there or the partition never had a message; cursorMovedTo is the createdAt
-- of the newest message stored (wire-admin §1.8; null when not moved or
-- none is stored). Unknown
-- queue or partition -> P0002.
CREATE OR REPLACE FUNCTION pgcursor.seek_partition(consumer_group text, queue text, partition text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp   text := seek_partition.consumer_group;
    p     pgcursor.partitions;
    head  bigint;
    moved boolean;
BEGIN
    SELECT * INTO p FROM pgcursor.partitions x
     WHERE x.queue = seek_partition.queue AND x.name = seek_partition.partition;
    IF NOT FOUND THEN
        -- Queen's words, which its dashboard shows as they are.
        RAISE EXCEPTION 'Partition not found' USING ERRCODE = 'P0002',
            HINT = format('No partition %L in queue %L.', seek_partition.partition, seek_partition.queue);
    END IF;
    PERFORM pgcursor_internal.materialize_cursors(grp);
    PERFORM FROM pgcursor.cursors c WHERE c.partition_id = p.id AND c.consumer_group = grp FOR UPDATE;
    head := pgcursor_internal.partition_head(p.id);
    moved := FOUND AND head > 0;
    IF moved THEN
        PERFORM pgcursor_internal.move_cursor(p, grp, head, now());
    END IF;
    RETURN jsonb_build_object(
        'success', true, 'consumerGroup', grp, 'queueName', p.queue, 'partitionName', p.name, 'updated', moved,
        'cursorMovedTo', CASE WHEN moved THEN
            (SELECT pgcursor_internal.rfc3339_utc(m.created_at) FROM pgcursor.messages m
              WHERE m.partition_id = p.id AND m.msg_offset <= head
              ORDER BY m.msg_offset DESC LIMIT 1) END);
END $$;
