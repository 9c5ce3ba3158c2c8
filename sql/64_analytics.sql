-- The /api/v1/analytics/* series (docs/sql-api.md "analytics"), in Queen's
-- shapes.
--
--   SELECT pgcursor.analytics('queue-ops', '{"queue":"orders"}');
--   SELECT pgcursor.analytics('postgres-stats');
--
-- What pgcursor has per minute (sql/63_status.sql): what stats_snapshots
-- give (pushed, completed, dead-lettered, discarded per queue) and what the
-- gateways flush into gateway_minutes (requests, pops, empty pops, acked
-- items, failed acks, transactions, message age at pop, time long-polls
-- waited per queue; requests failed by the database); each gateway process
-- its own figures and samples into gateway_process_minutes and _samples.
-- queue-ops, queue-lag, worker-metrics, system-metrics and
-- queue-parked-replicas fill those, and queue-ops the partitions from
-- partitions.created_at and retention_minutes.partitions_deleted. retention
-- reads pgcursor.retention_minutes.
-- postgres-stats is a live reading of PostgreSQL's statistics views over
-- schema pgcursor.

-- queue-ops: {timeRange, bucketMinutes, series [per (bucket, queue) with
-- any figure, oldest first, then by queue], queues [their names, sorted]}.
-- Partitions: created in the bucket (of those still there: a live queue
-- loses only partitions idle for long, purge_idle_partitions), deleted in
-- it (retention_minutes, kept 24 hours), and the queue's count at its end:
-- those created by then and still there, and those deleted since.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_ops(since timestamptz, upto timestamptz, bucket_minutes integer,
                                                       names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH deletions AS (
        SELECT r.minute, pgcursor_internal.bucket_start(r.minute, bucket_minutes) AS bucket, r.queue,
               r.partitions_deleted AS deleted
        FROM pgcursor.retention_minutes r
        WHERE r.partitions_deleted > 0 AND (names IS NULL OR r.queue = ANY (names))
    ), s AS (
        SELECT pgcursor_internal.bucket_start(f.minute, bucket_minutes) AS bucket, f.queue,
               sum(f.pushed) AS pushed, sum(f.completed) AS completed, sum(f.dead_lettered) AS dead_lettered,
               sum(f.discarded) AS discarded
        FROM pgcursor_internal.queue_minute_figures(since, upto, names) f
        GROUP BY 1, 2
    ), b AS (
        SELECT bucket, queue, d.deleted, coalesce(s.pushed, 0) AS pushed, coalesce(s.completed, 0) AS completed,
               coalesce(s.dead_lettered, 0) AS dead_lettered, g.push_requests, g.pop_messages, g.pop_empty,
               g.ack_requests, g.ack_failed, g.transactions, g.age_sum_ms, g.age_max_ms, g.parked_ms
        FROM s
        FULL JOIN (SELECT * FROM pgcursor_internal.gateway_figures(since, upto, bucket_minutes, names)
                   WHERE queue IS NOT NULL) g USING (bucket, queue)
        FULL JOIN (SELECT d.bucket, d.queue, sum(d.deleted) AS deleted FROM deletions d
                    WHERE d.minute BETWEEN since AND upto GROUP BY 1, 2) d USING (bucket, queue)
        WHERE coalesce(s.pushed + s.completed + s.dead_lettered + s.discarded, 0)
              + coalesce(g.pop_requests + g.push_requests + g.ack_requests + g.transactions, 0)
              + coalesce(d.deleted, 0) > 0
    ), parts AS (
        SELECT p.queue, pgcursor_internal.bucket_start(p.created_at, bucket_minutes) AS bucket, count(*) AS created
        FROM pgcursor.partitions p
        WHERE p.created_at <= upto AND p.queue IN (SELECT b.queue FROM b)
        GROUP BY 1, 2
    )
    SELECT jsonb_build_object(
        'timeRange', pgcursor_internal.time_range(since, upto), 'bucketMinutes', bucket_minutes,
        'series', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                              'bucket', pgcursor_internal.bucket_label(b.bucket), 'queueName', b.queue,
                              'pushMessages', b.pushed, 'pushRequests', coalesce(b.push_requests, 0),
                              'popMessages', coalesce(b.pop_messages, 0), 'popEmpty', coalesce(b.pop_empty, 0),
                              'ackSuccess', b.completed, 'ackFailed', coalesce(b.ack_failed, 0),
                              'ackRequests', coalesce(b.ack_requests, 0),
                              'transactions', coalesce(b.transactions, 0), 'dlqCount', b.dead_lettered,
                              'partitionsCreated', coalesce((SELECT c.created FROM parts c
                                                             WHERE (c.queue, c.bucket) = (b.queue, b.bucket)), 0),
                              'partitionsDeleted', coalesce(b.deleted, 0),
                              'partitionCount', (SELECT coalesce(sum(c.created), 0) FROM parts c
                                                 WHERE c.queue = b.queue AND c.bucket <= b.bucket)
                                                + (SELECT coalesce(sum(d.deleted), 0) FROM deletions d
                                                   WHERE d.queue = b.queue AND d.bucket > b.bucket),
                              'avgLagMs', pgcursor_internal.average_age(b.age_sum_ms, b.pop_messages),
                              'maxLagMs', coalesce(b.age_max_ms, 0),
                              'pushPerSecond', pgcursor_internal.per_second(b.pushed, bucket_minutes),
                              'popPerSecond', pgcursor_internal.per_second(b.pop_messages, bucket_minutes),
                              'ackPerSecond', pgcursor_internal.per_second(b.completed + coalesce(b.ack_failed, 0), bucket_minutes),
                              'emptyPerSecond', pgcursor_internal.per_second(b.pop_empty, bucket_minutes),
                              'parkedCount', pgcursor_internal.parked_average(b.parked_ms, bucket_minutes))
                            ORDER BY b.bucket, b.queue), '[]'::jsonb) FROM b),
        'queues', (SELECT coalesce(jsonb_agg(DISTINCT b.queue), '[]'::jsonb) FROM b))
$$;

-- retention: per bucket with deletions, oldest first, over the queues
-- selected: messages deleted by retentionSeconds, completedRetentionSeconds
-- and maxWaitTimeSeconds eviction, their sum, and the runs that deleted
-- (pgcursor.retention_minutes); totals over the window.
CREATE OR REPLACE FUNCTION pgcursor_internal.retention_series(since timestamptz, upto timestamptz,
                                                              bucket_minutes integer, names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH b AS (
        SELECT pgcursor_internal.bucket_start(r.minute, bucket_minutes) AS bucket,
               sum(r.retention_messages)::bigint AS retention, sum(r.completed_retention_messages)::bigint AS completed,
               sum(r.eviction_messages)::bigint AS eviction, sum(r.runs)::bigint AS runs
        FROM pgcursor.retention_minutes r
        WHERE r.minute > since - interval '1 minute' AND r.minute <= upto
          AND (names IS NULL OR r.queue = ANY (names))
        GROUP BY 1
    )
    SELECT jsonb_build_object(
        'timeRange', pgcursor_internal.time_range(since, upto), 'bucketMinutes', bucket_minutes,
        'series', coalesce(jsonb_agg(jsonb_build_object(
                               'bucket', pgcursor_internal.bucket_label(b.bucket), 'retentionMsgs', b.retention,
                               'completedRetentionMsgs', b.completed, 'evictionMsgs', b.eviction,
                               'totalMsgs', b.retention + b.completed + b.eviction, 'eventCount', b.runs)
                           ORDER BY b.bucket), '[]'::jsonb),
        'totals', jsonb_build_object(
                      'retentionMsgs', coalesce(sum(b.retention), 0), 'completedRetentionMsgs', coalesce(sum(b.completed), 0),
                      'evictionMsgs', coalesce(sum(b.eviction), 0),
                      'totalMsgs', coalesce(sum(b.retention + b.completed + b.eviction), 0),
                      'eventCount', coalesce(sum(b.runs), 0)))
    FROM b
$$;

-- queue-lag: per (minute, queue) with pops, newest first (then by queue),
-- not re-bucketed: {queueName, popCount, avgLagMs, maxLagMs, bucketTime}.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_lag(since timestamptz, upto timestamptz, names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'queueName', g.queue, 'popCount', g.pop_messages,
               'avgLagMs', pgcursor_internal.average_age(g.age_sum_ms, g.pop_messages),
               'maxLagMs', g.age_max_ms, 'bucketTime', pgcursor_internal.bucket_label(g.bucket))
             ORDER BY g.bucket DESC, g.queue), '[]'::jsonb)
    FROM pgcursor_internal.gateway_figures(since, upto, 1, names) g
    WHERE g.queue IS NOT NULL AND g.pop_messages > 0
$$;

-- worker-metrics: the series of pushes, pops and acks (newest first, every
-- bucket), the gateway processes of the last 5 minutes, per-queue pops and
-- message age at pop, and totals of the window. Without host and worker
-- the series is the broker's (messages as the snapshots count them, requests
-- as every gateway did); with them, that of the selected gateway processes
-- (hostname; workerId = pid), as they counted it.
CREATE OR REPLACE FUNCTION pgcursor_internal.worker_metrics(since timestamptz, upto timestamptz,
                                                            bucket_minutes integer, host text, worker integer)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH broker AS (
        SELECT b.bucket, b.pushed, b.completed, b.dead_lettered, g.push_requests, g.pop_requests, g.pop_messages,
               g.ack_requests, g.ack_failed, g.age_sum_ms, g.age_max_ms, g.db_errors
        FROM pgcursor_internal.bucket_figures(since, upto, bucket_minutes, NULL) b
        LEFT JOIN pgcursor_internal.gateway_bucket_totals(since, upto, bucket_minutes, NULL) g
               ON g.bucket = b.bucket
        WHERE host IS NULL AND worker IS NULL
    ), chosen AS (
        SELECT b AS bucket, coalesce(sum(p.push_messages), 0)::bigint AS pushed,
               coalesce(sum(p.ack_messages - p.ack_failed), 0)::bigint AS completed,
               coalesce(sum(p.dead_lettered), 0)::bigint AS dead_lettered, sum(p.push_requests)::bigint,
               sum(p.pop_requests)::bigint, sum(p.pop_messages)::bigint, sum(p.ack_requests)::bigint,
               sum(p.ack_failed)::bigint, sum(p.age_sum_ms)::bigint, max(p.age_max_ms), sum(p.db_errors)::bigint
        FROM pgcursor_internal.bucket_series(since, upto, bucket_minutes) b
        LEFT JOIN pgcursor_internal.process_figures(since, upto, bucket_minutes, host, worker) p ON p.bucket = b
        WHERE host IS NOT NULL OR worker IS NOT NULL
        GROUP BY b
    ), pool AS (
        -- The processes' pools added up: connections open, idle (their
        -- averages, and their fewest).
        SELECT s.bucket, sum(s.avg) FILTER (WHERE s.gauge = 'database.pool_size') AS connections,
               sum(s.avg) FILTER (WHERE s.gauge = 'database.pool_idle') AS idle,
               sum(s.min) FILTER (WHERE s.gauge = 'database.pool_idle') AS idle_min
        FROM pgcursor_internal.process_sample_buckets(since, upto, bucket_minutes, host, worker) s
        GROUP BY s.bucket
    ), f AS (
        SELECT x.*, coalesce(round(pool.connections::numeric, 2)::float8, 0) AS connections,
               coalesce(round(pool.idle::numeric, 2)::float8, 0) AS idle, coalesce(pool.idle_min, 0) AS idle_min
        FROM (SELECT * FROM broker UNION ALL SELECT * FROM chosen) x
        LEFT JOIN pool ON pool.bucket = x.bucket
    )
    SELECT jsonb_build_object(
        'timeRange', pgcursor_internal.time_range(since, upto), 'bucketMinutes', bucket_minutes,
        'pointCount', (SELECT count(*) FROM f),
        'timeSeries', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                  'timestamp', pgcursor_internal.bucket_label(f.bucket),
                                  'pushPerSecond', pgcursor_internal.per_second(f.pushed, bucket_minutes),
                                  'popPerSecond', pgcursor_internal.per_second(f.pop_messages, bucket_minutes),
                                  'ackPerSecond', pgcursor_internal.per_second(f.completed, bucket_minutes),
                                  'avgLagMs', pgcursor_internal.average_age(f.age_sum_ms, f.pop_messages),
                                  'maxLagMs', coalesce(f.age_max_ms, 0), 'avgEventLoopLagMs', 0,
                                  'maxEventLoopLagMs', 0, 'avgFreeSlots', f.idle, 'minFreeSlots', f.idle_min,
                                  'dbConnections', f.connections,
                                  'avgJobQueueSize', 0, 'maxJobQueueSize', 0, 'dbErrors', coalesce(f.db_errors, 0),
                                  'ackFailed', coalesce(f.ack_failed, 0), 'dlqCount', f.dead_lettered,
                                  'pushMessages', f.pushed, 'popMessages', coalesce(f.pop_messages, 0),
                                  'ackMessages', f.completed, 'ackSuccess', f.completed,
                                  'pushRequests', coalesce(f.push_requests, 0),
                                  'popRequests', coalesce(f.pop_requests, 0),
                                  'ackRequests', coalesce(f.ack_requests, 0), 'jobsDone', 0, 'backoffSize', 0,
                                  'lagCount', coalesce(f.pop_messages, 0))
                                ORDER BY f.bucket DESC), '[]'::jsonb) FROM f),
        'workers', (SELECT coalesce(jsonb_agg(w ORDER BY w ->> 'hostname', (w ->> 'workerId')::integer), '[]'::jsonb)
                    FROM jsonb_array_elements(pgcursor_internal.process_list(interval '5 minutes')) w
                    WHERE (host IS NULL OR w ->> 'hostname' = host)
                      AND (worker IS NULL OR (w ->> 'workerId')::integer = worker)),
        'queues', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                              'queueName', q.queue, 'popCount', q.pops,
                              'avgLagMs', pgcursor_internal.average_age(q.age_sum_ms, q.pops),
                              'maxLagMs', q.age_max_ms) ORDER BY q.queue), '[]'::jsonb)
                   FROM (SELECT g.queue, sum(g.pop_messages) AS pops, sum(g.age_sum_ms) AS age_sum_ms,
                                max(g.age_max_ms) AS age_max_ms
                         FROM pgcursor_internal.gateway_figures(since, upto, bucket_minutes, NULL) g
                         WHERE g.queue IS NOT NULL GROUP BY g.queue HAVING sum(g.pop_messages) > 0) q),
        'summary', (SELECT jsonb_build_object(
                               'totalPushMessages', coalesce(sum(f.pushed), 0),
                               'totalPopMessages', coalesce(sum(f.pop_messages), 0),
                               'totalAckMessages', coalesce(sum(f.completed), 0),
                               'totalDlqMessages', coalesce(sum(f.dead_lettered), 0),
                               'pendingMessages', (SELECT coalesce(sum(s.pending + s.processing), 0)
                                                   FROM pgcursor_internal.partition_stats(NULL) s))
                    FROM f))
$$;

-- queue-parked-replicas: per (bucket, queue, gateway process) with waits,
-- oldest first, then by queue, hostname and pid: the long-polls waiting on
-- average over the bucket (parkedCount); replicas: the processes listed.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_parked_replicas(since timestamptz, upto timestamptz,
                                                                   bucket_minutes integer, names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH p AS (
        SELECT pgcursor_internal.bucket_start(w.minute, bucket_minutes) AS bucket, w.queue, w.hostname, w.pid,
               sum(w.parked_ms) AS parked_ms
        FROM pgcursor.gateway_process_parked w
        WHERE w.minute > since - interval '1 minute' AND w.minute <= upto
          AND (names IS NULL OR w.queue = ANY (names))
        GROUP BY 1, 2, 3, 4
    )
    SELECT jsonb_build_object(
        'timeRange', pgcursor_internal.time_range(since, upto), 'bucketMinutes', bucket_minutes,
        'series', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                              'bucket', pgcursor_internal.bucket_label(p.bucket), 'queueName', p.queue,
                              'hostname', p.hostname, 'workerId', p.pid,
                              'parkedCount', pgcursor_internal.parked_average(p.parked_ms, bucket_minutes))
                            ORDER BY p.bucket, p.queue, p.hostname, p.pid), '[]'::jsonb) FROM p),
        'replicas', (SELECT coalesce(jsonb_agg(jsonb_build_object('hostname', r.hostname, 'workerId', r.pid)
                                               ORDER BY r.hostname, r.pid), '[]'::jsonb)
                     FROM (SELECT DISTINCT p.hostname, p.pid FROM p) r))
$$;

-- A leaf of system-metrics: {avg, min, max, last} of one gauge's samples
-- (zeros when there are none).
CREATE OR REPLACE FUNCTION pgcursor_internal.sample_leaf(avg float8, min float8, max float8, last float8)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('avg', coalesce(avg, 0), 'min', coalesce(min, 0), 'max', coalesce(max, 0),
                              'last', coalesce(last, 0))
$$;

-- system-metrics: one replica per gateway process (hostname, port,
-- workerId = pid) with samples in the window, by hostname then pid; its
-- timeSeries, oldest first, one point per bucket with samples: sampleCount
-- and metrics {cpu {user_us, system_us} (CPU percent x 100, as Queen),
-- memory {rss_bytes, virtual_bytes}, database {pool_size, pool_idle,
-- pool_active}, threadpool and registries (Queen internals: zeros)}, each
-- leaf {avg, min, max, last}.
CREATE OR REPLACE FUNCTION pgcursor_internal.system_metrics(since timestamptz, upto timestamptz,
                                                            bucket_minutes integer, host text, worker integer)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH s AS (
        SELECT * FROM pgcursor_internal.process_sample_buckets(since, upto, bucket_minutes, host, worker)
    ), points AS (
        SELECT s.hostname, s.pid, s.bucket, max(s.samples) AS samples,
               jsonb_object_agg(s.gauge, pgcursor_internal.sample_leaf(s.avg, s.min, s.max, s.last)) AS leaf
        FROM s GROUP BY 1, 2, 3
    ), ports AS (
        SELECT DISTINCT ON (g.hostname, g.pid) g.hostname, g.pid, g.port
        FROM pgcursor.gateway_process_minutes g
        WHERE g.minute > since - interval '1 minute' AND g.minute <= upto
        ORDER BY g.hostname, g.pid, g.minute DESC
    ), zero AS (
        SELECT pgcursor_internal.sample_leaf(NULL, NULL, NULL, NULL) AS leaf
    ), replicas AS (
        SELECT p.hostname, p.pid, jsonb_agg(jsonb_build_object(
                   'timestamp', pgcursor_internal.bucket_label(p.bucket), 'sampleCount', p.samples,
                   'metrics', jsonb_build_object(
                       'cpu', jsonb_build_object('user_us', coalesce(p.leaf -> 'cpu.user_us', zero.leaf),
                                                 'system_us', coalesce(p.leaf -> 'cpu.system_us', zero.leaf)),
                       'memory', jsonb_build_object('rss_bytes', coalesce(p.leaf -> 'memory.rss_bytes', zero.leaf),
                                                    'virtual_bytes',
                                                    coalesce(p.leaf -> 'memory.virtual_bytes', zero.leaf)),
                       'database', jsonb_build_object(
                           'pool_size', coalesce(p.leaf -> 'database.pool_size', zero.leaf),
                           'pool_idle', coalesce(p.leaf -> 'database.pool_idle', zero.leaf),
                           'pool_active', coalesce(p.leaf -> 'database.pool_active', zero.leaf)),
                       'threadpool', jsonb_build_object(
                           'db', jsonb_build_object('pool_size', zero.leaf, 'queue_size', zero.leaf),
                           'system', jsonb_build_object('pool_size', zero.leaf, 'queue_size', zero.leaf)),
                       'registries', jsonb_build_object('response', zero.leaf)))
                   ORDER BY p.bucket) AS series
        FROM points p, zero
        GROUP BY p.hostname, p.pid
    )
    SELECT jsonb_build_object(
        'timeRange', pgcursor_internal.time_range(since, upto),
        'replicas', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                'hostname', r.hostname, 'port', coalesce(ports.port, 0), 'workerId', r.pid,
                                'timeSeries', r.series) ORDER BY r.hostname, r.pid), '[]'::jsonb)
                     FROM replicas r LEFT JOIN ports USING (hostname, pid)),
        'replicaCount', (SELECT count(*) FROM replicas),
        'bucketMinutes', bucket_minutes,
        'pointCount', (SELECT count(DISTINCT bucket) FROM points))
$$;

-- A cache hit ratio in percent, 2 decimals (100 when nothing was read).
CREATE OR REPLACE FUNCTION pgcursor_internal.hit_ratio(hits numeric, reads numeric)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN coalesce(hits, 0) + coalesce(reads, 0) = 0 THEN 100
                ELSE round(100 * hits / (hits + reads), 2)::float8 END
$$;

-- The cache figures of postgres-stats: database, tables, top 20 indexes,
-- summary, over schema pgcursor.
CREATE OR REPLACE FUNCTION pgcursor_internal.postgres_cache_stats()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'databaseCache', (SELECT jsonb_build_object('database', d.datname, 'diskReads', d.blks_read,
                                                    'cacheHits', d.blks_hit,
                                                    'cacheHitRatio', pgcursor_internal.hit_ratio(d.blks_hit, d.blks_read))
                          FROM pg_stat_database d WHERE d.datname = current_database()),
        'tableCache', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                  'schema', t.schemaname, 'table', t.relname, 'diskReads', t.heap_blks_read,
                                  'cacheHits', t.heap_blks_hit,
                                  'cacheHitRatio', pgcursor_internal.hit_ratio(t.heap_blks_hit, t.heap_blks_read))
                                ORDER BY coalesce(t.heap_blks_read, 0) + coalesce(t.heap_blks_hit, 0) DESC, t.relname),
                              '[]'::jsonb)
                       FROM pg_statio_user_tables t WHERE t.schemaname = 'pgcursor'),
        'indexCache', (SELECT coalesce(jsonb_agg(x.e ORDER BY x.n DESC, x.e ->> 'index'), '[]'::jsonb)
                       FROM (SELECT jsonb_build_object(
                                        'schema', i.schemaname, 'table', i.relname, 'index', i.indexrelname,
                                        'diskReads', i.idx_blks_read, 'cacheHits', i.idx_blks_hit,
                                        'cacheHitRatio', pgcursor_internal.hit_ratio(i.idx_blks_hit, i.idx_blks_read)) AS e,
                                    coalesce(i.idx_blks_read, 0) + coalesce(i.idx_blks_hit, 0) AS n
                             FROM pg_statio_user_indexes i WHERE i.schemaname = 'pgcursor'
                             ORDER BY n DESC, i.indexrelname LIMIT 20) x),
        'cacheSummary', jsonb_build_object(
            'tables', (SELECT jsonb_build_object('diskReads', coalesce(sum(t.heap_blks_read), 0),
                                                 'cacheHits', coalesce(sum(t.heap_blks_hit), 0),
                                                 'hitRatio', pgcursor_internal.hit_ratio(sum(t.heap_blks_hit),
                                                                                         sum(t.heap_blks_read)))
                       FROM pg_statio_user_tables t WHERE t.schemaname = 'pgcursor'),
            'indexes', (SELECT jsonb_build_object('diskReads', coalesce(sum(i.idx_blks_read), 0),
                                                  'cacheHits', coalesce(sum(i.idx_blks_hit), 0),
                                                  'hitRatio', pgcursor_internal.hit_ratio(sum(i.idx_blks_hit),
                                                                                          sum(i.idx_blks_read)))
                        FROM pg_statio_user_indexes i WHERE i.schemaname = 'pgcursor')))
$$;

-- The table figures of postgres-stats: dead tuples, HOT updates,
-- autovacuum, sizes, over schema pgcursor.
CREATE OR REPLACE FUNCTION pgcursor_internal.postgres_table_stats()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH t AS (SELECT * FROM pg_stat_user_tables s WHERE s.schemaname = 'pgcursor')
    SELECT jsonb_build_object(
        'deadTuples', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                  'schema', x.schemaname, 'table', x.relname, 'deadTuples', x.n_dead_tup,
                                  'liveTuples', x.n_live_tup,
                                  'deadPercentage', round(100.0 * x.n_dead_tup
                                                          / greatest(x.n_dead_tup + x.n_live_tup, 1), 2)::float8,
                                  'lastVacuum', pgcursor_internal.rfc3339_utc(x.last_vacuum),
                                  'lastAutovacuum', pgcursor_internal.rfc3339_utc(x.last_autovacuum))
                                ORDER BY x.n_dead_tup DESC, x.relname), '[]'::jsonb)
                       FROM (SELECT * FROM t WHERE t.n_dead_tup > 0 ORDER BY t.n_dead_tup DESC, t.relname LIMIT 15) x),
        'hotUpdates', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                  'schema', x.schemaname, 'table', x.relname, 'totalUpdates', x.n_tup_upd,
                                  'hotUpdates', x.n_tup_hot_upd,
                                  'hotUpdatePercentage', round(100.0 * x.n_tup_hot_upd
                                                               / greatest(x.n_tup_upd, 1), 2)::float8)
                                ORDER BY x.n_tup_upd DESC, x.relname), '[]'::jsonb)
                       FROM (SELECT * FROM t ORDER BY t.n_tup_upd DESC, t.relname LIMIT 15) x),
        'autovacuumStatus', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                        'table', x.relname,
                                        'lastAutovacuum', pgcursor_internal.rfc3339_utc(x.last_autovacuum),
                                        'deadTuples', x.n_dead_tup, 'autovacuumCount', x.autovacuum_count,
                                        'autoanalyzeCount', x.autoanalyze_count)
                                      ORDER BY x.n_dead_tup DESC, x.relname), '[]'::jsonb)
                             FROM (SELECT * FROM t WHERE t.n_dead_tup > 1000
                                   ORDER BY t.n_dead_tup DESC, t.relname LIMIT 10) x),
        'tableSizes', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                  'table', x.relname, 'totalSize', pg_size_pretty(x.total),
                                  'totalSizeBytes', x.total, 'tableSize', pg_size_pretty(x.heap),
                                  'tableSizeBytes', x.heap, 'indexSize', pg_size_pretty(x.idx),
                                  'indexSizeBytes', x.idx)
                                ORDER BY x.total DESC, x.relname), '[]'::jsonb)
                       FROM (SELECT t.relname, pg_total_relation_size(t.relid) AS total,
                                    pg_relation_size(t.relid) AS heap, pg_indexes_size(t.relid) AS idx
                             FROM t ORDER BY 2 DESC, t.relname LIMIT 20) x))
$$;

-- postgres-stats: a reading of PostgreSQL's statistics over schema pgcursor.
-- bufferUsage is [] (it needs pg_buffercache).
CREATE OR REPLACE FUNCTION pgcursor_internal.postgres_stats()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'timestamp', pgcursor_internal.rfc3339_utc(now()), 'database', current_database(),
        'activeQueries', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                     'pid', a.pid,
                                     'duration', round(extract(epoch FROM clock_timestamp() - a.query_start), 3)::float8,
                                     'state', a.state, 'query', left(a.query, 200),
                                     'waitEventType', a.wait_event_type, 'waitEvent', a.wait_event)
                                   ORDER BY a.query_start), '[]'::jsonb)
                          FROM (SELECT * FROM pg_stat_activity s
                                WHERE s.state IS DISTINCT FROM 'idle' AND s.pid <> pg_backend_pid()
                                  AND s.backend_type = 'client backend'
                                  AND s.query_start < clock_timestamp() - interval '1 second'
                                ORDER BY s.query_start LIMIT 10) a),
        'bufferConfig', (SELECT jsonb_build_object('sharedBuffers', s.setting,
                                                   'sharedBuffersSize', pg_size_pretty(s.setting::bigint
                                                                                       * 8192))
                         FROM pg_settings s WHERE s.name = 'shared_buffers'),
        'bufferUsage', '[]'::jsonb)
        || pgcursor_internal.postgres_cache_stats() || pgcursor_internal.postgres_table_stats()
$$;

-- analytics: one of the /api/v1/analytics/* answers by its route's
-- name: queue-ops, queue-lag, retention, system-metrics, worker-metrics,
-- queue-parked-replicas, postgres-stats. req: from, to (default the last
-- hour), queue (queue-ops, queue-lag, retention, queue-parked-replicas),
-- hostname and workerId (a gateway's process id: system-metrics,
-- worker-metrics); values may be strings, empty = absent. Another name ->
-- 22023.
CREATE OR REPLACE FUNCTION pgcursor.analytics(kind text, req jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    given jsonb := pgcursor_internal.without_empty_values(req);
    w     record := pgcursor_internal.time_window(given, interval '1 hour');
    names text[] := pgcursor_internal.selected_queues(
                        jsonb_build_object('queue', pgcursor_internal.optional_text(given, 'queue')));
    host  text := pgcursor_internal.optional_text(given, 'hostname');
    worker integer := pgcursor_internal.integer_arg(given, 'workerId', 1, 2147483647, 'workerId',
                                                    'a process id (a positive integer)');
BEGIN
    CASE kind
    WHEN 'queue-ops' THEN
        RETURN pgcursor_internal.queue_ops(w.since, w.upto, w.bucket_minutes, names);
    WHEN 'queue-lag' THEN
        RETURN pgcursor_internal.queue_lag(w.since, w.upto, names);
    WHEN 'retention' THEN
        RETURN pgcursor_internal.retention_series(w.since, w.upto, w.bucket_minutes, names);
    WHEN 'system-metrics' THEN
        RETURN pgcursor_internal.system_metrics(w.since, w.upto, w.bucket_minutes, host, worker);
    WHEN 'worker-metrics' THEN
        RETURN pgcursor_internal.worker_metrics(w.since, w.upto, w.bucket_minutes, host, worker);
    WHEN 'queue-parked-replicas' THEN
        RETURN pgcursor_internal.queue_parked_replicas(w.since, w.upto, w.bucket_minutes, names);
    WHEN 'postgres-stats' THEN
        RETURN pgcursor_internal.postgres_stats();
    ELSE
        RAISE EXCEPTION 'unknown analytics: %', kind USING ERRCODE = '22023';
    END CASE;
END $$;
