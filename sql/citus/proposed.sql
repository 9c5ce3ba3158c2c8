-- Proposed replacements of pgcursor functions that fail on Citus 12.1, for
-- the engineers who own sql/ (which this branch does not edit: push and pop
-- are being rewritten there). `make test-citus` applies this file after
-- sql/citus/distribute.sql, so the pgTAP files run against these versions;
-- a gateway re-applies sql/*.sql at every start and would undo them. Each
-- one differs from its original only where its comment says.

-- ensure_partitions (sql/20_push.sql): the partitions insert and the
-- subscriptions update become two statements. As one (a data-modifying CTE
-- `made` read by an UPDATE whose sub-select locks FOR UPDATE) Citus 12.1
-- sends the CTE's one returned column where the partitions shard expects
-- all three, and every push that creates a partition fails with
-- "missing data for column "queue"".
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
    UPDATE pgcursor.subscriptions s SET cursor_rows = 'pending'
      FROM (SELECT x.consumer_group, x.queue FROM pgcursor.subscriptions x
             WHERE x.queue = ANY (made) AND x.cursor_rows <> 'none'
             ORDER BY x.consumer_group, x.queue
               FOR UPDATE) l
     WHERE s.consumer_group = l.consumer_group AND s.queue = l.queue;
END $$;

-- delete_queue (sql/10_queues.sql), two changes:
-- 1. SET citus.multi_shard_modify_mode = 'sequential'. Its deletes of
--    messages and transaction_index run on every shard in parallel, and the
--    queues delete that follows cascades to the partitions (a reference
--    table) and from there to cursors, dead letters and traces; Citus
--    refuses that in one transaction ("cannot modify table "queues" because
--    there was a parallel operation on a distributed table") unless the
--    transaction used one connection per node throughout. (A SET clause
--    naming a citus.* setting only loads where Citus is installed: this
--    cannot go into sql/ as it is.)
-- 2. The partitions' heads and their cursor rows' counters go to
--    retired_totals here, as the two triggers did before distribute.sql
--    disabled them.
CREATE OR REPLACE FUNCTION pgcursor.delete_queue(qname text)
RETURNS jsonb LANGUAGE plpgsql SET citus.multi_shard_modify_mode = 'sequential' AS $$
DECLARE
    gone boolean;
    ids uuid[];
BEGIN
    ids := ARRAY(SELECT id FROM pgcursor.partitions WHERE queue = qname ORDER BY id FOR UPDATE);
    PERFORM pgcursor_internal.retire_totals(ids, NULL);
    DELETE FROM pgcursor.messages WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.transaction_index WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.queues WHERE name = qname;
    gone := FOUND;
    RETURN jsonb_build_object('deleted', gone, 'queue', qname);
END $$;

-- What the disabled triggers wrote, for partitions `ids` about to be
-- deleted with their cursor rows (grp null: the partitions' heads too), or
-- only group grp's cursor rows there.
CREATE OR REPLACE FUNCTION pgcursor_internal.retire_totals(ids uuid[], grp text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.retired_totals AS r (partition_id, queue, pushed, completed, dead_lettered, discarded)
    SELECT p.id, p.queue, CASE WHEN grp IS NULL THEN p.head ELSE 0 END,
           coalesce(c.completed, 0), coalesce(c.dead_lettered, 0), coalesce(c.discarded, 0)
      FROM pgcursor.partitions p
      LEFT JOIN (SELECT x.partition_id, sum(x.completed_total) AS completed,
                        sum(x.dead_lettered_total) AS dead_lettered, sum(x.discarded_total) AS discarded
                   FROM pgcursor.cursors x
                  WHERE x.partition_id = ANY (ids) AND (grp IS NULL OR x.consumer_group = grp)
                  GROUP BY x.partition_id) c ON c.partition_id = p.id
     WHERE p.id = ANY (ids) AND (grp IS NULL OR c.partition_id IS NOT NULL)
    ON CONFLICT (partition_id) DO UPDATE
       SET queue = excluded.queue,
           pushed = r.pushed + excluded.pushed,
           completed = r.completed + excluded.completed,
           dead_lettered = r.dead_lettered + excluded.dead_lettered,
           discarded = r.discarded + excluded.discarded,
           retired_at = excluded.retired_at;
END $$;

-- delete_consumer_group (sql/65_consumer_groups.sql): the group's counters
-- go to retired_totals before its rows are deleted, as the disabled
-- cursors trigger did.
CREATE OR REPLACE FUNCTION pgcursor.delete_consumer_group(
    consumer_group text, queue text DEFAULT NULL, delete_metadata boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp     text := delete_consumer_group.consumer_group;
    qname   text := delete_consumer_group.queue;
    deleted integer;
BEGIN
    PERFORM pgcursor_internal.materialize_cursors(grp);  -- deletedPartitions counts where it stood
    PERFORM FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
     WHERE c.consumer_group = grp AND (qname IS NULL OR p.queue = qname)
     ORDER BY c.partition_id
       FOR UPDATE OF c;
    PERFORM pgcursor_internal.retire_totals(
        ARRAY(SELECT p.id FROM pgcursor.partitions p WHERE qname IS NULL OR p.queue = qname), grp);
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

-- push_write (sql/20_push.sql): the transaction index lookup becomes a
-- materialized CTE `known` over the request's partitions and transactionIds,
-- joined by (partition, transactionId), instead of a LATERAL probe per item.
-- Citus 12.1 cannot plan a LATERAL subquery on distributed tables
-- correlated to rows that come from no distributed table ("complex joins
-- are only supported when all distributed tables are co-located and joined
-- on their distribution columns"), so every push failed. The writes leave
-- the one statement too: the rows are computed once into `placed` (jsonb),
-- then the heads, messages and index entries are written by three
-- statements, which Citus routes or runs per shard.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_write(
    items jsonb, queues text[], names text[], ids uuid[], heads bigint[],
    full_queues text[], room bigint[])
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    given  text[] := ARRAY(SELECT DISTINCT a.item ->> 'transactionId' FROM jsonb_array_elements(items) a(item)
                            WHERE a.item ->> 'transactionId' IS NOT NULL);
    placed jsonb;
    result jsonb;
BEGIN
    WITH it AS MATERIALIZED (  -- materialised: each generated id is drawn once
        SELECT (a.n - 1)::int AS index, a.item ->> 'queue' AS queue,
               coalesce(a.item ->> 'partition', 'Default') AS partition,
               a.item ->> 'transactionId' AS given,
               coalesce(a.item ->> 'transactionId', pgcursor_internal.uuidv7()::text) AS txid,
               pgcursor_internal.uuidv7() AS mid,
               a.item -> 'payload' AS payload, (a.item ->> 'traceId')::uuid AS trace_id
        FROM jsonb_array_elements(items) WITH ORDINALITY AS a(item, n)
    ), known AS MATERIALIZED (
        SELECT x.partition_id, x.transaction_id, x.msg_offset, m.message_id
        FROM pgcursor.transaction_index x
        LEFT JOIN pgcursor.messages m ON m.partition_id = x.partition_id AND m.msg_offset = x.msg_offset
        WHERE x.partition_id = ANY (ids) AND x.transaction_id = ANY (given)
    ), located AS (
        SELECT it.*, l.id AS pid, l.head, r.room
        FROM it JOIN unnest(queues, names, ids, heads) AS l(q, n, id, head)
                  ON l.q = it.queue AND l.n = it.partition
        LEFT JOIN unnest(full_queues, room) AS r(q, room) ON r.q = it.queue
    ), classified AS (
        SELECT c.*, t.msg_offset AS existing, t.message_id AS existing_mid,
               c.given IS NULL OR c.index = min(c.index) OVER (PARTITION BY c.pid, c.given) AS first_seen
        FROM located c
        LEFT JOIN known t ON c.given IS NOT NULL AND t.partition_id = c.pid AND t.transaction_id = c.given
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
    ), p AS (  -- a repeat within the request takes its first occurrence's k and id
        SELECT r.*, coalesce(r.existing, r.head + min(r.k) OVER (PARTITION BY r.pid, r.txid)) AS off,
               coalesce(r.existing_mid, first_value(r.mid) OVER (PARTITION BY r.pid, r.txid ORDER BY r.index))
                   AS message_id
        FROM ranked r
    )
    SELECT jsonb_agg(jsonb_build_object(
               'index', index, 'queue', queue, 'partition', partition, 'txid', txid, 'payload', payload,
               'trace_id', trace_id, 'pid', pid, 'k', k, 'fresh', fresh, 'refused', refused, 'off', off,
               'message_id', message_id))
      INTO placed FROM p;

    UPDATE pgcursor.partitions p SET head = p.head + f.n
      FROM (SELECT r.pid, max(r.k) AS n FROM jsonb_to_recordset(placed) AS r(pid uuid, k bigint)
             GROUP BY r.pid HAVING max(r.k) > 0) f
     WHERE p.id = f.pid;
    INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, trace_id, message_id)
    SELECT r.pid, r.off, r.txid, r.payload, r.trace_id, r.message_id
      FROM jsonb_to_recordset(placed) AS r(pid uuid, off bigint, txid text, payload jsonb, trace_id uuid,
                                           message_id uuid, fresh boolean)
     WHERE r.fresh;
    INSERT INTO pgcursor.transaction_index (partition_id, transaction_id, msg_offset)
    SELECT r.pid, r.txid, r.off
      FROM jsonb_to_recordset(placed) AS r(pid uuid, off bigint, txid text, fresh boolean)
     WHERE r.fresh;

    SELECT coalesce(jsonb_agg(CASE WHEN r.refused THEN jsonb_build_object(
               'index', r.index, 'transactionId', r.txid, 'partitionId', r.pid, 'partition', r.partition,
               'queue', r.queue, 'offset', NULL, 'message_id', NULL, 'status', 'failed',
               'error', 'queue is full')
           ELSE jsonb_build_object(
               'index', r.index, 'transactionId', r.txid, 'partitionId', r.pid,
               'partition', r.partition, 'queue', r.queue, 'offset', r.off, 'message_id', r.message_id,
               'status', CASE WHEN r.fresh THEN 'queued' ELSE 'duplicate' END,
               'error', NULL) END ORDER BY r.index), '[]'::jsonb)
      INTO result
      FROM jsonb_to_recordset(placed) AS r(index int, queue text, partition text, txid text, pid uuid,
                                           off bigint, message_id uuid, fresh boolean, refused boolean);
    RETURN result;
END $$;

-- lock_cursor (sql/02_shared.sql): the partition and subscription rows are
-- read into variables, then start_cursor() is called on those, before the
-- INSERT. Two refusals of Citus 12.1 made every ack of a (partition, group)
-- without a cursor row fail: a sub-select inside INSERT ... VALUES on a
-- distributed table ("subqueries are not supported within INSERT
-- queries"), and a whole row of a Citus table passed to a function in a
-- query (`start_cursor(p, s)` over partitions p, subscriptions s): the
-- query runs on the coordinator's placements, whose row types are the
-- shards' ("function start_cursor(pgcursor.partitions_102009,
-- pgcursor.subscriptions_102010) does not exist").
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_cursor(partition_id uuid, consumer_group text)
RETURNS pgcursor.cursors LANGUAGE plpgsql AS $$
DECLARE
    row pgcursor.cursors;
    part pgcursor.partitions;
    sub pgcursor.subscriptions;
    start bigint;
BEGIN
    SELECT * INTO row FROM pgcursor.cursors c
     WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
       FOR UPDATE;
    IF NOT FOUND THEN
        SELECT * INTO part FROM pgcursor.partitions p WHERE p.id = lock_cursor.partition_id;
        SELECT * INTO sub FROM pgcursor.subscriptions s
         WHERE s.queue = part.queue AND s.consumer_group = lock_cursor.consumer_group;
        IF FOUND THEN
            start := pgcursor_internal.start_cursor(part, sub);
        END IF;
        INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor)
        VALUES (lock_cursor.partition_id, lock_cursor.consumer_group, coalesce(start, 0))
        ON CONFLICT DO NOTHING;
        SELECT * INTO row FROM pgcursor.cursors c
         WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
           FOR UPDATE;
    END IF;
    RETURN row;
END
$$;
