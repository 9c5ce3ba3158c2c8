-- Inspection: cursors of a partition, one message and where each group stands
-- with it. (The resource views behind /api/v1/resources/*: sql/61_resources.sql.)
--
--   SELECT pgcursor.cursors('0190...'::uuid);
--   SELECT pgcursor.message('0190...'::uuid, 'order-42');

-- The live lease of a cursor row as {leaseId, expiresAt, batchStart, batchEnd}, or null.
CREATE OR REPLACE FUNCTION pgcursor_internal.live_lease_json(c pgcursor.cursors)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN pgcursor_internal.lease_is_live(c.lease_expires_at) THEN
        jsonb_build_object('leaseId', c.lease_id, 'expiresAt', pgcursor_internal.rfc3339_utc(c.lease_expires_at),
                           'batchStart', c.batch_start, 'batchEnd', c.batch_end)
    END
$$;

-- cursors: per consumer group on the partition, its whole consumption state.
-- Unknown partition -> P0002.
CREATE OR REPLACE FUNCTION pgcursor.cursors(pid uuid)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    answer jsonb;
BEGIN
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'consumerGroup', c.consumer_group, 'cursor', c.cursor, 'head', h.head,
               'lag', h.head - c.cursor, 'lease', pgcursor_internal.live_lease_json(c),
               'retryCount', c.retry_count, 'retryLimit', q.retry_limit,
               'retriesLeft', greatest(q.retry_limit - c.retry_count, 0),
               'completedTotal', c.completed_total,
               'implicitlyCompletedTotal', c.implicitly_completed_total,
               'deadLetteredTotal', c.dead_lettered_total, 'discardedTotal', c.discarded_total,
               'lastAckAt', pgcursor_internal.rfc3339_utc(c.last_ack_at)) ORDER BY c.consumer_group)
             FILTER (WHERE c.partition_id IS NOT NULL), '[]'::jsonb)
    INTO answer
    FROM pgcursor.partitions p
    -- The head through partition_head: on Citus a statement joining
    -- cursor_rows() with partition_heads is refused.
    CROSS JOIN LATERAL (SELECT pgcursor_internal.partition_head(p.id) AS head) h
    JOIN pgcursor.queues q ON q.name = p.queue
    LEFT JOIN pgcursor_internal.cursor_rows() c ON c.partition_id = p.id
    WHERE p.id = pid
    HAVING count(p.id) > 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'partition not found: %', pid USING ERRCODE = 'P0002';
    END IF;
    RETURN answer;
END $$;

-- Where a group stands with the message at offset `off`.
CREATE OR REPLACE FUNCTION pgcursor_internal.message_state(c pgcursor.cursors, off bigint)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN off <= c.cursor THEN 'completed'
        WHEN pgcursor_internal.lease_is_live(c.lease_expires_at) AND off BETWEEN c.batch_start AND c.batch_end THEN 'leased'
        ELSE 'pending'
    END
$$;

-- message: the message a transactionId names in a partition, and per group
-- whether it is completed, leased or pending; unknown -> P0002. A message
-- removed by retention but still indexed comes back with a null payload.
-- Also Queen's detail fields (docs/sql-api.md "message"): its status by the
-- listing's rules (sql/62_messages.sql), the dead letter's reason and retry
-- counter, the queue's config, the partition's mode and every cursor row.
CREATE OR REPLACE FUNCTION pgcursor.message(pid uuid, txid text)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    off bigint;
    m   pgcursor.messages;
    p   pgcursor.partitions;
    q   pgcursor.queues;
    d   pgcursor.dead_letters;
    f   record;
BEGIN
    SELECT * INTO p FROM pgcursor.partitions WHERE id = pid;
    SELECT * INTO q FROM pgcursor.queues x WHERE x.name = p.queue;
    off := pgcursor_internal.named_offset(pid, txid, pgcursor_internal.transaction_index_horizon(
               q.transaction_index_from, q.transaction_index_retention_seconds));
    IF off IS NULL OR p.id IS NULL THEN
        RAISE EXCEPTION 'message not found: % in partition %', txid, pid USING ERRCODE = 'P0002';
    END IF;
    SELECT * INTO m FROM pgcursor.messages x WHERE x.partition_id = pid AND x.msg_offset = off;
    SELECT * INTO d FROM pgcursor.dead_letters x WHERE x.partition_id = pid AND x.msg_offset = off
     ORDER BY x.failed_at DESC, x.consumer_group LIMIT 1;
    SELECT * INTO f FROM pgcursor_internal.partition_consumption(pid);
    RETURN jsonb_build_object(
        'id', m.message_id, 'transactionId', txid, 'offset', off, 'partitionId', p.id, 'partition', p.name,
        'queue', p.queue, 'payload', m.payload, 'data', m.payload, 'createdAt', pgcursor_internal.rfc3339_utc(m.created_at),
        'traceId', m.trace_id,
        'groups', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                       'consumerGroup', c.consumer_group,
                                       'state', pgcursor_internal.message_state(c, off))
                                   ORDER BY c.consumer_group), '[]'::jsonb)
                   FROM pgcursor_internal.cursor_rows() c WHERE c.partition_id = pid))
        || jsonb_build_object(
        'queuePath', p.queue || '/' || p.name, 'namespace', q.namespace, 'task', q.task, 'producerSub', NULL,
        'status', pgcursor_internal.message_status(
                      off, d.id IS NOT NULL,
                      pgcursor_internal.completed_to(f.has_queue_mode, f.queue_cursor, f.bus_groups, f.bus_done_to),
                      f.lease_from, f.lease_to),
        'isEncrypted', coalesce(pgcursor_internal.is_envelope(m.payload), false),
        'errorMessage', d.error, 'retryCount', d.retry_count,
        'leaseExpiresAt', pgcursor_internal.rfc3339_utc(f.lease_expires_at),
        'queueConfig', jsonb_build_object('leaseTime', q.lease_time, 'retryLimit', q.retry_limit,
                                          'retryDelay', 1000, 'ttl', 3600, 'priority', q.priority),
        'mode', jsonb_build_object(
            'hasQueueMode', f.has_queue_mode, 'busGroupsCount', f.bus_groups,
            'consumedByGroups', (SELECT count(*) FROM pgcursor_internal.cursor_rows() c
                                  WHERE c.partition_id = pid AND c.consumer_group <> '__QUEUE_MODE__'
                                    AND c.cursor >= off),
            'type', pgcursor_internal.consumption_type(f.has_queue_mode, f.bus_groups)),
        'consumerGroups', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                               'name', c.consumer_group, 'consumed', c.cursor >= off,
                                               'leaseExpiresAt', pgcursor_internal.rfc3339_utc(c.lease_expires_at))
                                           ORDER BY c.consumer_group), '[]'::jsonb)
                           FROM pgcursor_internal.cursor_rows() c WHERE c.partition_id = pid));
END $$;
