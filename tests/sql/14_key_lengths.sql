-- Names that become index keys (queue, partition, consumer group,
-- namespace, task, trace name) are at most 1024 bytes, as transactionIds
-- are (10_push, 11_push_items): a longer one is a 22023 naming the field
-- where the name would be created, and 1024 bytes fit every index, two to
-- a key (sql/01_arguments.sql too_long_for_a_key).
BEGIN;
SELECT plan(19);

-- n bytes of hex that do not compress (an index would see them all).
CREATE FUNCTION pg_temp.noise(n integer) RETURNS text LANGUAGE sql AS $$
    SELECT left(string_agg(md5(random()::text), ''), n) FROM generate_series(1, n / 32 + 1)
$$;
CREATE TEMP TABLE long_names ON COMMIT DROP AS
SELECT pg_temp.noise(1024) AS fits, pg_temp.noise(1025) AS over,
       pg_temp.noise(1024) AS fits2, pg_temp.noise(1024) AS fits3;
CREATE FUNCTION pg_temp.fits() RETURNS text LANGUAGE sql AS $$ SELECT fits FROM long_names $$;
CREATE FUNCTION pg_temp.over() RETURNS text LANGUAGE sql AS $$ SELECT over FROM long_names $$;

-- configure
SELECT throws_ok(format('SELECT pgcursor.configure(%L)', jsonb_build_object('queue', pg_temp.over())),
                 '22023', 'queue must be at most 1024 bytes', 'configure: a queue name over 1024 bytes');
SELECT throws_ok(format('SELECT pgcursor.configure(%L)', jsonb_build_object('queue', 't14', 'namespace', pg_temp.over())),
                 '22023', 'namespace must be at most 1024 bytes', 'configure: a namespace over 1024 bytes');
SELECT throws_ok(format('SELECT pgcursor.configure(%L)', jsonb_build_object('queue', 't14', 'task', pg_temp.over())),
                 '22023', 'task must be at most 1024 bytes', 'configure: a task over 1024 bytes');
SELECT is((SELECT count(*)::int FROM pgcursor.queues WHERE name = 't14' OR octet_length(name) > 1024), 0,
          'a refused configure creates nothing');

-- push, as JSON and as arrays
SELECT throws_ok(format('SELECT pgcursor.push(%L)', jsonb_build_object('items', jsonb_build_array(
                     jsonb_build_object('queue', 't14', 'payload', 1),
                     jsonb_build_object('queue', pg_temp.over(), 'payload', 2)))),
                 '22023', 'items[1].queue must be at most 1024 bytes', 'push: a queue name over 1024 bytes');
SELECT throws_ok(format('SELECT pgcursor.push(%L)', jsonb_build_object('items', jsonb_build_array(
                     jsonb_build_object('queue', 't14', 'partition', pg_temp.over(), 'payload', 1)))),
                 '22023', 'items[0].partition must be at most 1024 bytes', 'push: a partition name over 1024 bytes');
SELECT throws_ok(format('SELECT * FROM pgcursor.push_items(%L::text[], ''{1,2}''::jsonb[], %L::text[])',
                        ARRAY['t14', 't14'], ARRAY['p', pg_temp.over()]),
                 '22023', 'items[1].partition must be at most 1024 bytes', 'push_items: a partition name over 1024 bytes');
SELECT throws_ok(format('SELECT * FROM pgcursor.push_items(%L::text[], ''{1}''::jsonb[])', ARRAY[pg_temp.over()]),
                 '22023', 'items[0].queue must be at most 1024 bytes', 'push_items: a queue name over 1024 bytes');
SELECT throws_ok(format('SELECT * FROM pgcursor.push_items(%L::text[], ''{1,2}''::jsonb[], %L::text[])',
                        ARRAY[pg_temp.over(), 't14'], ARRAY[NULL, '']),
                 '22023', 'items[0].queue must be at most 1024 bytes',
                 'push_items: the first bad item is named, a long name or another fault');
SELECT throws_ok(format('SELECT * FROM pgcursor.push_items(%L::text[], ''{1,NULL}''::jsonb[], %L::text[])',
                        ARRAY['t14', 't14'], ARRAY['p', pg_temp.over()]),
                 '22023', 'items[1].partition must be at most 1024 bytes',
                 '... and its first bad field, a long partition before a missing payload');
SELECT is((SELECT count(*)::int FROM pgcursor.queues WHERE name = 't14' OR octet_length(name) > 1024), 0,
          'a refused push creates nothing, not even the queue of its good items');

-- 1024-byte names everywhere fit every index: configure, push, pop, ack, trace.
SELECT lives_ok(format('SELECT pgcursor.configure(%L)',
                       jsonb_build_object('queue', pg_temp.fits(), 'namespace', pg_temp.fits(), 'task', pg_temp.fits())),
                'configure: queue, namespace and task of 1024 bytes each');
SELECT is((SELECT status FROM pgcursor.push_items(ARRAY[pg_temp.fits()], '{1}'::jsonb[],
                                                   ARRAY[(SELECT fits2 FROM long_names)])),
          'queued', 'push: a 1024-byte queue with a 1024-byte partition');
CREATE TEMP TABLE popped ON COMMIT DROP AS
SELECT * FROM pgcursor.pop_messages(jsonb_build_object('queue', pg_temp.fits(),
                                                       'consumerGroup', (SELECT fits3 FROM long_names)));
SELECT is((SELECT count(*)::int FROM popped), 1, 'pop: a 1024-byte consumer group on it');
SELECT is((SELECT pgcursor.ack_group(jsonb_build_object(
               'partitionId', p.partition_id, 'leaseId', p.lease_id, 'consumerGroup', (SELECT fits3 FROM long_names),
               'items', jsonb_build_array(jsonb_build_object('transactionId', p.transaction_id)))) -> 0 -> 'success'
             FROM popped p),
          'true'::jsonb, 'ack: the same group');
SELECT lives_ok(format('SELECT pgcursor.record_trace(%L)', (SELECT jsonb_build_object(
                    'partitionId', p.partition_id, 'transactionId', p.transaction_id, 'data', 1,
                    'traceNames', jsonb_build_array(pg_temp.fits())) FROM popped p)),
                'trace: a 1024-byte trace name');

-- pop, trace and a transaction's ack refuse longer ones
SELECT throws_ok(format('SELECT pgcursor.pop(%L)', jsonb_build_object('queue', pg_temp.fits(), 'consumerGroup', pg_temp.over())),
                 '22023', 'consumerGroup must be at most 1024 bytes', 'pop: a consumer group over 1024 bytes');
SELECT throws_ok(format('SELECT pgcursor.record_trace(%L)', (SELECT jsonb_build_object(
                     'partitionId', p.partition_id, 'transactionId', p.transaction_id, 'data', 1,
                     'traceNames', jsonb_build_array('a', pg_temp.over())) FROM popped p)),
                 '22023', 'traceNames[1] must be at most 1024 bytes', 'trace: a name over 1024 bytes');
SELECT throws_ok(format('SELECT pgcursor.transaction(%L)', (SELECT jsonb_build_object('operations', jsonb_build_array(
                     jsonb_build_object('type', 'ack', 'transactionId', p.transaction_id, 'partitionId', p.partition_id,
                                        'consumerGroup', pg_temp.over()))) FROM popped p)),
                 '22023', 'operations[0].consumerGroup must be at most 1024 bytes',
                 'transaction: an ack''s consumer group over 1024 bytes');

SELECT * FROM finish();
ROLLBACK;
