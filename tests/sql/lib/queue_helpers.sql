-- Helpers shared by the pgTAP files that build small queues (\ir'd inside
-- their transaction, so they are rolled back with the test).

-- The id of a partition by queue and name.
CREATE FUNCTION pg_temp.pid(q text, part text DEFAULT 'Default') RETURNS uuid LANGUAGE sql AS $$
    SELECT id FROM pgcursor.partitions WHERE queue = q AND name = part
$$;
-- Pushes n messages with payloads 1..n to (q, part).
CREATE FUNCTION pg_temp.push(q text, part text, n integer) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.push(jsonb_build_object('items',
        (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part, 'payload', i)) FROM generate_series(1, n) i)))
$$;
-- One pop of up to n messages of (q, part) for group grp.
CREATE FUNCTION pg_temp.pop(q text, part text, grp text, n integer, auto boolean DEFAULT false) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgcursor.pop(jsonb_build_object('queue', q, 'partition', part, 'consumerGroup', grp, 'batch', n,
                                           'autoAck', auto))
$$;
-- Where group grp stands on (q, part): its cursor row, or, when a pending
-- subscription has not written it yet, the row it will get (cursor_rows()).
CREATE FUNCTION pg_temp.cur(q text, part text, grp text) RETURNS pgcursor.cursors LANGUAGE sql AS $$
    SELECT c.* FROM pgcursor_internal.cursor_rows() c
    WHERE c.partition_id = pg_temp.pid(q, part) AND c.consumer_group = grp
$$;
