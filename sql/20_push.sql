-- Push: append messages to partitions with dense offsets, deduplicated by the
-- partition's transaction index. All items of one call commit together.
--
--   SELECT pgcursor.push('{"items":[{"queue":"orders","payload":{"id":1}},
--                                   {"queue":"orders","partition":"eu","payload":"x","transactionId":"t-2"}]}');

-- What is wrong with one push item (i = its index), or null when it is valid.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_item_error(item jsonb, i bigint)
RETURNS text LANGUAGE sql STABLE AS $$  -- STABLE like format(), so it inlines
    SELECT CASE
        WHEN jsonb_typeof(item) IS DISTINCT FROM 'object' THEN
            format('items[%s] must be an object', i)
        WHEN jsonb_typeof(item -> 'queue') IS DISTINCT FROM 'string' THEN
            format('items[%s].queue is required and must be a string', i)
        WHEN coalesce(jsonb_typeof(item -> 'partition'), 'null') NOT IN ('null', 'string')
             OR item ->> 'partition' = '' THEN
            format('items[%s].partition must be a non-empty string', i)
        WHEN NOT item ? 'payload' THEN
            format('items[%s].payload is required', i)
        WHEN coalesce(jsonb_typeof(item -> 'transactionId'), 'null') NOT IN ('null', 'string')
             OR item ->> 'transactionId' = '' THEN
            format('items[%s].transactionId must be a non-empty string', i)
        WHEN NOT pgcursor_internal.is_uuid_value(item -> 'traceId', true) THEN
            format('items[%s].traceId must be a UUID string', i)
    END
$$;

-- Raises 22023 naming the first bad field of the request, if any.
CREATE OR REPLACE FUNCTION pgcursor_internal.check_push_items(req jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    err text;
BEGIN
    IF jsonb_typeof(req -> 'items') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'items is required and must be an array' USING ERRCODE = '22023';
    END IF;
    SELECT v.e INTO err
    FROM (SELECT a.n, pgcursor_internal.push_item_error(a.item, a.n - 1) AS e
          FROM jsonb_array_elements(req -> 'items') WITH ORDINALITY AS a(item, n)) v
    WHERE v.e IS NOT NULL
    ORDER BY v.n LIMIT 1;
    IF err IS NOT NULL THEN
        RAISE EXCEPTION '%', err USING ERRCODE = '22023';
    END IF;
END $$;

-- Creates, race-safely, the queues (defaults) and partitions named by the
-- pairs (queues[i], names[i]); nothing to do (the usual case) costs one probe
-- per pair. Keys are inserted in sorted order so concurrent pushes cannot deadlock.
CREATE OR REPLACE FUNCTION pgcursor_internal.ensure_partitions(queues text[], names text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    growing text[] := ARRAY(SELECT u.q FROM unnest(queues, names) u(q, n)
                             WHERE NOT EXISTS (SELECT 1 FROM pgcursor.partitions p
                                               WHERE p.queue = u.q AND p.name = u.n));
    made text[];
BEGIN
    IF cardinality(growing) = 0 THEN
        RETURN;
    END IF;
    PERFORM pgcursor_internal.lock_partition_set(growing, shared => true);
    INSERT INTO pgcursor.queues (name)
    SELECT DISTINCT q FROM unnest(queues) q
    WHERE NOT EXISTS (SELECT 1 FROM pgcursor.queues x WHERE x.name = q)
    ORDER BY 1
    ON CONFLICT DO NOTHING;

    WITH ins AS (
        INSERT INTO pgcursor.partitions (id, queue, name)
        SELECT gen_random_uuid(), u.q, u.n FROM unnest(queues, names) u(q, n)
        WHERE NOT EXISTS (SELECT 1 FROM pgcursor.partitions p WHERE p.queue = u.q AND p.name = u.n)
        ORDER BY u.q, u.n
        ON CONFLICT DO NOTHING
        RETURNING queue)
    SELECT array_agg(DISTINCT ins.queue) INTO made FROM ins;
    -- Groups subscribed to the queue get their rows on the new partition
    -- from materialize_cursors (sql/02_shared.sql). Not only 'complete'
    -- ones: one being materialized now is locked, this waits, and marks it
    -- pending again after, so the new partition is not missed. Locked in
    -- (group, queue) order, as materialize_cursors locks them: two pushes
    -- creating partitions of one queue wait for each other, never deadlock.
    -- (A statement of its own, not one with the insert: as one, Citus sends
    -- the insert's returned column where the partitions shard expects all
    -- three, "missing data for column "queue"".)
    UPDATE pgcursor.subscriptions s SET cursor_rows = 'pending'
      FROM (SELECT x.consumer_group, x.queue FROM pgcursor.subscriptions x
             WHERE x.queue = ANY (made) AND x.cursor_rows <> 'none'
             ORDER BY x.consumer_group, x.queue
               FOR UPDATE) l
     WHERE s.consumer_group = l.consumer_group AND s.queue = l.queue;
END $$;

-- Writes the items into the partitions the caller has locked: partition i
-- is (queues[i], names[i]) with id ids[i] and head heads[i] as read under
-- that lock. A missing transactionId is generated here, once. A
-- transactionId already indexed, or repeated earlier in the request for the
-- same partition, is a duplicate (generated ids are new by construction and
-- skip the index probe) and answers the stored message's message_id. A queue
-- with room (full_queues[i] has room[i] messages left under its maxSize)
-- takes new messages in request order until it is full; the rest answer
-- "failed", "queue is full". The others get head+1, head+2, ... in request
-- order, with one head bump per partition. (Window functions only, no
-- self-joins: batches of 1000 items stay linear.)
CREATE OR REPLACE FUNCTION pgcursor_internal.push_write(
    items jsonb, queues text[], names text[], ids uuid[], heads bigint[],
    full_queues text[], room bigint[])
RETURNS jsonb LANGUAGE plpgsql AS $$  -- plpgsql, not sql, only so the plan is cached
DECLARE
    result jsonb;
BEGIN
    WITH it AS MATERIALIZED (  -- materialised: each generated id is drawn once
        -- One UUIDv7 per item is the message_id, and the transactionId too
        -- when the item has none (drawing one costs about 5 µs).
        SELECT (a.n - 1)::int AS index, a.item ->> 'queue' AS queue,
               coalesce(a.item ->> 'partition', 'Default') AS partition,
               a.item ->> 'transactionId' AS given,
               coalesce(a.item ->> 'transactionId', a.id::text) AS txid,
               a.id AS mid,
               a.item -> 'payload' AS payload, (a.item ->> 'traceId')::uuid AS trace_id
        FROM (SELECT e.item, e.n, pgcursor_internal.uuidv7() AS id  -- OFFSET 0: drawn once per item
                FROM jsonb_array_elements(items) WITH ORDINALITY AS e(item, n) OFFSET 0) a
    ), located AS (
        SELECT it.*, l.id AS pid, l.head, r.room, pgcursor_internal.transaction_index_horizon(qr) AS horizon
        FROM it JOIN unnest(queues, names, ids, heads) AS l(q, n, id, head)
                  ON l.q = it.queue AND l.n = it.partition
        JOIN pgcursor.queues qr ON qr.name = it.queue
        LEFT JOIN unnest(full_queues, room) AS r(q, room) ON r.q = it.queue
    ), classified AS (
        SELECT c.*, t.msg_offset AS existing, t.message_id AS existing_mid,
               c.given IS NULL OR c.index = min(c.index) OVER (PARTITION BY c.pid, c.given) AS first_seen
        FROM located c
        -- Index probes per given id. (A plain join, planned while the
        -- table was small, scans the partition's whole index once per item.)
        LEFT JOIN LATERAL (SELECT x.msg_offset, x.message_id
                             FROM pgcursor_internal.indexed_message(c.pid, c.given, c.horizon) x
                            WHERE c.given IS NOT NULL) t ON true
    ), capped AS (  -- new messages beyond a queue's room do not fit
        SELECT c.*, c.existing IS NULL AND c.first_seen AND c.room IS NOT NULL
                    AND count(*) FILTER (WHERE c.existing IS NULL AND c.first_seen)
                            OVER (PARTITION BY c.queue ORDER BY c.index) > c.room AS no_room
        FROM classified c
    ), ranked AS (  -- k: how many new messages this partition has up to this item
        SELECT c.*, c.existing IS NULL AND c.first_seen AND NOT c.no_room AS fresh,
               bool_or(c.no_room) OVER (PARTITION BY c.pid, c.txid) AND c.existing IS NULL AS refused,
               count(*) FILTER (WHERE c.existing IS NULL AND c.first_seen AND NOT c.no_room)
                   OVER (PARTITION BY c.pid ORDER BY c.index) AS k
        FROM capped c
    ), placed AS (  -- a repeat within the request takes its first occurrence's k and id
        SELECT r.*, coalesce(r.existing, r.head + min(r.k) OVER (PARTITION BY r.pid, r.txid)) AS off,
               coalesce(r.existing_mid, first_value(r.mid) OVER (PARTITION BY r.pid, r.txid ORDER BY r.index))
                   AS message_id
        FROM ranked r
    ), bumped AS (
        UPDATE pgcursor.partitions p SET head = p.head + f.n
        FROM (SELECT pid, max(k) AS n FROM ranked GROUP BY pid HAVING max(k) > 0) f
        WHERE p.id = f.pid
    ), msgs AS (  -- one row per message: it is its own transaction index entry
        INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, trace_id, message_id)
        SELECT pid, off, txid, payload, trace_id, message_id FROM placed WHERE fresh
    )
    SELECT coalesce(jsonb_agg(CASE WHEN refused THEN jsonb_build_object(
               'index', index, 'transactionId', txid, 'partitionId', pid, 'partition', partition,
               'queue', queue, 'offset', NULL, 'message_id', NULL, 'status', 'failed',
               'error', 'queue is full')
           ELSE jsonb_build_object(
               'index', index, 'transactionId', txid, 'partitionId', pid,
               'partition', partition, 'queue', queue, 'offset', off, 'message_id', message_id,
               'status', CASE WHEN fresh THEN 'queued' ELSE 'duplicate' END,
               'error', NULL) END ORDER BY index), '[]'::jsonb)
    INTO result
    FROM placed;
    RETURN result;
END $$;

-- How many more messages each queue with a maxSize takes: maxSize less its
-- depth (messages some group has not consumed yet, counted by offset; every
-- message when no group has a cursor). The queue rows are locked, so two
-- pushes cannot both take the last room.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_room(queues text[])
RETURNS TABLE (queue text, room bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT q.name, q.max_size - coalesce((SELECT sum(pgcursor_internal.partition_depth(p))
                                            FROM pgcursor.partitions p WHERE p.queue = q.name), 0)::bigint
      FROM (SELECT x.name, x.max_size FROM pgcursor.queues x
             WHERE x.name = ANY (queues) AND x.max_size > 0
             ORDER BY x.name FOR NO KEY UPDATE) q;
END $$;

-- Maintenance mode refuses a push before it writes anything (PC503: the
-- gateway's 503 with Retry-After), so nothing is accepted that is not stored.
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_push_in_maintenance()
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT enabled FROM pgcursor.maintenance WHERE mode = 'push') THEN
        RAISE EXCEPTION 'maintenance mode: pushes are paused' USING ERRCODE = 'PC503';
    END IF;
END $$;

-- Whether a payload is an encryption envelope (gateway/src/encryption.rs):
-- an object with exactly the string fields encrypted, iv and authTag.
CREATE OR REPLACE FUNCTION pgcursor_internal.is_envelope(payload jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(payload) = 'object'
       AND jsonb_typeof(payload -> 'encrypted') = 'string'
       AND jsonb_typeof(payload -> 'iv') = 'string'
       AND jsonb_typeof(payload -> 'authTag') = 'string'
       AND (SELECT count(*) FROM jsonb_object_keys(payload)) = 3
$$;

-- A queue with encryptionEnabled stores only envelopes: a push with any other
-- payload for one is refused before anything is written (PCENC, the refused
-- queues as a JSON array in the detail). The gateway, which holds the key,
-- seals those items and pushes again; psql, or a gateway without the key,
-- cannot store plaintext there. Checked in the push itself, so a queue
-- configured a moment ago by another gateway is never missed. push calls
-- it only when a queue of the request is encrypted (`encrypted`).
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_plaintext_payloads(items jsonb, encrypted text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    refused text[];
BEGIN
    SELECT array_agg(DISTINCT x ->> 'queue' ORDER BY x ->> 'queue') INTO refused
      FROM jsonb_array_elements(items) x
     WHERE x ->> 'queue' = ANY (encrypted) AND NOT pgcursor_internal.is_envelope(x -> 'payload');
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'queue % has encryptionEnabled: its payloads must be pushed as an envelope {"encrypted","iv","authTag"} (a gateway with PGCURSOR_ENCRYPTION_KEY makes one)',
            array_to_string(refused, ', ')
            USING ERRCODE = 'PCENC', DETAIL = to_jsonb(refused)::text;
    END IF;
END $$;

-- push: {"items":[...]} -> array in request order of
-- {index, transactionId, partitionId, partition, queue, offset, message_id,
-- status (queued, duplicate or failed), error}.
CREATE OR REPLACE FUNCTION pgcursor.push(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    queues text[];
    names  text[];
    ids    uuid[];
    heads  bigint[];
    encrypted text[];
    capped boolean;
    full_queues text[];
    room   bigint[];
    result jsonb;
BEGIN
    PERFORM pgcursor_internal.check_push_items(req);
    PERFORM pgcursor_internal.refuse_push_in_maintenance();
    SELECT array_agg(d.q ORDER BY d.q, d.n), array_agg(d.n ORDER BY d.q, d.n) INTO queues, names
    FROM (SELECT DISTINCT x ->> 'queue' AS q, coalesce(x ->> 'partition', 'Default') AS n
          FROM jsonb_array_elements(req -> 'items') x) d;
    PERFORM pgcursor_internal.ensure_partitions(queues, names);
    -- Lock the touched partitions (in id order: no deadlocks) before looking
    -- at the transaction index, so the next statement sees every push that
    -- committed ahead of us and offsets stay dense. NO KEY UPDATE serialises
    -- pushes without blocking foreign-key checks (cursor and dead-letter inserts).
    SELECT array_agg(l.queue), array_agg(l.name), array_agg(l.id), array_agg(l.head)
    INTO queues, names, ids, heads
    FROM (SELECT p.queue, p.name, p.id, p.head
          FROM pgcursor.partitions p
          JOIN unnest(queues, names) u(q, n) ON p.queue = u.q AND p.name = u.n
          ORDER BY p.id
          FOR NO KEY UPDATE OF p) l;
    -- What the request's queues ask of this push, in one look at their rows:
    -- encryption (a refusal rolls back everything, partitions created above
    -- included) and a maxSize (then the room left).
    SELECT array_agg(q.name) FILTER (WHERE q.encryption_enabled), coalesce(bool_or(q.max_size > 0), false)
      INTO encrypted, capped
      FROM pgcursor.queues q WHERE q.name = ANY (queues);
    IF encrypted IS NOT NULL THEN
        PERFORM pgcursor_internal.refuse_plaintext_payloads(req -> 'items', encrypted);
    END IF;
    IF capped THEN
        SELECT array_agg(r.queue), array_agg(r.room) INTO full_queues, room
          FROM pgcursor_internal.queue_room(queues) r;
    END IF;
    result := pgcursor_internal.push_write(req -> 'items', queues, names, ids, heads, full_queues, room);
    -- Wake long-polling pops (one notification per queue).
    PERFORM pg_notify('pgcursor_push', q) FROM (SELECT DISTINCT unnest(queues) AS q) d;
    RETURN result;
END $$;
