-- metrics_snapshot (docs/sql-api.md "metrics_snapshot"): the database figures
-- a scrape reads, on a small fixture: per queue and per (queue, group) depth,
-- lag, leased partitions and dead letters, lifetime totals with deleted
-- queues in the cluster totals only, the maintenance flags; and a plan that
-- touches messages only through primary-key probes.
BEGIN;
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SELECT plan(17);

\ir lib/queue_helpers.sql
CREATE FUNCTION pg_temp.snap() RETURNS jsonb LANGUAGE sql AS $$ SELECT pgcursor.metrics_snapshot() $$;
CREATE FUNCTION pg_temp.grp(q text, g text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT x - 'queue' - 'consumerGroup' FROM jsonb_array_elements(pg_temp.snap() -> 'groups') x
    WHERE x ->> 'queue' = q AND x ->> 'consumerGroup' = g
$$;

-- A clean slate inside this transaction (rolled back at the end).
DELETE FROM pgcursor.queues;
DELETE FROM pgcursor.retired_totals;
DELETE FROM pgcursor.gateway_minutes;
DELETE FROM pgcursor.gateway_process_minutes;
UPDATE pgcursor.gateway_totals SET push_requests = 0, pop_requests = 0, pop_messages = 0, ack_requests = 0,
                                   ack_messages = 0, ack_failed = 0, transactions = 0, db_errors = 0;
SELECT pgcursor.set_maintenance('push', false), pgcursor.set_maintenance('pop', false);

SELECT is(pg_temp.snap(),
          '{"maintenanceMode": false, "popMaintenanceMode": false, "deadLetters": 0,
            "totals": {"pushed": 0, "completed": 0, "deadLettered": 0, "discarded": 0},
            "queues": [], "groups": [],
            "gatewayTotals": {"pushRequests": 0, "popRequests": 0, "popMessages": 0, "ackRequests": 0,
                              "ackMessages": 0, "ackFailed": 0, "transactions": 0, "dbErrors": 0},
            "queueMinutes": [], "processMinutes": []}',
          'nothing stored: zeros and empty lists');
-- Minutes as unix seconds: this one, two ago, six ago.
SELECT extract(epoch FROM now())::bigint AS m0, extract(epoch FROM now() - interval '2 minutes')::bigint AS m2,
       extract(epoch FROM now() - interval '6 minutes')::bigint AS m6 \gset
SELECT pgcursor.record_gateway_minutes(format(
           '[{"minute": %s, "queue": "t63", "pushRequests": 2, "pushMessages": 7, "popMessages": 5, "ageSumMs": 501,
              "ageMaxMs": 300, "popEmpty": 1, "ackMessages": 4, "ackFailed": 1, "transactions": 3,
              "parkedMs": 90000},
             {"minute": %s, "queue": "t63", "popMessages": 50},
             {"minute": %s, "queue": "t63old", "popMessages": 1},
             {"minute": %s, "dbErrors": 2}]', :m0, :m2, :m6, :m0)::jsonb) IS NOT NULL AS x \gset
SELECT is(pg_temp.snap() -> 'gatewayTotals',
          '{"pushRequests": 2, "popRequests": 0, "popMessages": 56, "ackRequests": 0, "ackMessages": 4, "ackFailed": 1,
            "transactions": 3, "dbErrors": 2}', 'gatewayTotals: what the gateways flushed, for life');
SELECT is((pg_temp.snap() #> '{queueMinutes,0}') - 'ageSeconds',
          '{"queue": "t63", "pushRequests": 2, "pushMessages": 7, "popMessages": 5, "popEmpty": 1, "ackSuccess": 3,
            "ackFailed": 1, "transactions": 3, "lagAvgMs": 100, "lagMaxMs": 300, "parked": 1.5}',
          'queueMinutes: the queue''s newest minute, not the one before; acks by result, average and largest '
          'message age at pop, long-polls waiting on average over the minute');
SELECT cmp_ok((pg_temp.snap() #>> '{queueMinutes,0,ageSeconds}')::int, '<=',
              extract(epoch FROM now() - date_trunc('minute', now()))::int,
              'ageSeconds: since the start of that minute');
SELECT is(jsonb_array_length(pg_temp.snap() -> 'queueMinutes'), 1,
          'no row for a queue whose newest minute is older than 5 minutes, nor for the queue-less figures '
          '(dbErrors: in the totals only)');

-- Fixture: t63 partition a (3 messages), b (2); t63e configured, empty;
-- t63x (4 messages) deleted below. Messages are aged 10 s per offset step.
SELECT pgcursor.configure('{"queue":"t63"}'), pgcursor.configure('{"queue":"t63e"}');
SELECT pg_temp.push('t63', 'a', 3), pg_temp.push('t63', 'b', 2), pg_temp.push('t63x', 'Default', 4);
UPDATE pgcursor.messages SET created_at = now() - interval '10 seconds' * (5 - msg_offset)
 WHERE partition_id IN (pg_temp.pid('t63', 'a'), pg_temp.pid('t63', 'b'));
-- a: offset 1 is 40 s old, 2 is 30 s, 3 is 20 s; b: 1 is 40 s, 2 is 30 s.
UPDATE pgcursor.messages SET created_at = created_at + interval '5 seconds'
 WHERE partition_id = pg_temp.pid('t63', 'b');   -- b: 35 s and 25 s
SELECT FROM pg_temp.pop('t63', 'a', 'g', 2, true);   -- g completes a:1..2
SELECT FROM pg_temp.pop('t63', 'b', 'g', 2, true);   -- g completes b:1..2
SELECT FROM pg_temp.pop('t63', 'b', 'h', 1);         -- h leases b:1
SELECT pgcursor_internal.materialize_cursors();      -- g's and h's rows on the partitions they did not pop
SELECT pgcursor.delete_queue('t63x');

SELECT is(pg_temp.grp('t63', 'g'),
          '{"partitions": 2, "depth": 1, "lagSeconds": 20.000, "leasedPartitions": 0, "expiredLeases": 0,
            "leaseExpiries": 0}',
          'g: one message left (a:3, 20 s old); b caught up adds no lag');
SELECT is(pg_temp.grp('t63', 'h'),
          '{"partitions": 2, "depth": 5, "lagSeconds": 40.000, "leasedPartitions": 1, "expiredLeases": 0,
            "leaseExpiries": 0}',
          'h: every message; lag is its oldest unconsumed (a:1); one live lease');

UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 second'
 WHERE consumer_group = 'h';
SELECT is(pg_temp.grp('t63', 'h') - 'depth' - 'lagSeconds' - 'partitions',
          '{"leasedPartitions": 0, "expiredLeases": 1, "leaseExpiries": 0}',
          'an expired lease is not live, and shows until a pop takes over');
SELECT FROM pg_temp.pop('t63', 'b', 'h', 1);         -- h takes b over: b:1 again
SELECT is(pg_temp.grp('t63', 'h') - 'depth' - 'lagSeconds' - 'partitions',
          '{"leasedPartitions": 1, "expiredLeases": 0, "leaseExpiries": 1}',
          'the pop that takes over counts the expiry');
UPDATE pgcursor.cursors SET lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL
 WHERE consumer_group = 'h';                         -- as the ack that released it would

-- Retention deleted a:1: h's oldest unconsumed is then a:2 (or b:1, 35 s).
DELETE FROM pgcursor.messages WHERE partition_id = pg_temp.pid('t63', 'a') AND msg_offset = 1;
SELECT is(pg_temp.grp('t63', 'h') -> 'lagSeconds', '35.000', 'a deleted offset is skipped, not a null');

-- A dead letter (as ack_group files one) on t63.
INSERT INTO pgcursor.dead_letters (partition_id, consumer_group, msg_offset, transaction_id, payload, error, retry_count)
SELECT pg_temp.pid('t63', 'a'), 'h', 2, transaction_id, payload, 'poison', 3
  FROM pgcursor.messages WHERE partition_id = pg_temp.pid('t63', 'a') AND msg_offset = 2;
UPDATE pgcursor.cursors SET dead_lettered_total = 1
 WHERE partition_id = pg_temp.pid('t63', 'a') AND consumer_group = 'h';

SELECT is((SELECT jsonb_agg(x) FROM jsonb_array_elements(pg_temp.snap() -> 'queues') x),
          '[{"queue": "t63", "partitions": 2, "depth": 5, "deadLetters": 1, "pushed": 5, "completed": 4,
             "deadLettered": 1, "discarded": 0},
            {"queue": "t63e", "partitions": 0, "depth": 0, "deadLetters": 0, "pushed": 0, "completed": 0,
             "deadLettered": 0, "discarded": 0}]',
          'per live queue, by name: partitions, depth of the slowest group, dead letters, lifetime figures');
SELECT is(pg_temp.snap() -> 'totals', '{"pushed": 9, "completed": 4, "deadLettered": 1, "discarded": 0}',
          'the cluster totals keep what the deleted queue counted');
SELECT is(pg_temp.snap() -> 'deadLetters', '1', 'dead letters stored now');
SELECT is((SELECT count(*) FROM jsonb_array_elements(pg_temp.snap() -> 'groups')), 2::bigint,
          'one entry per (queue, group) with cursors');

SELECT pgcursor.set_maintenance('push', true);
SELECT is(pg_temp.snap() -> 'maintenanceMode', 'true', 'push maintenance shows');
SELECT pgcursor.set_maintenance('push', false);

-- Cheap: the oldest unconsumed message is found by the primary key (this
-- fixture's tables are so small that the planner would rather scan them, so
-- scans are discouraged here as a large table makes them; the 1,000,000
-- message measurement is in docs/http-api.md, Metrics).
SET LOCAL enable_seqscan = off;
CREATE FUNCTION pg_temp.plan_nodes() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
    FOR line IN EXPLAIN SELECT pgcursor.metrics_snapshot() LOOP
        RETURN NEXT line;
    END LOOP;
    FOR line IN EXPLAIN SELECT * FROM pgcursor_internal.group_figures() LOOP
        RETURN NEXT line;
    END LOOP;
END $$;
-- (A plain or a bitmap scan of the primary key, as the statistics left by
-- earlier files make the planner guess: a bitmap heap scan of messages is
-- fed by its bitmap index scan, which the second check names.)
SELECT ok(EXISTS (SELECT 1 FROM pg_temp.plan_nodes() l
                   WHERE l ~ 'Index.* using messages_pkey on messages' OR l ~ 'Bitmap Index Scan on messages_pkey'),
          'the lag probe is a primary-key index scan');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_temp.plan_nodes() l
                       WHERE l ~ ' on messages' AND l !~ 'messages_pkey' AND l !~ 'Bitmap Heap Scan on messages '),
          'messages is read through nothing else');
RESET enable_seqscan;

SELECT * FROM finish();
ROLLBACK;
