-- pgcursor.push: auto-create, dense offsets, duplicates, validation, concurrency.
BEGIN;
SELECT plan(48);

CREATE TEMP TABLE r ON COMMIT DROP AS
SELECT pgcursor.push('{"items":[{"queue":"t10","payload":{"n":1}},
                                {"queue":"t10","partition":"Default","payload":{"n":2},"transactionId":"a"}]}') AS out;

-- queue and partition created on first use, with the defaults
SELECT is((SELECT lease_time FROM pgcursor.queues WHERE name = 't10'), 300, 'queue created on first push with default leaseTime');
SELECT is((SELECT retry_limit FROM pgcursor.queues WHERE name = 't10'), 3, 'queue created with default retryLimit');
SELECT is((SELECT count(*)::int FROM pgcursor.partitions WHERE queue = 't10' AND name = 'Default'), 1,
          'partition Default created');
SELECT is((SELECT head FROM pgcursor.partitions JOIN pgcursor.partition_heads ON partition_id = id WHERE queue = 't10'), 2::bigint, 'head = 2 after two items');

-- answer shape
SELECT is(jsonb_array_length((SELECT out FROM r)), 2, 'one result per item');
SELECT is((SELECT out -> 0 FROM r) - 'transactionId' - 'partitionId' - 'message_id',
          '{"index":0,"partition":"Default","queue":"t10","offset":1,"status":"queued","error":null}'::jsonb,
          'first item: index 0, offset 1, queued');
SELECT is((SELECT out -> 0 ->> 'message_id' FROM r),
          (SELECT m.message_id::text FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
            WHERE p.queue = 't10' AND m.msg_offset = 1),
          'message_id: the stored message''s own id');
SELECT isnt((SELECT out -> 0 ->> 'message_id' FROM r), (SELECT out -> 1 ->> 'message_id' FROM r),
            'each message has its own message_id');
SELECT is((SELECT out -> 1 ->> 'transactionId' FROM r), 'a', 'given transactionId echoed');
SELECT is((SELECT (out -> 1 ->> 'offset')::int FROM r), 2, 'second item gets offset 2');
SELECT matches((SELECT out -> 0 ->> 'transactionId' FROM r),
               '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$',
               'missing transactionId defaults to a UUIDv7');
SELECT is((SELECT out -> 0 ->> 'transactionId' FROM r), (SELECT out -> 0 ->> 'message_id' FROM r),
          '... the message_id itself (one UUIDv7 per item)');
SELECT matches((SELECT out -> 1 ->> 'message_id' FROM r),
               '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$',
               'with a transactionId given, the message_id is a UUIDv7 of its own');
SELECT is((SELECT (out -> 0 ->> 'partitionId')::uuid FROM r),
          (SELECT id FROM pgcursor.partitions WHERE queue = 't10' AND name = 'Default'), 'partitionId answered');
SELECT is((SELECT payload FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't10' AND m.msg_offset = 2), '{"n":2}'::jsonb, 'payload stored');
SELECT is((SELECT count(*)::int FROM pgcursor.transaction_index t JOIN pgcursor.partitions p ON p.id = t.partition_id
           WHERE p.queue = 't10'), 0, 'one row per message: the message is its own transaction index entry');

-- duplicates: across requests, within a request, mixed with new items
SELECT is(pgcursor.push('{"items":[{"queue":"t10","payload":1,"transactionId":"a"},
                                   {"queue":"t10","payload":2,"transactionId":"b"},
                                   {"queue":"t10","payload":3,"transactionId":"b"},
                                   {"queue":"t10","payload":4,"transactionId":"c"}]}')
          @> '[{"index":0,"status":"duplicate","offset":2},{"index":1,"status":"queued","offset":3},
               {"index":2,"status":"duplicate","offset":3},{"index":3,"status":"queued","offset":4}]',
          true, 'duplicate across requests and within one request; new items stay dense');
SELECT is((SELECT head FROM pgcursor.partitions JOIN pgcursor.partition_heads ON partition_id = id WHERE queue = 't10' AND name = 'Default'), 4::bigint,
          'duplicates do not move the head');
SELECT is((SELECT count(*)::int FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't10'), 4, 'nothing written for duplicates');
SELECT is((SELECT payload FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't10' AND m.transaction_id = 'b'), '2'::jsonb, 'first occurrence in a request wins');
SELECT is((SELECT array_agg(msg_offset ORDER BY msg_offset) FROM pgcursor.messages m
           JOIN pgcursor.partitions p ON p.id = m.partition_id WHERE p.queue = 't10'),
          '{1,2,3,4}'::bigint[], 'offsets are dense');

-- the same transactionId in another partition is another message
SELECT is((pgcursor.push('{"items":[{"queue":"t10","partition":"eu","payload":1,"transactionId":"a"}]}') -> 0)
          - 'partitionId' - 'transactionId' - 'message_id',
          '{"index":0,"partition":"eu","queue":"t10","offset":1,"status":"queued","error":null}'::jsonb,
          'same transactionId in another partition: queued at offset 1 there');

-- payload may be any JSON value; traceId stored
SELECT is(pgcursor.push('{"items":[{"queue":"t10b","payload":"text"},{"queue":"t10b","payload":[1,2]},
                                   {"queue":"t10b","payload":null},{"queue":"t10b","payload":false,
                                    "traceId":"0190b6f2-1234-7000-8000-00000000abcd"}]}') @> '[{"status":"queued"}]',
          true, 'string, array, null and boolean payloads accepted');
SELECT is((SELECT array_agg(coalesce(payload, 'null') ORDER BY msg_offset) FROM pgcursor.messages m
           JOIN pgcursor.partitions p ON p.id = m.partition_id WHERE p.queue = 't10b'),
          ARRAY['"text"', '[1,2]', 'null', 'false']::jsonb[], 'payloads stored as sent');
SELECT is((SELECT trace_id FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't10b' AND msg_offset = 4), '0190b6f2-1234-7000-8000-00000000abcd'::uuid, 'traceId stored');
SELECT is(pgcursor.push('{"items":[]}'), '[]'::jsonb, 'empty items: empty answer');

-- several queues and partitions in one request keep request order
SELECT is((SELECT jsonb_agg(jsonb_build_array(x ->> 'queue', x ->> 'partition', x -> 'offset'))
           FROM jsonb_array_elements(pgcursor.push('{"items":[{"queue":"t10c","partition":"x","payload":1},
                {"queue":"t10d","payload":1},{"queue":"t10c","partition":"y","payload":1},
                {"queue":"t10c","partition":"x","payload":1}]}')) x),
          '[["t10c","x",1],["t10d","Default",1],["t10c","y",1],["t10c","x",2]]'::jsonb,
          'mixed queues/partitions: request order, per-partition offsets');

-- validation: 22023, naming the field; nothing written
SELECT throws_ok($$SELECT pgcursor.push('{"items":{}}')$$, '22023', 'items is required and must be an array', 'items not an array');
SELECT throws_ok($$SELECT pgcursor.push('{}')$$, '22023', 'items is required and must be an array', 'items missing');
SELECT throws_ok($$SELECT pgcursor.push('{"items":[{"queue":"t10","payload":1},{"payload":1}]}')$$,
                 '22023', 'items[1].queue is required and must be a string', 'missing queue');
SELECT throws_ok($$SELECT pgcursor.push('{"items":[{"queue":"t10"}]}')$$,
                 '22023', 'items[0].payload is required', 'missing payload');
SELECT throws_ok($$SELECT pgcursor.push('{"items":[{"queue":"t10","payload":1,"transactionId":5}]}')$$,
                 '22023', 'items[0].transactionId must be a non-empty string', 'non-string transactionId');
SELECT throws_ok(format($$SELECT pgcursor.push('{"items":[{"queue":"t10","payload":1,"transactionId":"%s"}]}')$$, repeat('é', 513)),
                 '22023', 'items[0].transactionId must be at most 1024 bytes', 'a transactionId over 1024 bytes');
SELECT lives_ok(format($$SELECT pgcursor.push('{"items":[{"queue":"t10x","payload":1,"transactionId":"%s"}]}')$$, repeat('é', 512)),
                'a transactionId of 1024 bytes is pushed');
SELECT throws_ok($$SELECT pgcursor.push('{"items":[{"queue":"t10","payload":1,"traceId":"nope"}]}')$$,
                 '22023', 'items[0].traceId must be a UUID string', 'invalid traceId');
SELECT throws_ok($$SELECT pgcursor.push('{"items":[{"queue":"t10","payload":1,"partition":7}]}')$$,
                 '22023', 'items[0].partition must be a non-empty string', 'non-string partition');
SELECT throws_ok($$SELECT pgcursor.push('{"items":[3]}')$$, '22023', 'items[0] must be an object', 'item not an object');
SELECT is((SELECT head FROM pgcursor.partitions JOIN pgcursor.partition_heads ON partition_id = id WHERE queue = 't10' AND name = 'Default'), 4::bigint,
          'a rejected request writes nothing, not even its valid items');

-- concurrency: two sessions push to one partition at once (through dblink,
-- committed, cleaned up below); offsets stay dense and each id lands once.
\ir lib/dblink.sql
DO $$ BEGIN
    PERFORM pg_temp.open_sessions('t10a', 't10b');
    PERFORM * FROM dblink('t10a', $q$SELECT pgcursor.delete_queue('t10_concurrent')$q$) AS t(x jsonb);
END $$;
-- each session: 20 transactions of 50 items; items 0..24 of every batch share ids across sessions
SELECT is(dblink_send_query(conn, format($q$
    DO $do$ BEGIN
        FOR i IN 1..20 LOOP
            PERFORM pgcursor.push(jsonb_build_object('items', (
                SELECT jsonb_agg(jsonb_build_object('queue', 't10_concurrent', 'payload', k,
                           'transactionId', CASE WHEN k < 25 THEN 'shared-' || i || '-' || k
                                                 ELSE '%s-' || i || '-' || k END))
                FROM generate_series(0, 49) k)));
            COMMIT;
        END LOOP;
    END $do$ $q$, conn)), 1, 'session ' || conn || ' started')
FROM unnest(ARRAY['t10a', 't10b']) conn;
SELECT is((SELECT count(*)::int FROM dblink_get_result(conn) AS t(x text)), 1, 'session ' || conn || ' finished')
FROM unnest(ARRAY['t10a', 't10b']) conn;
SELECT is((SELECT count(*)::int FROM dblink_get_result(conn) AS t(x text)), 0, 'session ' || conn || ' drained')
FROM unnest(ARRAY['t10a', 't10b']) conn;
SELECT is((SELECT jsonb_build_array(count(*), count(DISTINCT msg_offset), max(msg_offset), count(DISTINCT transaction_id))
           FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't10_concurrent'),
          '[1500, 1500, 1500, 1500]'::jsonb, 'concurrent pushes: 1500 dense offsets, each id once');
SELECT is((SELECT head FROM pgcursor.partitions JOIN pgcursor.partition_heads ON partition_id = id WHERE queue = 't10_concurrent'), 1500::bigint, 'head matches');
DO $$ BEGIN
    PERFORM * FROM dblink('t10a', $q$SELECT pgcursor.delete_queue('t10_concurrent')$q$) AS t(x jsonb);
    PERFORM pg_temp.close_sessions('t10a', 't10b');
END $$;

-- A queue created by its first push keeps namespace and task null, even
-- when its name looks like Queen's ns.task.queue (wire-admin §11.19).
SELECT pgcursor.push('{"items":[{"queue":"ns10.orders.ship","payload":1}]}');
SELECT is((SELECT format('%s/%s', coalesce(namespace, 'null'), coalesce(task, 'null')) FROM pgcursor.queues WHERE name = 'ns10.orders.ship'),
          'null/null', 'a dotted name pushed first: namespace and task stay null');
SELECT is(jsonb_array_length(pgcursor.pop('{"namespace": "ns10", "batch": 10}') -> 'messages'), 0,
          '... so a pop of namespace ns10 finds nothing in it');

SELECT * FROM finish();
ROLLBACK;
