-- Shared fixture for the ack_group pgTAP files (\ir'd inside their
-- transaction, so everything here is rolled back with the test).
-- A queue with one partition of n messages t1..tn, a group 'g' whose cursor
-- sits at cursor_at with lease L over batch_start..batch_end (live).

CREATE FUNCTION pg_temp.lease_l() RETURNS uuid LANGUAGE sql AS
$$ SELECT 'aaaaaaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa'::uuid $$;

CREATE FUNCTION pg_temp.setup(
    n integer DEFAULT 20, cursor_at bigint DEFAULT 9,
    batch_start bigint DEFAULT 10, batch_end bigint DEFAULT 19,
    retry_limit integer DEFAULT 3, dlq boolean DEFAULT NULL, dlq_after boolean DEFAULT NULL,
    counter integer DEFAULT 0)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    q text := 'ackq-' || gen_random_uuid();
    p uuid := gen_random_uuid();
BEGIN
    INSERT INTO pgcursor.queues (name, retry_limit, dead_letter_queue, dlq_after_max_retries)
    VALUES (q, retry_limit, dlq, dlq_after);
    INSERT INTO pgcursor.partitions (id, queue, name) VALUES (p, q, 'Default');
    INSERT INTO pgcursor.partition_heads (partition_id, head) VALUES (p, n);
    INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload)
    SELECT p, o, 't' || o, jsonb_build_object('n', o) FROM generate_series(1, n) AS o;
    INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor, lease_id, lease_expires_at,
                                  batch_start, batch_end, retry_count)
    VALUES (p, 'g', cursor_at,
            CASE WHEN batch_end IS NOT NULL THEN pg_temp.lease_l() END,
            CASE WHEN batch_end IS NOT NULL THEN now() + interval '5 minutes' END,
            batch_start, batch_end, counter);
    RETURN p;
END
$$;

-- Items from compact specs 'status:offset[:reason]'; status 'absent' omits
-- the key, 'null' sends JSON null.
CREATE FUNCTION pg_temp.items(VARIADIC specs text[]) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(
        jsonb_strip_nulls(jsonb_build_object(
            'transactionId', 't' || split_part(s, ':', 2),
            'error', nullif(split_part(s, ':', 3), '')))
        || CASE split_part(s, ':', 1)
               WHEN 'absent' THEN '{}'::jsonb
               WHEN 'null' THEN '{"status": null}'::jsonb
               ELSE jsonb_build_object('status', split_part(s, ':', 1)) END
        ORDER BY ord)
    FROM unnest(specs) WITH ORDINALITY AS u(s, ord)
$$;

-- Calls ack_group for group 'g'; lease 'L' is the live lease, 'X' a wrong one.
CREATE FUNCTION pg_temp.ack(p uuid, lease text, items jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.ack_group(jsonb_build_object(
        'partitionId', p, 'consumerGroup', 'g', 'items', items,
        'leaseId', CASE lease WHEN 'L' THEN pg_temp.lease_l()::text
                              WHEN 'X' THEN gen_random_uuid()::text END))
$$;

-- One line per item: "ok|<error> rel dlq noop" flags, '; '-separated.
CREATE FUNCTION pg_temp.brief(results jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(
        CASE WHEN (r ->> 'success')::boolean THEN 'ok' ELSE r ->> 'error' END
        || CASE WHEN (r ->> 'success')::boolean AND r ->> 'error' IS NOT NULL THEN '!error-on-success' ELSE '' END
        || CASE WHEN (r ->> 'leaseReleased')::boolean THEN ' rel' ELSE '' END
        || CASE WHEN (r ->> 'dlq')::boolean THEN ' dlq' ELSE '' END
        || CASE WHEN (r ->> 'noop')::boolean THEN ' noop' ELSE '' END,
        '; ' ORDER BY ord)
    FROM jsonb_array_elements(results) WITH ORDINALITY AS e(r, ord)
$$;

-- The group's state: "cursor=N lease=L|none|other counter=N".
CREATE FUNCTION pg_temp.state(p uuid) RETURNS text LANGUAGE sql AS $$
    SELECT format('cursor=%s lease=%s counter=%s', c.cursor,
                  CASE WHEN c.lease_id IS NULL THEN 'none'
                       -- lease_l()'s literal: on Citus the query runs on a worker,
                       -- where this session's pg_temp functions do not exist
                       WHEN c.lease_id = 'aaaaaaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa'::uuid THEN 'L' ELSE 'other' END,
                  c.retry_count)
      FROM pgcursor.cursors c WHERE c.partition_id = p AND c.consumer_group = 'g'
$$;

-- Dead letters of group 'g' as "offset:reason:retry_count", by offset.
CREATE FUNCTION pg_temp.dead(p uuid) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s:%s:%s', msg_offset, error, retry_count), ', ' ORDER BY msg_offset), '')
      FROM pgcursor.dead_letters WHERE partition_id = p AND consumer_group = 'g'
$$;
