-- Traces (docs/sql-api.md "Traces"): record_trace (validation, names, the
-- message must exist), message_traces, traces_by_name (paging, total,
-- payload), trace_names, and traces going with their message (delete_message,
-- purge_messages, purge_completed_messages, evict_expired_messages).
BEGIN;
SELECT plan(46);

CREATE FUNCTION pg_temp.fill(q text, n int, opts jsonb DEFAULT '{}') RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgcursor.configure(jsonb_build_object('queue', q, 'options', opts));
    RETURN (pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'payload', jsonb_build_object('k', k),
                                            'transactionId', q || '-' || k) ORDER BY k)
        FROM generate_series(1, n) k))) -> 0 ->> 'partitionId')::uuid;
END $$;
CREATE FUNCTION pg_temp.trace(pid uuid, txid text, text_ text, names jsonb DEFAULT NULL, extra jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.record_trace(jsonb_build_object('partitionId', pid, 'transactionId', txid,
                                                    'data', jsonb_build_object('text', text_), 'traceNames', names)
                                 || extra)
$$;
CREATE FUNCTION pg_temp.events(pid uuid) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pgcursor.trace_events WHERE partition_id = pid
$$;

SELECT pg_temp.fill('t68q', 3) AS p \gset

-- record_trace
SELECT pg_temp.trace(:'p', 't68q-1', 'first', '["t68-b", "t68-a", "t68-b", ""]',
                     '{"eventType": "step", "consumerGroup": "billing", "workerId": "host:1"}') AS r1 \gset
SELECT is(:'r1'::jsonb ->> 'success', 'true', 'recorded');
SELECT is(:'r1'::jsonb - 'success' - 'traceId', '{}'::jsonb, 'answer: success and traceId only');
SELECT is((SELECT row(partition_id, transaction_id, consumer_group, event_type, data, worker_id)::text
             FROM pgcursor.trace_events WHERE id = (:'r1'::jsonb ->> 'traceId')::uuid),
          row(:'p'::uuid, 't68q-1', 'billing', 'step', '{"text": "first"}'::jsonb, 'host:1')::text,
          'the event is stored as sent; traceId is its id');
SELECT is(ARRAY(SELECT name FROM pgcursor.trace_names WHERE trace_id = (:'r1'::jsonb ->> 'traceId')::uuid ORDER BY name),
          ARRAY['', 't68-a', 't68-b'], 'names: duplicates collapse, an empty name is kept');
SELECT pg_temp.trace(:'p', 't68q-1', 'second', '"t68-a"') AS r2 \gset
SELECT is((SELECT row(consumer_group, event_type, worker_id)::text FROM pgcursor.trace_events
            WHERE id = (:'r2'::jsonb ->> 'traceId')::uuid),
          row('__QUEUE_MODE__', 'info', NULL::text)::text, 'defaults: __QUEUE_MODE__, info, no worker');
SELECT pg_temp.trace(:'p', 't68q-2', 'other', NULL) AS r3 \gset
SELECT is((SELECT count(*) FROM pgcursor.trace_names WHERE trace_id = (:'r3'::jsonb ->> 'traceId')::uuid), 0::bigint,
          'traceNames null: no names');
SELECT throws_ok($$SELECT pgcursor.record_trace('{"partitionId": "7a0e0d1e-0000-4000-8000-000000000000", "data": 1}')$$,
                 '22023', 'transactionId and partitionId are required', 'no transactionId');
SELECT throws_ok($$SELECT pgcursor.record_trace('{"transactionId": "x", "partitionId": "nope", "data": 1}')$$,
                 '22023', 'transactionId and partitionId are required', 'partitionId not a UUID');
SELECT throws_ok(format('SELECT pgcursor.record_trace(%L)', jsonb_build_object('transactionId', 't68q-1', 'partitionId', :'p')),
                 '22023', 'data is required', 'no data');
SELECT throws_ok(format('SELECT pgcursor.record_trace(%L)', jsonb_build_object('transactionId', 't68q-1', 'partitionId', :'p',
                                                                               'data', 1, 'traceNames', '[1]'::jsonb)),
                 '22023', 'traceNames must be an array of strings, a string or null', 'traceNames of numbers');
SELECT throws_ok(format('SELECT pgcursor.record_trace(%L)', jsonb_build_object('transactionId', 't68q-1', 'partitionId', :'p',
                                                                               'data', 1, 'consumerGroup', repeat('g', 1025))),
                 '22023', 'consumerGroup must be at most 1024 bytes', 'a consumerGroup too long for a group''s name');
SELECT throws_ok(format('SELECT pgcursor.record_trace(%L)', jsonb_build_object('transactionId', 't68q-9', 'partitionId', :'p',
                                                                               'data', 1)),
                 'P0002', 'Message not found', 'an unknown message');
SELECT throws_ok($$SELECT pgcursor.record_trace('{"transactionId": "t68q-1", "partitionId": "7a0e0d1e-0000-4000-8000-000000000000", "data": 1}')$$,
                 'P0002', 'Message not found', 'the message must be in that partition');

-- message_traces
SELECT is(jsonb_path_query_array(pgcursor.message_traces(:'p', 't68q-1'), '$.traces[*].data.text'),
          '["first", "second"]'::jsonb, 'by message, oldest first');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(pgcursor.message_traces(:'p', 't68q-1') #> '{traces,0}') k),
          ARRAY['consumer_group', 'created_at', 'data', 'event_type', 'id', 'trace_names', 'worker_id'],
          'the fields of an event');
SELECT is(pgcursor.message_traces(:'p', 't68q-1') #> '{traces,0,trace_names}', '["", "t68-a", "t68-b"]'::jsonb,
          'trace_names sorted');
SELECT is(pgcursor.message_traces(:'p', 'nothing'), '{"traces": []}'::jsonb, 'an unknown message: none');

-- traces_by_name
SELECT is(jsonb_path_query_array(pgcursor.traces_by_name('t68-a', 100, 0), '$.traces[*].data.text'),
          '["first", "second"]'::jsonb, 'by name, oldest first');
SELECT is(pgcursor.traces_by_name('t68-a', 1, 1) - 'traces',
          '{"total": 2, "pagination": {"limit": 1, "offset": 1}}'::jsonb, 'total counts every event; pagination echoed');
SELECT is(jsonb_path_query_array(pgcursor.traces_by_name('t68-a', 1, 1), '$.traces[*].data.text'), '["second"]'::jsonb,
          'limit and offset pick the page');
SELECT is((pgcursor.traces_by_name('t68-a', 1, 0) #> '{traces,0}') - ARRAY['id', 'created_at', 'partition_id'],
          '{"data": {"text": "first"}, "worker_id": "host:1", "event_type": "step", "queue_name": "t68q",
            "trace_names": ["", "t68-a", "t68-b"], "consumer_group": "billing", "partition_name": "Default",
            "transaction_id": "t68q-1", "message_payload": {"k": 1}}'::jsonb, 'the fields, with the message payload');
SELECT is(pgcursor.traces_by_name('t68-none'), '{"total": 0, "traces": [], "pagination": {"limit": 100, "offset": 0}}'::jsonb,
          'an unknown name');
SELECT throws_ok($$SELECT pgcursor.traces_by_name('t68-a', 0, 0)$$, '22023', 'limit must be an integer from 1 to 1000',
                 'limit 0');
SELECT throws_ok($$SELECT pgcursor.traces_by_name('t68-a', 10, -1)$$, '22023', 'offset must be a non-negative integer',
                 'a negative offset');

-- A byte budget: every event is listed, its data (and message_payload)
-- only while the data and payloads up to it weigh at most max_bytes (the
-- first in any case). Three events of about 1 kB on a message of queue
-- t68b, named big-t68 (apart from the rest of the file's).
SELECT pg_temp.fill('t68b', 1) AS pb \gset
SELECT count(pg_temp.trace(:'pb', 't68b-1', repeat(x, 1000), '"big-t68"')) AS traced FROM unnest(ARRAY['a', 'b', 'c']) x \gset
SELECT is(jsonb_path_query_array(pgcursor.message_traces(:'pb', 't68b-1', 2500), '$.traces[*].data.text'),
          jsonb_build_array(repeat('a', 1000), repeat('b', 1000)), 'message_traces at 2,500 bytes: the first two events'' data');
SELECT is(jsonb_path_query_array(pgcursor.message_traces(:'pb', 't68b-1', 2500), '$.traces[*].dataOmitted'),
          '[true]'::jsonb, '... the third listed with data null and dataOmitted');
SELECT is(pgcursor.message_traces(:'pb', 't68b-1', 2500) #> '{traces,2,data}', 'null'::jsonb, '... (its data null)');
SELECT is(jsonb_array_length(pgcursor.message_traces(:'pb', 't68b-1', 1) -> 'traces'), 3, 'at 1 byte: every event listed');
SELECT is(jsonb_path_query_array(pgcursor.message_traces(:'pb', 't68b-1', 1), '$.traces[*].data.text'),
          jsonb_build_array(repeat('a', 1000)), '... the first with its data in any case');
SELECT is(jsonb_path_query_array(pgcursor.message_traces(:'pb', 't68b-1'), '$.traces[*].dataOmitted'), '[]'::jsonb,
          'by default (16 MiB) all with their data');
SELECT is(jsonb_path_query_array(pgcursor.traces_by_name('big-t68', 100, 0, 2500), '$.traces[*].message_payload.k'),
          '[1, 1]'::jsonb, 'traces_by_name at 2,500 bytes: the first two with data and message_payload');
SELECT is((pgcursor.traces_by_name('big-t68', 100, 0, 2500) #> '{traces,2}')
              - ARRAY['id', 'created_at', 'partition_id', 'worker_id', 'event_type', 'consumer_group', 'trace_names'],
          '{"data": null, "dataOmitted": true, "message_payload": null, "queue_name": "t68b",
            "partition_name": "Default", "transaction_id": "t68b-1"}'::jsonb, '... the third without either');
SELECT is(pgcursor.traces_by_name('big-t68', 1, 2, 1) #> '{traces,0,data,text}', to_jsonb(repeat('c', 1000)),
          'the first event of a page has its data in any case');
SELECT throws_ok(format('SELECT pgcursor.message_traces(%L, %L, 0)', :'pb', 't68b-1'), '22023',
                 'maxBytes must be a positive integer', 'message_traces: maxBytes 0');
SELECT throws_ok($$SELECT pgcursor.traces_by_name('big-t68', 10, 0, -1)$$, '22023',
                 'maxBytes must be a positive integer', 'traces_by_name: a negative maxBytes');

-- trace_names
SELECT is(jsonb_path_query_array(pgcursor.trace_names(1000, 0), '$.trace_names[*] ? (@.trace_name starts with "t68-")'),
          jsonb_build_array(
              jsonb_build_object('trace_name', 't68-a', 'trace_count', 2, 'message_count', 1,
                                 'last_seen', pgcursor_internal.rfc3339_utc((SELECT created_at FROM pgcursor.trace_events
                                                                            WHERE id = (:'r2'::jsonb ->> 'traceId')::uuid))),
              jsonb_build_object('trace_name', 't68-b', 'trace_count', 1, 'message_count', 1,
                                 'last_seen', pgcursor_internal.rfc3339_utc((SELECT created_at FROM pgcursor.trace_events
                                                                            WHERE id = (:'r1'::jsonb ->> 'traceId')::uuid)))),
          'names with their counts, most recently seen first');
SELECT is(pgcursor.trace_names(1, 0) -> 'pagination', '{"limit": 1, "offset": 0}'::jsonb, 'pagination echoed');
SELECT is(jsonb_array_length(pgcursor.trace_names(1, 0) -> 'trace_names'), 1, 'limit applies');
SELECT is((pgcursor.trace_names(1, 0) ->> 'total')::bigint, (SELECT count(DISTINCT name) FROM pgcursor.trace_names),
          'total: distinct names');

-- Traces go with their message.
SELECT ok((pgcursor.delete_message(:'p', 't68q-1') ->> 'success')::boolean, 'delete_message');
SELECT is(pgcursor.message_traces(:'p', 't68q-1'), '{"traces": []}'::jsonb, 'delete_message deletes its traces');
SELECT is(pg_temp.events(:'p'), 1::bigint, 'and only its traces');
SELECT is(pgcursor.traces_by_name('t68-a') ->> 'total', '0', 'its names went with them');

SELECT pg_temp.fill('t68ret', 3, '{"retentionSeconds": 3600}') AS ret \gset
SELECT pg_temp.trace(:'ret', 't68ret-1', 'old') IS NOT NULL AS t1 \gset
SELECT pg_temp.trace(:'ret', 't68ret-3', 'new') IS NOT NULL AS t2 \gset
UPDATE pgcursor.messages SET created_at = now() - interval '2 hours' WHERE partition_id = :'ret' AND msg_offset < 3;
SELECT pgcursor.purge_messages() IS NOT NULL AS purged \gset
SELECT is(jsonb_path_query_array(pgcursor.message_traces(:'ret', 't68ret-1'), '$.traces[*].data.text')
          || jsonb_path_query_array(pgcursor.message_traces(:'ret', 't68ret-3'), '$.traces[*].data.text'),
          '["new"]'::jsonb, 'purge_messages deletes the traces of what it deleted');

SELECT pg_temp.fill('t68done', 2, '{"completedRetentionSeconds": 3600}') AS done \gset
SELECT pgcursor.pop('{"queue": "t68done", "batch": 1, "autoAck": true}') IS NOT NULL AS popped \gset
SELECT pg_temp.trace(:'done', 't68done-1', 'done') IS NOT NULL AS t3 \gset
SELECT pg_temp.trace(:'done', 't68done-2', 'pending') IS NOT NULL AS t4 \gset
UPDATE pgcursor.messages SET created_at = now() - interval '2 hours' WHERE partition_id = :'done';
SELECT pgcursor.purge_completed_messages() IS NOT NULL AS purged2 \gset
SELECT is((SELECT array_agg(data ->> 'text') FROM pgcursor.trace_events WHERE partition_id = :'done'), ARRAY['pending'],
          'purge_completed_messages deletes the traces of what it deleted');

SELECT pg_temp.fill('t68evict', 2, '{"maxWaitTimeSeconds": 60}') AS ev \gset
SELECT pg_temp.trace(:'ev', 't68evict-1', 'waited') IS NOT NULL AS t5 \gset
SELECT pg_temp.trace(:'ev', 't68evict-2', 'fresh') IS NOT NULL AS t6 \gset
UPDATE pgcursor.messages SET created_at = now() - interval '2 minutes' WHERE partition_id = :'ev' AND msg_offset = 1;
SELECT pgcursor.evict_expired_messages() IS NOT NULL AS evicted \gset
SELECT is((SELECT array_agg(data ->> 'text') FROM pgcursor.trace_events WHERE partition_id = :'ev'), ARRAY['fresh'],
          'evict_expired_messages deletes the traces of what it evicted');

SELECT * FROM finish();
ROLLBACK;
