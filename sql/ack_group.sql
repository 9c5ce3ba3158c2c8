-- The ack contract (shared/spec/ack-contract.md §2–§6) for one group of
-- items sharing (partitionId, leaseId): one call, one transaction, one
-- locked cursor row. The decision is split into small helpers, each named
-- after what it decides; ack_group() only sequences them.

-- §2: exact, case-sensitive; absent or null means completed; anything else
-- (wrong case, unknown word, a number, an object) is an explicit failure.
CREATE OR REPLACE FUNCTION pgcursor.normalise_status(status jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN status IS NULL OR jsonb_typeof(status) = 'null' THEN 'completed'
        WHEN jsonb_typeof(status) = 'string'
             AND status #>> '{}' IN ('completed', 'failed', 'retry', 'dlq') THEN status #>> '{}'
        ELSE 'failed'
    END
$$;

-- Precedence at one offset: dlq > failed > retry > completed.
CREATE OR REPLACE FUNCTION pgcursor.status_strength(status text)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE status WHEN 'dlq' THEN 3 WHEN 'failed' THEN 2 WHEN 'retry' THEN 1 ELSE 0 END
$$;

-- Dead-lettering is off only when both flags are explicitly false.
CREATE OR REPLACE FUNCTION pgcursor.dead_lettering_enabled(queue pgcursor.queues)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT NOT (queue.dead_letter_queue IS FALSE AND queue.dlq_after_max_retries IS FALSE)
$$;

-- A uuid-valued request field, or NULL when absent; anything else is a 22023
-- error naming the field, so psql callers get the gateway's 400 rule too.
CREATE OR REPLACE FUNCTION pgcursor.uuid_field(request jsonb, field text)
RETURNS uuid LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT pgcursor.is_uuid_value(request -> field, true) THEN
        RAISE EXCEPTION '% must be a UUID string', field USING ERRCODE = '22023';
    END IF;
    RETURN (request ->> field)::uuid;
END
$$;

-- The group's items, normalised and resolved through the transaction index:
-- [{ord, index, transactionId, status, error, offset|null}], request order.
CREATE OR REPLACE FUNCTION pgcursor.resolve_ack_items(partition_id uuid, items jsonb)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    resolved jsonb;
BEGIN
    IF jsonb_typeof(items) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'items must be an array' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'ord', i.ord,
               'index', coalesce(i.item -> 'index', to_jsonb(i.ord - 1)),
               'transactionId', i.item -> 'transactionId',
               'status', pgcursor.normalise_status(i.item -> 'status'),
               'error', nullif(i.item ->> 'error', ''),
               'offset', t.msg_offset) ORDER BY i.ord), '[]'::jsonb)
      INTO resolved
      FROM jsonb_array_elements(items) WITH ORDINALITY AS i(item, ord)
      -- LATERAL ... LIMIT 1 keeps this one primary-key probe per item even in
      -- a cached generic plan (a join may pick the created_at index instead).
      LEFT JOIN LATERAL (
          SELECT x.msg_offset FROM pgcursor.transaction_index x
           WHERE x.partition_id = resolve_ack_items.partition_id
             AND x.transaction_id = i.item ->> 'transactionId'
             AND jsonb_typeof(i.item -> 'transactionId') = 'string'
           LIMIT 1) t ON true;
    RETURN resolved;
END
$$;

-- The items that still decide something: resolved and above the cursor.
CREATE OR REPLACE FUNCTION pgcursor.live_ack_items(items jsonb, cursor_at bigint)
RETURNS TABLE (ord bigint, msg_offset bigint, status text, error text)
LANGUAGE sql STABLE AS $$
    SELECT x.ord, x."offset", x.status, x.error
      FROM jsonb_to_recordset(items) AS x(ord bigint, "offset" bigint, status text, error text)
     WHERE x."offset" > cursor_at
$$;

-- N: the lowest offset whose effective status is a nack (NULL when none).
-- (Here, a helper whose body has a FROM clause is PL/pgSQL: its plan is then
-- cached per session. A SQL function that cannot be inlined is parsed and
-- planned anew in every transaction that calls it.)
CREATE OR REPLACE FUNCTION pgcursor.lowest_nack(items jsonb, cursor_at bigint)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT min(msg_offset) FROM pgcursor.live_ack_items(items, cursor_at) WHERE status <> 'completed');
END
$$;

-- The effective (strongest) status at one offset.
CREATE OR REPLACE FUNCTION pgcursor.effective_status(items jsonb, cursor_at bigint, at_offset bigint)
RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT status FROM pgcursor.live_ack_items(items, cursor_at)
             WHERE msg_offset = at_offset
             ORDER BY pgcursor.status_strength(status) DESC LIMIT 1);
END
$$;

-- P = max(cursor, highest completed offset below N, or overall when no nack).
CREATE OR REPLACE FUNCTION pgcursor.completed_prefix(items jsonb, cursor_at bigint, nack_at bigint)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT greatest(cursor_at, max(msg_offset))
              FROM pgcursor.live_ack_items(items, cursor_at)
             WHERE status = 'completed' AND (nack_at IS NULL OR msg_offset < nack_at));
END
$$;

-- How many distinct offsets in (cursor_at, upto] the call names as completed:
-- the rest of what the cursor passes over are silent gaps.
CREATE OR REPLACE FUNCTION pgcursor.mentioned_completed(items jsonb, cursor_at bigint, upto bigint)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(DISTINCT msg_offset)
              FROM pgcursor.live_ack_items(items, cursor_at)
             WHERE status = 'completed' AND msg_offset <= upto);
END
$$;

-- The dead-letter reason: a nack reason given on the poison message itself,
-- else the first nack reason in request order, else the default.
CREATE OR REPLACE FUNCTION pgcursor.dead_letter_reason(items jsonb, nack_at bigint)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN coalesce(
        (SELECT x.error FROM jsonb_to_recordset(items) AS x(ord bigint, "offset" bigint, status text, error text)
          WHERE x."offset" = nack_at AND x.status <> 'completed' AND x.error IS NOT NULL
          ORDER BY x.ord LIMIT 1),
        (SELECT x.error FROM jsonb_to_recordset(items) AS x(ord bigint, status text, error text)
          WHERE x.status <> 'completed' AND x.error IS NOT NULL
          ORDER BY x.ord LIMIT 1),
        'Retries exhausted');
END
$$;

-- Snapshot the poison message into the dead-letter table, so it survives
-- message retention.
CREATE OR REPLACE FUNCTION pgcursor.dead_letter(
    partition_id uuid, consumer_group text, msg_offset bigint, reason text, retry_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.dead_letters
           (partition_id, consumer_group, msg_offset, transaction_id, payload, error, retry_count, created_at)
    SELECT dead_letter.partition_id, dead_letter.consumer_group, dead_letter.msg_offset,
           coalesce(m.transaction_id, t.transaction_id, ''), m.payload, reason, dead_letter.retry_count, m.created_at
      FROM (SELECT 1) AS one
      LEFT JOIN pgcursor.messages m
             ON m.partition_id = dead_letter.partition_id AND m.msg_offset = dead_letter.msg_offset
      LEFT JOIN LATERAL (SELECT ti.transaction_id FROM pgcursor.transaction_index ti
                          WHERE ti.partition_id = dead_letter.partition_id
                            AND ti.msg_offset = dead_letter.msg_offset LIMIT 1) t ON m.transaction_id IS NULL;
END
$$;

-- One per-item answer (§4).
CREATE OR REPLACE FUNCTION pgcursor.ack_result(
    item jsonb, success boolean, error text, lease_released boolean, dlq boolean, noop boolean)
RETURNS jsonb LANGUAGE sql STABLE AS $$  -- STABLE like jsonb_build_object, so it inlines
    SELECT jsonb_build_object('index', item -> 'index', 'transactionId', item -> 'transactionId',
                              'success', success, 'error', error, 'leaseReleased', lease_released,
                              'dlq', dlq, 'noop', noop)
$$;

-- Every item refused with the same error (unknown partition, refused lease).
CREATE OR REPLACE FUNCTION pgcursor.refuse_all(items jsonb, error text, lease_released boolean)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(pgcursor.ack_result(
                       jsonb_build_object('index', coalesce(i.item -> 'index', to_jsonb(i.ord - 1)),
                                          'transactionId', i.item -> 'transactionId'),
                       false, refuse_all.error, lease_released, false, true) ORDER BY i.ord), '[]'::jsonb)
              FROM jsonb_array_elements(items) WITH ORDINALITY AS i(item, ord));
END
$$;

-- §4–§6 per item, once the outcome is known: nack_at = N (NULL when none),
-- dead_lettered says whether N went to the dead-letter table.
CREATE OR REPLACE FUNCTION pgcursor.ack_results(
    items jsonb, cursor_before bigint, nack_at bigint, nack_status text,
    lease_released boolean, dead_lettered boolean)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(jsonb_agg(
        CASE
        WHEN x."offset" IS NULL THEN
            pgcursor.ack_result(x.item, false, 'transaction not found', lease_released, false, true)
        WHEN x."offset" <= cursor_before AND x.status = 'completed' THEN
            pgcursor.ack_result(x.item, true, NULL, lease_released, false, true)
        WHEN x."offset" <= cursor_before THEN
            pgcursor.ack_result(x.item, false, 'already completed', lease_released, false, true)
        WHEN nack_at IS NULL OR x."offset" < nack_at THEN
            pgcursor.ack_result(x.item, true, NULL, lease_released, false, false)
        WHEN x."offset" = nack_at AND x.status = nack_status THEN
            pgcursor.ack_result(x.item, true, NULL, lease_released, dead_lettered, false)
        ELSE
            pgcursor.ack_result(x.item, false, 'superseded by an earlier nack', lease_released, false, true)
        END ORDER BY x.ord), '[]'::jsonb)
      FROM jsonb_array_elements(items) AS e(item),
           LATERAL (SELECT (e.item ->> 'ord')::bigint AS ord, (e.item ->> 'offset')::bigint AS "offset",
                           e.item ->> 'status' AS status, e.item AS item) AS x);
END
$$;

-- The cursor row of (partition, group), locked; created at cursor 0 when the
-- group never touched the partition. Concurrent acks of one (partition,
-- group) serialise here; other partitions never wait on it.
CREATE OR REPLACE FUNCTION pgcursor.lock_cursor(partition_id uuid, consumer_group text)
RETURNS pgcursor.cursors LANGUAGE plpgsql AS $$
DECLARE
    row pgcursor.cursors;
BEGIN
    SELECT * INTO row FROM pgcursor.cursors c
     WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
       FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pgcursor.cursors (partition_id, consumer_group)
        VALUES (lock_cursor.partition_id, lock_cursor.consumer_group)
        ON CONFLICT DO NOTHING;
        SELECT * INTO row FROM pgcursor.cursors c
         WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
           FOR UPDATE;
    END IF;
    RETURN row;
END
$$;

-- A nack releases the lease and leaves messages pending past the cursor:
-- wake long-polling pops the way a push does, so the tail redelivers at once.
-- (Not on a completed batch end: its consumer pops again by itself, and each
-- NOTIFY serialises commits cluster-wide, which costs throughput.)
CREATE OR REPLACE FUNCTION pgcursor.wake_waiters(partition_id uuid, queue text, cursor_at bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgcursor_push', wake_waiters.queue)
       FROM pgcursor.partitions p
      WHERE p.id = wake_waiters.partition_id AND p.head > cursor_at;
END
$$;

-- Is lease_id the live lease of this cursor row?
CREATE OR REPLACE FUNCTION pgcursor.is_live_lease(cur pgcursor.cursors, lease_id uuid)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT cur.lease_id IS NOT DISTINCT FROM lease_id AND cur.lease_expires_at > now()
$$;

-- The one entry point: {partitionId, consumerGroup, leaseId, items:[...]}
-- -> [{index, transactionId, success, error, leaseReleased, dlq, noop}].
CREATE OR REPLACE FUNCTION pgcursor.ack_group(request jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    partition_id uuid := pgcursor.uuid_field(request, 'partitionId');
    lease_id uuid := pgcursor.uuid_field(request, 'leaseId');
    consumer_group text := coalesce(request ->> 'consumerGroup', '__QUEUE_MODE__');
    queue pgcursor.queues;
    cur pgcursor.cursors;
    items jsonb;
BEGIN
    IF partition_id IS NULL THEN
        RAISE EXCEPTION 'partitionId is required' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(request -> 'items') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'items must be an array' USING ERRCODE = '22023';
    END IF;
    SELECT q.* INTO queue FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
     WHERE p.id = partition_id;
    IF NOT FOUND THEN
        RETURN pgcursor.refuse_all(request -> 'items', 'partition not found', false);
    END IF;
    cur := pgcursor.lock_cursor(partition_id, consumer_group);
    IF lease_id IS NOT NULL AND NOT pgcursor.is_live_lease(cur, lease_id) THEN
        RETURN pgcursor.refuse_all(request -> 'items', 'invalid or expired lease', cur.lease_id IS NULL);
    END IF;
    items := pgcursor.resolve_ack_items(partition_id, request -> 'items');
    RETURN pgcursor.apply_ack(queue, cur, items);
END
$$;

-- §3 step 5: decide the outcome for the resolved items, move the cursor,
-- and answer per item.
CREATE OR REPLACE FUNCTION pgcursor.apply_ack(queue pgcursor.queues, cur pgcursor.cursors, items jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    nack_at bigint := pgcursor.lowest_nack(items, cur.cursor);
    nack_status text := pgcursor.effective_status(items, cur.cursor, nack_at);
    prefix bigint := pgcursor.completed_prefix(items, cur.cursor, nack_at);
    new_cursor bigint := prefix;
    new_retry_count integer := cur.retry_count;
    release boolean := true;
    terminal boolean := false;       -- N is dead-lettered or discarded
    dead_lettered boolean := false;
BEGIN
    IF nack_at IS NULL THEN
        release := cur.batch_end IS NOT NULL AND prefix >= cur.batch_end;
        IF release THEN
            new_retry_count := 0;
        END IF;
    ELSIF nack_status = 'failed' AND cur.retry_count < queue.retry_limit THEN
        new_retry_count := cur.retry_count + 1;
    ELSIF nack_status IN ('failed', 'dlq') THEN
        terminal := true;
        dead_lettered := nack_status = 'dlq' OR pgcursor.dead_lettering_enabled(queue);
        IF dead_lettered THEN
            PERFORM pgcursor.dead_letter(cur.partition_id, cur.consumer_group, nack_at,
                                         pgcursor.dead_letter_reason(items, nack_at), cur.retry_count);
        END IF;
        new_cursor := nack_at;
        new_retry_count := 0;
    END IF;
    -- nack_status = 'retry' falls through: cursor at the prefix, lease released, counter untouched.

    UPDATE pgcursor.cursors c
       SET cursor = new_cursor,
           retry_count = new_retry_count,
           lease_id = CASE WHEN release THEN NULL ELSE c.lease_id END,
           lease_expires_at = CASE WHEN release THEN NULL ELSE c.lease_expires_at END,
           batch_start = CASE WHEN release THEN NULL ELSE c.batch_start END,
           batch_end = CASE WHEN release THEN NULL ELSE c.batch_end END,
           completed_total = c.completed_total + (new_cursor - cur.cursor) - terminal::integer,
           implicitly_completed_total = c.implicitly_completed_total
               + (new_cursor - cur.cursor) - terminal::integer
               - pgcursor.mentioned_completed(items, cur.cursor, prefix),
           dead_lettered_total = c.dead_lettered_total + dead_lettered::integer,
           discarded_total = c.discarded_total + (terminal AND NOT dead_lettered)::integer,
           last_ack_at = now()
     WHERE c.partition_id = cur.partition_id AND c.consumer_group = cur.consumer_group;

    IF nack_at IS NOT NULL THEN
        PERFORM pgcursor.wake_waiters(cur.partition_id, queue.name, new_cursor);
    END IF;
    RETURN pgcursor.ack_results(items, cur.cursor, nack_at, nack_status,
                                release OR cur.lease_id IS NULL, dead_lettered);
END
$$;
