-- Push: append messages to partitions with dense offsets, deduplicated by the
-- partition's transaction index. All items of one call commit together.
--
--   SELECT pgcursor.push('{"items":[{"queue":"orders","payload":{"id":1}},
--                                   {"queue":"orders","partition":"eu","payload":"x","transactionId":"t-2"}]}');

-- The message for a bad field of push item i; field 'item' is the item itself.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_field_error(i bigint, field text)
RETURNS text LANGUAGE sql STABLE AS $$  -- STABLE like format(), so it inlines
    SELECT format('items[%s]', i) || CASE field
        WHEN 'item' THEN ' must be an object'
        WHEN 'queue' THEN '.queue is required and must be a string'
        WHEN 'queueLength' THEN '.queue must be at most 1024 bytes'
        WHEN 'partition' THEN '.partition must be a non-empty string'
        WHEN 'partitionLength' THEN '.partition must be at most 1024 bytes'
        WHEN 'payload' THEN '.payload is required'
        WHEN 'transactionId' THEN '.transactionId must be a non-empty string'
        WHEN 'transactionIdLength' THEN '.transactionId must be at most 1024 bytes'
        WHEN 'traceId' THEN '.traceId must be a UUID string'
    END
$$;

-- What is wrong with one push item given as JSON (i = its index), or null
-- when it is valid.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_item_error(item jsonb, i bigint)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT pgcursor_internal.push_field_error(i, CASE
        WHEN jsonb_typeof(item) IS DISTINCT FROM 'object' THEN 'item'
        WHEN jsonb_typeof(item -> 'queue') IS DISTINCT FROM 'string' THEN 'queue'
        WHEN pgcursor_internal.too_long_for_a_key(item ->> 'queue') THEN 'queueLength'
        WHEN coalesce(jsonb_typeof(item -> 'partition'), 'null') NOT IN ('null', 'string')
             OR item ->> 'partition' = '' THEN 'partition'
        WHEN pgcursor_internal.too_long_for_a_key(item ->> 'partition') THEN 'partitionLength'
        WHEN NOT item ? 'payload' THEN 'payload'
        WHEN coalesce(jsonb_typeof(item -> 'transactionId'), 'null') NOT IN ('null', 'string')
             OR item ->> 'transactionId' = '' THEN 'transactionId'
        WHEN pgcursor_internal.too_long_for_a_key(item ->> 'transactionId') THEN 'transactionIdLength'
        WHEN NOT pgcursor_internal.is_uuid_value(item -> 'traceId', true) THEN 'traceId'
    END)
$$;

-- Raises 22023 naming the first bad field of a JSON request, if any.
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

-- Raises 22023 naming the first item whose queue or partition name is too
-- long for a key. push_items asks only before it creates partitions (names
-- already stored passed here when they were created), and
-- check_push_arrays when an item is bad anyway.
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_long_names(queues text[], partitions text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT u.n, pgcursor_internal.too_long_for_a_key(u.q) AS queue INTO bad
      FROM unnest(queues, partitions) WITH ORDINALITY u(q, p, n)
     WHERE pgcursor_internal.too_long_for_a_key(u.q) OR pgcursor_internal.too_long_for_a_key(u.p)
     ORDER BY u.n LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%', pgcursor_internal.push_field_error(
            bad.n - 1, CASE WHEN bad.queue THEN 'queueLength' ELSE 'partitionLength' END)
            USING ERRCODE = '22023';
    END IF;
END $$;

-- Raises 22023 naming the first bad item of push_items' arrays: item i is
-- element i of each (an array left null is all nulls, but queues and
-- payloads are required); a queue and a payload are required (JSON null is
-- a payload, SQL NULL is none).
CREATE OR REPLACE FUNCTION pgcursor_internal.check_push_arrays(
    queues text[], payloads jsonb[], partitions text[], transaction_ids text[], trace_ids uuid[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    names   text[] := ARRAY['payloads', 'partitions', 'transaction_ids', 'trace_ids'];
    lengths integer[] := ARRAY[cardinality(payloads), cardinality(partitions),
                               cardinality(transaction_ids), cardinality(trace_ids)];
    err text;
    bad integer;  -- the first bad item's position, from 1
BEGIN
    IF queues IS NULL OR payloads IS NULL THEN
        RAISE EXCEPTION '% is required', CASE WHEN queues IS NULL THEN 'queues' ELSE 'payloads' END
              USING ERRCODE = '22023';
    END IF;
    -- Item i is element i, counted from 1: an array of arrays has no such
    -- elements (and array_position refuses it), and one indexed from
    -- elsewhere ('[0:1]={...}', or filled from arr[0]) would pair its
    -- elements with other items' (least/greatest skip an empty array's NULL).
    IF greatest(array_ndims(queues), array_ndims(payloads), array_ndims(partitions),
                array_ndims(transaction_ids), array_ndims(trace_ids)) > 1
       OR least(array_lower(queues, 1), array_lower(payloads, 1), array_lower(partitions, 1),
                array_lower(transaction_ids, 1), array_lower(trace_ids, 1)) <> 1
       OR greatest(array_lower(queues, 1), array_lower(payloads, 1), array_lower(partitions, 1),
                   array_lower(transaction_ids, 1), array_lower(trace_ids, 1)) <> 1 THEN
        SELECT CASE WHEN a.dims > 1 THEN format('%s must be a one-dimensional array', a.name)
                    ELSE format('%s must be indexed from 1 (it starts at %s)', a.name, a.low) END
          INTO err
          FROM (VALUES (1, 'queues', array_ndims(queues), array_lower(queues, 1)),
                       (2, 'payloads', array_ndims(payloads), array_lower(payloads, 1)),
                       (3, 'partitions', array_ndims(partitions), array_lower(partitions, 1)),
                       (4, 'transaction_ids', array_ndims(transaction_ids), array_lower(transaction_ids, 1)),
                       (5, 'trace_ids', array_ndims(trace_ids), array_lower(trace_ids, 1))) a(n, name, dims, low)
         WHERE a.dims > 1 OR a.low <> 1
         ORDER BY a.dims > 1 DESC, a.n
         LIMIT 1;
        RAISE EXCEPTION '%', err USING ERRCODE = '22023';
    END IF;
    -- Expressions, no query, unless transactionIds are given: the lengths
    -- compared in a VALUES query and a sub-select looking for long
    -- transactionIds cost every push two statements.
    FOR k IN 1 .. 4 LOOP
        IF lengths[k] IS DISTINCT FROM cardinality(queues) AND (lengths[k] IS NOT NULL OR k = 1) THEN
            err := format('%s has %s elements; queues has %s', names[k], lengths[k], cardinality(queues));
            RAISE EXCEPTION '%', err USING ERRCODE = '22023';
        END IF;
    END LOOP;
    -- The first bad item through array_position, not a scan that unpacks
    -- every payload (that scan was a twentieth of a push).
    bad := least(array_position(queues, NULL), array_position(partitions, ''),
                 array_position(payloads, NULL), array_position(transaction_ids, ''));
    IF transaction_ids IS NOT NULL THEN
        bad := least(bad, (SELECT min(t.i) FROM unnest(transaction_ids) WITH ORDINALITY t(id, i)
                            WHERE pgcursor_internal.too_long_for_a_key(t.id)));
    END IF;
    IF bad IS NOT NULL THEN
        -- Failing anyway: an earlier name too long for a key comes first.
        PERFORM pgcursor_internal.refuse_long_names(queues[1:bad - 1], partitions[1:bad - 1]);
        err := pgcursor_internal.push_field_error(bad - 1, CASE
                   WHEN queues[bad] IS NULL THEN 'queue'
                   WHEN pgcursor_internal.too_long_for_a_key(queues[bad]) THEN 'queueLength'
                   WHEN partitions[bad] = '' THEN 'partition'
                   WHEN pgcursor_internal.too_long_for_a_key(partitions[bad]) THEN 'partitionLength'
                   WHEN payloads[bad] IS NULL THEN 'payload'
                   WHEN transaction_ids[bad] = '' THEN 'transactionId'
                   ELSE 'transactionIdLength' END);
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
    made_ids uuid[];
BEGIN
    IF cardinality(growing) = 0 THEN
        RETURN;
    END IF;
    PERFORM pgcursor_internal.lock_partition_sets('{}', growing);
    -- The subscriptions the new partitions concern are locked before the
    -- partitions are written, in (group, queue) order: a pop's
    -- materialize_cursors locks subscriptions, then writes cursor rows that
    -- reference partitions. One order for both, or on Citus (where a
    -- reference table's row lock is a lock on all of it) they deadlock.
    PERFORM 1 FROM pgcursor.subscriptions x
      WHERE x.queue = ANY (growing) AND x.cursor_rows <> 'none'
      ORDER BY x.consumer_group, x.queue
        FOR UPDATE;
    -- Each write below runs only when it has something to write: on Citus a
    -- statement modifying a reference table takes the table's one lock
    -- however few rows it changes (none included), and such no-op writes
    -- deadlocked concurrent pushes and pops.
    IF EXISTS (SELECT 1 FROM unnest(growing) q WHERE NOT EXISTS (SELECT 1 FROM pgcursor.queues x WHERE x.name = q)) THEN
        INSERT INTO pgcursor.queues (name)
        SELECT DISTINCT q FROM unnest(queues) q
        WHERE NOT EXISTS (SELECT 1 FROM pgcursor.queues x WHERE x.name = q)
        ORDER BY 1
        ON CONFLICT DO NOTHING;
    END IF;

    WITH ins AS (
        INSERT INTO pgcursor.partitions (id, queue, name)
        SELECT gen_random_uuid(), u.q, u.n FROM unnest(queues, names) u(q, n)
        WHERE NOT EXISTS (SELECT 1 FROM pgcursor.partitions p WHERE p.queue = u.q AND p.name = u.n)
        ORDER BY u.q, u.n
        ON CONFLICT DO NOTHING
        RETURNING id, queue)
    SELECT array_agg(DISTINCT ins.queue), array_agg(ins.id) INTO made, made_ids FROM ins;
    INSERT INTO pgcursor.partition_heads (partition_id) SELECT unnest(made_ids);
    -- Groups subscribed to the queue get their rows on the new partition
    -- from materialize_cursors (sql/02_shared.sql). Not only 'complete'
    -- ones: one being materialized when this push locked the subscriptions
    -- above made it wait, and is marked pending again here, so the new
    -- partition is not missed. Only rows locked above are written (no pop
    -- can subscribe to these queues meanwhile: lock_partition_sets). (A
    -- statement of its own, not one with the insert: as one, Citus sends
    -- the insert's returned column where the partitions shard expects all
    -- three, "missing data for column "queue"". Only when there is a row to
    -- write: see above.)
    IF EXISTS (SELECT 1 FROM pgcursor.subscriptions x WHERE x.queue = ANY (made) AND x.cursor_rows <> 'none') THEN
        UPDATE pgcursor.subscriptions s SET cursor_rows = 'pending'
         WHERE s.queue = ANY (made) AND s.cursor_rows <> 'none';
    END IF;
END $$;

-- The createdAt of a push's messages in each partition it writes (ids,
-- locked by the caller): now, or the partition's newest message's when that
-- is later (a clock stepped back, a transaction older than the last push).
-- createdAt then never decreases with the offset, which lookups by time
-- rely on (first_offset_at).
CREATE OR REPLACE FUNCTION pgcursor_internal.push_stamps(ids uuid[])
RETURNS TABLE (pid uuid, at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT u.id, greatest(now(), (SELECT m.created_at FROM pgcursor.messages m
                                   WHERE m.partition_id = u.id ORDER BY m.msg_offset DESC LIMIT 1))
      FROM unnest(ids) u(id)
$$;

-- The largest of a push's payloads, in bytes as handed over: what
-- partition_heads.max_weight keeps the largest of (one figure for every
-- partition of the push: a bound, never an underestimate). PL/pgSQL, so
-- the statement is planned once per session.
CREATE OR REPLACE FUNCTION pgcursor_internal.largest_weight(payloads jsonb[])
RETURNS integer LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(max(pg_column_size(x)), 0) FROM unnest(payloads) x);
END $$;

-- Writes the items into the partitions the caller has locked: item i is
-- element i of the item arrays; partition j is (pair_queues[j],
-- pair_names[j]) with id ids[j] and head heads[j] as read under that lock.
-- Each item's message_id is drawn here, once; it is the transactionId too
-- when the item has none. A transactionId already indexed, or repeated
-- earlier in the request for the same partition, is a duplicate (generated
-- ids are new by construction and skip the index probe) and answers the
-- stored message's message_id. A queue with room (full_queues[k] has
-- room[k] messages left under its maxSize) takes new messages in request
-- order until it is full; the rest answer "failed", "queue is full". The
-- others get head+1, head+2, ... in request order, with one head bump per
-- partition. (Window functions only, no self-joins: batches of 1000 items
-- stay linear.) enable_seqscan = off: planned once (push_items' generic
-- plans) while messages was empty, the newest createdAt and the duplicate
-- probes read the whole table at every push once it had filled.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_write(
    queues text[], partitions text[], payloads jsonb[], transaction_ids text[], trace_ids uuid[],
    pair_queues text[], pair_names text[], ids uuid[], heads bigint[],
    full_queues text[], room bigint[])
RETURNS TABLE (index integer, queue text, partition text, partition_id uuid, transaction_id text,
               msg_offset bigint, message_id uuid, status text, error text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$  -- plpgsql, not sql, only so the plan is cached
#variable_conflict use_column
DECLARE
    run uuid := pgcursor_internal.uuidv7();  -- the message ids' run (uuidv7_step)
    run_head text := pgcursor_internal.uuidv7_head(run);
    run_rand bigint := pgcursor_internal.uuidv7_rand_b(run);
    weight integer := pgcursor_internal.largest_weight(payloads);
BEGIN
    IF coalesce(cardinality(array_remove(transaction_ids, NULL)), 0) = 0 AND full_queues IS NULL THEN
        -- Nothing can be a duplicate (no transactionId given) or refused (no
        -- maxSize): each item is head + its rank in its partition. This
        -- statement is the common push; the one below's window sorts, for
        -- duplicates and room, cost a fifth of it.
        RETURN QUERY
        WITH placed AS (
            SELECT (u.n - 1)::int AS index, u.q AS queue, coalesce(u.p, 'Default') AS partition,
                   pgcursor_internal.uuidv7_step(run_head, run_rand, u.n) AS mid,
                   l.id AS pid, l.head + row_number() OVER (PARTITION BY l.id ORDER BY u.n) AS off
            FROM unnest(queues, partitions) WITH ORDINALITY AS u(q, p, n)
            JOIN unnest(pair_queues, pair_names, ids, heads) AS l(q, n, id, head)
              ON l.q = u.q AND l.n = coalesce(u.p, 'Default')
        ), bumped AS (
            UPDATE pgcursor.partition_heads h SET head = f.last, max_weight = greatest(h.max_weight, weight),
                   pushed_at = now()
            FROM (SELECT pid, max(off) AS last FROM placed GROUP BY pid) f
            WHERE h.partition_id = f.pid
        ), stamps AS MATERIALIZED (  -- one read per partition, not per message
            SELECT * FROM pgcursor_internal.push_stamps(ids)
        ), msgs AS (
            INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, trace_id, message_id,
                                           created_at)
            SELECT p.pid, p.off, p.mid::text, payloads[p.index + 1], trace_ids[p.index + 1], p.mid, s.at
              FROM placed p JOIN stamps s ON s.pid = p.pid
        )
        SELECT p.index, p.queue, p.partition, p.pid, p.mid::text, p.off, p.mid, 'queued', NULL
        FROM placed p
        ORDER BY p.index;
        RETURN;
    END IF;
    RETURN QUERY
    WITH located AS (
        SELECT (u.n - 1)::int AS index, u.q AS queue, coalesce(u.p, 'Default') AS partition,
               u.t AS given,
               coalesce(u.t, pgcursor_internal.uuidv7_step(run_head, run_rand, u.n)::text) AS txid,
               pgcursor_internal.uuidv7_step(run_head, run_rand, u.n) AS mid,
               l.id AS pid, l.head, r.room  -- not the payload: the sorts below copy every row
        FROM unnest(queues, partitions, transaction_ids) WITH ORDINALITY AS u(q, p, t, n)
        JOIN unnest(pair_queues, pair_names, ids, heads) AS l(q, n, id, head)
          ON l.q = u.q AND l.n = coalesce(u.p, 'Default')
        LEFT JOIN unnest(full_queues, room) AS r(q, room) ON r.q = u.q
    ), classified AS (
        SELECT c.*, t.msg_offset AS existing, t.message_id AS existing_mid,
               c.given IS NULL OR c.index = min(c.index) OVER (PARTITION BY c.pid, c.given) AS first_seen
        FROM located c
        -- Index probes per given id. (A plain join, planned while the
        -- table was small, scans the partition's whole index once per item.)
        LEFT JOIN LATERAL (SELECT x.msg_offset, x.message_id
                             FROM pgcursor.queues qr,
                                  pgcursor_internal.indexed_message(
                                      c.pid, c.given, pgcursor_internal.transaction_index_horizon(
                                          qr.transaction_index_from, qr.transaction_index_retention_seconds)) x
                            WHERE c.given IS NOT NULL AND qr.name = c.queue) t ON true
    ), capped AS (  -- new messages beyond a queue's room do not fit
        SELECT c.*, c.existing IS NULL AND c.first_seen AND c.room IS NOT NULL
                    AND count(*) FILTER (WHERE c.existing IS NULL AND c.first_seen)
                            OVER (PARTITION BY c.queue ORDER BY c.index) > c.room AS no_room
        FROM classified c
    ), ranked AS (  -- k: how many new messages this partition has up to this item
        SELECT c.*, c.existing IS NULL AND c.first_seen AND NOT c.no_room AS fresh,
               count(*) FILTER (WHERE c.existing IS NULL AND c.first_seen AND NOT c.no_room)
                   OVER (PARTITION BY c.pid ORDER BY c.index) AS k
        FROM capped c
    ), placed AS (  -- a repeat within the request takes its first occurrence's k, id and refusal
        SELECT r.*, coalesce(r.existing, r.head + min(r.k) OVER (PARTITION BY r.pid, r.txid)) AS off,
               coalesce(r.existing_mid, first_value(r.mid) OVER (PARTITION BY r.pid, r.txid ORDER BY r.index))
                   AS message_id,
               bool_or(r.no_room) OVER (PARTITION BY r.pid, r.txid) AND r.existing IS NULL AS refused
        FROM ranked r
    ), bumped AS (
        UPDATE pgcursor.partition_heads h SET head = h.head + f.n, max_weight = greatest(h.max_weight, weight),
                   pushed_at = now()
        FROM (SELECT pid, max(k) AS n FROM ranked GROUP BY pid HAVING max(k) > 0) f
        WHERE h.partition_id = f.pid
    ), stamps AS MATERIALIZED (  -- one read per partition, not per message
        SELECT * FROM pgcursor_internal.push_stamps(ids)
    ), msgs AS (  -- one row per message: it is its own transaction index entry
        INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, trace_id, message_id,
                                       created_at)
        SELECT p.pid, p.off, p.txid, payloads[p.index + 1], trace_ids[p.index + 1], p.message_id, s.at
          FROM placed p JOIN stamps s ON s.pid = p.pid
         WHERE p.fresh
    )
    SELECT p.index, p.queue, p.partition, p.pid, p.txid,
           CASE WHEN p.refused THEN NULL ELSE p.off END,
           CASE WHEN p.refused THEN NULL ELSE p.message_id END,
           CASE WHEN p.refused THEN 'failed' WHEN p.fresh THEN 'queued' ELSE 'duplicate' END,
           CASE WHEN p.refused THEN 'queue is full' END
    FROM placed p
    ORDER BY p.index;
END $$;

-- Pushes to queues with a maxSize take their turns here, before they lock
-- any head, and hold them while they count the room left (queue_room) and
-- fill it: two cannot both take the last room. (They used to lock the
-- queue's row after their heads; on Citus that row is a reference table's,
-- locked on every node, and pushes holding heads while waiting for it
-- deadlocked across nodes. Taken first, in name order, this lock leaves no
-- such cycle.)
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_capped_queues(names text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(pgcursor_internal.capped_queue_class(), hashtext(n))
       FROM unnest(names) WITH ORDINALITY u(n, i) ORDER BY u.i;
END $$;

-- The advisory lock class (first key) of lock_capped_queues ("pgcm").
CREATE OR REPLACE FUNCTION pgcursor_internal.capped_queue_class()
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1885823853 $$;

-- How many more messages each queue with a maxSize takes: maxSize less its
-- depth (messages some group has not consumed yet, counted by offset; every
-- message when no group has a cursor). The caller holds these queues' turns
-- (lock_capped_queues), so two pushes cannot both take the last room.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_room(queues text[])
RETURNS TABLE (queue text, room bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT q.name, q.max_size - coalesce((SELECT sum(pgcursor_internal.partition_depth(p.id))
                                            FROM pgcursor.partitions p WHERE p.queue = q.name), 0)::bigint
      FROM pgcursor.queues q
     WHERE q.name = ANY (queues) AND q.max_size > 0;
END $$;

-- Maintenance mode refuses a push before it writes anything (PC503: the
-- gateway's 503 with Retry-After), so nothing is accepted that is not stored.
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_push_in_maintenance()
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT enabled FROM pgcursor.maintenance WHERE mode = 'push') THEN
        RAISE EXCEPTION 'maintenance mode' USING ERRCODE = 'PC503';
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
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_plaintext_payloads(
    queues text[], payloads jsonb[], encrypted text[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    refused text[];
BEGIN
    SELECT array_agg(DISTINCT u.q ORDER BY u.q) INTO refused
      FROM unnest(queues, payloads) u(q, payload)
     WHERE u.q = ANY (encrypted) AND NOT pgcursor_internal.is_envelope(u.payload);
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'queue % has encryptionEnabled: its payloads must be pushed as an envelope {"encrypted","iv","authTag"} (a gateway with PGCURSOR_ENCRYPTION_KEY makes one)',
            array_to_string(refused, ', ')
            USING ERRCODE = 'PCENC', DETAIL = to_jsonb(refused)::text;
    END IF;
END $$;

-- After lock_heads found fewer heads than partitions `ids`: refused when
-- every one of them is still there, so one has no head row (offsets would
-- go to the wrong partitions); otherwise one was deleted meanwhile.
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_headless_partitions(ids uuid[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM pgcursor.partitions p WHERE p.id = ANY (ids)) = cardinality(ids) THEN
        RAISE EXCEPTION 'a partition of this push has no head row (pgcursor.partition_heads)'
            USING ERRCODE = 'XX000';
    END IF;
END $$;

-- Locks the heads of partitions `ids` (given in id order: concurrent pushes
-- lock in one order and cannot deadlock) and answers them in that order.
-- A partition deleted (delete_queue) while this waited for its head has
-- none: the answer is then shorter than `ids`.
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_heads(ids uuid[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN
    RETURN ARRAY(
        SELECT h.head FROM unnest(ids) WITH ORDINALITY u(id, n)
          JOIN pgcursor.partition_heads h ON h.partition_id = u.id
         ORDER BY u.n
           FOR UPDATE OF h);
END $$;
DROP FUNCTION IF EXISTS pgcursor_internal.all_heads(uuid[], bigint[]);

-- push_rows: the items as arrays, element i of each being item i (see
-- check_push_arrays) -> one row per item in request order. This is the
-- push. Push maintenance refuses it (PC503, the gateway's 503) once the
-- request is found well formed, unless through_maintenance: a transaction
-- and a dead letter's requeue go on (docs/http-api.md "Maintenance mode").
CREATE OR REPLACE FUNCTION pgcursor_internal.push_rows(
    queues text[], payloads jsonb[], partitions text[], transaction_ids text[], trace_ids uuid[],
    through_maintenance boolean)
RETURNS TABLE (index integer, queue text, partition text, partition_id uuid, transaction_id text,
               msg_offset bigint, message_id uuid, status text, error text)
LANGUAGE plpgsql
-- Generic plans: a custom plan per call (the array arguments tempt the
-- planner into one) was a tenth of the push's time.
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    pair_queues text[];
    pair_names  text[];
    found_queues text[];
    found_names  text[];
    ids    uuid[];
    heads  bigint[];
    encrypted text[];
    capped text[];
    full_queues text[];
    room   bigint[];
BEGIN
    PERFORM pgcursor_internal.check_push_arrays(queues, payloads, partitions, transaction_ids, trace_ids);
    IF NOT through_maintenance THEN
        PERFORM pgcursor_internal.refuse_push_in_maintenance();
    END IF;
    SELECT array_agg(d.q ORDER BY d.q, d.n), array_agg(d.n ORDER BY d.q, d.n) INTO pair_queues, pair_names
    FROM (SELECT DISTINCT u.q, coalesce(u.n, 'Default') AS n FROM unnest(queues, partitions) u(q, n)) d;
    -- What the request's queues ask of this push, in one look at their rows
    -- (a queue this push creates asks nothing): encryption, and a maxSize.
    SELECT array_agg(q.name) FILTER (WHERE q.encryption_enabled),
           array_agg(q.name ORDER BY q.name) FILTER (WHERE q.max_size > 0)
      INTO encrypted, capped
      FROM pgcursor.queues q WHERE q.name = ANY (pair_queues);
    IF encrypted IS NOT NULL THEN
        PERFORM pgcursor_internal.refuse_plaintext_payloads(queues, payloads, encrypted);
    END IF;
    IF capped IS NOT NULL THEN
        PERFORM pgcursor_internal.lock_capped_queues(capped);
    END IF;
    -- The partitions, in id order, and their heads, locked (in id order: no
    -- deadlocks) before the transaction index is looked at, so the next
    -- statement sees every push that committed ahead of us and offsets stay
    -- dense. When a partition is missing (a new queue or partition), create
    -- it and look again; so too when one was deleted with its queue while
    -- this push waited for its head: the push then creates it anew, as it
    -- would have after the delete. (Looked up first: the usual push creates
    -- nothing, and a probe for that was a statement more.)
    LOOP
        SELECT array_agg(p.queue ORDER BY p.id), array_agg(p.name ORDER BY p.id), array_agg(p.id ORDER BY p.id)
        INTO found_queues, found_names, ids
        FROM pgcursor.partitions p
        JOIN unnest(pair_queues, pair_names) u(q, n) ON p.queue = u.q AND p.name = u.n;
        IF coalesce(cardinality(ids), 0) = coalesce(cardinality(pair_queues), 0) THEN
            heads := pgcursor_internal.lock_heads(ids);
            EXIT WHEN cardinality(heads) = coalesce(cardinality(ids), 0);
            PERFORM pgcursor_internal.refuse_headless_partitions(ids);
        ELSE
            PERFORM pgcursor_internal.refuse_long_names(queues, partitions);
            PERFORM pgcursor_internal.ensure_partitions(pair_queues, pair_names);
        END IF;
    END LOOP;
    pair_queues := found_queues;
    pair_names := found_names;
    IF capped IS NOT NULL THEN
        SELECT array_agg(r.queue), array_agg(r.room) INTO full_queues, room
          FROM pgcursor_internal.queue_room(capped) r;
    END IF;
    RETURN QUERY SELECT * FROM pgcursor_internal.push_write(
        queues, partitions, payloads, transaction_ids, trace_ids,
        pair_queues, pair_names, ids, heads, full_queues, room);
    -- Wake long-polling pops (one notification per queue waited on).
    PERFORM pgcursor_internal.wake_pops(pair_queues);
END $$;

-- push_items: push_rows, refused in push maintenance. The HTTP push reads
-- its body into these arrays.
CREATE OR REPLACE FUNCTION pgcursor.push_items(
    queues text[], payloads jsonb[], partitions text[] DEFAULT NULL,
    transaction_ids text[] DEFAULT NULL, trace_ids uuid[] DEFAULT NULL)
RETURNS TABLE (index integer, queue text, partition text, partition_id uuid, transaction_id text,
               msg_offset bigint, message_id uuid, status text, error text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM pgcursor_internal.push_rows(queues, payloads, partitions, transaction_ids, trace_ids,
                                                           through_maintenance => false);
END $$;

-- push_answer: {"items":[...]} -> array in request order of
-- {index, transactionId, partitionId, partition, queue, offset, message_id,
-- status (queued, duplicate or failed), error}; through_maintenance as
-- push_rows'.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_answer(req jsonb, through_maintenance boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    result jsonb;
BEGIN
    PERFORM pgcursor_internal.check_push_items(req);
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'index', r.index, 'transactionId', r.transaction_id, 'partitionId', r.partition_id,
               'partition', r.partition, 'queue', r.queue, 'offset', r.msg_offset,
               'message_id', r.message_id, 'status', r.status, 'error', r.error) ORDER BY r.index), '[]'::jsonb)
      INTO result
      FROM (SELECT array_agg(x.item ->> 'queue') AS queues,  -- in item order, every array from one scan
                   array_agg(x.item -> 'payload') AS payloads,
                   array_agg(x.item ->> 'partition') AS partitions,
                   array_agg(x.item ->> 'transactionId') AS transaction_ids,
                   array_agg((x.item ->> 'traceId')::uuid) AS trace_ids
              FROM (SELECT e.item FROM jsonb_array_elements(req -> 'items') WITH ORDINALITY e(item, n)
                     ORDER BY e.n) x) a,
           pgcursor_internal.push_rows(coalesce(a.queues, '{}'), coalesce(a.payloads, '{}'), a.partitions,
                                        a.transaction_ids, a.trace_ids, through_maintenance) r;
    RETURN result;
END $$;

-- push: push_answer, refused in push maintenance.
CREATE OR REPLACE FUNCTION pgcursor.push(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    RETURN pgcursor_internal.push_answer(req, through_maintenance => false);
END $$;
