-- Traces (docs/sql-api.md "Traces"): events a consumer records against a
-- message, each with any number of names, read back by message, by name, and
-- as the list of names. They go with their message (delete_message,
-- retention).
--
--   SELECT pgcursor.record_trace('{"partitionId":"0190...","transactionId":"order-42","data":{"text":"charged"},"traceNames":["order-42"]}');
--   SELECT pgcursor.message_traces('0190...'::uuid, 'order-42');
--   SELECT pgcursor.traces_by_name('order-42', 100, 0);
--   SELECT pgcursor.trace_names(50, 0);

-- traceNames: an array of strings, one string, or absent/null (none).
-- Duplicates collapse; empty strings are names like any other.
CREATE OR REPLACE FUNCTION pgcursor_internal.trace_names_arg(req jsonb)
RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := req -> 'traceNames';
    err text;
BEGIN
    IF v IS NULL OR v = 'null'::jsonb THEN
        RETURN '{}';
    ELSIF jsonb_typeof(v) = 'string' THEN
        PERFORM pgcursor_internal.refuse_long_key('traceNames', v #>> '{}');
        RETURN ARRAY[v #>> '{}'];
    ELSIF jsonb_typeof(v) = 'array'
          AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v) e WHERE jsonb_typeof(e) <> 'string') THEN
        SELECT pgcursor_internal.long_key_error(format('traceNames[%s]', e.n - 1), e.name) INTO err
          FROM jsonb_array_elements_text(v) WITH ORDINALITY e(name, n)
         WHERE pgcursor_internal.too_long_for_a_key(e.name)
         ORDER BY e.n LIMIT 1;
        IF err IS NOT NULL THEN
            RAISE EXCEPTION '%', err USING ERRCODE = '22023';
        END IF;
        RETURN ARRAY(SELECT DISTINCT e FROM jsonb_array_elements_text(v) e ORDER BY 1);
    END IF;
    RAISE EXCEPTION 'traceNames must be an array of strings, a string or null' USING ERRCODE = '22023';
END $$;

-- record_trace: {transactionId, partitionId, data, eventType? ("info"),
-- consumerGroup? ("__QUEUE_MODE__"), traceNames?, workerId? (who recorded
-- it; the gateway sends its own)} -> {"success": true, "traceId": <the
-- event's id>}. The message must be stored in that partition (P0002).
CREATE OR REPLACE FUNCTION pgcursor.record_trace(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    txid  text;
    pid   uuid;
    names text[];
    one   text;
    event pgcursor.trace_events;
BEGIN
    IF jsonb_typeof(req) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'request must be a JSON object' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(req -> 'transactionId') IS DISTINCT FROM 'string'
       OR NOT pgcursor_internal.is_uuid_value(req -> 'partitionId', false) THEN
        RAISE EXCEPTION 'transactionId and partitionId are required' USING ERRCODE = '22023';
    END IF;
    IF req -> 'data' IS NULL OR req -> 'data' = 'null'::jsonb THEN
        RAISE EXCEPTION 'data is required' USING ERRCODE = '22023';
    END IF;
    txid := req ->> 'transactionId';
    pid := (req ->> 'partitionId')::uuid;
    names := pgcursor_internal.trace_names_arg(req);
    -- A group's name, as where pops and acks create it (docs/http-api.md).
    PERFORM pgcursor_internal.refuse_long_key('consumerGroup', pgcursor_internal.group_arg(req));
    IF NOT EXISTS (SELECT 1 FROM pgcursor.messages m  -- the stored message (index messages_transaction_id)
                    WHERE m.partition_id = pid AND m.transaction_id = txid) THEN
        RAISE EXCEPTION 'Message not found' USING ERRCODE = 'P0002';
    END IF;
    BEGIN
        INSERT INTO pgcursor.trace_events (partition_id, id, transaction_id, consumer_group, event_type, data,
                                           worker_id, created_at)
        VALUES (pid, pgcursor_internal.uuidv7(), txid,
                pgcursor_internal.group_arg(req),
                coalesce(pgcursor_internal.optional_text(req, 'eventType'), 'info'), req -> 'data',
                pgcursor_internal.optional_text(req, 'workerId'), clock_timestamp())
        RETURNING * INTO event;
    EXCEPTION WHEN foreign_key_violation THEN
        -- The queue was deleted since the message was found. (Not a lock on
        -- the partition first: on Citus that locks the whole table, and
        -- traces deadlocked with pushes creating partitions.)
        RAISE EXCEPTION 'Message not found' USING ERRCODE = 'P0002';
    END;
    -- One INSERT ... VALUES per name: Citus runs an INSERT ... SELECT through
    -- the coordinator and answers a name too long for the index as an
    -- internal error (XX000) instead of PostgreSQL's 54000, the client's 400.
    FOREACH one IN ARRAY names LOOP
        INSERT INTO pgcursor.trace_names (partition_id, trace_id, name, created_at)
        VALUES (pid, event.id, one, event.created_at);
    END LOOP;
    RETURN jsonb_build_object('success', true, 'traceId', event.id);
END $$;

-- (An event's names are read by a LATERAL join in each query, not by a
-- function per event: on Citus the query about one partition runs on its
-- worker, where a function querying trace_names would be a distributed
-- query run from a shard, which Citus refuses.)
DROP FUNCTION IF EXISTS pgcursor_internal.event_names(uuid, uuid);

-- An event's data (and its message's payload, with_payload) in a listing
-- with a byte budget (message_traces, traces_by_name) when it `fits` (the
-- data and payloads up to it weigh at most the budget, as pops weigh
-- payloads: payload_weight) or it is the listing's first; else nulls and
-- "dataOmitted": true.
CREATE OR REPLACE FUNCTION pgcursor_internal.trace_data(fits boolean, data jsonb, payload jsonb, with_payload boolean)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN fits
                THEN jsonb_build_object('data', data)
                     || CASE WHEN with_payload THEN jsonb_build_object('message_payload', payload) ELSE '{}' END
                ELSE jsonb_build_object('data', NULL, 'dataOmitted', true)
                     || CASE WHEN with_payload THEN jsonb_build_object('message_payload', NULL) ELSE '{}' END
           END
$$;

-- message_traces: {"traces": [{id, event_type, data, consumer_group,
-- worker_id, created_at, trace_names}]} of one message, oldest first; an
-- unknown message has none. Every event is listed, but its data only while
-- the events' data up to it weigh at most max_bytes (the first in any
-- case): the rest answer data null and "dataOmitted": true. A message has
-- as many events as clients record, each up to a request body's size: an
-- answer of them all could be larger than jsonb holds (256 MB).
DROP FUNCTION IF EXISTS pgcursor.message_traces(uuid, text);
CREATE OR REPLACE FUNCTION pgcursor.message_traces(pid uuid, txid text, max_bytes integer DEFAULT 16777216)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$  -- plpgsql: Citus plans no SQL function with parameters
DECLARE
    e      record;
    events jsonb[] := '{}';
    spent  bigint := 0;  -- the weight of the data up to e
BEGIN
    PERFORM pgcursor_internal.check_max_bytes(max_bytes);
    FOR e IN SELECT x.*, n.names FROM pgcursor.trace_events x
               CROSS JOIN LATERAL (SELECT coalesce(jsonb_agg(y.name ORDER BY y.name), '[]'::jsonb) AS names
                                     FROM pgcursor.trace_names y
                                    WHERE y.partition_id = x.partition_id AND y.trace_id = x.id) n
              WHERE x.partition_id = pid AND x.transaction_id = txid
              ORDER BY x.created_at, x.id LOOP
        spent := spent + coalesce(pgcursor_internal.payload_weight(e.data), 0);
        events := events || (jsonb_build_object(
            'id', e.id, 'event_type', e.event_type, 'consumer_group', e.consumer_group,
            'worker_id', e.worker_id, 'created_at', pgcursor_internal.rfc3339_utc(e.created_at),
            'trace_names', e.names)
            || pgcursor_internal.trace_data(spent <= max_bytes OR cardinality(events) = 0, e.data, NULL, false));
    END LOOP;
    RETURN jsonb_build_object('traces', to_jsonb(events));
END $$;

-- A listing's byte budget: positive; else 22023 naming it.
CREATE OR REPLACE FUNCTION pgcursor_internal.check_max_bytes(max_bytes integer)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF max_bytes IS NULL OR max_bytes < 1 THEN
        RAISE EXCEPTION 'maxBytes must be a positive integer' USING ERRCODE = '22023';
    END IF;
END $$;

-- A page of a listing: lim from 1 to 1000, skip from 0; else 22023 naming it.
CREATE OR REPLACE FUNCTION pgcursor_internal.check_page(lim integer, skip integer)
RETURNS void LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF lim IS NULL OR lim < 1 OR lim > 1000 THEN
        RAISE EXCEPTION 'limit must be an integer from 1 to 1000' USING ERRCODE = '22023';
    END IF;
    IF skip IS NULL OR skip < 0 THEN
        RAISE EXCEPTION 'offset must be a non-negative integer' USING ERRCODE = '22023';
    END IF;
END $$;

-- traces_by_name: the events carrying a name, oldest first, page by
-- lim (1..1000) and skip -> {"traces": [{id, transaction_id, partition_id,
-- event_type, data, consumer_group, worker_id, created_at, queue_name,
-- partition_name, trace_names, message_payload (null once the message is
-- gone)}], "total": <events with the name>, "pagination": {limit, offset}}.
-- Every event of the page is listed, but its data and message_payload only
-- while the page's data and payloads up to it weigh at most max_bytes (the
-- first in any case): the rest answer both null and "dataOmitted": true.
DROP FUNCTION IF EXISTS pgcursor.traces_by_name(text, integer, integer);
CREATE OR REPLACE FUNCTION pgcursor.traces_by_name(
    name text, lim integer DEFAULT 100, skip integer DEFAULT 0, max_bytes integer DEFAULT 16777216)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    e      record;
    events jsonb[] := '{}';
    spent  bigint := 0;  -- the weight of the data and payloads up to e
BEGIN
    PERFORM pgcursor_internal.check_page(lim, skip);
    PERFORM pgcursor_internal.check_max_bytes(max_bytes);
    FOR e IN SELECT x.*, p.queue, p.name AS partition_name, en.names,
                    (SELECT m.payload FROM pgcursor.messages m
                      WHERE m.partition_id = x.partition_id AND m.transaction_id = x.transaction_id
                      ORDER BY m.msg_offset LIMIT 1) AS payload
               FROM (SELECT y.partition_id, y.trace_id, y.created_at FROM pgcursor.trace_names y
                      WHERE y.name = traces_by_name.name
                      ORDER BY y.created_at, y.trace_id OFFSET skip LIMIT lim) n
               JOIN pgcursor.trace_events x ON x.partition_id = n.partition_id AND x.id = n.trace_id
               CROSS JOIN LATERAL (SELECT coalesce(jsonb_agg(y.name ORDER BY y.name), '[]'::jsonb) AS names
                                     FROM pgcursor.trace_names y
                                    WHERE y.partition_id = x.partition_id AND y.trace_id = x.id) en
               JOIN pgcursor.partitions p ON p.id = x.partition_id
              ORDER BY n.created_at, n.trace_id LOOP
        spent := spent + coalesce(pgcursor_internal.payload_weight(e.data), 0)
                       + coalesce(pgcursor_internal.payload_weight(e.payload), 0);
        events := events || (jsonb_build_object(
            'id', e.id, 'transaction_id', e.transaction_id, 'partition_id', e.partition_id,
            'event_type', e.event_type, 'consumer_group', e.consumer_group,
            'worker_id', e.worker_id, 'created_at', pgcursor_internal.rfc3339_utc(e.created_at),
            'queue_name', e.queue, 'partition_name', e.partition_name, 'trace_names', e.names)
            || pgcursor_internal.trace_data(spent <= max_bytes OR cardinality(events) = 0, e.data, e.payload, true));
    END LOOP;
    RETURN jsonb_build_object('traces', to_jsonb(events),
                              'total', (SELECT count(*) FROM pgcursor.trace_names x
                                         WHERE x.name = traces_by_name.name),
                              'pagination', jsonb_build_object('limit', lim, 'offset', skip));
END $$;

-- trace_names: {"trace_names": [{trace_name, trace_count (events),
-- message_count (distinct messages), last_seen}], "total": <distinct names>,
-- "pagination": {limit, offset}}, the most recently seen first.
CREATE OR REPLACE FUNCTION pgcursor.trace_names(lim integer DEFAULT 50, skip integer DEFAULT 0)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    page jsonb;
BEGIN
    PERFORM pgcursor_internal.check_page(lim, skip);
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'trace_name', s.name, 'trace_count', s.events, 'message_count', s.messages,
               'last_seen', pgcursor_internal.rfc3339_utc(s.last_seen))
             ORDER BY s.last_seen DESC, s.name), '[]'::jsonb)
      INTO page
      FROM (SELECT n.name, count(*) AS events,
                   count(DISTINCT (e.partition_id, e.transaction_id)) AS messages, max(n.created_at) AS last_seen
              FROM pgcursor.trace_names n
              JOIN pgcursor.trace_events e ON e.partition_id = n.partition_id AND e.id = n.trace_id
             GROUP BY n.name
             ORDER BY max(n.created_at) DESC, n.name OFFSET skip LIMIT lim) s;
    RETURN jsonb_build_object('trace_names', page,
                              'total', (SELECT count(DISTINCT x.name) FROM pgcursor.trace_names x),
                              'pagination', jsonb_build_object('limit', lim, 'offset', skip));
END $$;
