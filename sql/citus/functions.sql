-- pgcursor's functions on Citus 12.1: the SQL functions reading tables
-- made PL/pgSQL (the block below), then each function here replaces the
-- one of the same name in sql/ that Citus refuses to run, and differs from
-- it only where its comment says. Its own helpers (first_created_after,
-- cursors_with_heads) live in pgcursor_citus: sql/98_sweep.sql drops every
-- function of pgcursor_internal that sql/ did not write, so there they
-- would be dropped and made again, with new oids, by every bootstrap, and
-- a concurrent call failed ("cache lookup failed for function"). The
-- gateway's bootstrap applies this file after sql/*.sql whenever
-- pgcursor.messages is a distributed table (gateway/src/db.rs), so a
-- gateway started against a Citus coordinator runs these versions; on
-- plain PostgreSQL it is never applied.

-- Citus plans a statement on distributed tables only with its parameters'
-- values ("could not create distributed plan"): there the push and a
-- transaction's lease check keep PostgreSQL's own choice of plan.
ALTER FUNCTION pgcursor_internal.push_rows(text[], jsonb[], text[], text[], uuid[], boolean) RESET plan_cache_mode;
ALTER FUNCTION pgcursor_internal.required_leases_live(jsonb) RESET plan_cache_mode;

-- Every LANGUAGE sql function that reads one of pgcursor's tables becomes
-- PL/pgSQL with the same statement (but those in sql_kept); the versions
-- this file writes out below then replace some of them. Citus plans no
-- such SQL function: inlined into a statement that names no
-- Citus table it fails ("parameterized queries for SQL functions
-- referencing distributed tables are not supported", even for a
-- reference table and without parameters), and run on its own its
-- statement is planned without its arguments' values ("could not create
-- distributed plan") unless it goes to one shard. A PL/pgSQL function's
-- statements are planned with the values. A SQL function returns its
-- statement's first row, as the FOR loop does; #variable_conflict
-- use_column resolves a name as SQL does (a column before a parameter).
-- Only a function calling a table directly changes: a SQL function
-- calling only PL/pgSQL ones is planned by Citus as it is.
DO $convert$
DECLARE
    -- Inlined into the push's and the ack's statements, which Citus routes
    -- to the partition's worker: as PL/pgSQL it would run a distributed
    -- query from a shard there.
    sql_kept constant regproc[] := ARRAY['pgcursor_internal.indexed_message']::regproc[];
    tables text := (SELECT string_agg(c.relname, '|') FROM pg_class c
                     WHERE c.relnamespace = 'pgcursor'::regnamespace AND c.relkind IN ('r', 'p', 'v'));
    f record;
    body text;
    def text;
BEGIN
    FOR f IN SELECT p.oid, p.proretset, p.prosrc, pg_get_function_result(p.oid) AS result
               FROM pg_proc p
              WHERE p.pronamespace IN ('pgcursor'::regnamespace, 'pgcursor_internal'::regnamespace)
                AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql')
                AND p.prosrc ~ ('pgcursor\.(' || tables || ')\M')
                AND p.oid::regproc <> ALL (sql_kept)
    LOOP
        body := rtrim(btrim(f.prosrc, E' \n\t'), ';');
        body := E'#variable_conflict use_column\n'
             || CASE WHEN f.proretset
                     THEN format(E'BEGIN\n    RETURN QUERY %s;\nEND', body)
                     ELSE format(E'DECLARE\n    first %s;\nBEGIN\n    FOR first IN %s\n    LOOP\n        RETURN first;\n    END LOOP;\n    RETURN NULL;\nEND',
                                 f.result, body) END;
        def := pg_get_functiondef(f.oid);
        def := regexp_replace(def, E'\n LANGUAGE sql\n', E'\n LANGUAGE plpgsql\n');
        def := left(def, strpos(def, E'AS $function$') - 1) || format('AS %L', body);
        EXECUTE def;
    END LOOP;
END $convert$;

-- lock_heads (sql/20_push.sql): one routed FOR UPDATE per partition, in the
-- order given (id order); a partition deleted meanwhile has no head. Citus
-- 12.1 takes row locks only in a query routed to one shard ("could not run
-- distributed query with FOR UPDATE/SHARE commands"), and a push's
-- partitions may lie on several.
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_heads(ids uuid[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    heads bigint[] := '{}';
    pid   uuid;
    head  bigint;
BEGIN
    FOREACH pid IN ARRAY coalesce(ids, '{}') LOOP  -- a push of no items has no partitions
        SELECT h.head INTO head FROM pgcursor.partition_heads h WHERE h.partition_id = pid FOR UPDATE;
        IF FOUND THEN
            heads := heads || head;
        END IF;
    END LOOP;
    RETURN heads;
END $$;

-- delete_queue (sql/10_queues.sql), two changes (and the cursor rows are
-- locked one partition at a time: Citus takes row locks only in a query
-- routed to one shard):
-- 1. citus.multi_shard_modify_mode = 'sequential' for the transaction. Its
--    deletes of messages and transaction_index run on every shard in
--    parallel, and the queues delete that follows cascades to the
--    partitions (a reference table) and from there to cursors, dead letters
--    and traces; Citus refuses that in one transaction ("cannot modify
--    table "queues" because there was a parallel operation on a distributed
--    table") unless the transaction used one connection per node
--    throughout. set_config, not a SET clause: on a PostgreSQL without
--    Citus it only sets an unused placeholder, so this can go into sql/.
-- 2. The partitions' heads and their cursor rows' counters go to
--    retired_totals here, as the two triggers did before distribute.sql
--    disabled them.
CREATE OR REPLACE FUNCTION pgcursor.delete_queue(qname text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    gone boolean;
    ids uuid[];
    pid uuid;
BEGIN
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pgcursor_internal.lock_partition_sets(ARRAY[qname], '{}');
    PERFORM pgcursor_internal.lock_subscriptions(NULL, qname, false);
    ids := ARRAY(SELECT id FROM pgcursor.partitions WHERE queue = qname ORDER BY id);
    FOREACH pid IN ARRAY ids LOOP
        PERFORM 1 FROM pgcursor.cursors WHERE partition_id = pid ORDER BY consumer_group FOR UPDATE;
    END LOOP;
    PERFORM pgcursor_internal.lock_heads(ids);
    PERFORM 1 FROM pgcursor.partitions WHERE id = ANY (ids) ORDER BY id FOR UPDATE;
    PERFORM pgcursor_internal.retire_totals(ids, NULL);
    DELETE FROM pgcursor.messages WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.transaction_index WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.queues WHERE name = qname;
    gone := FOUND;
    RETURN jsonb_build_object('deleted', gone, 'queue', qname);
END $$;

-- delete_partitions (sql/80_retention.sql, purge_idle_partitions): the
-- partitions' heads and their cursor rows' counters go to retired_totals
-- here, as the disabled triggers did; and the delete, which cascades from
-- the reference table to the distributed ones, runs on one connection per
-- node (see delete_queue).
CREATE OR REPLACE FUNCTION pgcursor_internal.delete_partitions(ids uuid[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pgcursor_internal.retire_totals(ids, NULL);
    DELETE FROM pgcursor.partitions p WHERE p.id = ANY (ids);
END $$;

-- What the disabled triggers wrote, for partitions `ids` about to be
-- deleted with their cursor rows (grp null: the partitions' heads too), or
-- only group grp's cursor rows there.
CREATE OR REPLACE FUNCTION pgcursor_internal.retire_totals(ids uuid[], grp text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.retired_totals AS r (partition_id, queue, pushed, completed, dead_lettered, discarded)
    SELECT p.id, p.queue, CASE WHEN grp IS NULL THEN h.head ELSE 0 END,
           coalesce(c.completed, 0), coalesce(c.dead_lettered, 0), coalesce(c.discarded, 0)
      FROM pgcursor.partitions p
      JOIN pgcursor.partition_heads h ON h.partition_id = p.id
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
-- cursors trigger did; and its rows are locked one partition at a time (in
-- partition order, as before): Citus 12.1 refuses the one FOR UPDATE over
-- all shards ("could not run distributed query with FOR UPDATE/SHARE
-- commands"). One probe per partition of the queue (of every queue when
-- none is named).
CREATE OR REPLACE FUNCTION pgcursor.delete_consumer_group(
    consumer_group text, queue text DEFAULT NULL, delete_metadata boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    grp     text := delete_consumer_group.consumer_group;
    qname   text := delete_consumer_group.queue;
    deleted integer;
    pid     uuid;
BEGIN
    PERFORM pgcursor_internal.lock_subscriptions(grp, NULL, false);
    PERFORM pgcursor_internal.materialize_cursors(grp);  -- deletedPartitions counts where it stood
    FOR pid IN SELECT p.id FROM pgcursor.partitions p WHERE qname IS NULL OR p.queue = qname ORDER BY p.id LOOP
        PERFORM FROM pgcursor.cursors c WHERE c.partition_id = pid AND c.consumer_group = grp FOR UPDATE;
    END LOOP;
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
-- on their distribution columns"), so every push failed. `known` reads
-- the stored messages and the entries retention left since each
-- partition's queue's transaction_index_horizon (`horizons`, aligned with
-- `ids`). The writes leave the one statement too: the rows are computed
-- once into `placed` (jsonb), then the heads and the messages are written
-- by two statements, which Citus routes or runs per shard.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_write(
    queues text[], partitions text[], payloads jsonb[], transaction_ids text[], trace_ids uuid[],
    pair_queues text[], pair_names text[], ids uuid[], heads bigint[],
    full_queues text[], room bigint[])
RETURNS TABLE (index integer, queue text, partition text, partition_id uuid, transaction_id text,
               msg_offset bigint, message_id uuid, status text, error text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    given  text[] := ARRAY(SELECT DISTINCT t FROM unnest(transaction_ids) t WHERE t IS NOT NULL);
    run uuid := pgcursor_internal.uuidv7();  -- the message ids' run (uuidv7_step)
    run_head text := pgcursor_internal.uuidv7_head(run);
    run_rand bigint := pgcursor_internal.uuidv7_rand_b(run);
    placed jsonb;
    bump record;
    newest timestamptz;
    stamp_pids uuid[] := '{}';        -- push_stamps (sql/20_push.sql), one routed read per partition
    stamp_ats timestamptz[] := '{}';
    weight integer := pgcursor_internal.largest_weight(payloads);
    -- The queues are a reference table: read here, on the coordinator.
    horizons timestamptz[] := ARRAY(
        SELECT pgcursor_internal.transaction_index_horizon(q.transaction_index_from,
                                                           q.transaction_index_retention_seconds)
          FROM unnest(pair_queues) WITH ORDINALITY u(name, n) JOIN pgcursor.queues q ON q.name = u.name
         ORDER BY u.n);
BEGIN
    WITH known AS MATERIALIZED (
        SELECT k.partition_id, k.transaction_id, max(k.msg_offset) AS msg_offset,
               (array_agg(k.message_id ORDER BY k.msg_offset DESC))[1] AS message_id
        FROM (SELECT m.partition_id, m.transaction_id, m.msg_offset, m.message_id, m.created_at
                FROM pgcursor.messages m
               WHERE m.partition_id = ANY (ids) AND m.transaction_id = ANY (given)
              UNION ALL
              SELECT x.partition_id, x.transaction_id, x.msg_offset, NULL, x.created_at
                FROM pgcursor.transaction_index x
               WHERE x.partition_id = ANY (ids) AND x.transaction_id = ANY (given)) k
        JOIN unnest(ids, horizons) h(pid, horizon) ON h.pid = k.partition_id
        WHERE k.created_at >= h.horizon
        GROUP BY k.partition_id, k.transaction_id
    ), located AS (
        SELECT (u.n - 1)::int AS index, u.q AS queue, coalesce(u.p, 'Default') AS partition,
               u.t AS given,
               coalesce(u.t, pgcursor_internal.uuidv7_step(run_head, run_rand, u.n)::text) AS txid,
               pgcursor_internal.uuidv7_step(run_head, run_rand, u.n) AS mid,
               u.payload, u.trace_id, l.id AS pid, l.head, r.room
        FROM unnest(queues, partitions, payloads, transaction_ids, trace_ids)
                 WITH ORDINALITY AS u(q, p, payload, t, trace_id, n)
        JOIN unnest(pair_queues, pair_names, ids, heads) AS l(q, n, id, head)
          ON l.q = u.q AND l.n = coalesce(u.p, 'Default')
        LEFT JOIN unnest(full_queues, room) AS r(q, room) ON r.q = u.q
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
               count(*) FILTER (WHERE c.existing IS NULL AND c.first_seen AND NOT c.no_room)
                   OVER (PARTITION BY c.pid ORDER BY c.index) AS k
        FROM capped c
    ), p AS (  -- a repeat within the request takes its first occurrence's k, id and refusal
        SELECT r.*, coalesce(r.existing, r.head + min(r.k) OVER (PARTITION BY r.pid, r.txid)) AS off,
               coalesce(r.existing_mid, first_value(r.mid) OVER (PARTITION BY r.pid, r.txid ORDER BY r.index))
                   AS message_id,
               bool_or(r.no_room) OVER (PARTITION BY r.pid, r.txid) AND r.existing IS NULL AS refused
        FROM ranked r
    )
    SELECT jsonb_agg(jsonb_build_object(
               'index', p.index, 'queue', p.queue, 'partition', p.partition, 'txid', p.txid,
               'payload', p.payload, 'trace_id', p.trace_id, 'pid', p.pid, 'k', p.k, 'fresh', p.fresh,
               'refused', p.refused, 'off', p.off, 'message_id', p.message_id))
      INTO placed FROM p;

    -- One routed update per partition's head.
    FOR bump IN SELECT r.pid, max(r.k) AS n FROM jsonb_to_recordset(placed) AS r(pid uuid, k bigint)
                 GROUP BY r.pid HAVING max(r.k) > 0
    LOOP
        UPDATE pgcursor.partition_heads h SET head = h.head + bump.n, max_weight = greatest(h.max_weight, weight),
                   pushed_at = now()
         WHERE h.partition_id = bump.pid;
        SELECT m.created_at INTO newest FROM pgcursor.messages m
         WHERE m.partition_id = bump.pid ORDER BY m.msg_offset DESC LIMIT 1;
        stamp_pids := stamp_pids || bump.pid;
        stamp_ats := stamp_ats || greatest(now(), newest);
    END LOOP;
    INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, trace_id, message_id,
                                   created_at)
    SELECT r.pid, r.off, r.txid, r.payload, r.trace_id, r.message_id, s.at
      FROM jsonb_to_recordset(placed) AS r(pid uuid, off bigint, txid text, payload jsonb, trace_id uuid,
                                           message_id uuid, fresh boolean)
      JOIN unnest(stamp_pids, stamp_ats) AS s(pid, at) ON s.pid = r.pid
     WHERE r.fresh;

    RETURN QUERY
    SELECT r.index, r.queue, r.partition, r.pid, r.txid,
           CASE WHEN r.refused THEN NULL ELSE r.off END,
           CASE WHEN r.refused THEN NULL ELSE r.message_id END,
           CASE WHEN r.refused THEN 'failed' WHEN r.fresh THEN 'queued' ELSE 'duplicate' END,
           CASE WHEN r.refused THEN 'queue is full' END
      FROM jsonb_to_recordset(placed) AS r(index int, queue text, partition text, txid text, pid uuid,
                                           off bigint, message_id uuid, fresh boolean, refused boolean)
     ORDER BY r.index;
END $$;

-- claim_batches (sql/30_pop.sql): the claim becomes a loop, as
-- docs/operations.md planned. Citus 12.1 takes row locks only in queries
-- routed to one shard, so the one statement that chose, locked (FOR UPDATE
-- OF c SKIP LOCKED) and updated the candidates across partitions was
-- refused ("could not run distributed query with FOR UPDATE/SHARE
-- commands") and every pop failed. Now the candidates are chosen by a
-- lock-free read over all shards, in the same order and with the same
-- conditions, and each one is then locked by itself (FOR UPDATE SKIP
-- LOCKED, one shard), its lease re-checked on the locked row, and updated,
-- until nparts are claimed or the batch is used up. One partition is still
-- never leased twice to one group: the re-check runs on the locked row. A
-- candidate whose cursor moved meanwhile is served from where it stands,
-- never past what the read found ready. (The read looks at twice nparts
-- and 16 more candidates, so that rows other pops hold can be passed over;
-- with more of those than that, a pop may claim fewer than it could.)
CREATE OR REPLACE FUNCTION pgcursor_internal.claim_batches(
    queues text[], pname text, grp text, batch integer, nparts integer, lease uuid)
RETURNS SETOF pgcursor_internal.pop_claim
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cand  record;
    cur   pgcursor.cursors;
    claim pgcursor_internal.pop_claim;
    take  bigint;
    left_ bigint := batch;
    n     bigint := 0;
    at    timestamptz := now();
    part_ids uuid[];
BEGIN
    -- The partitions first, from the reference table (a read on the
    -- coordinator): the candidates' query names them, so Citus sends it to
    -- the shards holding them only, and a pop of a queue without partitions
    -- sends nothing (a query on every shard cost an idle queue's pop 10 ms).
    part_ids := pgcursor_internal.pop_partition_ids(queues, pname);
    IF cardinality(part_ids) = 0 THEN
        RETURN;
    END IF;
    FOR cand IN
        SELECT s.pid, s.ready, s.qname, s.pname, s.lease_time
        FROM (SELECT c.partition_id AS pid, c.cursor, p.queue AS qname, p.name AS pname, q.lease_time,
                     q.priority, greatest(c.last_ack_at, c.lease_expires_at) AS last_served,
                     -- ready as delayed_ready (sql/30_pop.sql) reads it, written out
                     -- again: this query runs on the workers, where a helper reading
                     -- messages may not run
                     CASE WHEN q.delayed_processing = 0 THEN h.head ELSE coalesce(
                         (SELECT min(y.msg_offset) - 1 FROM pgcursor.messages y
                           WHERE y.partition_id = c.partition_id AND y.msg_offset > coalesce(
                               (SELECT max(o.msg_offset) FROM pgcursor.messages o
                                 WHERE o.partition_id = c.partition_id AND o.msg_offset > c.cursor
                                   AND o.created_at <= now() - q.delayed_processing * interval '1 second'),
                               c.cursor)),
                         h.head) END AS ready
                FROM pgcursor.cursors c
                JOIN pgcursor.partition_heads h ON h.partition_id = c.partition_id
                JOIN pgcursor.partitions p ON p.id = c.partition_id
                JOIN pgcursor.queues q ON q.name = p.queue
               WHERE c.partition_id = ANY (part_ids) AND c.consumer_group = grp
                 AND c.cursor < h.head
                 AND NOT pgcursor_internal.lease_is_live(c.lease_expires_at)
                 AND (q.window_buffer = 0 OR NOT EXISTS (
                         SELECT 1 FROM pgcursor.messages m
                          WHERE m.partition_id = c.partition_id AND m.msg_offset = h.head
                            AND m.created_at > now() - q.window_buffer * interval '1 second'))) s
        WHERE s.cursor < s.ready
        ORDER BY s.priority DESC, s.last_served NULLS FIRST, s.pid
        LIMIT nparts * 2 + 16
    LOOP
        SELECT * INTO cur FROM pgcursor.cursors x
         WHERE x.partition_id = cand.pid AND x.consumer_group = grp
           FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND OR pgcursor_internal.lease_is_live(cur.lease_expires_at)
                      OR cur.cursor >= cand.ready;
        take := least(cand.ready - cur.cursor, left_);
        -- From the locked row's values: Citus refuses non-immutable
        -- expressions (now(), timestamptz + interval) inside CASE in an
        -- UPDATE of a distributed table.
        IF lease IS NULL THEN  -- autoAck: completed on the spot
            UPDATE pgcursor.cursors x SET
                lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL,
                cursor = cur.cursor + take, completed_total = cur.completed_total + take,
                last_ack_at = at, retry_count = 0,
                lease_expiries = cur.lease_expiries + (cur.lease_id IS NOT NULL)::integer
             WHERE x.partition_id = cand.pid AND x.consumer_group = grp;
        ELSE
            UPDATE pgcursor.cursors x SET
                lease_id = lease, lease_expires_at = at + cand.lease_time * interval '1 second',
                batch_start = cur.cursor + 1, batch_end = cur.cursor + take,
                -- a lease still set here was never released: it expired (live ones are skipped)
                lease_expiries = cur.lease_expiries + (cur.lease_id IS NOT NULL)::integer
             WHERE x.partition_id = cand.pid AND x.consumer_group = grp;
        END IF;
        n := n + 1;
        claim := ROW(n, cand.pid, cand.qname, cand.pname, cur.cursor + 1, cur.cursor + take, cur.retry_count);
        RETURN NEXT claim;
        left_ := left_ - take;
        EXIT WHEN n >= nparts OR left_ <= 0;
    END LOOP;
END $$;

-- materialize_cursors (sql/02_shared.sql): the missing rows are written one
-- (partition, group) at a time, in the same (partition, group) order.
-- Citus 12.1 refuses the one INSERT ... SELECT over the subscriptions and
-- partitions with its NOT EXISTS on cursors ("correlated subqueries are not
-- supported when the FROM clause contains a set returning function"), and
-- start_cursor(p, s) over the tables' rows fails as in lock_cursor above;
-- so a group's second pop failed. One probe, and for a missing row one
-- insert, per partition of the pending queues: slower than the original on
-- queues of thousands of partitions (not measured).
CREATE OR REPLACE FUNCTION pgcursor_internal.materialize_cursors(
    grp text DEFAULT NULL, skip_locked boolean DEFAULT false)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    groups text[];
    queues text[];
    made   bigint := 0;
    one    bigint;
    pair   record;
    part   pgcursor.partitions;
    sub    pgcursor.subscriptions;
BEGIN
    SELECT l.groups, l.queues INTO groups, queues
      FROM pgcursor_internal.lock_subscriptions(grp, NULL, true, skip_locked) l;
    IF groups IS NULL THEN
        RETURN 0;
    END IF;
    FOR pair IN SELECT p.id AS pid, k.consumer_group AS g, k.queue AS q
                  FROM unnest(groups, queues) k(consumer_group, queue)
                  JOIN pgcursor.partitions p ON p.queue = k.queue
                 ORDER BY p.id, k.consumer_group  -- partition order, as every writer of new rows
    LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pgcursor.cursors c
                               WHERE c.partition_id = pair.pid AND c.consumer_group = pair.g);
        SELECT * INTO part FROM pgcursor.partitions p WHERE p.id = pair.pid;
        SELECT * INTO sub FROM pgcursor.subscriptions s WHERE s.consumer_group = pair.g AND s.queue = pair.q;
        INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor)
        VALUES (pair.pid, pair.g, pgcursor_internal.start_cursor(part, sub))
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS one = ROW_COUNT;
        made := made + one;
    END LOOP;
    UPDATE pgcursor.subscriptions s SET cursor_rows = 'complete'
      FROM unnest(groups, queues) k(consumer_group, queue)
     WHERE s.consumer_group = k.consumer_group AND s.queue = k.queue;
    RETURN made;
END $$;

-- cursor_rows (sql/02_shared.sql) in PL/pgSQL: the stored rows, then one
-- row per (partition, group) a pending subscription has not written yet.
-- Citus plans neither the SQL function (it reads a distributed table) nor
-- its second half as one statement (the NOT EXISTS on cursors correlated
-- with reference tables; start_cursor(p, s) over rows a worker's shards
-- give). So the pairs and the rows are read by statements of their own,
-- each with its own snapshot: the pending pairs first, the stored rows
-- second. A materialize_cursors (housekeeping's) committing between the two
-- reads then shows its pair once, as the stored row; read the other way
-- round the pair would be in neither. Each start is computed on the
-- coordinator from the pair's own rows, as materialize_cursors below does.
CREATE OR REPLACE FUNCTION pgcursor_internal.cursor_rows()
RETURNS SETOF pgcursor.cursors LANGUAGE plpgsql STABLE AS $$
DECLARE
    pending_ids    uuid[];
    pending_groups text[];
    stored         pgcursor.cursors[];
    pair record;
    part pgcursor.partitions;
    sub  pgcursor.subscriptions;
BEGIN
    SELECT array_agg(p.id), array_agg(s.consumer_group) INTO pending_ids, pending_groups
      FROM pgcursor.subscriptions s JOIN pgcursor.partitions p ON p.queue = s.queue
     WHERE s.cursor_rows = 'pending';
    SELECT array_agg(c) INTO stored FROM pgcursor.cursors c;
    RETURN QUERY SELECT * FROM unnest(stored);
    FOR pair IN
        SELECT k.pid, k.g FROM unnest(pending_ids, pending_groups) k(pid, g)
         WHERE (k.pid, k.g) NOT IN (SELECT c.partition_id, c.consumer_group FROM unnest(stored) c)
    LOOP
        SELECT * INTO part FROM pgcursor.partitions p WHERE p.id = pair.pid;
        CONTINUE WHEN NOT FOUND;  -- deleted since
        SELECT * INTO sub FROM pgcursor.subscriptions s WHERE s.consumer_group = pair.g AND s.queue = part.queue;
        CONTINUE WHEN NOT FOUND;
        RETURN NEXT ROW(part.id, sub.consumer_group, pgcursor_internal.start_cursor(part, sub), NULL, NULL, NULL,
                        NULL, 0, 0, 0, 0, 0, NULL, sub.created_at, 0)::pgcursor.cursors;
    END LOOP;
END $$;

-- partitions_with_heads (sql/61_resources.sql): the partitions and their
-- heads read apart, one statement each, and joined here. Citus refuses a
-- statement joining cursor_rows() with partition_heads ("complex joins are
-- only supported when all distributed tables are co-located and joined on
-- their distribution columns"), which the views' statements over this
-- function's rows would be once it was inlined.
CREATE OR REPLACE FUNCTION pgcursor_internal.partitions_with_heads(qname text)
RETURNS TABLE (id uuid, queue text, name text, head bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
    part_ids uuid[];
    queues   text[];
    names    text[];
    head_ids uuid[];
    heads    bigint[];
BEGIN
    SELECT array_agg(p.id), array_agg(p.queue), array_agg(p.name) INTO part_ids, queues, names
      FROM pgcursor.partitions p WHERE qname IS NULL OR p.queue = qname;
    SELECT array_agg(h.partition_id), array_agg(h.head) INTO head_ids, heads
      FROM pgcursor.partition_heads h WHERE h.partition_id = ANY (part_ids);
    RETURN QUERY
    SELECT p.id, p.queue, p.name, h.head
      FROM unnest(part_ids, queues, names) p(id, queue, name)
      JOIN unnest(head_ids, heads) h(partition_id, head) ON h.partition_id = p.id;
END $$;

CREATE SCHEMA IF NOT EXISTS pgcursor_citus;  -- also made by delegate.sql

-- The createdAt of partition pid's first stored message past offset
-- `after` (null when none): one statement routed to the partition's shard.
CREATE OR REPLACE FUNCTION pgcursor_citus.first_created_after(pid uuid, after bigint)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    at timestamptz;
BEGIN
    SELECT m.created_at INTO at FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.msg_offset > after ORDER BY m.msg_offset LIMIT 1;
    RETURN at;
END $$;

-- Each cursor row (cursor_rows) with its partition's queue, name and head
-- and the createdAt of the first message past the cursor (null when none
-- is waiting): the consumer-group views, the lag figures and the metrics
-- below read it, where sql/ joins cursor_rows() with partition_heads and a
-- LATERAL read of messages, which Citus refuses. A waiting message is one
-- routed read per cursor row that is behind its head.
CREATE OR REPLACE FUNCTION pgcursor_citus.cursors_with_heads()
RETURNS TABLE (c pgcursor.cursors, queue text, partition text, head bigint, oldest_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r, p.queue, p.name, p.head,
           CASE WHEN p.head > r.cursor THEN pgcursor_citus.first_created_after(r.partition_id, r.cursor) END
      FROM pgcursor_internal.cursor_rows() r
      JOIN pgcursor_internal.partitions_with_heads(NULL) p ON p.id = r.partition_id
$$;

-- group_cursor_rows (sql/65_consumer_groups.sql) from cursors_with_heads.
CREATE OR REPLACE FUNCTION pgcursor_internal.group_cursor_rows()
RETURNS TABLE (consumer_group text, queue text, partition text, partition_id uuid, lease_id uuid,
               lease_expires_at timestamptz, completed_total bigint, last_ack_at timestamptz,
               offset_lag bigint, oldest_at timestamptz, age_seconds bigint)
LANGUAGE sql STABLE AS $$
    SELECT (x.c).consumer_group, x.queue, x.partition, (x.c).partition_id, (x.c).lease_id,
           (x.c).lease_expires_at, (x.c).completed_total, (x.c).last_ack_at, x.head - (x.c).cursor,
           x.oldest_at, greatest(floor(extract(epoch FROM now() - x.oldest_at)), 0)::bigint
    FROM pgcursor_citus.cursors_with_heads() x
$$;

-- lag_figures (sql/61_resources.sql) from cursors_with_heads.
CREATE OR REPLACE FUNCTION pgcursor_internal.lag_figures()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH x AS (SELECT * FROM pgcursor_citus.cursors_with_heads()),
    ages AS (
        SELECT greatest(extract(epoch FROM now() - x.oldest_at), 0)::numeric AS v
        FROM x WHERE x.oldest_at IS NOT NULL
    ), behind AS (
        SELECT sum(x.head - (x.c).cursor)::numeric AS v FROM x GROUP BY x.queue, (x.c).consumer_group
    )
    SELECT jsonb_build_object(
        'time', (SELECT pgcursor_internal.spread(array_agg(v)) FROM ages),
        'offset', (SELECT pgcursor_internal.spread(array_agg(v)) FROM behind))
$$;

-- group_figures (sql/66_metrics.sql) from cursors_with_heads.
CREATE OR REPLACE FUNCTION pgcursor_internal.group_figures()
RETURNS TABLE (queue text, consumer_group text, partitions bigint, depth bigint, lag_seconds numeric,
               leased_partitions bigint, expired_leases bigint, lease_expiries bigint)
LANGUAGE sql STABLE AS $$
    SELECT x.queue, (x.c).consumer_group, count(*), sum(greatest(x.head - (x.c).cursor, 0))::bigint,
           round(coalesce(max(extract(epoch FROM now() - x.oldest_at)), 0), 3),
           count(*) FILTER (WHERE pgcursor_internal.lease_is_live((x.c).lease_expires_at)),
           count(*) FILTER (WHERE (x.c).lease_id IS NOT NULL
                              AND NOT pgcursor_internal.lease_is_live((x.c).lease_expires_at)),
           sum((x.c).lease_expiries)::bigint
    FROM pgcursor_citus.cursors_with_heads() x
    GROUP BY x.queue, (x.c).consumer_group
$$;

-- queue_room (sql/20_push.sql) with each partition's depth added up here,
-- on the coordinator: in one statement Citus sends the sum over partitions
-- (a reference table) to a worker, where partition_depth's read of the
-- cursors is a distributed query run from a shard, which Citus refuses.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_room(queues text[])
RETURNS TABLE (queue text, room bigint) LANGUAGE plpgsql AS $$
DECLARE
    q    record;
    pid  uuid;
    used bigint;
BEGIN
    FOR q IN SELECT x.name, x.max_size FROM pgcursor.queues x
              WHERE x.name = ANY (queues) AND x.max_size > 0
              ORDER BY x.name
    LOOP
        used := 0;
        FOR pid IN SELECT p.id FROM pgcursor.partitions p WHERE p.queue = q.name LOOP
            used := used + pgcursor_internal.partition_depth(pid);
        END LOOP;
        queue := q.name;
        room := q.max_size - used;
        RETURN NEXT;
    END LOOP;
END $$;

-- rows_per_probe (sql/63_status.sql): here each probe of first_offset_at
-- is a query the coordinator sends to a worker, about 0.3 ms, where a row
-- read by the worker costs about 1.2 us (status analytics over 20
-- partitions of 300 messages an hour, 24 hours: every interval searched
-- 2.1-2.3 s, every row read 0.17-0.21 s). So status analytics searches an
-- interval only when it holds thousands of messages.
CREATE OR REPLACE FUNCTION pgcursor_internal.rows_per_probe()
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 250 $$;

-- The functions above replaced some of sql/'s without their jit = off
-- (sql/99_jit.sql): set it again.
SELECT pgcursor_internal.turn_off_jit_for_api();
