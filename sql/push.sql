-- Push: append messages to partitions with dense offsets, deduplicated by the
-- partition's transaction index. All items of one call commit together.
--
--   SELECT pgcursor.push('{"items":[{"queue":"orders","payload":{"id":1}},
--                                   {"queue":"orders","partition":"eu","payload":"x","transactionId":"t-2"}]}');

-- A time-ordered UUID (version 7): 48-bit Unix milliseconds, then random bits.
CREATE OR REPLACE FUNCTION pgcursor.uuidv7()
RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

-- What is wrong with one push item (i = its index), or null when it is valid.
CREATE OR REPLACE FUNCTION pgcursor.push_item_error(item jsonb, i bigint)
RETURNS text LANGUAGE sql STABLE AS $$  -- STABLE like format(), so it inlines
    SELECT CASE
        WHEN jsonb_typeof(item) IS DISTINCT FROM 'object' THEN
            format('items[%s] must be an object', i)
        WHEN jsonb_typeof(item -> 'queue') IS DISTINCT FROM 'string' OR item ->> 'queue' = '' THEN
            format('items[%s].queue is required and must be a non-empty string', i)
        WHEN coalesce(jsonb_typeof(item -> 'partition'), 'null') NOT IN ('null', 'string')
             OR item ->> 'partition' = '' THEN
            format('items[%s].partition must be a non-empty string', i)
        WHEN NOT item ? 'payload' THEN
            format('items[%s].payload is required', i)
        WHEN coalesce(jsonb_typeof(item -> 'transactionId'), 'null') NOT IN ('null', 'string')
             OR item ->> 'transactionId' = '' THEN
            format('items[%s].transactionId must be a non-empty string', i)
        WHEN NOT pgcursor.is_uuid_value(item -> 'traceId', true) THEN
            format('items[%s].traceId must be a UUID string', i)
    END
$$;

-- The request's items, validated (22023 naming the first bad field) and
-- normalised: partition defaulted, transactionId filled in once (so every
-- later statement sees the same generated id), index attached.
CREATE OR REPLACE FUNCTION pgcursor.push_items(req jsonb)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    err text;
    items jsonb;
BEGIN
    IF jsonb_typeof(req -> 'items') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'items is required and must be an array' USING ERRCODE = '22023';
    END IF;
    SELECT v.e INTO err
    FROM (SELECT a.n, pgcursor.push_item_error(a.item, a.n - 1) AS e
          FROM jsonb_array_elements(req -> 'items') WITH ORDINALITY AS a(item, n)) v
    WHERE v.e IS NOT NULL
    ORDER BY v.n LIMIT 1;
    IF err IS NOT NULL THEN
        RAISE EXCEPTION '%', err USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'index', a.n - 1,
               'queue', a.item ->> 'queue',
               'partition', coalesce(a.item ->> 'partition', 'Default'),
               'transactionId', coalesce(a.item ->> 'transactionId', pgcursor.uuidv7()::text),
               'payload', a.item -> 'payload',
               'traceId', a.item ->> 'traceId') ORDER BY a.n), '[]'::jsonb)
    INTO items
    FROM jsonb_array_elements(req -> 'items') WITH ORDINALITY AS a(item, n);
    RETURN items;
END $$;

-- Creates, race-safely, the queues (defaults) and partitions the items name.
-- Keys are inserted in sorted order so concurrent pushes cannot deadlock.
CREATE OR REPLACE FUNCTION pgcursor.ensure_partitions(items jsonb)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.queues (name)
    SELECT DISTINCT x ->> 'queue' FROM jsonb_array_elements(items) x
    WHERE NOT EXISTS (SELECT 1 FROM pgcursor.queues q WHERE q.name = x ->> 'queue')
    ORDER BY 1
    ON CONFLICT DO NOTHING;

    INSERT INTO pgcursor.partitions (id, queue, name)
    SELECT gen_random_uuid(), d.q, d.p
    FROM (SELECT DISTINCT x ->> 'queue' AS q, x ->> 'partition' AS p
          FROM jsonb_array_elements(items) x) d
    WHERE NOT EXISTS (SELECT 1 FROM pgcursor.partitions p WHERE p.queue = d.q AND p.name = d.p)
    ORDER BY d.q, d.p
    ON CONFLICT DO NOTHING;
END $$;

-- Writes the normalised items into partitions the caller has locked; heads
-- maps each partition id to its head as read under that lock. A
-- transactionId already indexed, or repeated earlier in the request for the
-- same partition, is a duplicate; the others get head+1, head+2, ... in
-- request order, with one head bump per partition. (Window functions only,
-- no self-joins: batches of 1000 items stay linear.)
CREATE OR REPLACE FUNCTION pgcursor.push_write(items jsonb, heads jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$  -- plpgsql, not sql, only so the plan is cached
DECLARE
    result jsonb;
BEGIN
    WITH it AS (
        SELECT i.index, i.queue, i.partition, i."transactionId" AS txid, i.payload,
               i."traceId" AS trace_id, p.id AS pid
        FROM jsonb_to_recordset(items) AS i(index int, queue text, partition text,
                                            "transactionId" text, payload jsonb, "traceId" uuid)
        JOIN pgcursor.partitions p ON p.queue = i.queue AND p.name = i.partition
    ), classified AS (
        SELECT it.*, t.msg_offset AS existing,
               it.index = min(it.index) OVER (PARTITION BY it.pid, it.txid) AS first_seen
        FROM it
        -- One primary-key probe per item. (A plain join, planned while the
        -- table was small, scans the partition's whole index once per item.)
        LEFT JOIN LATERAL (SELECT x.msg_offset FROM pgcursor.transaction_index x
                           WHERE x.partition_id = it.pid AND x.transaction_id = it.txid
                           LIMIT 1) t ON true
    ), ranked AS (  -- k: how many new messages this partition has up to this item
        SELECT c.*, c.existing IS NULL AND c.first_seen AS fresh,
               count(*) FILTER (WHERE c.existing IS NULL AND c.first_seen)
                   OVER (PARTITION BY c.pid ORDER BY c.index) AS k
        FROM classified c
    ), placed AS (  -- a repeat within the request takes its first occurrence's k
        SELECT r.*, coalesce(r.existing, (heads ->> r.pid::text)::bigint
                                         + min(r.k) OVER (PARTITION BY r.pid, r.txid)) AS off
        FROM ranked r
    ), bumped AS (
        UPDATE pgcursor.partitions p SET head = p.head + f.n
        FROM (SELECT pid, max(k) AS n FROM ranked GROUP BY pid HAVING max(k) > 0) f
        WHERE p.id = f.pid
    ), msgs AS (
        INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, trace_id)
        SELECT pid, off, txid, payload, trace_id FROM placed WHERE fresh
    ), idx AS (
        INSERT INTO pgcursor.transaction_index (partition_id, transaction_id, msg_offset)
        SELECT pid, txid, off FROM placed WHERE fresh
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'index', index, 'transactionId', txid, 'partitionId', pid,
               'partition', partition, 'queue', queue, 'offset', off,
               'status', CASE WHEN fresh THEN 'queued' ELSE 'duplicate' END,
               'error', NULL) ORDER BY index), '[]'::jsonb)
    INTO result
    FROM placed;
    RETURN result;
END $$;

-- push: {"items":[...]} -> array in request order of
-- {index, transactionId, partitionId, partition, queue, offset, status, error}.
CREATE OR REPLACE FUNCTION pgcursor.push(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    items jsonb := pgcursor.push_items(req);
    heads jsonb;
    result jsonb;
BEGIN
    PERFORM pgcursor.ensure_partitions(items);
    -- Lock the touched partitions (in id order: no deadlocks) before looking
    -- at the transaction index, so the next statement sees every push that
    -- committed ahead of us and offsets stay dense. NO KEY UPDATE serialises
    -- pushes without blocking foreign-key checks (cursor and dead-letter inserts).
    SELECT jsonb_object_agg(l.id, l.head) INTO heads
    FROM (SELECT p.id, p.head
          FROM pgcursor.partitions p
          JOIN (SELECT DISTINCT x ->> 'queue' AS q, x ->> 'partition' AS n
                FROM jsonb_array_elements(items) x) d ON p.queue = d.q AND p.name = d.n
          ORDER BY p.id
          FOR NO KEY UPDATE OF p) l;
    result := pgcursor.push_write(items, heads);
    -- Wake long-polling pops (one notification per queue; duplicates fold).
    PERFORM pg_notify('pgcursor_push', q)
    FROM (SELECT DISTINCT x ->> 'queue' AS q FROM jsonb_array_elements(items) x) d;
    RETURN result;
END $$;
