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

-- One row of record_gateway_minutes' input, checked, as a table row: its
-- minute (unix seconds, any second of it), its queue (named, or the queue of
-- the partition it names; null when neither or the partition is gone) and
-- its figures (absent = 0). A bad field raises 22023 naming rows[i].field.
CREATE OR REPLACE FUNCTION pgcursor_internal.gateway_minute_row(r jsonb, i bigint)
RETURNS pgcursor.gateway_minutes LANGUAGE plpgsql STABLE AS $$
DECLARE
    at  text := 'rows[' || i || '].';
    g   pgcursor.gateway_minutes;
    sec bigint;
    figure CONSTANT text[] := ARRAY['pushRequests', 'popRequests', 'popMessages', 'popEmpty', 'ackRequests',
                                    'ackMessages', 'ackFailed', 'transactions', 'ageSumMs', 'ageMaxMs',
                                    'pushMessages', 'parkedMs', 'dbErrors'];
    n   bigint[];
BEGIN
    IF jsonb_typeof(r) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'rows[%] must be an object', i USING ERRCODE = '22023';
    END IF;
    sec := pgcursor_internal.non_negative_bigint_arg(r, 'minute', at || 'minute');
    IF sec IS NULL OR sec > 253402300799 THEN  -- the last second of 9999
        RAISE EXCEPTION '%minute must be a time in unix seconds', at USING ERRCODE = '22023';
    END IF;
    g.minute := to_timestamp(sec - sec % 60);
    g.queue := pgcursor_internal.optional_text(r, 'queue', at || 'queue');
    IF g.queue IS NULL AND r ? 'partitionId' THEN
        IF NOT pgcursor_internal.is_uuid_value(r -> 'partitionId', true) THEN
            RAISE EXCEPTION '%partitionId must be a UUID string', at USING ERRCODE = '22023';
        END IF;
        g.queue := (SELECT p.queue FROM pgcursor.partitions p WHERE p.id = (r ->> 'partitionId')::uuid);
    END IF;
    n := ARRAY(SELECT coalesce(pgcursor_internal.non_negative_bigint_arg(r, f, at || f), 0)
                 FROM unnest(figure) WITH ORDINALITY u(f, k) ORDER BY k);
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
