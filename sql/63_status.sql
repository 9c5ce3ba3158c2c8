-- Status and analytics (docs/sql-api.md "Status and analytics"): the
-- dashboard's overview with its throughput series, the status queue list,
-- queue detail and message list, the message-count analytics and the
-- /analytics/* series.
--
--   SELECT pgcursor.status('{"from":"2026-01-01T10:00:00Z","to":"2026-01-01T11:00:00Z"}');
--   SELECT pgcursor.status_queues('{"namespace":"shop"}');
--   SELECT pgcursor.status_queue('orders');
--   SELECT pgcursor.status_queue_messages('orders', '{"limit":"50"}');
--   SELECT pgcursor.status_analytics('{"interval":"hour"}');
--   SELECT pgcursor.analytics('queue-ops', '{"queue":"orders"}');
--
-- The per-minute figures come from two tables. pgcursor.stats_snapshots
-- (lifetime totals per queue and minute, written by housekeeping): the
-- difference of two consecutive snapshots is what was pushed, completed,
-- dead-lettered and discarded between them. pgcursor.gateway_minutes (what
-- only the gateways see, flushed by each: requests, pops, empty pops, failed
-- acks, transactions, message age at pop; sql/67_gateway_minutes.sql).
-- Nothing is written on the push/pop/ack path. Figures nobody records (event
-- loop, process samples, parked long-polls) are 0 or [] (docs/sql-api.md
-- "Status and analytics").

-- The window's bucket size in minutes: <= 60 min -> 1, <= 6 h -> 5,
-- <= 24 h -> 15, <= 7 d -> 60, longer -> 360.
CREATE OR REPLACE FUNCTION pgcursor_internal.bucket_minutes(since timestamptz, upto timestamptz)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN upto - since <= interval '60 minutes' THEN 1
                WHEN upto - since <= interval '6 hours' THEN 5
                WHEN upto - since <= interval '24 hours' THEN 15
                WHEN upto - since <= interval '7 days' THEN 60
                ELSE 360 END
$$;

-- The bucket a time falls in, by its start: the time truncated to the
-- minute (UTC), less its minute-of-hour modulo bucket_minutes. So 360-minute
-- buckets start on every hour, as in Queen.
CREATE OR REPLACE FUNCTION pgcursor_internal.bucket_start(ts timestamptz, bucket_minutes integer)
RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT (date_trunc('minute', ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
           - make_interval(mins => extract(minute FROM ts AT TIME ZONE 'UTC')::integer % bucket_minutes)
$$;

-- Every bucket start of a window, oldest first: from the bucket of `since`
-- to `upto`, a bucket (at most an hour: see bucket_start) apart.
CREATE OR REPLACE FUNCTION pgcursor_internal.bucket_series(since timestamptz, upto timestamptz, bucket_minutes integer)
RETURNS SETOF timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT generate_series(pgcursor_internal.bucket_start(since, bucket_minutes), upto,
                           make_interval(mins => least(bucket_minutes, 60)))
$$;

-- A series label: RFC 3339 UTC to the second, one format for every bucket
-- (the dashboard sorts the labels as strings).
CREATE OR REPLACE FUNCTION pgcursor_internal.bucket_label(ts timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- A count per second over a bucket: n / (bucket_minutes * 60), 2 decimals.
CREATE OR REPLACE FUNCTION pgcursor_internal.per_second(n numeric, bucket_minutes integer)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT round(coalesce(n, 0) / (bucket_minutes * 60), 2)::float8
$$;

-- Long-polls waiting, on average over a bucket, from the ms they waited in
-- it (gateway_minutes.parked_ms), 2 decimals.
CREATE OR REPLACE FUNCTION pgcursor_internal.parked_average(parked_ms numeric, bucket_minutes integer)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT round(coalesce(parked_ms, 0) / (bucket_minutes * 60000), 2)::float8
$$;

-- The window of a request: from (default to - default_span), to (default
-- now), both in the years 1970 to 9999, from not after to, at most 366 days
-- long; and its bucket size.
CREATE OR REPLACE FUNCTION pgcursor_internal.time_window(
    req jsonb, default_span interval,
    OUT since timestamptz, OUT upto timestamptz, OUT bucket_minutes integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    upto := coalesce(pgcursor_internal.timestamp_arg(req, 'to', '1970-01-01Z', '9999-01-01Z'), now());
    -- (a default from starts no earlier than to may)
    since := coalesce(pgcursor_internal.timestamp_arg(req, 'from', '1970-01-01Z', '9999-01-01Z'),
                      greatest(upto - default_span, '1970-01-01Z'));
    IF since > upto THEN
        RAISE EXCEPTION 'from must not be after to' USING ERRCODE = '22023';
    END IF;
    IF upto - since > interval '366 days' THEN
        RAISE EXCEPTION 'from..to must not span more than 366 days' USING ERRCODE = '22023';
    END IF;
    bucket_minutes := pgcursor_internal.bucket_minutes(since, upto);
END $$;

-- {from, to} of a window as the answers show it.
CREATE OR REPLACE FUNCTION pgcursor_internal.time_range(since timestamptz, upto timestamptz)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('from', pgcursor_internal.rfc3339_utc(since), 'to', pgcursor_internal.rfc3339_utc(upto))
$$;

-- The queues a queue/namespace/task filter selects, or NULL without one
-- (every queue, deleted ones included). A queue filter alone names the
-- queue even when it no longer exists (its snapshots keep its name).
CREATE OR REPLACE FUNCTION pgcursor_internal.selected_queues(req jsonb)
RETURNS text[] LANGUAGE plpgsql STABLE AS $$
DECLARE
    qname text := pgcursor_internal.optional_text(req, 'queue');
    ns    text := pgcursor_internal.optional_text(req, 'namespace');
    tk    text := pgcursor_internal.optional_text(req, 'task');
BEGIN
    IF qname IS NULL AND ns IS NULL AND tk IS NULL THEN
        RETURN NULL;
    ELSIF ns IS NULL AND tk IS NULL THEN
        RETURN ARRAY[qname];
    END IF;
    RETURN ARRAY(SELECT q.name FROM pgcursor.queues q
                  WHERE (qname IS NULL OR q.name = qname) AND (ns IS NULL OR q.namespace = ns)
                    AND (tk IS NULL OR q.task = tk));
END $$;

-- Per (snapshot minute, queue) in the minutes that overlap [since, upto]
-- (as gateway_figures: the minute of `since` is the first), over the
-- selected queues (names NULL: every existing queue), what the queue did
-- until its next snapshot (or its live totals, for the newest). A queue
-- created in reach, with no earlier life under its name (no snapshot before
-- its creation, no totals a deleted queue of that name left: a deleted
-- group's totals, retired on partitions that still exist, are not one),
-- starts from zeros at the minute of its creation, so what it did before
-- its first snapshot counts there; otherwise its first snapshot in reach is
-- only a base.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_minute_figures(since timestamptz, upto timestamptz, names text[])
RETURNS TABLE (minute timestamptz, queue text, pushed bigint, completed bigint, dead_lettered bigint,
               discarded bigint)
LANGUAGE sql STABLE AS $$
    WITH first AS (
        SELECT pgcursor_internal.bucket_start(since, 1) AS minute
    ), reach AS (
        SELECT coalesce((SELECT max(x.minute) FROM pgcursor.stats_snapshots x WHERE x.minute < first.minute),
                        first.minute) AS low
        FROM first
    ), points AS (
        SELECT s.minute, 1 AS kind, s.queue, s.pushed, s.completed, s.dead_lettered, s.discarded
        FROM pgcursor.stats_snapshots s, reach
        WHERE s.minute >= reach.low AND s.queue IS NOT NULL AND (names IS NULL OR s.queue = ANY (names))
        UNION ALL
        SELECT pgcursor_internal.bucket_start(q.created_at, 1), 0, q.name, 0, 0, 0, 0
        FROM pgcursor.queues q, reach
        WHERE q.created_at >= reach.low AND (names IS NULL OR q.name = ANY (names))
          AND NOT EXISTS (SELECT 1 FROM pgcursor.stats_snapshots s WHERE s.queue = q.name AND s.taken_at < q.created_at)
          AND NOT EXISTS (SELECT 1 FROM pgcursor.retired_totals r
                           WHERE r.queue = q.name
                             AND NOT EXISTS (SELECT 1 FROM pgcursor.partitions p WHERE p.id = r.partition_id))
        UNION ALL
        SELECT 'infinity', 2, t.queue, t.pushed, t.completed, t.dead_lettered, t.discarded
        FROM pgcursor_internal.lifetime_totals() t
        WHERE t.queue IS NOT NULL AND (names IS NULL OR t.queue = ANY (names))
    ), steps AS (
        SELECT p.minute, p.queue, lead(p.pushed) OVER w - p.pushed AS pushed,
               lead(p.completed) OVER w - p.completed AS completed,
               lead(p.dead_lettered) OVER w - p.dead_lettered AS dead_lettered,
               lead(p.discarded) OVER w - p.discarded AS discarded
        FROM points p WINDOW w AS (PARTITION BY p.queue ORDER BY p.minute, p.kind)
    )
    SELECT s.minute, s.queue, greatest(s.pushed, 0)::bigint, greatest(s.completed, 0)::bigint,
           greatest(s.dead_lettered, 0)::bigint, greatest(s.discarded, 0)::bigint
    FROM steps s, first
    WHERE s.minute >= first.minute AND s.minute <= upto AND s.pushed IS NOT NULL
$$;

-- Per snapshot minute in the minutes that overlap [since, upto], what
-- happened from that snapshot to the next one (or to the live totals, for
-- the newest): pushed, completed, dead-lettered, discarded. Over every
-- queue (names NULL), a snapshot's rows add up to the grand totals, so they
-- are summed before differencing: a deleted queue's move into the
-- null-queue row counts nothing; and the broker starts from zeros at the
-- minute of its first snapshot or oldest queue, whichever is earlier, so
-- what happened before the first snapshot counts there (as a queue's does
-- from its creation). Over selected queues, each queue's own differences
-- are summed (queue_minute_figures). A figure that went down counts 0.
CREATE OR REPLACE FUNCTION pgcursor_internal.minute_figures(since timestamptz, upto timestamptz, names text[])
RETURNS TABLE (minute timestamptz, pushed bigint, completed bigint, dead_lettered bigint, discarded bigint)
LANGUAGE sql STABLE AS $$
    WITH first AS (
        SELECT pgcursor_internal.bucket_start(since, 1) AS minute
    ), points AS (
        SELECT s.minute, 1 AS kind, sum(s.pushed) AS pushed, sum(s.completed) AS completed,
               sum(s.dead_lettered) AS dead_lettered, sum(s.discarded) AS discarded
        FROM pgcursor.stats_snapshots s, first
        WHERE names IS NULL
          AND s.minute >= coalesce((SELECT max(x.minute) FROM pgcursor.stats_snapshots x WHERE x.minute < first.minute),
                                   first.minute)
        GROUP BY s.minute
        UNION ALL
        SELECT z.minute, 0, 0, 0, 0, 0
        FROM (SELECT least((SELECT min(x.minute) FROM pgcursor.stats_snapshots x),
                           (SELECT pgcursor_internal.bucket_start(min(q.created_at), 1) FROM pgcursor.queues q))
                     AS minute) z
        WHERE names IS NULL AND z.minute IS NOT NULL
        UNION ALL
        SELECT 'infinity', 2, coalesce(sum(t.pushed), 0), coalesce(sum(t.completed), 0),
               coalesce(sum(t.dead_lettered), 0), coalesce(sum(t.discarded), 0)
        FROM pgcursor_internal.lifetime_totals() t
        WHERE names IS NULL
    ), steps AS (
        SELECT p.minute, lead(p.pushed) OVER w - p.pushed AS pushed, lead(p.completed) OVER w - p.completed AS completed,
               lead(p.dead_lettered) OVER w - p.dead_lettered AS dead_lettered,
               lead(p.discarded) OVER w - p.discarded AS discarded
        FROM points p WINDOW w AS (ORDER BY p.minute, p.kind)
    )
    SELECT s.minute, sum(greatest(s.pushed, 0))::bigint, sum(greatest(s.completed, 0))::bigint,
           sum(greatest(s.dead_lettered, 0))::bigint, sum(greatest(s.discarded, 0))::bigint
    FROM steps s, first
    WHERE s.minute >= first.minute AND s.minute <= upto AND s.pushed IS NOT NULL
    GROUP BY s.minute  -- (the zero point and a snapshot may share a minute)
    UNION ALL
    SELECT f.minute, sum(f.pushed)::bigint, sum(f.completed)::bigint, sum(f.dead_lettered)::bigint,
           sum(f.discarded)::bigint
    FROM pgcursor_internal.queue_minute_figures(since, upto, names) f
    WHERE names IS NOT NULL
    GROUP BY f.minute
$$;

-- The figures of minute_figures summed per bucket, every bucket of the
-- window included (zeros where nothing happened), oldest first.
CREATE OR REPLACE FUNCTION pgcursor_internal.bucket_figures(since timestamptz, upto timestamptz,
                                                            bucket_minutes integer, names text[])
RETURNS TABLE (bucket timestamptz, pushed bigint, completed bigint, dead_lettered bigint, discarded bigint)
LANGUAGE sql STABLE AS $$
    SELECT b, coalesce(f.pushed, 0)::bigint, coalesce(f.completed, 0)::bigint,
           coalesce(f.dead_lettered, 0)::bigint, coalesce(f.discarded, 0)::bigint
    FROM pgcursor_internal.bucket_series(since, upto, bucket_minutes) b
    LEFT JOIN (SELECT pgcursor_internal.bucket_start(m.minute, bucket_minutes) AS bucket, sum(m.pushed) AS pushed,
                      sum(m.completed) AS completed, sum(m.dead_lettered) AS dead_lettered,
                      sum(m.discarded) AS discarded
               FROM pgcursor_internal.minute_figures(since, upto, names) m
               GROUP BY 1) f ON f.bucket = b
    ORDER BY b
$$;

-- The gateways' figures (pgcursor.gateway_minutes) per (bucket, queue), over
-- the minutes that overlap [since, upto] and the selected queues (names
-- NULL: every row, the queue-less ones included).
SELECT pgcursor_internal.drop_version_without(
    'pgcursor_internal.gateway_figures(timestamptz, timestamptz, integer, text[])', 'db_errors');
CREATE OR REPLACE FUNCTION pgcursor_internal.gateway_figures(since timestamptz, upto timestamptz,
                                                             bucket_minutes integer, names text[])
RETURNS TABLE (bucket timestamptz, queue text, push_requests bigint, pop_requests bigint, pop_messages bigint,
               pop_empty bigint, ack_requests bigint, ack_messages bigint, ack_failed bigint, transactions bigint,
               age_sum_ms bigint, age_max_ms bigint, push_messages bigint, parked_ms bigint, db_errors bigint)
LANGUAGE sql STABLE AS $$
    SELECT pgcursor_internal.bucket_start(g.minute, bucket_minutes), g.queue, sum(g.push_requests)::bigint,
           sum(g.pop_requests)::bigint, sum(g.pop_messages)::bigint, sum(g.pop_empty)::bigint,
           sum(g.ack_requests)::bigint, sum(g.ack_messages)::bigint, sum(g.ack_failed)::bigint,
           sum(g.transactions)::bigint, sum(g.age_sum_ms)::bigint, max(g.age_max_ms),
           sum(g.push_messages)::bigint, sum(g.parked_ms)::bigint, sum(g.db_errors)::bigint
    FROM pgcursor.gateway_minutes g
    WHERE g.minute > since - interval '1 minute' AND g.minute <= upto
      AND (names IS NULL OR g.queue = ANY (names))
    GROUP BY 1, 2
$$;

-- gateway_figures summed over the queues, per bucket.
SELECT pgcursor_internal.drop_version_without(
    'pgcursor_internal.gateway_bucket_totals(timestamptz, timestamptz, integer, text[])', 'db_errors');
CREATE OR REPLACE FUNCTION pgcursor_internal.gateway_bucket_totals(since timestamptz, upto timestamptz,
                                                                   bucket_minutes integer, names text[])
RETURNS TABLE (bucket timestamptz, push_requests bigint, pop_requests bigint, pop_messages bigint,
               pop_empty bigint, ack_requests bigint, ack_messages bigint, ack_failed bigint, transactions bigint,
               age_sum_ms bigint, age_max_ms bigint, db_errors bigint)
LANGUAGE sql STABLE AS $$
    SELECT g.bucket, sum(g.push_requests)::bigint, sum(g.pop_requests)::bigint, sum(g.pop_messages)::bigint,
           sum(g.pop_empty)::bigint, sum(g.ack_requests)::bigint, sum(g.ack_messages)::bigint,
           sum(g.ack_failed)::bigint, sum(g.transactions)::bigint, sum(g.age_sum_ms)::bigint, max(g.age_max_ms),
           sum(g.db_errors)::bigint
    FROM pgcursor_internal.gateway_figures(since, upto, bucket_minutes, names) g
    GROUP BY g.bucket
$$;

-- Each gateway process's figures (pgcursor.gateway_process_minutes) per
-- (bucket, hostname, pid), over the minutes that overlap [since, upto]; host
-- and pid select one process (NULL: any). port is the newest minute's.
CREATE OR REPLACE FUNCTION pgcursor_internal.process_figures(since timestamptz, upto timestamptz,
                                                             bucket_minutes integer, host text, worker integer)
RETURNS TABLE (bucket timestamptz, hostname text, pid integer, port integer, push_requests bigint,
               pop_requests bigint, ack_requests bigint, transactions bigint, push_messages bigint,
               pop_messages bigint, ack_messages bigint, ack_failed bigint, age_sum_ms bigint, age_max_ms bigint,
               db_errors bigint, dead_lettered bigint)
LANGUAGE sql STABLE AS $$
    SELECT pgcursor_internal.bucket_start(g.minute, bucket_minutes), g.hostname, g.pid,
           (array_agg(g.port ORDER BY g.minute DESC))[1], sum(g.push_requests)::bigint,
           sum(g.pop_requests)::bigint, sum(g.ack_requests)::bigint, sum(g.transactions)::bigint,
           sum(g.push_messages)::bigint, sum(g.pop_messages)::bigint, sum(g.ack_messages)::bigint,
           sum(g.ack_failed)::bigint, sum(g.age_sum_ms)::bigint, max(g.age_max_ms), sum(g.db_errors)::bigint,
           sum(g.dead_lettered)::bigint
    FROM pgcursor.gateway_process_minutes g
    WHERE g.minute > since - interval '1 minute' AND g.minute <= upto
      AND (host IS NULL OR g.hostname = host) AND (worker IS NULL OR g.pid = worker)
    GROUP BY 1, 2, 3
$$;

-- Each gateway process's samples (pgcursor.gateway_process_samples) per
-- (bucket, hostname, pid, gauge): how many, their average (weighted by
-- samples), least, largest and last (the newest minute's).
CREATE OR REPLACE FUNCTION pgcursor_internal.process_sample_buckets(since timestamptz, upto timestamptz,
                                                                    bucket_minutes integer, host text,
                                                                    worker integer)
RETURNS TABLE (bucket timestamptz, hostname text, pid integer, gauge text, samples bigint, avg float8, min float8,
               max float8, last float8)
LANGUAGE sql STABLE AS $$
    SELECT pgcursor_internal.bucket_start(s.minute, bucket_minutes), s.hostname, s.pid, s.gauge,
           sum(s.samples)::bigint, round((sum(s.avg * s.samples) / sum(s.samples))::numeric, 2)::float8,
           min(s.min), max(s.max), (array_agg(s.last ORDER BY s.minute DESC))[1]
    FROM pgcursor.gateway_process_samples s
    WHERE s.minute > since - interval '1 minute' AND s.minute <= upto
      AND (host IS NULL OR s.hostname = host) AND (worker IS NULL OR s.pid = worker)
    GROUP BY 1, 2, 3, 4
$$;

-- The gateway processes that flushed figures in the last `span`, by
-- hostname then pid, as /status and worker-metrics list them (Queen's
-- worker: workerId is the process id): the pool's newest sample as
-- freeSlots (idle connections) and dbConnections (open ones), messages
-- popped in the span as messagesProcessed, lastSeen the start of its newest
-- minute. Queen's event-loop and job-queue figures are 0.
CREATE OR REPLACE FUNCTION pgcursor_internal.process_list(span interval)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH f AS (
        SELECT g.hostname, g.pid, max(g.minute) AS last_seen, sum(g.pop_messages)::bigint AS popped
        FROM pgcursor.gateway_process_minutes g
        WHERE g.minute > now() - span - interval '1 minute'
        GROUP BY 1, 2
    ), pool AS (
        SELECT DISTINCT ON (s.hostname, s.pid, s.gauge) s.hostname, s.pid, s.gauge, s.last
        FROM pgcursor.gateway_process_samples s
        WHERE s.minute > now() - span - interval '1 minute'
          AND s.gauge IN ('database.pool_size', 'database.pool_idle')
        ORDER BY s.hostname, s.pid, s.gauge, s.minute DESC
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'hostname', f.hostname, 'workerId', f.pid, 'avgEventLoopLagMs', 0, 'maxEventLoopLagMs', 0,
               'freeSlots', coalesce((SELECT p.last FROM pool p WHERE (p.hostname, p.pid, p.gauge)
                                                                    = (f.hostname, f.pid, 'database.pool_idle')), 0),
               'dbConnections', coalesce((SELECT p.last FROM pool p WHERE (p.hostname, p.pid, p.gauge)
                                                                        = (f.hostname, f.pid, 'database.pool_size')), 0),
               'jobQueueSize', 0, 'backoffSize', 0, 'messagesProcessed', f.popped,
               'lastSeen', pgcursor_internal.bucket_label(f.last_seen))
             ORDER BY f.hostname, f.pid), '[]'::jsonb)
    FROM f
$$;

-- Per bucket, every gateway process's samples averaged (weighted by
-- samples): CPU percent in user mode and in the kernel, resident memory in
-- MB, pool connections open, idle and checked out; 2 decimals. And the
-- fewest idle connections any process had (pool_idle_min).
CREATE OR REPLACE FUNCTION pgcursor_internal.process_averages(since timestamptz, upto timestamptz,
                                                              bucket_minutes integer)
RETURNS TABLE (bucket timestamptz, cpu_user_pct float8, cpu_system_pct float8, rss_mb float8, pool_size float8,
               pool_idle float8, pool_active float8, pool_idle_min float8)
LANGUAGE sql STABLE AS $$
    WITH a AS (
        SELECT s.bucket, s.gauge, sum(s.avg * s.samples) / sum(s.samples) AS avg, min(s.min) AS min
        FROM pgcursor_internal.process_sample_buckets(since, upto, bucket_minutes, NULL, NULL) s
        GROUP BY 1, 2
    )
    SELECT a.bucket,
           round((max(a.avg) FILTER (WHERE a.gauge = 'cpu.user_us') / 100)::numeric, 2)::float8,
           round((max(a.avg) FILTER (WHERE a.gauge = 'cpu.system_us') / 100)::numeric, 2)::float8,
           round((max(a.avg) FILTER (WHERE a.gauge = 'memory.rss_bytes') / 1048576)::numeric, 2)::float8,
           round(max(a.avg) FILTER (WHERE a.gauge = 'database.pool_size')::numeric, 2)::float8,
           round(max(a.avg) FILTER (WHERE a.gauge = 'database.pool_idle')::numeric, 2)::float8,
           round(max(a.avg) FILTER (WHERE a.gauge = 'database.pool_active')::numeric, 2)::float8,
           max(a.min) FILTER (WHERE a.gauge = 'database.pool_idle')
    FROM a
    GROUP BY a.bucket
$$;

-- The average message age at pop in ms (0 without pops), whole.
CREATE OR REPLACE FUNCTION pgcursor_internal.average_age(age_sum_ms numeric, pops numeric)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(round(age_sum_ms / nullif(pops, 0)), 0)::bigint
$$;

-- Messages per request, 2 decimals (0 without requests).
CREATE OR REPLACE FUNCTION pgcursor_internal.per_request(n numeric, requests numeric)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(round(n / nullif(requests, 0), 2), 0)::float8
$$;

-- The throughput series of /status, newest first: ingested (pushed) and
-- processed (completed) with their rates, dlqCount (dead-lettered); pops,
-- message age at pop and failed acks as the gateways counted them; requests
-- failed by the database and the gateway processes' CPU, memory and pool
-- averages, over every queue (system signals: §4.1 keeps them global under
-- a queue filter); the figures nobody records are 0.
CREATE OR REPLACE FUNCTION pgcursor_internal.throughput_series(since timestamptz, upto timestamptz,
                                                               bucket_minutes integer, names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'timestamp', pgcursor_internal.bucket_label(f.bucket),
               'ingested', f.pushed, 'processed', f.completed,
               'ingestedPerSecond', pgcursor_internal.per_second(f.pushed, bucket_minutes),
               'processedPerSecond', pgcursor_internal.per_second(f.completed, bucket_minutes),
               'popPerSecond', pgcursor_internal.per_second(g.pop_messages, bucket_minutes),
               'popMessages', coalesce(g.pop_messages, 0),
               'avgLagMs', pgcursor_internal.average_age(g.age_sum_ms, g.pop_messages),
               'maxLagMs', coalesce(g.age_max_ms, 0),
               'avgEventLoopLagMs', 0, 'maxEventLoopLagMs', 0, 'dbErrors', coalesce(e.db_errors, 0),
               'ackFailed', coalesce(g.ack_failed, 0),
               'dlqCount', f.dead_lettered, 'queenCpuUserPct', coalesce(p.cpu_user_pct, 0),
               'queenCpuSysPct', coalesce(p.cpu_system_pct, 0), 'dbPoolActive', coalesce(p.pool_active, 0),
               'dbPoolIdle', coalesce(p.pool_idle, 0), 'dbPoolSize', coalesce(p.pool_size, 0),
               'minFreeSlots', coalesce(p.pool_idle_min, 0),
               'queenRssMb', coalesce(p.rss_mb, 0))
             ORDER BY f.bucket DESC), '[]'::jsonb)
    FROM pgcursor_internal.bucket_figures(since, upto, bucket_minutes, names) f
    LEFT JOIN pgcursor_internal.gateway_bucket_totals(since, upto, bucket_minutes, names) g ON g.bucket = f.bucket
    LEFT JOIN pgcursor_internal.gateway_bucket_totals(since, upto, bucket_minutes, NULL) e ON e.bucket = f.bucket
    LEFT JOIN pgcursor_internal.process_averages(since, upto, bucket_minutes) p ON p.bucket = f.bucket
$$;

-- /status `messages` over the selected queues: lifetime total (pushed),
-- completed, failed (discarded) and deadLetter; pending and processing now
-- (status_requests adds requests and batchEfficiency).
CREATE OR REPLACE FUNCTION pgcursor_internal.status_messages(names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH life AS (
        SELECT coalesce(sum(t.pushed), 0) AS pushed, coalesce(sum(t.completed), 0) AS completed,
               coalesce(sum(t.dead_lettered), 0) AS dead_lettered, coalesce(sum(t.discarded), 0) AS discarded
        FROM pgcursor_internal.lifetime_totals() t WHERE names IS NULL OR t.queue = ANY (names)
    ), live AS (
        SELECT coalesce(sum(s.pending), 0) AS pending, coalesce(sum(s.processing), 0) AS processing
        FROM pgcursor_internal.partition_stats(NULL) s WHERE names IS NULL OR s.queue = ANY (names)
    )
    SELECT jsonb_build_object(
        'total', life.pushed, 'pending', live.pending, 'processing', live.processing,
        'completed', life.completed, 'failed', life.discarded, 'deadLetter', life.dead_lettered)
    FROM life, live
$$;

-- /status `messages.requests` and `messages.batchEfficiency` over the
-- window and the selected queues, as the gateways counted them: push, pop
-- and ack requests, and messages per request (pushed: what the window's
-- snapshots say was pushed).
CREATE OR REPLACE FUNCTION pgcursor_internal.status_requests(since timestamptz, upto timestamptz, names text[],
                                                             pushed bigint)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'requests', jsonb_build_object('push', coalesce(sum(g.push_requests), 0),
                                       'pop', coalesce(sum(g.pop_requests), 0),
                                       'ack', coalesce(sum(g.ack_requests), 0)),
        'batchEfficiency', jsonb_build_object(
            'push', pgcursor_internal.per_request(pushed, sum(g.push_requests)),
            'pop', pgcursor_internal.per_request(sum(g.pop_messages), sum(g.pop_requests)),
            'ack', pgcursor_internal.per_request(sum(g.ack_messages), sum(g.ack_requests))))
    FROM pgcursor_internal.gateway_figures(since, upto, 1, names) g
$$;

-- /status `leases`: live leases (one pop's lease over several partitions
-- is one), the partitions they are on, the sizes of their batches and how
-- much of those is already acked.
CREATE OR REPLACE FUNCTION pgcursor_internal.status_leases(names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'active', count(DISTINCT c.lease_id), 'partitionsWithLeases', count(DISTINCT c.partition_id),
        'totalBatchSize', coalesce(sum(b.size), 0),
        'totalAcked', coalesce(sum(b.size - pgcursor_internal.leased_offsets(c)), 0))
    FROM pgcursor_internal.cursor_rows() c
    JOIN pgcursor.partitions p ON p.id = c.partition_id
    CROSS JOIN LATERAL (SELECT coalesce(c.batch_end - c.batch_start + 1, 0) AS size) b
    WHERE pgcursor_internal.lease_is_live(c.lease_expires_at) AND (names IS NULL OR p.queue = ANY (names))
$$;

-- /status `deadLetterQueue`: the dead letters stored now, the partitions
-- they are on and the five most frequent errors (then by error).
CREATE OR REPLACE FUNCTION pgcursor_internal.status_dead_letters(names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH d AS (
        SELECT d.partition_id, d.error FROM pgcursor.dead_letters d
        JOIN pgcursor.partitions p ON p.id = d.partition_id
        WHERE names IS NULL OR p.queue = ANY (names)
    )
    SELECT jsonb_build_object(
        'totalMessages', (SELECT count(*) FROM d),
        'affectedPartitions', (SELECT count(DISTINCT d.partition_id) FROM d),
        'topErrors', (SELECT coalesce(jsonb_agg(jsonb_build_object('error', e.error, 'count', e.n)
                                                ORDER BY e.n DESC, e.error), '[]'::jsonb)
                      FROM (SELECT d.error, count(*) AS n FROM d GROUP BY d.error
                            ORDER BY count(*) DESC, d.error LIMIT 5) e))
$$;

-- /status `queues`: the selected queues that ever had a message, by name,
-- with totalConsumed (lifetime completed) and the per-queue figures C reads.
CREATE OR REPLACE FUNCTION pgcursor_internal.status_queue_list(names text[])
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', q.name, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
               'partitions', s.partitions, 'totalConsumed', coalesce(t.completed, 0),
               'pending', s.pending, 'processing', s.processing, 'completed', coalesce(t.completed, 0),
               'failed', coalesce(t.discarded, 0), 'dlq', coalesce(t.dead_lettered, 0))
             ORDER BY q.name), '[]'::jsonb)
    FROM pgcursor.queues q
    JOIN pgcursor_internal.queue_stats() s ON s.queue = q.name AND s.total > 0
    LEFT JOIN pgcursor_internal.lifetime_totals() t ON t.queue = q.name
    WHERE names IS NULL OR q.name = ANY (names)
$$;

-- Seconds since the newest snapshot was taken (the series' resolution), -1 with none.
CREATE OR REPLACE FUNCTION pgcursor_internal.stats_age()
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT coalesce(floor(extract(epoch FROM now() - max(s.taken_at)))::integer, -1)
    FROM pgcursor.stats_snapshots s
$$;

-- status: the dashboard's overview (GET /api/v1/status). req: from, to
-- (default the last hour), queue, namespace, task; values may be strings,
-- empty = absent.
CREATE OR REPLACE FUNCTION pgcursor.status(req jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    given  jsonb := pgcursor_internal.without_empty_values(req);
    w      record := pgcursor_internal.time_window(given, interval '1 hour');
    names  text[] := pgcursor_internal.selected_queues(given);
    series jsonb := pgcursor_internal.throughput_series(w.since, w.upto, w.bucket_minutes, names);
    summed jsonb := (SELECT jsonb_object_agg(k.key, (SELECT coalesce(sum((x ->> k.key)::bigint), 0)
                                                     FROM jsonb_array_elements(series) x))
                     FROM unnest(ARRAY['ingested', 'ackFailed', 'dlqCount', 'dbErrors']) k(key));
BEGIN
    RETURN jsonb_build_object(
        'timeRange', pgcursor_internal.time_range(w.since, w.upto),
        'pointCount', jsonb_array_length(series), 'bucketMinutes', w.bucket_minutes,
        'throughput', series,
        'messages', pgcursor_internal.status_messages(names)
                    || pgcursor_internal.status_requests(w.since, w.upto, names, (summed ->> 'ingested')::bigint),
        'leases', pgcursor_internal.status_leases(names),
        'deadLetterQueue', pgcursor_internal.status_dead_letters(names),
        'workers', pgcursor_internal.process_list(interval '2 minutes'),
        'queues', pgcursor_internal.status_queue_list(names),
        'errors', jsonb_build_object('dbErrors', summed -> 'dbErrors', 'ackFailed', summed -> 'ackFailed',
                                     'dlqMessages', summed -> 'dlqCount'),
        'statsAge', pgcursor_internal.stats_age());
END $$;

-- status_queues: {"queues": [{id, name, namespace, task, createdAt,
-- partitions, messages {total, pending (the slowest group's unconsumed, leased
-- included: the depth), processing,
-- completed (lifetime)}}], "pagination": {limit, offset}}, newest queue
-- first. req: namespace, task, limit (100), offset (0); others ignored.
CREATE OR REPLACE FUNCTION pgcursor.status_queues(req jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    given jsonb := pgcursor_internal.without_empty_values(req);
    ns    text := pgcursor_internal.optional_text(given, 'namespace');
    tk    text := pgcursor_internal.optional_text(given, 'task');
    lim   integer := pgcursor_internal.positive_int_arg(given, 'limit', 100);
    skip  integer := pgcursor_internal.non_negative_int_arg(given, 'offset', 0);
BEGIN
    RETURN jsonb_build_object(
        'queues', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', q.name, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
                       'createdAt', pgcursor_internal.rfc3339_utc(q.created_at),
                       'partitions', coalesce(s.partitions, 0),
                       'messages', jsonb_build_object(
                           'total', coalesce(s.total, 0),
                           'pending', coalesce(s.depth, 0),
                           'processing', coalesce(s.processing, 0),
                           'completed', coalesce(t.completed, 0)))
                     ORDER BY q.created_at DESC, q.name), '[]'::jsonb)
            FROM (SELECT * FROM pgcursor.queues x
                  WHERE (ns IS NULL OR x.namespace = ns) AND (tk IS NULL OR x.task = tk)
                  ORDER BY x.created_at DESC, x.name LIMIT lim OFFSET skip) q
            LEFT JOIN pgcursor_internal.queue_stats() s ON s.queue = q.name
            LEFT JOIN pgcursor_internal.lifetime_totals() t ON t.queue = q.name),
        'pagination', jsonb_build_object('limit', lim, 'offset', skip));
END $$;

-- status_queue: {queue {id, name, namespace, task, priority, createdAt,
-- config}, partitions [...], totals}. Unknown -> P0002.
CREATE OR REPLACE FUNCTION pgcursor.status_queue(qname text)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    q pgcursor.queues;
    parts jsonb;
BEGIN
    q := pgcursor_internal.known_queue(qname);
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', p.id, 'name', p.name, 'createdAt', pgcursor_internal.rfc3339_utc(p.created_at),
               'messages', m.messages, 'stats', m.messages,
               'cursor', jsonb_build_object('totalConsumed', s.completed, 'batchesConsumed', 0),
               'lastActivity', pgcursor_internal.rfc3339_utc(greatest(e.newest, g.last_ack)),
               'oldestMessage', pgcursor_internal.rfc3339_utc(e.oldest),
               'newestMessage', pgcursor_internal.rfc3339_utc(e.newest))
             ORDER BY p.name), '[]'::jsonb)
    INTO parts
    FROM pgcursor.partitions p
    JOIN pgcursor_internal.partition_stats(qname) s ON s.partition_id = p.id
    CROSS JOIN LATERAL pgcursor_internal.stored_span(p.id) e
    CROSS JOIN LATERAL (SELECT max(c.last_ack_at) AS last_ack FROM pgcursor_internal.cursor_rows() c
                        WHERE c.partition_id = p.id) g
    CROSS JOIN LATERAL (SELECT pgcursor_internal.stats_json(  -- from the slowest group; leased included in pending
                                   s.total, s.depth, s.processing, greatest(s.total - s.depth - e.dead, 0), 0, e.dead)
                               AS messages) m
    WHERE p.queue = qname;
    RETURN jsonb_build_object(
        'queue', jsonb_build_object(
            'id', q.name, 'name', q.name, 'namespace', q.namespace, 'task', q.task, 'priority', q.priority,
            'createdAt', pgcursor_internal.rfc3339_utc(q.created_at),
            'config', jsonb_build_object('leaseTime', q.lease_time, 'retryLimit', q.retry_limit, 'retryDelay', 0,
                                         'ttl', q.retention_seconds, 'maxQueueSize', q.max_size,
                                         'deadLetterQueue', pgcursor_internal.dead_lettering_enabled(q))),
        'partitions', parts,
        'totals', (SELECT t || jsonb_build_object('messages', t)
                   FROM (SELECT jsonb_object_agg(k, s) AS t
                         FROM (SELECT k, coalesce(sum((x -> 'messages' ->> k)::bigint), 0) AS s
                               FROM unnest(ARRAY['total', 'pending', 'processing', 'completed', 'failed',
                                                 'deadLetter']) k
                               LEFT JOIN jsonb_array_elements(parts) x ON true
                               GROUP BY k) sums) a));
END $$;

-- status_queue_messages: the queue's stored messages, newest first (then by
-- partition and offset, descending), [{id, transactionId, partitionId,
-- queuePath, queue, partition, status, createdAt}], status by
-- the queue-mode rule only. req: limit (50, at most 1000), offset (0).
-- Unknown queue: []. Each partition gives at most offset + limit rows,
-- newest first (listed_messages).
CREATE OR REPLACE FUNCTION pgcursor.status_queue_messages(qname text, req jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    given jsonb := pgcursor_internal.without_empty_values(req);
    lim   integer := least(pgcursor_internal.positive_int_arg(given, 'limit', 50), 1000);
    skip  integer := pgcursor_internal.non_negative_int_arg(given, 'offset', 0);
BEGIN
    RETURN (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', coalesce(r.message_id::text, r.pid || ':' || r.msg_offset),
                   'transactionId', r.transaction_id, 'partitionId', r.pid,
                   'queuePath', qname || '/' || r.partition, 'queue', qname, 'partition', r.partition,
                   'offset', r.msg_offset,
                   'status', pgcursor_internal.message_status(
                                 r.msg_offset, r.dead, CASE WHEN r.has_queue_mode THEN r.queue_cursor END,
                                 r.lease_from, r.lease_to),
                   'createdAt', pgcursor_internal.rfc3339_utc(r.created_at))
                 ORDER BY r.created_at DESC, r.pid DESC, r.msg_offset DESC), '[]'::jsonb)
        FROM (SELECT w.*, f.* FROM (
                  SELECT p.id AS pid, p.name AS partition, m.msg_offset, m.transaction_id, m.message_id,
                         m.created_at, m.dead
                  FROM pgcursor.partitions p
                  CROSS JOIN LATERAL pgcursor_internal.listed_messages(
                      p.id, '-infinity', 'infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, skip::bigint + lim) m
                  WHERE p.queue = qname
                  ORDER BY m.created_at DESC, p.id DESC, m.msg_offset DESC
                  OFFSET skip LIMIT lim) w
              -- where the consumers stand, only for the partitions of the page
              CROSS JOIN LATERAL pgcursor_internal.partition_consumption(w.pid) f) r);
END $$;

-- How many messages of a partition read in offset order cost what one
-- probe of messages' primary key does, a probe being one statement of
-- first_offset_at's binary search (created_per_interval chooses by it).
-- Measured on one PostgreSQL: minutes over 200,000 messages, 150-230 us an
-- interval's search of about 20 probes against 0.65 us a row. On Citus a
-- probe is a round trip to a worker: sql/citus/functions.sql replaces it.
CREATE OR REPLACE FUNCTION pgcursor_internal.rows_per_probe()
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 13 $$;

-- How many messages of partition pid were created in each interval (unit:
-- minute, hour or day) of [since, upto), for the intervals with any. The
-- window is one offset range (created_offsets). Where its intervals hold
-- more messages than a search costs (rows_per_probe: about 250 in a
-- partition of 200,000), each interval's first offset is found by binary
-- search (createdAt never decreases with the offset) and its messages are
-- counted along the primary key alone, without reading them (an
-- index-only scan, where the visibility map allows): 2,000 partitions of
-- 600 messages, GET /api/v1/status/analytics 1.2 -> 0.26 s. Where they
-- hold fewer, the rows are read and grouped. Its own function of the
-- partition's id, as listed_messages, so that on Citus it goes to the
-- partition's shard. enable_seqscan = off: planned while messages was
-- empty, a plan would read the whole table once it had filled. Every read
-- is in offset order for the same reason: else, with the table's size
-- unknown, the planner may find the transaction index, which holds the
-- whole partition, as cheap.
CREATE OR REPLACE FUNCTION pgcursor_internal.created_per_interval(
    pid uuid, since timestamptz, upto timestamptz, unit text)
RETURNS TABLE (at timestamptz, n bigint) LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    created record := pgcursor_internal.created_offsets(pid, since, upto);
    step    interval := ('1 ' || unit)::interval;
    newest  bigint;     -- the window's newest stored offset
    newest_at timestamptz;
    from_at bigint := created.first;  -- the current interval's first offset
    next_at bigint;     -- the next interval's first offset
BEGIN
    SELECT m.msg_offset, m.created_at INTO newest, newest_at FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.msg_offset BETWEEN created.first AND created.last
     ORDER BY m.msg_offset DESC LIMIT 1;
    IF newest IS NULL THEN  -- no message in the window
        RETURN;
    END IF;
    LOOP
        SELECT date_trunc(unit, m.created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' INTO at FROM pgcursor.messages m
         WHERE m.partition_id = pid AND m.msg_offset >= from_at ORDER BY m.msg_offset LIMIT 1;
        -- Fewer messages an interval than a search costs: read and group
        -- them. A search probes about 2 + log2 of the offsets above from_at.
        IF from_at = created.first
           AND newest - created.first + 1
               < pgcursor_internal.rows_per_probe()
                 * (2 + log(2, greatest(pgcursor_internal.partition_head(pid) - from_at, 1)))
                    * (1 + extract(epoch FROM newest_at - at) / extract(epoch FROM step)) THEN
            RETURN QUERY
            SELECT date_trunc(unit, x.created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*)
              FROM (SELECT m.created_at FROM pgcursor.messages m
                     WHERE m.partition_id = pid AND m.msg_offset BETWEEN created.first AND newest
                     ORDER BY m.msg_offset) x
             GROUP BY 1;
            RETURN;
        END IF;
        next_at := pgcursor_internal.first_offset_at(pid, at + step, from_at);
        n := (SELECT count(*) FROM (SELECT FROM pgcursor.messages m
                                     WHERE m.partition_id = pid AND m.msg_offset BETWEEN from_at AND least(next_at - 1, newest)
                                     ORDER BY m.msg_offset) x);
        RETURN NEXT;
        EXIT WHEN next_at IS NULL OR next_at > newest;
        from_at := next_at;
    END LOOP;
END $$;

-- status_analytics: messages created per interval (minute, hour or
-- day; default hour) that are still stored, in the selected queues, one
-- point per interval from truncated from (default now - 24 h) to truncated
-- to (default now), oldest first, zeros included; at most 100000 points.
CREATE OR REPLACE FUNCTION pgcursor.status_analytics(req jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    given jsonb := pgcursor_internal.without_empty_values(req);
    unit  text := coalesce(pgcursor_internal.optional_text(given, 'interval'), 'hour');
    w     record := pgcursor_internal.time_window(given, interval '24 hours');
    names text[] := pgcursor_internal.selected_queues(given);
    step  interval;
    first timestamptz;
    last  timestamptz;
BEGIN
    IF unit NOT IN ('minute', 'hour', 'day') THEN
        RAISE EXCEPTION 'interval must be minute, hour or day' USING ERRCODE = '22023';
    END IF;
    step := ('1 ' || unit)::interval;
    first := date_trunc(unit, w.since AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    last := date_trunc(unit, w.upto AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    IF (extract(epoch FROM last - first) / extract(epoch FROM step)) >= 100000 THEN
        RAISE EXCEPTION 'from..to holds more than 100000 intervals of a %', unit USING ERRCODE = '22023';
    END IF;
    RETURN jsonb_build_object(
        'dataPoints', (
            SELECT coalesce(jsonb_agg(jsonb_build_object('timestamp', pgcursor_internal.bucket_label(t),
                                                         'messages', coalesce(c.n, 0)) ORDER BY t), '[]'::jsonb)
            FROM generate_series(first, last, step) t
            LEFT JOIN (SELECT x.at, sum(x.n) AS n
                       FROM pgcursor.partitions p
                       CROSS JOIN LATERAL pgcursor_internal.created_per_interval(p.id, first, last + step, unit) x
                       WHERE names IS NULL OR p.queue = ANY (names)
                       GROUP BY x.at) c ON c.at = t),
        'interval', unit, 'from', pgcursor_internal.rfc3339_utc(w.since),
        'to', pgcursor_internal.rfc3339_utc(w.upto));
END $$;
