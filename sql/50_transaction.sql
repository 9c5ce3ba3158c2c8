-- Transaction: acks and pushes as one PostgreSQL transaction, so a pipeline
-- stage hands work forward without a window in which the ack landed and the
-- next message did not (or the other way round).
--
--   SELECT pgcursor.transaction('{"operations":[
--     {"type":"ack","transactionId":"t1","partitionId":"0190...","leaseId":"0190...","consumerGroup":"billing"},
--     {"type":"push","items":[{"queue":"invoices","payload":{"order":1}}]}],
--     "requiredLeases":["0190..."]}');

-- What is wrong with operation i, or null when it is well formed. Push items
-- are checked by push's own rule, their path prefixed with the operation's.
-- PL/pgSQL, not SQL: a SQL function with a sub-select is not inlined, and
-- its body was planned again in every bundle (0.6 ms of a 1.9 ms bundle).
CREATE OR REPLACE FUNCTION pgcursor_internal.transaction_op_error(op jsonb, i bigint)
RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF jsonb_typeof(op) IS DISTINCT FROM 'object' THEN
        RETURN format('operations[%s] must be an object', i);
    ELSIF jsonb_typeof(op -> 'type') IS DISTINCT FROM 'string' OR op ->> 'type' NOT IN ('ack', 'push') THEN
        RETURN format('operations[%s].type must be "ack" or "push"', i);
    ELSIF op ->> 'type' = 'push' THEN
        IF jsonb_typeof(op -> 'items') IS DISTINCT FROM 'array' THEN
            RETURN format('operations[%s].items must be an array', i);
        END IF;
        RETURN (SELECT format('operations[%s].%s', i, v.e)
                  FROM (SELECT pgcursor_internal.push_item_error(x.item, x.n - 1) AS e, x.n
                          FROM jsonb_array_elements(op -> 'items') WITH ORDINALITY AS x(item, n)) v
                 WHERE v.e IS NOT NULL ORDER BY v.n LIMIT 1);
    END IF;
    -- An ack operation is one acknowledgement: ack_group's own rules (docs/ack-contract.md §13).
    -- Its consumerGroup is checked as a pop's is where a group's rows are made.
    RETURN coalesce(pgcursor_internal.ack_item_error(op, format('operations[%s]', i)),
                    pgcursor_internal.ack_target_error(op, format('operations[%s].', i)),
                    pgcursor_internal.long_key_error(format('operations[%s].consumerGroup', i),
                                                     op ->> 'consumerGroup'));
END $$;

-- Checks the whole request before anything runs: a malformed one is a 22023
-- naming the field (the gateway's 400) and writes nothing.
CREATE OR REPLACE FUNCTION pgcursor_internal.validate_transaction(req jsonb)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
    err text;
BEGIN
    IF jsonb_typeof(req) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'request body must be a JSON object' USING ERRCODE = '22023';
    ELSIF jsonb_typeof(req -> 'operations') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'operations is required and must be an array' USING ERRCODE = '22023';
    ELSIF jsonb_array_length(req -> 'operations') = 0 THEN
        RAISE EXCEPTION 'operations must not be empty' USING ERRCODE = '22023';
    ELSIF coalesce(jsonb_typeof(req -> 'requiredLeases'), 'null') NOT IN ('null', 'array') THEN
        RAISE EXCEPTION 'requiredLeases must be an array' USING ERRCODE = '22023';
    END IF;
    SELECT format('requiredLeases[%s] must be a UUID string', x.n - 1) INTO err
      FROM jsonb_array_elements(coalesce(nullif(req -> 'requiredLeases', 'null'), '[]')) WITH ORDINALITY AS x(v, n)
     WHERE NOT pgcursor_internal.is_uuid_value(x.v, false)
     ORDER BY x.n LIMIT 1;
    IF err IS NULL THEN
        SELECT v.e INTO err
          FROM (SELECT pgcursor_internal.transaction_op_error(x.op, x.n - 1) AS e, x.n
                  FROM jsonb_array_elements(req -> 'operations') WITH ORDINALITY AS x(op, n)) v
         WHERE v.e IS NOT NULL ORDER BY v.n LIMIT 1;
    END IF;
    IF err IS NOT NULL THEN
        RAISE EXCEPTION '%', err USING ERRCODE = '22023';
    END IF;
END $$;

-- requiredLeases: every listed lease must be live on at least one cursor row
-- when the bundle starts (checked before the acks, which may release them).
-- lease_id is not indexed (migrations/V2), so a lease is first looked for
-- in the cursor rows the bundle's acks name, by key: that is where a queen
-- client's leases are, as it lists the leases of the messages it acks. Only
-- a lease not found there costs a scan of the cursors (one for all such
-- leases). The leases are given as arrays: Citus runs no query correlating
-- the cursors with a set-returning function.
--
-- Always the generic plan (plan_cache_mode): with arrays for parameters,
-- PostgreSQL kept planning the keyed lookup anew: 0.24 ms a call, 0.12 since.
CREATE OR REPLACE FUNCTION pgcursor_internal.required_leases_live(req jsonb)
RETURNS boolean LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    listed uuid[] := ARRAY(SELECT DISTINCT l.id::uuid
                             FROM jsonb_array_elements_text(coalesce(nullif(req -> 'requiredLeases', 'null'), '[]')) AS l(id));
    acked_partitions uuid[];
    acked_groups text[];
    found uuid[];
    live bigint;
BEGIN
    IF cardinality(listed) = 0 THEN
        RETURN true;
    END IF;
    SELECT array_agg(DISTINCT (op ->> 'partitionId')::uuid),
           array_agg(DISTINCT pgcursor_internal.group_arg(op))
      INTO acked_partitions, acked_groups
      FROM jsonb_array_elements(req -> 'operations') op
     WHERE op ->> 'type' = 'ack';
    found := ARRAY(SELECT DISTINCT c.lease_id FROM pgcursor.cursors c
                    WHERE c.partition_id = ANY (acked_partitions) AND c.consumer_group = ANY (acked_groups)
                      AND c.lease_id = ANY (listed)
                      AND pgcursor_internal.lease_is_live(c.lease_expires_at));
    IF cardinality(found) = cardinality(listed) THEN
        RETURN true;
    END IF;
    listed := ARRAY(SELECT unnest(listed) EXCEPT SELECT unnest(found));
    -- EXECUTE plans the scan with the leases as a constant, which PostgreSQL
    -- looks up in a hash table; as a parameter of a cached plan, each cursor
    -- row holding a lease was compared with every listed one (10,000 leases
    -- held, 20,000 listed: 0.9 s).
    EXECUTE 'SELECT count(DISTINCT c.lease_id) FROM pgcursor.cursors c
              WHERE c.lease_id = ANY ($1) AND pgcursor_internal.lease_is_live(c.lease_expires_at)'
       INTO live USING listed;
    RETURN live = cardinality(listed);
END $$;

-- Ack operation i, through ack_group as a one-item group (identical
-- semantics to POST /api/v1/ack): its item result, index = i.
CREATE OR REPLACE FUNCTION pgcursor_internal.transaction_ack(op jsonb, i integer)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    RETURN pgcursor.ack_group(jsonb_build_object(
        'partitionId', op -> 'partitionId', 'leaseId', op -> 'leaseId',
        'consumerGroup', op -> 'consumerGroup',
        'items', jsonb_build_array(jsonb_build_object(
            'index', i, 'transactionId', op -> 'transactionId',
            'status', op -> 'status', 'error', op -> 'error')))) -> 0;
END $$;

-- Why an operation's answer refuses the bundle, or null when it succeeded:
-- an ack item with success false, or a push item neither queued nor duplicate.
CREATE OR REPLACE FUNCTION pgcursor_internal.operation_failure(op_type text, result jsonb)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE op_type
        WHEN 'ack' THEN CASE WHEN (result ->> 'success')::boolean IS NOT TRUE
                             THEN coalesce(result ->> 'error', 'ack refused') END
        ELSE (SELECT coalesce(r ->> 'error', 'push item ' || (r ->> 'index') || ' ' || (r ->> 'status'))
                FROM jsonb_array_elements(result) r
               WHERE r ->> 'status' NOT IN ('queued', 'duplicate') OR r ->> 'error' IS NOT NULL
               LIMIT 1)
    END
$$;

-- The queues a bundle acks on or pushes to.
CREATE OR REPLACE FUNCTION pgcursor_internal.transaction_queues(req jsonb)
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY(
        SELECT i ->> 'queue'
          FROM jsonb_array_elements(req -> 'operations') o, jsonb_array_elements(o -> 'items') i
         WHERE o ->> 'type' = 'push'
        UNION
        SELECT p.queue FROM pgcursor.partitions p
         WHERE p.id IN (SELECT (o ->> 'partitionId')::uuid FROM jsonb_array_elements(req -> 'operations') o
                         WHERE o ->> 'type' = 'ack'))
$$;

-- transaction: {"operations":[...], "requiredLeases"?:[...]} ->
-- {"success":true, "transactionId", "results":[...]} or, everything rolled
-- back, {"success":false, "error", "failedIndex", "results":[answers so far]}.
CREATE OR REPLACE FUNCTION pgcursor.transaction(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    op jsonb;
    i integer := 0;
    result jsonb;
    results jsonb := '[]';
    failure text;
    failed_index integer;
BEGIN
    PERFORM pgcursor_internal.validate_transaction(req);
    -- The partition sets of its queues first (shared), before any cursor
    -- row: a push creating a partition takes its queue's set, and after an
    -- ack's row it deadlocked with the queue's delete, which takes the set
    -- and then the rows.
    PERFORM pgcursor_internal.lock_partition_sets('{}', pgcursor_internal.transaction_queues(req));
    IF NOT pgcursor_internal.required_leases_live(req) THEN
        RETURN jsonb_build_object('success', false, 'error', 'invalid or expired lease',
                                  'failedIndex', NULL, 'results', results);
    END IF;
    -- A savepoint: a refused bundle raises PC001 (pgcursor's own SQLSTATE,
    -- never seen outside) to unwind everything done so far, and still answers.
    BEGIN
        FOR op IN SELECT x FROM jsonb_array_elements(req -> 'operations') x LOOP
            result := CASE op ->> 'type' WHEN 'ack' THEN pgcursor_internal.transaction_ack(op, i)
                                         ELSE pgcursor_internal.push_answer(op, through_maintenance => true) END;
            results := results || jsonb_build_array(result);
            failure := pgcursor_internal.operation_failure(op ->> 'type', result);
            IF failure IS NOT NULL THEN
                failed_index := i;
                RAISE EXCEPTION USING ERRCODE = 'PC001';
            END IF;
            i := i + 1;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'PC001' THEN
        -- Local variables survive the rollback to the savepoint.
        RETURN jsonb_build_object('success', false, 'error', failure, 'failedIndex', failed_index,
                                  'results', results);
    END;
    RETURN jsonb_build_object('success', true, 'transactionId', pgcursor_internal.uuidv7(), 'results', results);
END $$;
