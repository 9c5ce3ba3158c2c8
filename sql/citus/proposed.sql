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

-- delete_queue (sql/10_queues.sql): SET citus.multi_shard_modify_mode =
-- 'sequential'. Its deletes of messages and transaction_index run on every
-- shard in parallel, and the queues delete that follows cascades to the
-- partitions (a reference table) and from there to cursors, dead letters and
-- traces; Citus refuses that in one transaction ("cannot modify table
-- "queues" because there was a parallel operation on a distributed table")
-- unless the transaction used one connection per node throughout. (A
-- function's SET clause is only legal where Citus is loaded; this one cannot
-- go into sql/ as it is.)
CREATE OR REPLACE FUNCTION pgcursor.delete_queue(qname text)
RETURNS jsonb LANGUAGE plpgsql SET citus.multi_shard_modify_mode = 'sequential' AS $$
DECLARE
    gone boolean;
    ids uuid[];
BEGIN
    ids := ARRAY(SELECT id FROM pgcursor.partitions WHERE queue = qname ORDER BY id FOR UPDATE);
    DELETE FROM pgcursor.messages WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.transaction_index WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.queues WHERE name = qname;
    gone := FOUND;
    RETURN jsonb_build_object('deleted', gone, 'queue', qname);
END $$;
