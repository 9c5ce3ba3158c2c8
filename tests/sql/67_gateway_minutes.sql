-- The gateways' per-minute figures: record_gateway_minutes adds (never
-- overwrites) per (minute, queue), resolves partitions to their queue,
-- keeps 24 hours and refuses bad rows whole; status and analytics read them.
BEGIN;
SELECT plan(36);

DELETE FROM pgcursor.gateway_minutes;
CREATE TEMP TABLE totals_before ON COMMIT DROP AS SELECT * FROM pgcursor.gateway_totals;
\ir lib/queue_helpers.sql
SELECT pg_temp.push('q67', 'Default', 1);
SELECT pg_temp.push('q67b', 'Default', 1);

-- Minutes as unix seconds: m5 five minutes ago (its 17th second), m4 four.
SELECT extract(epoch FROM date_trunc('minute', now()) - interval '5 minutes')::bigint + 17 AS m5,
       extract(epoch FROM date_trunc('minute', now()) - interval '4 minutes')::bigint AS m4,
       date_trunc('minute', now()) - interval '5 minutes' AS t5 \gset
CREATE FUNCTION pg_temp.stored(q text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s:%s/%s/%s/%s/%s/%s/%s/%s', to_char(g.minute AT TIME ZONE 'UTC', 'HH24:MI:SS'),
                             g.pop_requests, g.pop_messages, g.pop_empty, g.ack_requests, g.ack_failed,
                             g.push_requests, g.age_sum_ms, g.age_max_ms), ' ' ORDER BY g.minute)
    FROM pgcursor.gateway_minutes g WHERE g.queue IS NOT DISTINCT FROM q
$$;

SELECT is(pgcursor.record_gateway_minutes(format(
              '[{"minute": %s, "queue": "q67", "popRequests": 2, "popMessages": 3, "ageSumMs": 300, "ageMaxMs": 200},
                {"minute": %s, "queue": "q67", "popRequests": "1", "popEmpty": 1}]', :m5, :m4)::jsonb),
          '{"rows": 2, "purged": 0}', 'one row per (minute, queue) written');
SELECT is(pg_temp.stored('q67'),
          to_char(:'t5'::timestamptz AT TIME ZONE 'UTC', 'HH24:MI:SS') || ':2/3/0/0/0/0/300/200 '
          || to_char((:'t5'::timestamptz + interval '1 minute') AT TIME ZONE 'UTC', 'HH24:MI:SS') || ':1/0/1/0/0/0/0/0',
          'any second names its minute; absent figures are 0; digit strings count');
-- A second gateway writes the same minute: its figures add up.
SELECT is(pgcursor.record_gateway_minutes(format(
              '[{"minute": %s, "queue": "q67", "popRequests": 1, "popMessages": 1, "ageSumMs": 50, "ageMaxMs": 50},
                {"minute": %s, "partitionId": "%s", "ackRequests": 1, "ackFailed": 2}]',
              :m5, :m5, pg_temp.pid('q67'))::jsonb) -> 'rows',
          '1', 'a partition''s figures land on its queue''s row: one row for the minute');
SELECT is(split_part(pg_temp.stored('q67'), ' ', 1),
          to_char(:'t5'::timestamptz AT TIME ZONE 'UTC', 'HH24:MI:SS') || ':3/4/0/1/2/0/350/200',
          'added to what was there, never overwritten; the larger maximum stays');
SELECT pgcursor.record_gateway_minutes(format(
           '[{"minute": %s, "queue": "q67", "ageMaxMs": 900}, {"minute": %s, "popEmpty": 4},
             {"minute": %s, "partitionId": "%s", "ackRequests": 1}]', :m5, :m5, :m5, gen_random_uuid())::jsonb);
SELECT is(split_part(split_part(pg_temp.stored('q67'), ' ', 1), '/', 8), '900',
          'a larger maximum replaces the stored one');
-- V17's figures: messages stored by pushes, ms long-polls waited, requests the database failed.
SELECT pgcursor.record_gateway_minutes(format(
           '[{"minute": %s, "queue": "q67", "pushMessages": 3, "parkedMs": 30000},
             {"minute": %s, "queue": "q67", "pushMessages": 2, "parkedMs": 6000}, {"minute": %s, "dbErrors": 1}]',
           :m5, :m5, :m5)::jsonb);
SELECT is((SELECT format('%s/%s/%s', g.push_messages, g.parked_ms, g.db_errors) FROM pgcursor.gateway_minutes g
            WHERE g.queue = 'q67' AND g.minute = :'t5'), '5/36000/0', 'pushMessages and parkedMs add up per minute');
SELECT is((SELECT g.db_errors FROM pgcursor.gateway_minutes g WHERE g.queue IS NULL AND g.minute = :'t5'), 1::bigint,
          'dbErrors: on the queue-less row');
SELECT is(pg_temp.stored(NULL), to_char(:'t5'::timestamptz AT TIME ZONE 'UTC', 'HH24:MI:SS') || ':0/0/4/1/0/0/0/0',
          'no queue, or a partition that is gone: the queue-less row');

-- Retention: 24 hours by default.
SELECT is(pgcursor.record_gateway_minutes(format('[{"minute": %s, "queue": "q67", "popRequests": 1}]',
                                                 extract(epoch FROM now() - interval '25 hours')::bigint)::jsonb),
          '{"rows": 0, "purged": 0}', 'a minute older than keep is not written');
INSERT INTO pgcursor.gateway_minutes (minute, queue, pop_requests) VALUES (now() - interval '2 days', 'q67', 9);
SELECT is(pgcursor.record_gateway_minutes('[]') -> 'purged', '1', 'stored minutes older than keep are deleted');
SELECT is((SELECT format('push %s, pop %s/%s, ack %s/%s/%s, transactions %s, db errors %s',
                         t.push_requests - b.push_requests, t.pop_requests - b.pop_requests,
                         t.pop_messages - b.pop_messages, t.ack_requests - b.ack_requests,
                         t.ack_messages - b.ack_messages, t.ack_failed - b.ack_failed, t.transactions - b.transactions,
                         t.db_errors - b.db_errors)
             FROM pgcursor.gateway_totals t, totals_before b),
          'push 0, pop 4/4, ack 2/0/2, transactions 0, db errors 1',
          'gateway_totals: everything written added up for life, not the minute older than keep');

-- Bad input: 22023 naming the row and field, nothing written.
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('{}')$$, '22023', 'rows must be an array', 'not an array');
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('[{"minute": 60}, 5]')$$, '22023',
                 'rows[1] must be an object', 'a row that is not an object');
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('[{"queue": "q67"}]')$$, '22023',
                 'rows[0].minute must be a time in unix seconds', 'no minute');
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('[{"minute": 60, "popMessages": -1}]')$$, '22023',
                 'rows[0].popMessages must be a non-negative integer', 'a negative figure');
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('[{"minute": 60, "popMessages": 9223372036854775807}]')$$,
                 '22023', 'rows[0].popMessages must be at most 1000000000000',
                 'a figure no minute can count (its lifetime sum would overflow every later call)');
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('[]', NULL)$$, '22023',
                 'keep must be an interval above 0 and at most 100 years', 'a null keep (it would write nothing)');
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('[]', interval '-1 hour')$$, '22023',
                 'keep must be an interval above 0 and at most 100 years', 'a negative keep (it would purge everything)');
SELECT throws_ok($$SELECT pgcursor.record_gateway_minutes('[{"minute": 60, "partitionId": "x"}]')$$, '22023',
                 'rows[0].partitionId must be a UUID string', 'a bad partitionId');
SELECT throws_ok(format($$SELECT pgcursor.record_gateway_minutes('[{"minute": %s, "queue": "q67", "popRequests": 5},
                                                                    {"minute": %s, "queue": 7}]')$$, :m4, :m4),
                 '22023', 'rows[1].queue must be a string', 'a bad row refuses them all');
SELECT is(split_part(pg_temp.stored('q67'), ' ', 2),
          to_char((:'t5'::timestamptz + interval '1 minute') AT TIME ZONE 'UTC', 'HH24:MI:SS') || ':1/0/1/0/0/0/0/0',
          'nothing of a refused call is written');

-- Readers. q67 in the window: 3 pop requests, 4 messages (ages 350 ms, max 900), 1 empty, 2 failed acks
-- at t5; 1 empty pop at t5 + 1 minute. q67b: 2 pushes and 1 pop of 1 message at t5.
SELECT pgcursor.record_gateway_minutes(format(
           '[{"minute": %s, "queue": "q67b", "pushRequests": 2, "popRequests": 1, "popMessages": 1, "ageSumMs": 40,
              "ageMaxMs": 40, "ackRequests": 1, "ackMessages": 3}]', :m5)::jsonb);
SELECT (pgcursor.status('{"queue":"q67"}') -> 'throughput') AS series \gset
SELECT is((SELECT x - ARRAY['timestamp', 'ingested', 'ingestedPerSecond', 'processed', 'processedPerSecond', 'dlqCount']
           FROM jsonb_array_elements(:'series') x WHERE x ->> 'timestamp' = pgcursor_internal.bucket_label(:'t5')),
          '{"popPerSecond":0.07,"popMessages":4,"avgLagMs":88,"maxLagMs":900,"avgEventLoopLagMs":0,"maxEventLoopLagMs":0,
            "dbErrors":1,"ackFailed":2,"queenCpuUserPct":0,"queenCpuSysPct":0,"dbPoolActive":0,"dbPoolIdle":0,
            "dbPoolSize":0,"minFreeSlots":0,"queenRssMb":0}',
          'status throughput: pops, their rate, message age at pop and failed acks of the queue; '
          'requests the database failed over every queue');
SELECT is(pgcursor.status('{"queue":"q67b"}') #> '{errors,dbErrors}', '1', 'errors.dbErrors of the window, global');
SELECT is(pgcursor.status('{"queue":"q67"}') #> '{messages,requests}', '{"push":0,"pop":4,"ack":1}',
          'status requests over the window (the queue''s)');
SELECT is(pgcursor.status('{}') #> '{messages,requests}', '{"push":2,"pop":5,"ack":3}',
          'without a filter: every queue and the queue-less row');
SELECT is(pgcursor.status('{"queue":"q67b"}') #> '{messages,batchEfficiency}', '{"push":0.5,"pop":1,"ack":3}',
          'batchEfficiency: messages per request (1 pushed in 2 requests)');
SELECT is(pgcursor.status('{"queue":"q67"}') #> '{errors,ackFailed}', '2', 'errors.ackFailed of the window');
-- queue-ops' q67 rows up to t5's next minute, oldest first: queueName and the keys given.
CREATE FUNCTION pg_temp.queue_ops(upto timestamptz, VARIADIC keys text[]) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg((SELECT jsonb_agg(x -> k ORDER BY n) FROM unnest('{queueName}' || keys) WITH ORDINALITY u(k, n))
                     ORDER BY x ->> 'bucket', x ->> 'queueName')
    FROM jsonb_array_elements(pgcursor.analytics('queue-ops') -> 'series') x
    WHERE x ->> 'queueName' LIKE 'q67%' AND x ->> 'bucket' <= pgcursor_internal.bucket_label(upto + interval '1 minute')
$$;
SELECT is(pg_temp.queue_ops(:'t5', 'popMessages', 'popEmpty', 'avgLagMs', 'maxLagMs', 'ackFailed', 'pushRequests',
                            'ackPerSecond', 'parkedCount'),
          '[["q67",4,0,88,900,2,0,0.03,0.6],["q67b",1,0,40,40,0,2,0,0],["q67",0,1,0,0,0,0,0,0]]',
          'queue-ops: the gateways'' figures per bucket and queue, a bucket with only an empty pop included; '
          'ackPerSecond counts failed acks too; parkedCount: long-polls waiting on average (36 s in a minute)');
-- Partitions: q67's Default an hour before t5, a second one inside t5's minute; q67b's made now.
UPDATE pgcursor.partitions SET created_at = :'t5'::timestamptz - interval '1 hour' WHERE queue = 'q67';
INSERT INTO pgcursor.partitions (id, queue, name, created_at)
VALUES (gen_random_uuid(), 'q67', 'second', :'t5'::timestamptz + interval '30 seconds');
SELECT is(pg_temp.queue_ops(:'t5', 'partitionsCreated', 'partitionCount', 'partitionsDeleted'),
          '[["q67",1,2,0],["q67b",0,0,0],["q67",0,2,0]]',
          'queue-ops partitions: created in the bucket and the count at its end (q67b''s is newer)');
SELECT is(pgcursor.analytics('queue-ops', '{"queue":"q67b"}') -> 'queues', '["q67b"]', 'queue-ops: filtered');
SELECT is(pgcursor.analytics('queue-lag'),
          jsonb_build_array(
              jsonb_build_object('queueName', 'q67', 'popCount', 4, 'avgLagMs', 88, 'maxLagMs', 900,
                                 'bucketTime', pgcursor_internal.bucket_label(:'t5')),
              jsonb_build_object('queueName', 'q67b', 'popCount', 1, 'avgLagMs', 40, 'maxLagMs', 40,
                                 'bucketTime', pgcursor_internal.bucket_label(:'t5'))),
          'queue-lag: per minute and queue with pops');
SELECT is(pgcursor.analytics('queue-lag', '{"queue":"q67b"}') -> 0 -> 'queueName', '"q67b"', 'queue-lag: filtered');
SELECT is((SELECT x -> 'popMessages' FROM jsonb_array_elements(pgcursor.analytics('worker-metrics') -> 'timeSeries') x
           WHERE x ->> 'timestamp' = pgcursor_internal.bucket_label(:'t5')), '5',
          'worker-metrics: every queue''s pops per bucket');
SELECT is(pgcursor.analytics('worker-metrics') #> '{summary,totalPopMessages}', '5', 'worker-metrics: total pops');
SELECT is((SELECT x -> 'dbErrors' FROM jsonb_array_elements(pgcursor.analytics('worker-metrics') -> 'timeSeries') x
           WHERE x ->> 'timestamp' = pgcursor_internal.bucket_label(:'t5')), '1',
          'worker-metrics: requests the database failed, per bucket');
SELECT is(pgcursor.analytics('worker-metrics') -> 'queues',
          '[{"queueName":"q67","popCount":4,"avgLagMs":88,"maxLagMs":900},
            {"queueName":"q67b","popCount":1,"avgLagMs":40,"maxLagMs":40}]', 'worker-metrics: pops per queue');

SELECT * FROM finish();
ROLLBACK;
