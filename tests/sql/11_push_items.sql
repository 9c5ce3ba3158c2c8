-- pgcursor.push_items: the push with its items as arrays and its answer as rows.
BEGIN;
SELECT plan(36);

CREATE TEMP TABLE r ON COMMIT DROP AS
SELECT * FROM pgcursor.push_items(ARRAY['t11', 't11', 't11', 't11'],
                                  ARRAY['{"n": 1}', 'null', '"x"', '2']::jsonb[],
                                  ARRAY[NULL, 'eu', NULL, NULL],
                                  ARRAY[NULL, NULL, 'tx-a', 'tx-a']);

SELECT is((SELECT array_agg(index ORDER BY index) FROM r), '{0,1,2,3}'::int[], 'one row per item, indexed from 0');
SELECT is((SELECT array_agg(partition || ':' || coalesce(msg_offset::text, '-') || ':' || status ORDER BY index) FROM r),
          '{Default:1:queued,eu:1:queued,Default:2:queued,Default:2:duplicate}'::text[],
          'a NULL partition is Default; offsets dense per partition; a repeat within the call is a duplicate');
SELECT is((SELECT partition_id FROM r WHERE index = 1),
          (SELECT id FROM pgcursor.partitions WHERE queue = 't11' AND name = 'eu'), 'partition_id answered');
SELECT is((SELECT payload FROM pgcursor.messages m JOIN r ON r.partition_id = m.partition_id AND r.msg_offset = m.msg_offset
            WHERE r.index = 1), 'null'::jsonb, 'JSON null is a payload, stored as sent');
SELECT is((SELECT transaction_id FROM r WHERE index = 0), (SELECT message_id::text FROM r WHERE index = 0),
          'no transactionId: the message_id is it');
SELECT is((SELECT message_id FROM r WHERE index = 3), (SELECT message_id FROM r WHERE index = 2),
          'the duplicate answers the first occurrence''s message_id');
SELECT ok((SELECT bool_and(message_id::text ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$') FROM r),
          'message ids are UUIDv7 (version 7, RFC 9562 variant)');
SELECT is((SELECT array_agg(message_id ORDER BY message_id) FROM r WHERE index < 3),
          (SELECT array_agg(message_id ORDER BY index) FROM r WHERE index < 3),
          'one push''s message ids increase in request order');
SELECT is((SELECT count(DISTINCT message_id)::int FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
            WHERE p.queue = 't11'), 3, 'three messages stored, each with its own id');

-- without transactionIds nothing can be a duplicate (push_write's short way):
-- several partitions interleaved, dense offsets, request order, traceIds kept
CREATE TEMP TABLE f ON COMMIT DROP AS
SELECT * FROM pgcursor.push_items(ARRAY['t11f', 't11f', 't11f', 't11f', 't11f'], ARRAY['1', '2', '3', '4', '5']::jsonb[],
                                  ARRAY['a', 'b', 'a', NULL, 'b'], NULL,
                                  ARRAY[NULL, '0190b6f2-1234-7000-8000-00000000abcd', NULL, NULL, NULL]::uuid[]);
SELECT is((SELECT array_agg(partition || ':' || msg_offset || ':' || status ORDER BY index) FROM f),
          '{a:1:queued,b:1:queued,a:2:queued,Default:1:queued,b:2:queued}'::text[],
          'no transactionIds: offsets dense per partition, in request order');
SELECT is((SELECT array_agg(m.payload::text || '@' || coalesce(m.trace_id::text, '-') ORDER BY f.index)
             FROM f JOIN pgcursor.messages m ON m.partition_id = f.partition_id AND m.msg_offset = f.msg_offset),
          '{1@-,2@0190b6f2-1234-7000-8000-00000000abcd,3@-,4@-,5@-}'::text[], 'each payload and traceId stored with its item');
SELECT is((SELECT array_agg(p.name || '=' || h.head ORDER BY p.name) FROM pgcursor.partitions p
            JOIN pgcursor.partition_heads h ON h.partition_id = p.id WHERE p.queue = 't11f'),
          '{Default=1,a=2,b=2}'::text[], 'each partition''s head moved by its items');

-- the same request through push(jsonb) answers the same, field for field
SELECT is((SELECT jsonb_agg(x - 'message_id' - 'partitionId' - 'transactionId' ORDER BY (x ->> 'index')::int)
             FROM jsonb_array_elements(pgcursor.push('{"items": [{"queue": "t11j", "payload": 1},
                  {"queue": "t11j", "payload": 2, "partition": "eu"}, {"queue": "t11j", "payload": 3, "transactionId": "a"},
                  {"queue": "t11j", "payload": 4, "transactionId": "a"}]}')) x),
          (SELECT jsonb_agg(jsonb_build_object('index', index, 'queue', 't11j', 'partition', partition, 'offset', msg_offset,
                                               'status', status, 'error', error) ORDER BY index)
             FROM pgcursor.push_items(ARRAY['t11k', 't11k', 't11k', 't11k'], ARRAY['1', '2', '3', '4']::jsonb[],
                                      ARRAY[NULL, 'eu', NULL, NULL], ARRAY[NULL, NULL, 'a', 'a'])),
          'push(jsonb) answers what push_items answers');

-- bad arrays: 22023 naming the item or the array, nothing written
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', NULL], ARRAY['1', '2']::jsonb[])$$,
                 '22023', 'items[1].queue is required and must be a string', 'a NULL queue');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', 't11b'], ARRAY['1', NULL]::jsonb[])$$,
                 '22023', 'items[1].payload is required', 'a NULL payload (SQL NULL, not JSON null)');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b'], ARRAY['1']::jsonb[], ARRAY[''])$$,
                 '22023', 'items[0].partition must be a non-empty string', 'an empty partition');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b'], ARRAY['1']::jsonb[], transaction_ids => ARRAY[''])$$,
                 '22023', 'items[0].transactionId must be a non-empty string', 'an empty transactionId');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b'], ARRAY['1']::jsonb[], transaction_ids => ARRAY[repeat('x', 1025)])$$,
                 '22023', 'items[0].transactionId must be at most 1024 bytes', 'a transactionId over 1024 bytes');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', 't11b', NULL], ARRAY['1', '2', '3']::jsonb[],
                                                   ARRAY['a', '', 'c'], ARRAY['x', 'y', repeat('z', 1025)])$$,
                 '22023', 'items[1].partition must be a non-empty string', 'the first bad item is named, whatever its fault');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', 't11b'], ARRAY['1', NULL]::jsonb[],
                                                   ARRAY['a', ''], ARRAY['x', ''])$$,
                 '22023', 'items[1].partition must be a non-empty string', '... and its first bad field, in the order queue, partition, payload, transactionId');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', 't11b'], ARRAY['1']::jsonb[])$$,
                 '22023', 'payloads has 1 elements; queues has 2', 'arrays of different lengths');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', 't11b'], NULL)$$,
                 '22023', 'payloads is required', 'no payloads');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', 't11b'], ARRAY['1', '2']::jsonb[], ARRAY['a'])$$,
                 '22023', 'partitions has 1 elements; queues has 2', 'partitions of another length');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b'], ARRAY['1']::jsonb[], transaction_ids => ARRAY['a', 'b'])$$,
                 '22023', 'transaction_ids has 2 elements; queues has 1', 'transaction_ids of another length');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b'], ARRAY['1']::jsonb[], trace_ids => '{}'::uuid[])$$,
                 '22023', 'trace_ids has 0 elements; queues has 1', 'trace_ids of another length');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(NULL, ARRAY['1']::jsonb[])$$,
                 '22023', 'queues is required', 'no queues');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY[['t11b', 't11b'], ['t11b', 't11b']], ARRAY['1', '2', '3', '4']::jsonb[])$$,
                 '22023', 'queues must be a one-dimensional array', 'an array of arrays: item i is element i');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11b', 't11b'], ARRAY['1', '2']::jsonb[],
                                                      trace_ids => ARRAY[[gen_random_uuid()], [gen_random_uuid()]])$$,
                 '22023', 'trace_ids must be a one-dimensional array', '... trace_ids too (they were stored as nulls)');
-- Item i is element i counted from 1: payloads '[0:1]' stored "one" for
-- item 0 and NULL for item 1, both answered queued.
SELECT throws_ok($$SELECT * FROM pgcursor.push_items('{t11b,t11b}'::text[], '[0:1]={"\"zero\"","\"one\""}'::jsonb[])$$,
                 '22023', 'payloads must be indexed from 1 (it starts at 0)', 'payloads indexed from 0');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items('[3:4]={t11b,t11b}'::text[], '[3:4]={1,2}'::jsonb[])$$,
                 '22023', 'queues must be indexed from 1 (it starts at 3)', '... every array, however alike');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items('{t11b,t11b}'::text[], '{1,2}'::jsonb[],
                                                      trace_ids => '[0:1]={00000000-0000-0000-0000-000000000001,00000000-0000-0000-0000-000000000002}'::uuid[])$$,
                 '22023', 'trace_ids must be indexed from 1 (it starts at 0)', '... trace_ids too (shifted to the next item)');
SELECT is((SELECT count(*) FROM pgcursor.push_items('{}'::text[], '{}'::jsonb[])), 0::bigint,
          'no items: no rows, no error');
SELECT is((SELECT count(*)::int FROM pgcursor.queues WHERE name = 't11b'), 0, 'refused calls created nothing');

-- Every partition has a head row (pushes create both): one without is
-- refused, never given another partition's offsets.
SELECT pgcursor.push('{"items": [{"queue": "t11h", "payload": 1}]}') IS NOT NULL AS made \gset
INSERT INTO pgcursor.partitions (id, queue, name) VALUES (gen_random_uuid(), 't11h', 'headless');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t11h', 't11h'], ARRAY['2', '3']::jsonb[],
                                                     ARRAY['Default', 'headless'])$$,
                 'XX000', 'a partition of this push has no head row (pgcursor.partition_heads)',
                 'a partition without a head row is refused');
SELECT is((SELECT h.head FROM pgcursor.partitions p JOIN pgcursor.partition_heads h ON h.partition_id = p.id
            WHERE p.queue = 't11h' AND p.name = 'Default'), 1::bigint, '... and the other partition took nothing');
SELECT is(pgcursor_internal.lock_heads(ARRAY(SELECT id FROM pgcursor.partitions WHERE queue = 't11h' AND name = 'Default')),
          '{1}'::bigint[], 'lock_heads answers the heads in the order given');

SELECT * FROM finish();
ROLLBACK;
