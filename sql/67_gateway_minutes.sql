-- Per-minute gateway figures (migrations/V7__gateway_minutes.sql, V17): what
-- only the gateways count (requests, messages their pushes stored, pops,
-- empty pops, acked items, failed acks, transactions, message age at pop,
-- time long-polls spent waiting, requests failed by the database), added up
-- across gateways. The status, analytics and metrics answers read them
-- (sql/63_status.sql, sql/64_analytics.sql, sql/66_metrics.sql).
--
--   SELECT pgcursor.record_gateway_minutes(
--       '[{"minute": 1767225600, "queue": "orders", "popRequests": 3, "popMessages": 5,
--          "ageSumMs": 1200, "ageMaxMs": 400}]');

-- A row's minute: unix seconds, any second of it, up to the year 9999; a
-- bad one raises 22023 naming <at>minute.
CREATE OR REPLACE FUNCTION pgcursor_internal.minute_arg(r jsonb, at text)
RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    sec bigint := pgcursor_internal.non_negative_bigint_arg(r, 'minute', at || 'minute');
BEGIN
    IF sec IS NULL OR sec > 253402300799 THEN  -- the last second of 9999
        RAISE EXCEPTION '%minute must be a time in unix seconds', at USING ERRCODE = '22023';
    END IF;
    RETURN to_timestamp(sec - sec % 60);
END $$;

-- One row of record_gateway_minutes' input, checked, as a table row: its
-- minute (unix seconds, any second of it), its queue (named, or the queue of
-- the partition it names; null when neither or the partition is gone) and
-- its figures (absent = 0). A bad field raises 22023 naming rows[i].field.
CREATE OR REPLACE FUNCTION pgcursor_internal.gateway_minute_row(r jsonb, i bigint)
RETURNS pgcursor.gateway_minutes LANGUAGE plpgsql STABLE AS $$
DECLARE
    at  text := 'rows[' || i || '].';
    g   pgcursor.gateway_minutes;
    figure CONSTANT text[] := ARRAY['pushRequests', 'popRequests', 'popMessages', 'popEmpty', 'ackRequests',
                                    'ackMessages', 'ackFailed', 'transactions', 'ageSumMs', 'ageMaxMs',
                                    'pushMessages', 'parkedMs', 'dbErrors'];
    n   bigint[];
BEGIN
    IF jsonb_typeof(r) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'rows[%] must be an object', i USING ERRCODE = '22023';
    END IF;
    g.minute := pgcursor_internal.minute_arg(r, at);
    g.queue := pgcursor_internal.optional_text(r, 'queue', at || 'queue');
    IF g.queue IS NULL AND r ? 'partitionId' THEN
        IF NOT pgcursor_internal.is_uuid_value(r -> 'partitionId', true) THEN
            RAISE EXCEPTION '%partitionId must be a UUID string', at USING ERRCODE = '22023';
        END IF;
        g.queue := (SELECT p.queue FROM pgcursor.partitions p WHERE p.id = (r ->> 'partitionId')::uuid);
    END IF;
    n := pgcursor_internal.figure_args(r, at, figure);
    g.push_requests := n[1]; g.pop_requests := n[2]; g.pop_messages := n[3]; g.pop_empty := n[4];
    g.ack_requests := n[5]; g.ack_messages := n[6]; g.ack_failed := n[7]; g.transactions := n[8];
    g.age_sum_ms := n[9]; g.age_max_ms := n[10];
    g.push_messages := n[11]; g.parked_ms := n[12]; g.db_errors := n[13];
    RETURN g;
END $$;

-- record_gateway_minutes: adds a gateway's per-minute figures, rows [{minute,
-- queue? | partitionId?, pushRequests?, pushMessages?, popRequests?,
-- popMessages?, popEmpty?, ackRequests?, ackMessages?, ackFailed?,
-- transactions?, ageSumMs?, ageMaxMs?, parkedMs?, dbErrors?}], to what
-- pgcursor.gateway_minutes holds for each (minute, queue): several gateways write the same minute, so figures add
-- up and never overwrite (ageMaxMs keeps the larger). Rows older than `keep`
-- are not written, and stored ones older than it are deleted; what is
-- written is added to pgcursor.gateway_totals too (lifetime). All or
-- nothing: a bad row raises 22023 naming it. -> {"rows" (minute-queue rows
-- written), "purged"}.
CREATE OR REPLACE FUNCTION pgcursor.record_gateway_minutes(rows jsonb, keep interval DEFAULT interval '24 hours')
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    written bigint;
    purged  bigint;
    sums    pgcursor.gateway_totals;
BEGIN
    keep := pgcursor_internal.keep_arg(keep);
    IF jsonb_typeof(rows) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'rows must be an array' USING ERRCODE = '22023';
    END IF;
    -- One row per (minute, queue), inserted in that order: an upsert may
    -- touch a row once, and two gateways lock rows in one order (no deadlock).
    INSERT INTO pgcursor.gateway_minutes AS t (minute, queue, push_requests, pop_requests, pop_messages, pop_empty,
                                               ack_requests, ack_messages, ack_failed, transactions, age_sum_ms,
                                               age_max_ms, push_messages, parked_ms, db_errors)
    SELECT g.minute, g.queue, sum(g.push_requests), sum(g.pop_requests), sum(g.pop_messages), sum(g.pop_empty),
           sum(g.ack_requests), sum(g.ack_messages), sum(g.ack_failed), sum(g.transactions), sum(g.age_sum_ms),
           max(g.age_max_ms), sum(g.push_messages), sum(g.parked_ms), sum(g.db_errors)
      FROM jsonb_array_elements(rows) WITH ORDINALITY e(r, n)
     CROSS JOIN LATERAL pgcursor_internal.gateway_minute_row(e.r, e.n - 1) g
     WHERE g.minute >= now() - keep
     GROUP BY g.minute, g.queue
     ORDER BY g.minute, g.queue
    ON CONFLICT ON CONSTRAINT gateway_minutes_minute_queue DO UPDATE SET
        push_requests = t.push_requests + excluded.push_requests,
        pop_requests = t.pop_requests + excluded.pop_requests,
        pop_messages = t.pop_messages + excluded.pop_messages,
        pop_empty = t.pop_empty + excluded.pop_empty,
        ack_requests = t.ack_requests + excluded.ack_requests,
        ack_messages = t.ack_messages + excluded.ack_messages,
        ack_failed = t.ack_failed + excluded.ack_failed,
        transactions = t.transactions + excluded.transactions,
        age_sum_ms = t.age_sum_ms + excluded.age_sum_ms,
        age_max_ms = greatest(t.age_max_ms, excluded.age_max_ms),
        push_messages = t.push_messages + excluded.push_messages,
        parked_ms = t.parked_ms + excluded.parked_ms,
        db_errors = t.db_errors + excluded.db_errors;
    GET DIAGNOSTICS written = ROW_COUNT;
    -- Summed here, then added by key: on Citus the update of the reference
    -- table is then a statement of its own.
    SELECT true, coalesce(sum(g.push_requests), 0), coalesce(sum(g.pop_requests), 0),
           coalesce(sum(g.pop_messages), 0), coalesce(sum(g.ack_requests), 0), coalesce(sum(g.ack_messages), 0),
           coalesce(sum(g.ack_failed), 0), coalesce(sum(g.transactions), 0), coalesce(sum(g.db_errors), 0)
      INTO sums
      FROM jsonb_array_elements(rows) WITH ORDINALITY e(r, n)
     CROSS JOIN LATERAL pgcursor_internal.gateway_minute_row(e.r, e.n - 1) g
     WHERE g.minute >= now() - keep;
    UPDATE pgcursor.gateway_totals t SET
        push_requests = t.push_requests + sums.push_requests, pop_requests = t.pop_requests + sums.pop_requests,
        pop_messages = t.pop_messages + sums.pop_messages, ack_requests = t.ack_requests + sums.ack_requests,
        ack_messages = t.ack_messages + sums.ack_messages, ack_failed = t.ack_failed + sums.ack_failed,
        transactions = t.transactions + sums.transactions, db_errors = t.db_errors + sums.db_errors
     WHERE t.one;
    DELETE FROM pgcursor.gateway_minutes t WHERE t.minute < now() - keep;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN jsonb_build_object('rows', written, 'purged', purged);
END $$;

-- The gauges a gateway samples (gateway_process_samples.gauge), named by
-- their place in system-metrics' answer: CPU percent x 100 in user mode and
-- in the kernel since the previous sample, resident and virtual memory in
-- bytes, pool connections open, idle and checked out.
CREATE OR REPLACE FUNCTION pgcursor_internal.process_gauges()
RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['cpu.user_us', 'cpu.system_us', 'memory.rss_bytes', 'memory.virtual_bytes',
                 'database.pool_size', 'database.pool_idle', 'database.pool_active']
$$;

-- One row of record_process_minutes' input, checked, as a table row of the
-- process (hostname, pid, port).
CREATE OR REPLACE FUNCTION pgcursor_internal.process_minute_row(r jsonb, i bigint, hostname text, pid integer,
                                                                port integer)
RETURNS pgcursor.gateway_process_minutes LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    at  text := 'rows[' || i || '].';
    g   pgcursor.gateway_process_minutes;
    figure CONSTANT text[] := ARRAY['pushRequests', 'popRequests', 'ackRequests', 'transactions', 'pushMessages',
                                    'popMessages', 'ackMessages', 'ackFailed', 'ageSumMs', 'ageMaxMs', 'dbErrors',
                                    'deadLettered'];
    n   bigint[];
BEGIN
    IF jsonb_typeof(r) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'rows[%] must be an object', i USING ERRCODE = '22023';
    END IF;
    g.minute := pgcursor_internal.minute_arg(r, at);
    g.hostname := hostname; g.pid := pid; g.port := port;
    n := pgcursor_internal.figure_args(r, at, figure);
    g.push_requests := n[1]; g.pop_requests := n[2]; g.ack_requests := n[3]; g.transactions := n[4];
    g.push_messages := n[5]; g.pop_messages := n[6]; g.ack_messages := n[7]; g.ack_failed := n[8];
    g.age_sum_ms := n[9]; g.age_max_ms := n[10]; g.db_errors := n[11]; g.dead_lettered := n[12];
    RETURN g;
END $$;

-- The samples of one row of record_process_minutes' input, checked:
-- {"<gauge>": {"samples", "avg", "min", "max", "last"}} for gauges of
-- process_gauges(), samples a positive integer, the others non-negative
-- numbers with min <= avg <= max. Absent = none.
CREATE OR REPLACE FUNCTION pgcursor_internal.process_sample_rows(r jsonb, i bigint, hostname text, pid integer)
RETURNS SETOF pgcursor.gateway_process_samples LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    at      text := 'rows[' || i || '].samples';
    samples jsonb := pgcursor_internal.optional_object(r, 'samples', at);
    g       record;
    row     pgcursor.gateway_process_samples;
    value   jsonb;
BEGIN
    FOR g IN SELECT e.key, e.value FROM jsonb_each(samples) e ORDER BY e.key LOOP
        IF NOT g.key = ANY (pgcursor_internal.process_gauges()) THEN
            RAISE EXCEPTION '%.% is not a gauge: %', at, g.key, array_to_string(pgcursor_internal.process_gauges(), ', ')
                USING ERRCODE = '22023';
        END IF;
        IF jsonb_typeof(g.value) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION '%.% must be an object', at, g.key USING ERRCODE = '22023';
        END IF;
        row.minute := NULL; row.hostname := hostname; row.pid := pid; row.gauge := g.key;
        row.samples := pgcursor_internal.integer_arg(g.value, 'samples', 1, 2147483647,
                                                     at || '.' || g.key || '.samples', 'a positive integer');
        IF row.samples IS NULL THEN
            RAISE EXCEPTION '%.%.samples must be a positive integer', at, g.key USING ERRCODE = '22023';
        END IF;
        FOREACH value IN ARRAY ARRAY[g.value -> 'avg', g.value -> 'min', g.value -> 'max', g.value -> 'last'] LOOP
            IF jsonb_typeof(value) IS DISTINCT FROM 'number' OR value::numeric < 0 THEN
                RAISE EXCEPTION '%.% needs avg, min, max and last, non-negative numbers', at, g.key
                    USING ERRCODE = '22023';
            END IF;
        END LOOP;
        row.avg := (g.value ->> 'avg')::float8; row.min := (g.value ->> 'min')::float8;
        row.max := (g.value ->> 'max')::float8; row.last := (g.value ->> 'last')::float8;
        IF NOT (row.min <= row.avg AND row.avg <= row.max AND row.min <= row.last AND row.last <= row.max) THEN
            RAISE EXCEPTION '%.%: min <= avg, last <= max does not hold', at, g.key USING ERRCODE = '22023';
        END IF;
        RETURN NEXT row;
    END LOOP;
END $$;

-- The long-poll waits of one row of record_process_minutes' input, checked:
-- {"<queue>": ms waited in the minute}, non-negative integers. Absent = none.
CREATE OR REPLACE FUNCTION pgcursor_internal.process_parked_rows(r jsonb, i bigint)
RETURNS TABLE (queue text, parked_ms bigint) LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    at     text := 'rows[' || i || '].parked';
    waits  jsonb := pgcursor_internal.optional_object(r, 'parked', at);
    q      text;
BEGIN
    FOR q IN SELECT jsonb_object_keys(waits) ORDER BY 1 LOOP
        PERFORM pgcursor_internal.refuse_long_key(at || ' queue name', q);
        queue := q;
        parked_ms := pgcursor_internal.figure_arg(waits, q, at || '.' || q);
        IF parked_ms IS NULL THEN
            RAISE EXCEPTION '%.% must be a non-negative integer', at, q USING ERRCODE = '22023';
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- record_process_minutes: one gateway process's per-minute figures and
-- samples. gateway: {hostname, pid, port} (who it is: hostname and pid
-- name the process, port is where it listens). rows: [{minute,
-- pushRequests?, popRequests?, ackRequests?, transactions?, pushMessages?,
-- popMessages?, ackMessages?, ackFailed?, ageSumMs?, ageMaxMs?, dbErrors?,
-- deadLettered?, samples?, parked?}]: the figures are added to what the
-- process's row of that minute holds (it flushes what it counted since its
-- last flush), and so are the ms its long-polls waited per queue (parked:
-- {queue: ms}); the samples, the minute's so far, replace the stored ones. Rows
-- older than `keep` are not written, stored ones older than it (of every
-- process) are deleted. All or nothing: a bad field raises 22023 naming it.
-- -> {"rows", "samples" (written), "purged"}.
CREATE OR REPLACE FUNCTION pgcursor.record_process_minutes(gateway jsonb, rows jsonb,
                                                           keep interval DEFAULT interval '24 hours')
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    gw_host text;
    gw_pid  integer;
    gw_port integer;
    written bigint;
    sampled bigint;
    purged  bigint;
BEGIN
    keep := pgcursor_internal.keep_arg(keep);
    IF jsonb_typeof(gateway) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'gateway must be an object' USING ERRCODE = '22023';
    END IF;
    gw_host := pgcursor_internal.optional_text(gateway, 'hostname', 'gateway.hostname');
    IF gw_host IS NULL OR gw_host = '' THEN
        RAISE EXCEPTION 'gateway.hostname must be a non-empty string' USING ERRCODE = '22023';
    END IF;
    PERFORM pgcursor_internal.refuse_long_key('gateway.hostname', gw_host);
    gw_pid := pgcursor_internal.integer_arg(gateway, 'pid', 1, 2147483647, 'gateway.pid', 'a positive integer');
    gw_port := pgcursor_internal.integer_arg(gateway, 'port', 0, 65535, 'gateway.port', 'a port number');
    IF gw_pid IS NULL OR gw_port IS NULL THEN
        RAISE EXCEPTION 'gateway needs hostname, pid and port' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(rows) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'rows must be an array' USING ERRCODE = '22023';
    END IF;
    -- Every row checked, its samples too, before anything is written.
    PERFORM count(*)
       FROM jsonb_array_elements(rows) WITH ORDINALITY e(r, n)
      CROSS JOIN LATERAL pgcursor_internal.process_minute_row(e.r, e.n - 1, gw_host, gw_pid, gw_port) m
       LEFT JOIN LATERAL pgcursor_internal.process_sample_rows(e.r, e.n - 1, gw_host, gw_pid) s ON true
       LEFT JOIN LATERAL pgcursor_internal.process_parked_rows(e.r, e.n - 1) w ON true;
    IF (SELECT count(DISTINCT pgcursor_internal.minute_arg(e.r, '')) <> count(*)
          FROM jsonb_array_elements(rows) e(r)) THEN
        RAISE EXCEPTION 'rows name a minute twice' USING ERRCODE = '22023';
    END IF;
    INSERT INTO pgcursor.gateway_process_minutes AS t
    SELECT m.*
      FROM jsonb_array_elements(rows) WITH ORDINALITY e(r, n)
     CROSS JOIN LATERAL pgcursor_internal.process_minute_row(e.r, e.n - 1, gw_host, gw_pid, gw_port) m
     WHERE m.minute >= now() - keep
     ORDER BY m.minute
    ON CONFLICT (minute, hostname, pid) DO UPDATE SET
        port = excluded.port,
        push_requests = t.push_requests + excluded.push_requests,
        pop_requests = t.pop_requests + excluded.pop_requests,
        ack_requests = t.ack_requests + excluded.ack_requests,
        transactions = t.transactions + excluded.transactions,
        push_messages = t.push_messages + excluded.push_messages,
        pop_messages = t.pop_messages + excluded.pop_messages,
        ack_messages = t.ack_messages + excluded.ack_messages,
        ack_failed = t.ack_failed + excluded.ack_failed,
        age_sum_ms = t.age_sum_ms + excluded.age_sum_ms,
        age_max_ms = greatest(t.age_max_ms, excluded.age_max_ms),
        db_errors = t.db_errors + excluded.db_errors,
        dead_lettered = t.dead_lettered + excluded.dead_lettered;
    GET DIAGNOSTICS written = ROW_COUNT;
    INSERT INTO pgcursor.gateway_process_samples AS t
    SELECT pgcursor_internal.minute_arg(e.r, ''), s.hostname, s.pid, s.gauge, s.samples, s.avg, s.min, s.max,
           s.last
      FROM jsonb_array_elements(rows) WITH ORDINALITY e(r, n)
     CROSS JOIN LATERAL pgcursor_internal.process_sample_rows(e.r, e.n - 1, gw_host, gw_pid) s
     WHERE pgcursor_internal.minute_arg(e.r, '') >= now() - keep
     ORDER BY 1, 4
    ON CONFLICT (minute, hostname, pid, gauge) DO UPDATE SET
        samples = excluded.samples, avg = excluded.avg, min = excluded.min, max = excluded.max,
        last = excluded.last;
    GET DIAGNOSTICS sampled = ROW_COUNT;
    INSERT INTO pgcursor.gateway_process_parked AS t
    SELECT pgcursor_internal.minute_arg(e.r, ''), gw_host, gw_pid, w.queue, w.parked_ms
      FROM jsonb_array_elements(rows) WITH ORDINALITY e(r, n)
     CROSS JOIN LATERAL pgcursor_internal.process_parked_rows(e.r, e.n - 1) w
     WHERE pgcursor_internal.minute_arg(e.r, '') >= now() - keep
     ORDER BY 1, 4
    ON CONFLICT (minute, hostname, pid, queue) DO UPDATE SET parked_ms = t.parked_ms + excluded.parked_ms;
    DELETE FROM pgcursor.gateway_process_minutes t WHERE t.minute < now() - keep;
    GET DIAGNOSTICS purged = ROW_COUNT;
    DELETE FROM pgcursor.gateway_process_samples t WHERE t.minute < now() - keep;
    DELETE FROM pgcursor.gateway_process_parked t WHERE t.minute < now() - keep;
    RETURN jsonb_build_object('rows', written, 'samples', sampled, 'purged', purged);
END $$;
