-- Each gateway process's per-minute figures and samples:
-- record_process_minutes adds figures and replaces samples per (minute,
-- process), keeps 24 hours and refuses bad input whole; system-metrics,
-- worker-metrics and /status read them.
BEGIN;
SELECT plan(41);

DELETE FROM pgcursor.gateway_process_minutes;
DELETE FROM pgcursor.gateway_process_samples;
DELETE FROM pgcursor.gateway_process_parked;

-- Minutes as unix seconds: m2 two minutes ago (its 5th second), m1 one.
SELECT extract(epoch FROM date_trunc('minute', now()) - interval '2 minutes')::bigint + 5 AS m2,
       extract(epoch FROM date_trunc('minute', now()) - interval '1 minute')::bigint AS m1,
       date_trunc('minute', now()) - interval '2 minutes' AS t2,
       date_trunc('minute', now()) - interval '1 minute' AS t1 \gset
CREATE FUNCTION pg_temp.leaf(n int, avg float8, min float8, max float8, last float8) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('samples', n, 'avg', avg, 'min', min, 'max', max, 'last', last)
$$;
CREATE FUNCTION pg_temp.figures(host text, pid int) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s:%s/%s/%s/%s/%s/%s', to_char(g.minute AT TIME ZONE 'UTC', 'HH24:MI'), g.port,
                             g.pop_requests, g.pop_messages, g.age_max_ms, g.db_errors, g.dead_lettered),
                      ' ' ORDER BY g.minute)
    FROM pgcursor.gateway_process_minutes g WHERE g.hostname = host AND g.pid = pid
$$;
CREATE FUNCTION pg_temp.sampled(host text, pid int, g text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s/%s/%s/%s/%s', s.samples, s.avg, s.min, s.max, s.last), ' ' ORDER BY s.minute)
    FROM pgcursor.gateway_process_samples s WHERE s.hostname = host AND s.pid = pid AND s.gauge = g
$$;

-- Process a (h1, 101): two minutes; process b (h2, 202): one.
SELECT is(pgcursor.record_process_minutes('{"hostname": "h1", "pid": 101, "port": 6632}', format(
              '[{"minute": %s, "popRequests": 2, "popMessages": 10, "ageMaxMs": 40, "deadLettered": 1,
                 "samples": {"cpu.user_us": %s, "database.pool_size": %s, "database.pool_idle": %s,
                             "memory.rss_bytes": %s}},
                {"minute": %s, "popMessages": 4, "dbErrors": 1,
                 "samples": {"cpu.user_us": %s, "database.pool_size": %s, "database.pool_idle": %s}}]',
              :m2, pg_temp.leaf(2, 1500, 1000, 2000, 2000), pg_temp.leaf(2, 4, 4, 4, 4), pg_temp.leaf(2, 3, 2, 4, 2),
              pg_temp.leaf(2, 20971520, 10485760, 31457280, 31457280),
              :m1, pg_temp.leaf(1, 500, 500, 500, 500), pg_temp.leaf(1, 8, 8, 8, 8), pg_temp.leaf(1, 6, 6, 6, 6))::jsonb),
          '{"rows": 2, "samples": 7, "purged": 0}', 'a row per minute, a sample row per gauge');
-- The next flush of a: more figures for m1, and m1's samples so far, whole.
SELECT pgcursor.record_process_minutes('{"hostname": "h1", "pid": "101", "port": "6633"}', format(
           '[{"minute": %s, "popRequests": 1, "popMessages": 1, "ageMaxMs": 90, "deadLettered": 2,
              "samples": {"cpu.user_us": %s}, "parked": {"q1": 30000, "q2": 6000}}]',
           :m1, pg_temp.leaf(3, 300, 100, 500, 100))::jsonb);
SELECT pgcursor.record_process_minutes('{"hostname": "h1", "pid": 101, "port": 6633}',
                                       format('[{"minute": %s, "parked": {"q1": "15000"}}]', :m1)::jsonb);
SELECT is((SELECT string_agg(w.queue || ':' || w.parked_ms, ' ' ORDER BY w.queue) FROM pgcursor.gateway_process_parked w
            WHERE (w.hostname, w.pid, w.minute) = ('h1', 101, :'t1')), 'q1:45000 q2:6000',
          'long-poll waits add up per (minute, queue)');
SELECT is(pg_temp.figures('h1', 101),
          to_char(:'t2'::timestamptz AT TIME ZONE 'UTC', 'HH24:MI') || ':6632/2/10/40/0/1 '
          || to_char(:'t1'::timestamptz AT TIME ZONE 'UTC', 'HH24:MI') || ':6633/1/5/90/1/2',
          'figures add up per minute (the larger maximum stays), the newest port is kept, digit strings count');
SELECT is(pg_temp.sampled('h1', 101, 'cpu.user_us'), '2/1500/1000/2000/2000 3/300/100/500/100',
          'samples are replaced by the minute''s newer ones');
SELECT is(pg_temp.sampled('h1', 101, 'database.pool_size'), '2/4/4/4/4 1/8/8/8/8',
          'a gauge a flush does not name keeps its samples');
SELECT pgcursor.record_process_minutes('{"hostname": "h2", "pid": 202, "port": 7000}', format(
           '[{"minute": %s, "popRequests": 1, "popMessages": 3,
              "samples": {"cpu.user_us": %s, "cpu.system_us": %s, "database.pool_size": %s,
                          "database.pool_idle": %s}}]',
           :m1, pg_temp.leaf(1, 2500, 2500, 2500, 2500), pg_temp.leaf(1, 700, 700, 700, 700),
           pg_temp.leaf(1, 2, 2, 2, 2), pg_temp.leaf(1, 1, 1, 1, 1))::jsonb);

-- Bad input: 22023 naming the field, nothing written.
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('[]', '[]')$$, '22023', 'gateway must be an object',
                 'gateway not an object');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"pid": 1, "port": 1}', '[]')$$, '22023',
                 'gateway.hostname must be a non-empty string', 'no hostname');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 0, "port": 1}', '[]')$$, '22023',
                 'gateway.pid must be a positive integer', 'a pid of 0');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 70000}', '[]')$$,
                 '22023', 'gateway.port must be at most 65535', 'a port past 65535');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                       '[{"minute": 60, "parked": {"q": 9223372036854775807}}]')$$,
                 '22023', 'rows[0].parked.q must be at most 1000000000000', 'a wait no minute holds');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}', '[]',
                                                          interval '1000000 years')$$,
                 '22023', 'keep must be an interval above 0 and at most 100 years', 'a keep past the calendar');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}', '{}')$$,
                 '22023', 'rows must be an array', 'rows not an array');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                                                          '[{"minute": 60, "popMessages": -1}]')$$,
                 '22023', 'rows[0].popMessages must be a non-negative integer', 'a negative figure');
SELECT throws_ok(format($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                                                                 '[{"minute": %s}, {"minute": %s}]')$$, :m1, :m1),
                 '22023', 'rows name a minute twice', 'a minute twice');
SELECT throws_ok(format($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                           '[{"minute": %s, "popMessages": 5}, {"minute": %s, "samples": {"cpu": {}}}]')$$, :m2, :m1),
                 '22023', 'rows[1].samples.cpu is not a gauge: cpu.user_us, cpu.system_us, memory.rss_bytes, '
                          'memory.virtual_bytes, database.pool_size, database.pool_idle, database.pool_active',
                 'an unknown gauge refuses the whole call');
SELECT throws_ok(format($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                           '[{"minute": %s, "samples": {"cpu.user_us": {"samples": 0, "avg": 1, "min": 1, "max": 1,
                                                                        "last": 1}}}]')$$, :m1),
                 '22023', 'rows[0].samples.cpu.user_us.samples must be a positive integer', 'no samples');
SELECT throws_ok(format($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                           '[{"minute": %s, "samples": {"cpu.user_us": {"samples": 1, "avg": 5, "min": 6, "max": 7,
                                                                        "last": 6}}}]')$$, :m1),
                 '22023', 'rows[0].samples.cpu.user_us: min <= avg, last <= max does not hold', 'an average below min');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                                                          '[{"minute": 60, "samples": [1]}]')$$,
                 '22023', 'rows[0].samples must be an object', 'samples not an object');
SELECT throws_ok($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                                                          '[{"minute": 60, "parked": "q1"}]')$$,
                 '22023', 'rows[0].parked must be an object', 'parked not an object');
SELECT throws_ok(format($$SELECT pgcursor.record_process_minutes('{"hostname": "h", "pid": 1, "port": 1}',
                           '[{"minute": %s, "popMessages": 1, "parked": {"q1": -5}}]')$$, :m1),
                 '22023', 'rows[0].parked.q1 must be a non-negative integer', 'a negative wait');
SELECT is((SELECT count(*) FROM pgcursor.gateway_process_minutes WHERE hostname = 'h'), 0::bigint,
          'nothing of a refused call is written');

-- Retention: 24 hours by default, both tables.
SELECT is(pgcursor.record_process_minutes('{"hostname": "h1", "pid": 101, "port": 6632}',
                                          format('[{"minute": %s, "popMessages": 1}]',
                                                 extract(epoch FROM now() - interval '25 hours')::bigint)::jsonb),
          '{"rows": 0, "samples": 0, "purged": 0}', 'a minute older than keep is not written');
INSERT INTO pgcursor.gateway_process_minutes (minute, hostname, pid, port) VALUES (now() - interval '2 days', 'h1', 101, 1);
INSERT INTO pgcursor.gateway_process_samples VALUES (now() - interval '2 days', 'h1', 101, 'cpu.user_us', 1, 1, 1, 1, 1);
SELECT is(pgcursor.record_process_minutes('{"hostname": "h9", "pid": 9, "port": 1}', '[]') -> 'purged', '1',
          'stored minutes older than keep are deleted, every process''s');
SELECT is((SELECT count(*) FROM pgcursor.gateway_process_samples WHERE minute < now() - interval '1 day'), 0::bigint,
          'and their samples');

-- system-metrics: a replica per process, a point per bucket with samples.
SELECT pgcursor.analytics('system-metrics') AS sm \gset
SELECT is(jsonb_build_array(:'sm'::jsonb -> 'replicaCount', :'sm'::jsonb -> 'pointCount',
                            jsonb_path_query_array(:'sm'::jsonb, '$.replicas[*].hostname'),
                            jsonb_path_query_array(:'sm'::jsonb, '$.replicas[*].workerId'),
                            jsonb_path_query_array(:'sm'::jsonb, '$.replicas[*].port')),
          '[2, 2, ["h1", "h2"], [101, 202], [6633, 7000]]',
          'system-metrics: one replica per process (workerId its pid, port its newest), two buckets');
CREATE FUNCTION pg_temp.point(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(p -> 'sampleCount', p #> '{metrics,cpu,user_us}', p #> '{metrics,cpu,system_us}',
                             p #> '{metrics,memory,rss_bytes}', p #> '{metrics,database,pool_size}',
                             p #> '{metrics,database,pool_idle}')
$$;
SELECT is((SELECT jsonb_agg(jsonb_build_array(p -> 'timestamp') || pg_temp.point(p) ORDER BY n)
           FROM jsonb_array_elements(:'sm'::jsonb #> '{replicas,0,timeSeries}') WITH ORDINALITY x(p, n)),
          jsonb_build_array(
              jsonb_build_array(pgcursor_internal.bucket_label(:'t2'), 2,
                                '{"avg": 1500, "min": 1000, "max": 2000, "last": 2000}'::jsonb,
                                '{"avg": 0, "min": 0, "max": 0, "last": 0}'::jsonb,
                                '{"avg": 20971520, "min": 10485760, "max": 31457280, "last": 31457280}'::jsonb,
                                '{"avg": 4, "min": 4, "max": 4, "last": 4}'::jsonb,
                                '{"avg": 3, "min": 2, "max": 4, "last": 2}'::jsonb),
              jsonb_build_array(pgcursor_internal.bucket_label(:'t1'), 3,
                                '{"avg": 300, "min": 100, "max": 500, "last": 100}'::jsonb,
                                '{"avg": 0, "min": 0, "max": 0, "last": 0}'::jsonb,
                                '{"avg": 0, "min": 0, "max": 0, "last": 0}'::jsonb,
                                '{"avg": 8, "min": 8, "max": 8, "last": 8}'::jsonb,
                                '{"avg": 6, "min": 6, "max": 6, "last": 6}'::jsonb)),
          'a replica''s points, oldest first: each gauge''s {avg, min, max, last}, zeros where nothing is sampled');
SELECT is((SELECT jsonb_agg(DISTINCT l.value)
           FROM (SELECT jsonb_path_query(:'sm'::jsonb, '$.replicas[*].timeSeries[*].metrics.threadpool.*.*')
                 UNION ALL
                 SELECT jsonb_path_query(:'sm'::jsonb, '$.replicas[*].timeSeries[*].metrics.registries.*')) l(value)),
          '[{"avg": 0, "min": 0, "max": 0, "last": 0}]', 'Queen''s threadpool and registries leaves are zeros');
SELECT is(jsonb_path_query_array(:'sm'::jsonb, '$.replicas[0].timeSeries[*].metrics.keyvalue().key'),
          '["cpu", "memory", "database", "registries", "threadpool", "cpu", "memory", "database", "registries",
            "threadpool"]'::jsonb,
          'every point has Queen''s five groups of metrics');
SELECT is(pgcursor.analytics('system-metrics', '{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T10:00:00Z"}')
              - 'timeRange',
          '{"replicas": [], "replicaCount": 0, "bucketMinutes": 15, "pointCount": 0}',
          'no replica in a window without samples');
SELECT pgcursor.analytics('system-metrics', format('{"from": "%s"}', now() - interval '61 minutes')::jsonb) AS sm5 \gset
SELECT is(jsonb_build_array(:'sm5'::jsonb -> 'bucketMinutes',
                            (SELECT sum((p ->> 'sampleCount')::int) FROM jsonb_array_elements(:'sm5'::jsonb
                                                                                             #> '{replicas,0,timeSeries}') p)),
          '[5, 5]', 'a window of 61 minutes: buckets of 5, the same samples in them');
SELECT is(jsonb_path_query_array(pgcursor.analytics('system-metrics', '{"hostname": "h2"}'), '$.replicas[*].workerId'),
          '[202]', 'system-metrics: hostname filters');
SELECT is(jsonb_path_query_array(pgcursor.analytics('system-metrics', '{"workerId": "101"}'),
                                 '$.replicas[*].hostname'), '["h1"]', 'system-metrics: workerId filters');
SELECT throws_ok($$SELECT pgcursor.analytics('system-metrics', '{"workerId": "x"}')$$, '22023',
                 'workerId must be a process id (a positive integer)', 'a bad workerId');

-- worker-metrics and /status: the processes, their figures and samples.
SELECT is(pgcursor.analytics('worker-metrics') -> 'workers',
          ('[{"hostname": "h1", "workerId": 101, "avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0, "freeSlots": 6,
             "dbConnections": 8, "jobQueueSize": 0, "backoffSize": 0, "messagesProcessed": 15,
             "lastSeen": "' || pgcursor_internal.bucket_label(:'t1') || '"},
            {"hostname": "h2", "workerId": 202, "avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0, "freeSlots": 1,
             "dbConnections": 2, "jobQueueSize": 0, "backoffSize": 0, "messagesProcessed": 3,
             "lastSeen": "' || pgcursor_internal.bucket_label(:'t1') || '"}]')::jsonb,
          'worker-metrics workers: each process''s newest pool sample, messages popped in 5 minutes');
SELECT is((SELECT jsonb_agg(jsonb_build_array(x -> 'popMessages', x -> 'dlqCount', x -> 'dbErrors', x -> 'maxLagMs',
                                              x -> 'dbConnections', x -> 'avgFreeSlots', x -> 'minFreeSlots')
                            ORDER BY x ->> 'timestamp')
           FROM jsonb_array_elements(pgcursor.analytics('worker-metrics', '{"workerId": 101}') -> 'timeSeries') x
           WHERE x ->> 'timestamp' >= pgcursor_internal.bucket_label(:'t2')
             AND x ->> 'timestamp' <= pgcursor_internal.bucket_label(:'t1')),
          '[[10, 1, 0, 40, 4, 3, 2], [5, 2, 1, 90, 8, 6, 6]]',
          'worker-metrics of one process: its own pops, dead letters, database errors and pool (open, idle on '
          'average and at fewest), per bucket');
SELECT is((SELECT jsonb_build_array(x -> 'dbConnections', x -> 'avgFreeSlots', x -> 'minFreeSlots')
           FROM jsonb_array_elements(pgcursor.analytics('worker-metrics') -> 'timeSeries') x
           WHERE x ->> 'timestamp' = pgcursor_internal.bucket_label(:'t1')), '[10, 7, 7]',
          'worker-metrics of the broker: the processes'' pools added up');
SELECT is((SELECT jsonb_build_array(x -> 'queenCpuUserPct', x -> 'queenCpuSysPct', x -> 'dbPoolSize',
                                    x -> 'dbPoolIdle', x -> 'queenRssMb', x -> 'minFreeSlots')
           FROM jsonb_array_elements(pgcursor.status('{"queue": "nothing-here"}') -> 'throughput') x
           WHERE x ->> 'timestamp' = pgcursor_internal.bucket_label(:'t1')),
          '[8.5, 7, 5, 3.5, 0, 1]',
          'status throughput: CPU percent, pool and memory averaged over every process''s samples, '
          'whatever the queue filter; minFreeSlots the fewest idle connections any process had');
SELECT is(jsonb_path_query_array(pgcursor.status() -> 'workers', '$[*].workerId'), '[101, 202]',
          'status workers: the processes of the last 2 minutes');

-- queue-parked-replicas: per (bucket, queue, process), waits averaged over the bucket.
SELECT pgcursor.record_process_minutes('{"hostname": "h2", "pid": 202, "port": 7000}',
                                       format('[{"minute": %s, "parked": {"q1": 60000}}]', :m1)::jsonb);
SELECT is(pgcursor.analytics('queue-parked-replicas') - 'timeRange',
          jsonb_build_object('bucketMinutes', 1, 'series', jsonb_build_array(
              jsonb_build_object('bucket', pgcursor_internal.bucket_label(:'t1'), 'queueName', 'q1', 'hostname', 'h1',
                                 'workerId', 101, 'parkedCount', 0.75),
              jsonb_build_object('bucket', pgcursor_internal.bucket_label(:'t1'), 'queueName', 'q1', 'hostname', 'h2',
                                 'workerId', 202, 'parkedCount', 1),
              jsonb_build_object('bucket', pgcursor_internal.bucket_label(:'t1'), 'queueName', 'q2', 'hostname', 'h1',
                                 'workerId', 101, 'parkedCount', 0.1)),
              'replicas', '[{"hostname": "h1", "workerId": 101}, {"hostname": "h2", "workerId": 202}]'::jsonb),
          'queue-parked-replicas: long-polls waiting on average, per bucket, queue and process');
SELECT is(jsonb_path_query_array(pgcursor.analytics('queue-parked-replicas', '{"queue": "q2"}'), '$.series[*].queueName'),
          '["q2"]', 'queue-parked-replicas: queue filters');
SELECT is((pgcursor.metrics_snapshot() #> '{processMinutes,0}') - 'ageSeconds',
          '{"hostname": "h1", "pid": 101, "pushRequests": 0, "popRequests": 1, "ackRequests": 0, "transactions": 0,
            "pushMessages": 0, "popMessages": 5, "ackMessages": 0, "ackSuccess": 0, "ackFailed": 0, "lagAvgMs": 0,
            "lagMaxMs": 90, "dbErrors": 1, "deadLettered": 2, "dbConnections": 8, "freeSlotsAvg": 6,
            "freeSlotsMin": 6}',
          'metrics_snapshot processMinutes: each process''s newest minute with its pool samples');

SELECT * FROM finish();
ROLLBACK;
