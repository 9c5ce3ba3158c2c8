-- Status and analytics (docs/sql-api.md "Status and analytics"): bucket sizes
-- and labels, rates, per-minute figures from snapshot deltas (zeros included,
-- filters), the status figures, the status queue views and the analytics
-- answers.
BEGIN;
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SELECT plan(57);

-- A clean slate inside this transaction (rolled back at the end).
DELETE FROM pgcursor.queues;
DELETE FROM pgcursor.retired_totals;
DELETE FROM pgcursor.stats_snapshots;
DELETE FROM pgcursor.gateway_minutes;

CREATE FUNCTION pg_temp.snap(m text, q text, pushed bigint, completed bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO pgcursor.stats_snapshots (minute, queue, taken_at, pushed, completed, dead_lettered, discarded)
    VALUES (m::timestamptz, q, m::timestamptz, pushed, completed, 0, 0)
$$;
CREATE FUNCTION pg_temp.field(series jsonb, f text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(x -> f ORDER BY x ->> 'timestamp'), '[]')
    FROM jsonb_array_elements(series) x WHERE (x ->> 'ingested')::int + (x ->> 'processed')::int > 0
$$;

-- bucket sizes by window length, labels, rates
SELECT is(ARRAY(SELECT pgcursor_internal.bucket_minutes('2026-01-01Z', '2026-01-01Z'::timestamptz + d)
                FROM unnest(ARRAY['60 min', '61 min', '6 h', '6 h 1 min', '24 h', '25 h', '7 days', '8 days']::interval[]) d),
          ARRAY[1, 5, 5, 15, 15, 60, 60, 360], 'bucketMinutes: <=60 min 1, <=6 h 5, <=24 h 15, <=7 d 60, else 360');
SELECT is(ARRAY(SELECT pgcursor_internal.bucket_label(pgcursor_internal.bucket_start('2026-01-01 10:47:31.5Z', b))
                FROM unnest(ARRAY[1, 5, 15, 60, 360]) b),
          ARRAY['2026-01-01T10:47:00Z', '2026-01-01T10:45:00Z', '2026-01-01T10:45:00Z', '2026-01-01T10:00:00Z',
                '2026-01-01T10:00:00Z'], 'a bucket starts at the minute less minute-of-hour mod bucketMinutes (360: hourly)');
SET LOCAL TimeZone = 'Asia/Kathmandu';
SELECT is(pgcursor_internal.bucket_label(pgcursor_internal.bucket_start('2026-01-01 10:47:31Z', 60)),
          '2026-01-01T10:00:00Z', 'buckets are UTC whatever the session''s zone');
RESET TimeZone;
SELECT is(ARRAY[pgcursor_internal.per_second(10, 1), pgcursor_internal.per_second(10, 5), pgcursor_internal.per_second(0, 15)],
          ARRAY[0.17, 0.03, 0]::float8[], 'rates: count / (bucketMinutes * 60), 2 decimals');
SELECT is((SELECT count(*) FROM pgcursor_internal.bucket_series('2026-01-01 10:03Z', '2026-01-01 16:00Z', 5)),
          73::bigint, 'every bucket of the window, from the bucket of from');

-- Fixture: q63 (namespace ns63) 10 pushed, 5 completed; q63b 4 pushed.
SELECT pgcursor.configure('{"queue":"q63","namespace":"ns63","task":"t63"}');
SELECT pgcursor.configure('{"queue":"q63b","namespace":"other"}');
SELECT FROM pgcursor.push(jsonb_build_object('items',
    (SELECT jsonb_agg(jsonb_build_object('queue', 'q63', 'payload', i)) FROM generate_series(1, 10) i)));
SELECT FROM pgcursor.push(jsonb_build_object('items',
    (SELECT jsonb_agg(jsonb_build_object('queue', 'q63b', 'payload', i)) FROM generate_series(1, 4) i)));
SELECT FROM pgcursor.pop('{"queue":"q63","batch":5,"autoAck":true}');
SELECT pg_temp.snap('2026-01-01 10:00Z', 'q63', 0, 0), pg_temp.snap('2026-01-01 10:00Z', 'q63b', 0, 0),
       pg_temp.snap('2026-01-01 10:01Z', 'q63', 4, 1), pg_temp.snap('2026-01-01 10:01Z', 'q63b', 2, 0),
       pg_temp.snap('2026-01-01 10:07Z', 'q63', 6, 3), pg_temp.snap('2026-01-01 10:07Z', 'q63b', 4, 0);

-- per-minute figures: the delta to the next snapshot, the newest to the live totals
SELECT is((SELECT jsonb_agg(jsonb_build_array(pgcursor_internal.bucket_label(m.minute), m.pushed, m.completed)
                            ORDER BY m.minute)
           FROM pgcursor_internal.minute_figures('2026-01-01 10:00Z', '2026-01-01 10:30Z', NULL) m),
          '[["2026-01-01T10:00:00Z",6,1],["2026-01-01T10:01:00Z",4,2],["2026-01-01T10:07:00Z",4,2]]',
          'per minute: what happened until the next snapshot, summed over every queue');
SELECT is((SELECT jsonb_agg(jsonb_build_array(m.pushed, m.completed) ORDER BY m.minute)
           FROM pgcursor_internal.minute_figures('2026-01-01 10:00Z', '2026-01-01 10:30Z', ARRAY['q63']) m),
          '[[4,1],[2,2],[4,2]]', 'over the selected queues only');
SELECT is((SELECT jsonb_agg(m.pushed ORDER BY m.minute)
           FROM pgcursor_internal.minute_figures('2026-01-01 10:01Z', '2026-01-01 10:30Z', NULL) m),
          '[4,4]', 'the snapshot before the window is the base of its first minute, not a minute of it');
SELECT is((SELECT count(*) FROM pgcursor_internal.minute_figures('2026-01-01 11:00Z', '2026-01-01 12:00Z', NULL)),
          0::bigint, 'no snapshot in the window: no minutes');

-- status: the throughput series
SELECT is(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}') -> 'bucketMinutes', '1',
          'a 30-minute window: 1-minute buckets');
SELECT is(jsonb_array_length(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}') -> 'throughput'),
          31, 'one point per bucket, zeros included');
SELECT is(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}') -> 'pointCount', '31', 'pointCount');
SELECT is(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}') #> '{throughput,0,timestamp}',
          '"2026-01-01T10:30:00Z"', 'newest first');
SELECT is(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}') #> '{throughput,30}',
          '{"timestamp":"2026-01-01T10:00:00Z","ingested":6,"processed":1,"ingestedPerSecond":0.1,
            "processedPerSecond":0.02,"popPerSecond":0,"popMessages":0,"avgLagMs":0,"maxLagMs":0,
            "avgEventLoopLagMs":0,"maxEventLoopLagMs":0,"dbErrors":0,"ackFailed":0,"dlqCount":0,
            "queenCpuUserPct":0,"queenCpuSysPct":0,"dbPoolActive":0,"dbPoolIdle":0,"dbPoolSize":0,
            "minFreeSlots":0,"queenRssMb":0}',
          'a bucket: pushed and completed with their rates; what pgcursor does not record is 0');
SELECT is(pg_temp.field(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}') -> 'throughput',
                        'ingested'), '[6,4,4]', 'ingested per bucket');
SELECT is(pg_temp.field(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T16:00:00Z"}') -> 'throughput',
                        'ingested'), '[10,4]', '6 hours: 5-minute buckets sum their minutes');
SELECT is(pg_temp.field(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T16:00:00Z"}') -> 'throughput',
                        'ingestedPerSecond'), '[0.03,0.01]', 'rates over 5 minutes');
SELECT is(pg_temp.field(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z","namespace":"ns63"}')
                        -> 'throughput', 'ingested'), '[4,2,4]', 'a namespace filter: its queues'' figures');
SELECT is(pg_temp.field(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z","queue":"q63b","task":""}')
                        -> 'throughput', 'ingested'), '[2,2]', 'empty values count as absent');

-- status: the other figures
SELECT FROM pgcursor.pop('{"queue":"q63","batch":2}');
SELECT is(pgcursor.status('{"namespace":"ns63"}') -> 'messages',
          '{"total":10,"pending":3,"processing":2,"completed":5,"failed":0,"deadLetter":0,
            "requests":{"push":0,"pop":0,"ack":0},"batchEfficiency":{"push":0,"pop":0,"ack":0}}',
          'messages: lifetime total and completed, pending and processing now');
SELECT is(pgcursor.status('{}') -> 'leases', '{"active":1,"partitionsWithLeases":1,"totalBatchSize":2,"totalAcked":0}',
          'leases: the live lease and its batch');
INSERT INTO pgcursor.dead_letters (partition_id, consumer_group, msg_offset, transaction_id, error, retry_count)
SELECT p.id, g, o, 'tx' || o, e, 0 FROM pgcursor.partitions p,
       (VALUES ('a', 1, 'boom'), ('a', 2, 'boom'), ('b', 1, 'bang'), ('a', 3, 'crash')) v(g, o, e)
WHERE p.queue = 'q63';
SELECT is(pgcursor.status('{"queue":"q63"}') -> 'deadLetterQueue',
          '{"totalMessages":4,"affectedPartitions":1,"topErrors":[{"error":"boom","count":2},{"error":"bang","count":1},
            {"error":"crash","count":1}]}', 'dead letters: count, partitions, top errors by count then error');
SELECT is(pgcursor.status('{"queue":"q63b"}') #> '{deadLetterQueue,totalMessages}', '0', 'filtered dead letters');
SELECT is(pgcursor.status('{"namespace":"ns63"}') -> 'queues',
          '[{"id":"q63","name":"q63","namespace":"ns63","task":"t63","partitions":1,"totalConsumed":5,
             "pending":3,"processing":2,"completed":5,"failed":0,"dlq":0}]', 'queues: the selected ones with messages');
SELECT is(pgcursor.status('{}') -> 'statsAge', to_jsonb(floor(extract(epoch FROM now() - '2026-01-01 10:07Z'::timestamptz))::int),
          'statsAge: seconds since the newest snapshot');
SELECT throws_ok($$SELECT pgcursor.status('{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}')$$,
                 '22023', 'from must not be after to', 'from after to');
SELECT throws_ok($$SELECT pgcursor.status('{"from":"2024-01-01T00:00:00Z","to":"2026-01-01T00:00:00Z"}')$$,
                 '22023', 'from..to must not span more than 366 days', 'a window of at most 366 days');
SELECT throws_ok($$SELECT pgcursor.status('{"to":"-infinity"}')$$, '22023', 'to must be a time from 1970-01-01 to 9999-01-01',
                 'no infinite window');
SELECT is(pgcursor.status('{"to":"1970-01-01T00:10:00Z"}') -> 'timeRange',
          '{"from": "1970-01-01T00:00:00.000000Z", "to": "1970-01-01T00:10:00.000000Z"}',
          'a window ending in 1970''s first hour: the default from starts with 1970');
SELECT is(pgcursor.status('{"from":"9999-01-01T00:00:00Z","to":"9999-01-01T00:00:00Z"}') -> 'timeRange' ->> 'to',
          '9999-01-01T00:00:00.000000Z', 'the last time a window may end');

-- status_queues, status_queue, status_queue_messages
SELECT is(pgcursor.status_queues('{"namespace":"ns63","limit":"5"}'),
          jsonb_build_object('queues', jsonb_build_array(jsonb_build_object(
              'id', 'q63', 'name', 'q63', 'namespace', 'ns63', 'task', 't63',
              'createdAt', pgcursor_internal.rfc3339_utc(now()), 'partitions', 1,
              'messages', '{"total":10,"pending":5,"processing":2,"completed":5}'::jsonb)),
              'pagination', '{"limit":5,"offset":0}'::jsonb),
          'status queues: pending includes the processing ones');
SELECT is(pgcursor.status_queues('{"offset":1}') #> '{pagination}', '{"limit":100,"offset":1}', 'default limit 100');
-- Newest queue first; from, to and queue are read by nothing (Queen's dashboard sends queue).
SELECT count(pgcursor.configure(jsonb_build_object('queue', q, 'namespace', 'ns63o'))) AS made
  FROM unnest(ARRAY['q63-old', 'q63-mid', 'q63-new']) q \gset
UPDATE pgcursor.queues SET created_at = now() - CASE name WHEN 'q63-old' THEN interval '2 days'
                                                          WHEN 'q63-mid' THEN interval '1 day' ELSE interval '0' END
 WHERE namespace = 'ns63o';
SELECT is(jsonb_path_query_array(pgcursor.status_queues(
              '{"namespace": "ns63o", "queue": "q63-old", "from": "nope", "to": "nope", "limit": 500}'), '$.queues[*].name'),
          '["q63-new", "q63-mid", "q63-old"]', 'status queues: newest first; from, to and queue are not read');
SELECT is(pgcursor.status_queue('q63') #> '{partitions,0,messages}',
          '{"total":10,"pending":5,"processing":2,"completed":1,"failed":0,"deadLetter":4}',
          'a partition: the slowest group''s pending, completed = total - pending - dead letters');
SELECT is((pgcursor.status_queue('q63') -> 'totals') - 'messages',
          pgcursor.status_queue('q63') #> '{totals,messages}', 'totals: the flat copies mirror messages');
SELECT is(pgcursor.status_queue('q63') #> '{queue,config}',
          '{"leaseTime":300,"retryLimit":3,"retryDelay":0,"ttl":0,"maxQueueSize":0,"deadLetterQueue":true}', 'config');
SELECT throws_ok($$SELECT pgcursor.status_queue('nope')$$, 'P0002', 'queue not found: nope', 'unknown queue');
UPDATE pgcursor.messages m SET created_at = CASE WHEN m.msg_offset <= 3 THEN '2026-01-01 10:20:30Z'::timestamptz
                                                 ELSE '2026-01-01 11:05Z' END
FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 'q63';
DELETE FROM pgcursor.dead_letters;
SELECT is((SELECT jsonb_agg(jsonb_build_array(x -> 'offset', x -> 'status'))
           FROM jsonb_array_elements(pgcursor.status_queue_messages('q63', '{"limit":"3","offset":"4"}')) x),
          '[[6,"processing"],[5,"completed"],[4,"completed"]]', 'messages: newest first, paged, queue-mode status');
SELECT is(pgcursor.status_queue_messages('nope'), '[]', 'unknown queue: []');

-- status_analytics
SELECT is(pgcursor.status_analytics('{"namespace":"ns63","from":"2026-01-01T09:30:00Z","to":"2026-01-01T11:10:00Z"}'),
          '{"dataPoints":[{"timestamp":"2026-01-01T09:00:00Z","messages":0},{"timestamp":"2026-01-01T10:00:00Z","messages":3},
            {"timestamp":"2026-01-01T11:00:00Z","messages":7}],"interval":"hour",
            "from":"2026-01-01T09:30:00.000000Z","to":"2026-01-01T11:10:00.000000Z"}',
          'messages created per hour that are still stored, zeros included, oldest first');
SELECT is(pgcursor.status_analytics('{"interval":"minute","from":"2026-01-01T10:19:59Z","to":"2026-01-01T10:21:00Z"}') -> 'dataPoints',
          '[{"timestamp":"2026-01-01T10:19:00Z","messages":0},{"timestamp":"2026-01-01T10:20:00Z","messages":3},
            {"timestamp":"2026-01-01T10:21:00Z","messages":0}]', 'per minute');
SELECT throws_ok($$SELECT pgcursor.status_analytics('{"interval":"week"}')$$, '22023',
                 'interval must be minute, hour or day', 'another interval');

-- analytics
SELECT is((SELECT jsonb_agg(jsonb_build_array(x -> 'bucket', x -> 'queueName', x -> 'pushMessages', x -> 'ackSuccess'))
           FROM jsonb_array_elements(pgcursor.analytics('queue-ops', '{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}')
                                     -> 'series') x),
          '[["2026-01-01T10:00:00Z","q63",4,1],["2026-01-01T10:00:00Z","q63b",2,0],["2026-01-01T10:01:00Z","q63",2,2],
            ["2026-01-01T10:01:00Z","q63b",2,0],["2026-01-01T10:07:00Z","q63",4,2]]',
          'queue-ops: per bucket and queue with figures, oldest first');
SELECT is(pgcursor.analytics('queue-ops', '{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z","queue":"q63b"}')
          -> 'queues', '["q63b"]', 'queue-ops: the queue filter');
SELECT is(pgcursor.analytics('queue-lag'), '[]', 'queue-lag: no gateway recorded pops');
SELECT ok(pgcursor.analytics('postgres-stats') -> 'tableSizes' @> '[{"table":"messages"}]',
          'postgres-stats: the sizes of pgcursor''s tables');
SELECT is(pgcursor.analytics('worker-metrics', '{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z"}') -> 'summary',
          '{"totalPushMessages":14,"totalPopMessages":0,"totalAckMessages":5,"totalDlqMessages":0,"pendingMessages":9}',
          'worker-metrics: the window''s totals');
SELECT throws_ok($$SELECT pgcursor.analytics('nope')$$, '22023', 'unknown analytics: nope', 'unknown analytics');

-- A queue created in the window, before any snapshot of it, counts from its creation.
SELECT pgcursor.configure('{"queue":"q63c","namespace":"ns63c"}');
SELECT FROM pgcursor.push('{"items":[{"queue":"q63c","payload":1},{"queue":"q63c","payload":2}]}');
UPDATE pgcursor.queues SET created_at = '2026-01-01 10:03:20Z' WHERE name = 'q63c';
SELECT is(pg_temp.field(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z","queue":"q63c"}')
                        -> 'throughput', 'timestamp'), '["2026-01-01T10:03:00Z"]', 'a new queue: from the minute it was created');
SELECT is((SELECT jsonb_agg(jsonb_build_array(x -> 'bucket', x -> 'pushMessages'))
           FROM jsonb_array_elements(pgcursor.analytics('queue-ops', '{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z","queue":"q63c"}')
                                     -> 'series') x),
          '[["2026-01-01T10:03:00Z",2]]', 'queue-ops: the same');
UPDATE pgcursor.queues SET created_at = '2026-01-01 09:00Z' WHERE name = 'q63c';
SELECT is(pg_temp.field(pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T10:30:00Z","queue":"q63c"}')
                        -> 'throughput', 'ingested'), '[]',
          'created before the window and never snapshotted: nothing to measure against');

-- Before the first snapshot, on a clean slate: the broker counts from zeros
-- too (its unfiltered series said nothing where a queue filter said 3), a
-- consumer group deleted since takes nothing back from a queue's early
-- buckets (its retired totals are not a deleted queue's), and a window
-- starting mid-minute has that minute (as the gateways' figures do).
DELETE FROM pgcursor.queues;
DELETE FROM pgcursor.retired_totals;
DELETE FROM pgcursor.stats_snapshots;
SELECT pgcursor.configure('{"queue":"q63z"}');
SELECT FROM pgcursor.push('{"items":[{"queue":"q63z","payload":1},{"queue":"q63z","payload":2},{"queue":"q63z","payload":3}]}');
SELECT FROM pgcursor.pop('{"queue":"q63z","consumerGroup":"g63","batch":3,"autoAck":true}');
CREATE FUNCTION pg_temp.figures(since timestamptz, names text[]) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_array(m.minute = pgcursor_internal.bucket_start(now(), 1), m.pushed, m.completed))
      FROM pgcursor_internal.minute_figures(since, now() + interval '5 minutes', names) m
$$;
SELECT is(pg_temp.figures(now() - interval '10 minutes', NULL), '[[true,3,3]]',
          'no snapshot yet: the broker counts from zeros, as the queue does');
INSERT INTO pgcursor.stats_snapshots (minute, queue, taken_at, pushed, completed, dead_lettered, discarded)
VALUES (pgcursor_internal.bucket_start(now(), 1), 'q63z', now(), 3, 3, 0, 0);
SELECT is(pg_temp.figures(now() - interval '10 minutes', NULL), '[[true,3,3]]',
          '... and once snapshotted, what came before the first snapshot still counts');
SELECT is(pg_temp.figures(now() - interval '10 minutes', ARRAY['q63z']), '[[true,3,3]]', '... as under a queue filter');
SELECT FROM pgcursor.delete_consumer_group('g63');
SELECT is(pg_temp.figures(now() - interval '10 minutes', ARRAY['q63z']), '[[true,3,3]]',
          'a deleted consumer group takes nothing back from the queue''s early buckets');
SELECT is(pg_temp.figures(pgcursor_internal.bucket_start(now(), 1) + interval '30 seconds', NULL), '[[true,3,3]]',
          'a window starting mid-minute has that minute');
-- One pop's lease over two partitions is one live lease.
SELECT FROM pgcursor.push('{"items":[{"queue":"q63w","partition":"x","payload":1},{"queue":"q63w","partition":"y","payload":2}]}');
SELECT FROM pgcursor.pop('{"queue":"q63w","consumerGroup":"h63","partitions":2,"batch":2}');
SELECT is(pgcursor.status('{"queue":"q63w"}') -> 'leases', '{"active":1,"partitionsWithLeases":2,"totalBatchSize":2,"totalAcked":0}',
          'leases: a lease over two partitions counts once, its partitions twice');

SELECT * FROM finish();
ROLLBACK;
