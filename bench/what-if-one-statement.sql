-- A what-if for measuring, never for use: pop and ack as one SQL statement
-- each, with none of the contract's work (no request checks, no
-- subscriptions or options, no maxBytes, no decision table, no nacks, no
-- per-item answers). It bounds what any PL/pgSQL pop and ack could reach
-- (bench/README.md, "Reading the results"). It replaces pgcursor.pop_messages
-- and pgcursor.ack_group in the database it is run in; the real ones stay
-- as pop_messages_full and ack_group_full. Only in a throwaway database:
--
--   bench --only i --apply bench/what-if-one-statement.sql
--   psql "$DATABASE_URL" -f bench/ab.sql -f bench/what-if-one-statement.sql
--   SET synchronous_commit = off;
--   CALL ab_pop(600, 'pgcursor.pop_messages', 'pgcursor.pop_messages_full');
--   CALL ab_ack(600, 'pgcursor.ack_group', 'pgcursor.ack_group_full');

ALTER FUNCTION pgcursor.pop_messages(jsonb) RENAME TO pop_messages_full;
ALTER FUNCTION pgcursor.ack_group(jsonb) RENAME TO ack_group_full;

-- The queue's least recently served partition with messages past the
-- group's cursor and no live lease, leased, and its batch read, in one
-- statement. A group with no cursor rows yet (its first pops) goes to the
-- real pop, which subscribes it and writes them.
CREATE FUNCTION pgcursor.pop_messages(req jsonb)
RETURNS TABLE (paused boolean, lease_id uuid, consumer_group text, partitions_claimed integer,
               queue text, partition text, partition_id uuid, retry_count integer,
               message_id uuid, transaction_id text, msg_offset bigint, payload jsonb,
               created_at timestamptz, trace_id uuid)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    q     text := req ->> 'queue';
    grp   text := coalesce(req ->> 'consumerGroup', '__QUEUE_MODE__');
    batch int := (req ->> 'batch')::int;
BEGIN
    RETURN QUERY
    WITH c AS (
        SELECT c.partition_id, c.cursor, h.head, p.name FROM pgcursor.partitions p
          JOIN pgcursor.cursors c ON c.partition_id = p.id AND c.consumer_group = grp
          JOIN pgcursor.partition_heads h ON h.partition_id = p.id
         WHERE p.queue = q AND c.cursor < h.head AND NOT pgcursor_internal.lease_is_live(c.lease_expires_at)
         ORDER BY greatest(c.last_ack_at, c.lease_expires_at) NULLS FIRST, c.partition_id
         LIMIT 1 FOR UPDATE OF c SKIP LOCKED
    ), u AS (
        UPDATE pgcursor.cursors x SET lease_id = gen_random_uuid(), lease_expires_at = now() + interval '300 s',
               batch_start = c.cursor + 1, batch_end = least(c.head, c.cursor + batch)
          FROM c WHERE x.partition_id = c.partition_id AND x.consumer_group = grp
        RETURNING x.partition_id, x.lease_id, x.batch_start, x.batch_end, c.name
    )
    SELECT false, u.lease_id, grp, 1, q, u.name, u.partition_id, 0,
           m.message_id, m.transaction_id, m.msg_offset, m.payload, m.created_at, m.trace_id
      FROM u JOIN pgcursor.messages m
        ON m.partition_id = u.partition_id AND m.msg_offset BETWEEN u.batch_start AND u.batch_end
     ORDER BY m.msg_offset;
    IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM pgcursor.pop_messages_full(req);
    END IF;
END $$;

-- The cursor moved to the last item's message under the lease, and the
-- lease released, in one statement; [{"success": moved}].
CREATE FUNCTION pgcursor.ack_group(request jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    moved integer;
BEGIN
    UPDATE pgcursor.cursors c SET cursor = m.msg_offset, lease_id = NULL, lease_expires_at = NULL,
           batch_start = NULL, batch_end = NULL, last_ack_at = now(), retry_count = 0,
           completed_total = c.completed_total + (m.msg_offset - c.cursor)
      FROM pgcursor.messages m
     WHERE m.partition_id = (request ->> 'partitionId')::uuid
       AND m.transaction_id = request -> 'items' -> -1 ->> 'transactionId'
       AND c.partition_id = m.partition_id
       AND c.consumer_group = coalesce(request ->> 'consumerGroup', '__QUEUE_MODE__')
       AND c.lease_id = (request ->> 'leaseId')::uuid AND m.msg_offset > c.cursor;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN jsonb_build_array(jsonb_build_object('success', moved = 1));
END $$;
