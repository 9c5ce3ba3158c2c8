-- A group's subscription on a queue (docs/http-api.md "Consumer groups"):
-- recorded at its first pop, shown by the list, read for partitions made
-- later, moved by update_subscription, kept or deleted with the group; the
-- describe view; and acks of messages replayed past the transaction index.
-- now() does not move inside the transaction: messages are aged by setting
-- their created_at.
BEGIN;
SELECT plan(71);

\ir lib/queue_helpers.sql
CREATE FUNCTION pg_temp.sub(q text, grp text) RETURNS text LANGUAGE sql AS $$
    SELECT s.mode || ' ' || coalesce(pgcursor_internal.rfc3339_utc(s.since), '-')
    FROM pgcursor.subscriptions s WHERE s.queue = q AND s.consumer_group = grp
$$;
CREATE FUNCTION pg_temp.offsets(answer jsonb) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((m ->> 'offset')::bigint ORDER BY ord), '{}')
    FROM jsonb_array_elements(answer -> 'messages') WITH ORDINALITY AS x(m, ord)
$$;
CREATE FUNCTION pg_temp.push(q text, part text, n integer, prefix text) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part, 'payload', i,
                                            'transactionId', prefix || i))
        FROM generate_series(1, n) i)))
$$;
-- group grp's ack of r1 on t67r (stored twice below), under lease (or none).
CREATE FUNCTION pg_temp.ack_r1(grp text, lease text DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67r'), 'consumerGroup', grp,
                                                 'leaseId', lease, 'items', '[{"transactionId":"r1"}]'::jsonb)) -> 0
$$;
CREATE FUNCTION pg_temp.ago(secs integer) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT now() - secs * interval '1 second'
$$;

-- Fixture: queue t67, partition a with 4 messages 400/300/200/100 s old.
SELECT pg_temp.push('t67', 'a', 4, 'a');
UPDATE pgcursor.messages SET created_at = pg_temp.ago(500 - 100 * msg_offset::int)
 WHERE partition_id = pg_temp.pid('t67', 'a');

-- Recorded at the first pop, once per (group, queue)
SELECT FROM pgcursor.pop('{"queue":"t67","consumerGroup":"all"}');
SELECT FROM pgcursor.pop('{"queue":"t67","consumerGroup":"new","subscriptionMode":"new"}');
SELECT FROM pgcursor.pop(jsonb_build_object('queue', 't67', 'consumerGroup', 'ts',
                                            'subscriptionFrom', pg_temp.ago(250)));
-- (their leases on a released: the describe tests below want a quiet partition)
UPDATE pgcursor.cursors SET lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL
 WHERE partition_id = pg_temp.pid('t67', 'a');
SELECT is(pg_temp.sub('t67', 'all'), 'all -', 'first pop, mode all: recorded without a time');
SELECT is(pg_temp.sub('t67', 'new'), 'new ' || pgcursor_internal.rfc3339_utc(now()),
          'mode new: recorded with the first pop''s time');
SELECT is(pg_temp.sub('t67', 'ts'), 'timestamp ' || pgcursor_internal.rfc3339_utc(pg_temp.ago(250)),
          'subscriptionFrom: recorded as timestamp with its time');
SELECT is(ARRAY[(pg_temp.cur('t67', 'a', 'all')).cursor, (pg_temp.cur('t67', 'a', 'new')).cursor,
                (pg_temp.cur('t67', 'a', 'ts')).cursor], '{0,4,2}',
          'the first pop starts each as its request says');
SELECT FROM pgcursor.pop('{"queue":"t67","consumerGroup":"new"}');
SELECT is(pg_temp.sub('t67', 'new'), 'new ' || pgcursor_internal.rfc3339_utc(now()),
          'a later pop with other options changes nothing');

-- A partition made later starts where the subscription says
SELECT pg_temp.push('t67', 'b', 3, 'b');
UPDATE pgcursor.messages SET created_at = pg_temp.ago(350 - 100 * msg_offset::int)
 WHERE partition_id = pg_temp.pid('t67', 'b');  -- 250, 150, 50 s old
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t67","partition":"b","consumerGroup":"all","batch":10}')),
          '{1,2,3}', 'mode all: a new partition from its start');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t67","partition":"b","consumerGroup":"ts","batch":10,
                                         "subscriptionMode":"new"}')),
          '{1,2,3}', 'mode timestamp: from the first message created at or after the time (at it, here)');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t67","partition":"b","consumerGroup":"new","batch":10}')),
          '{}', 'mode new: nothing created before the subscription');

-- The list and the describe view
SELECT is((SELECT e - 'maxTimeLag' - 'lagSeconds' - 'state' - 'partitionsWithLag' - 'totalLag' - 'lagMessages' - 'oldestPartition'
             FROM jsonb_array_elements(pgcursor.consumer_groups()) e
            WHERE e ->> 'name' = 'ts' AND e ->> 'queueName' = 't67'),
          jsonb_build_object('name', 'ts', 'queueName', 't67', 'queue', 't67', 'topics', '["t67"]'::jsonb,
                             'members', 2, 'partitions', 2, 'subscriptionMode', 'timestamp',
                             'subscriptionTimestamp', pgcursor_internal.rfc3339_utc(pg_temp.ago(250)),
                             'subscriptionCreatedAt', pgcursor_internal.rfc3339_utc(now())),
          'list: the subscription fields');
SELECT is(pgcursor.consumer_group('ts') -> 't67' -> 'partitions' -> 0,
          jsonb_build_object('partition', 'a', 'partitionId', pg_temp.pid('t67', 'a'), 'workerId', NULL,
                             'lastConsumedAt', NULL, 'totalConsumed', 0, 'offsetLag', 2,
                             'timeLagSeconds', 200, 'leaseActive', false),
          'describe: a partition with two messages after the cursor, the oldest 200 s old');
SELECT is((SELECT string_agg(e ->> 'partition' || ':' || (e ->> 'leaseActive') || ':' || (e ->> 'totalConsumed'), ',')
             FROM jsonb_array_elements(pgcursor.consumer_group('ts') -> 't67' -> 'partitions') e),
          'a:false:0,b:true:0', 'describe: partitions by name; leaseActive for the live lease');
SELECT is(pgcursor.consumer_group('ts') -> 't67' -> 'partitions' -> 1 ->> 'workerId',
          (SELECT c.lease_id::text FROM pgcursor.cursors c
            WHERE c.partition_id = pg_temp.pid('t67', 'b') AND c.consumer_group = 'ts'),
          'describe: workerId is the lease holder');
SELECT is(pgcursor.consumer_group('nobody'), '{}', 'describe: an unknown group is {}');

-- update_subscription
SELECT pg_temp.push('t67', 'c', 1, 'c');
UPDATE pgcursor.messages SET created_at = pg_temp.ago(200) WHERE partition_id = pg_temp.pid('t67', 'c');
SELECT FROM pgcursor.pop('{"queue":"t67","partition":"a","consumerGroup":"up","autoAck":true}');  -- a: consumed 1
SELECT FROM pgcursor.pop('{"queue":"t67","partition":"b","consumerGroup":"up"}');                 -- b: leased
SELECT is(ARRAY[(pg_temp.cur('t67', 'a', 'up')).cursor, (pg_temp.cur('t67', 'b', 'up')).cursor,
                (pg_temp.cur('t67', 'c', 'up')).cursor], '{1,0,0}', 'before the update');
SELECT is(pgcursor.update_subscription('up', pg_temp.ago(120)),
          jsonb_build_object('success', true, 'consumerGroup', 'up',
                             'newTimestamp', pgcursor_internal.rfc3339_utc(pg_temp.ago(120)), 'rowsUpdated', 1),
          'update: one subscription updated');
SELECT is(pg_temp.sub('t67', 'up'), 'timestamp ' || pgcursor_internal.rfc3339_utc(pg_temp.ago(120)),
          '... now mode timestamp at that time');
SELECT is((pg_temp.cur('t67', 'c', 'up')).cursor, 1::bigint,
          '... a never-consumed row without a lease moves (past c''s message, 200 s old)');
SELECT is((pg_temp.cur('t67', 'a', 'up')).cursor, 1::bigint, '... a row that consumed something stays');
SELECT is((pg_temp.cur('t67', 'b', 'up')).cursor, 0::bigint, '... a row under a live lease stays');
SELECT is((SELECT c.last_ack_at FROM pgcursor.cursors c
            WHERE c.partition_id = pg_temp.pid('t67', 'c') AND c.consumer_group = 'up'), NULL,
          '... and a moved row is still never-consumed');
SELECT is(pgcursor.update_subscription('up', pg_temp.ago(1000)) -> 'rowsUpdated', '1', 'update again, further back');
SELECT is((pg_temp.cur('t67', 'c', 'up')).cursor, 0::bigint, '... the never-consumed row moves again');
SELECT pg_temp.push('t67', 'd', 2, 'd');
UPDATE pgcursor.messages SET created_at = pg_temp.ago(1500) WHERE partition_id = pg_temp.pid('t67', 'd') AND msg_offset = 1;
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t67","partition":"d","consumerGroup":"up","batch":10}')),
          '{2}', 'a partition made after the update starts at its time');
SELECT is(pgcursor.update_subscription('nobody', now()) -> 'rowsUpdated', '0', 'a group that never popped: 0');
SELECT is(pgcursor.update_subscription('up', now() + interval '1 day') ->> 'newTimestamp',
          pgcursor_internal.rfc3339_utc(now()), 'a time still to come counts as now, as a pop''s subscriptionFrom does');
SELECT is(pg_temp.sub('t67', 'up'), 'timestamp ' || pgcursor_internal.rfc3339_utc(now()), '... and is stored so');
SELECT is(pgcursor.update_subscription('up', pg_temp.ago(1000)) -> 'rowsUpdated', '1', '(back again)');
-- A nack consumed nothing: a row whose only ack failed (its counter
-- charged, its cursor where it was) still moves; a seek stamps lastAckAt
-- and consumes nothing either. A dead letter consumed its message: stays.
SELECT is(pgcursor.ack_group(jsonb_build_object(
              'partitionId', pg_temp.pid('t67', 'c'), 'consumerGroup', 'up',
              'leaseId', pgcursor.pop('{"queue":"t67","partition":"c","consumerGroup":"up"}') ->> 'leaseId',
              'items', '[{"transactionId":"c1","status":"failed"}]'::jsonb)) -> 0 ->> 'success',
          'true', '(c''s message popped and nacked)');
SELECT FROM pgcursor.update_subscription('up', pg_temp.ago(120));
SELECT is((pg_temp.cur('t67', 'c', 'up')).cursor, 1::bigint, 'a row that was only nacked moves');
SELECT FROM pgcursor.update_subscription('up', pg_temp.ago(1000));
SELECT is(pgcursor.ack_group(jsonb_build_object(
              'partitionId', pg_temp.pid('t67', 'c'), 'consumerGroup', 'up',
              'items', '[{"transactionId":"c1","status":"dlq"}]'::jsonb)) -> 0 ->> 'dlq',
          'true', '(c''s message dead-lettered)');
SELECT FROM pgcursor.update_subscription('up', pg_temp.ago(1000));
SELECT is((pg_temp.cur('t67', 'c', 'up')).cursor, 1::bigint, '... a row that dead-lettered stays where that left it');
-- Queue mode has no subscription to update (its pops start at the
-- beginning); a group whose rows came from acks alone has none either: it
-- answers 0 and moves none of them (it moved them and answered 0).
SELECT throws_ok($$SELECT pgcursor.update_subscription('__QUEUE_MODE__', now())$$, '22023',
                 'queue mode (__QUEUE_MODE__) has no subscription to update', 'queue mode: 22023');
SELECT pg_temp.push('t67u', 'Default', 2, 'u');
UPDATE pgcursor.messages SET created_at = pg_temp.ago(3600) WHERE partition_id = pg_temp.pid('t67u');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67u'), 'consumerGroup', 'ackonly',
                                                'items', '[{"transactionId":"u1","status":"failed"}]'::jsonb)) -> 0 ->> 'success',
          'true', '(a lease-less nack writes ackonly''s row, at 0)');
SELECT is(pgcursor.update_subscription('ackonly', now()) -> 'rowsUpdated', '0', 'a group with no subscription: 0 ...');
SELECT is((pg_temp.cur('t67u', 'Default', 'ackonly')).cursor, 0::bigint, '... and its row stays');
SELECT throws_ok($$SELECT pgcursor.update_subscription('up', NULL)$$, '22023',
                 'Missing subscriptionTimestamp in request body', 'no timestamp: 22023');

-- Deleting a group, with and without its subscription. "new" stood on all
-- four partitions (c and d came after its first pop: it stands on them
-- where its subscription says).
SELECT is(pgcursor.delete_consumer_group('new', 't67', false),
          '{"success":true,"consumerGroup":"new","deletedPartitions":4,"metadataDeleted":false,"queueName":"t67"}',
          'delete without metadata');
SELECT is(pg_temp.sub('t67', 'new'), 'new ' || pgcursor_internal.rfc3339_utc(now()), '... the subscription stays');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t67","partition":"a","consumerGroup":"new","batch":10}')),
          '{}', '... the next pop starts where it says, whatever the request (mode all here)');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t67","partition":"b","consumerGroup":"new","batch":10}')),
          '{}', '... on every partition');
SELECT is(pgcursor.delete_consumer_group('new') -> 'metadataDeleted', 'true', 'delete with metadata (the default)');
SELECT is(pg_temp.sub('t67', 'new'), NULL, '... the subscription is gone');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t67","partition":"a","consumerGroup":"new","batch":10}')),
          '{1,2,3,4}', '... and the next pop is a new group''s (mode all: from the start)');

-- An ack of a replayed message resolves without its index entry
SELECT pg_temp.push('t67r', 'Default', 3, 'r');
SELECT FROM pgcursor.pop('{"queue":"t67r","consumerGroup":"g","batch":3,"autoAck":true}');
SELECT FROM pgcursor.purge_transaction_index(now() + interval '1 second');  -- forget every id pushed so far
SELECT FROM pgcursor.seek_consumer_group('g', 't67r', pg_temp.ago(3600));
CREATE TEMP TABLE r ON COMMIT DROP AS
SELECT pgcursor.pop('{"queue":"t67r","consumerGroup":"g","batch":3}') AS a;
SELECT is(pg_temp.offsets(a), '{1,2,3}', 'seek back: replayed') FROM r;
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67r'), 'consumerGroup', 'g',
                                                'leaseId', a ->> 'leaseId',
                                                'items', '[{"transactionId":"r2"}]'::jsonb)) -> 0,
          '{"index":0,"transactionId":"r2","success":true,"error":null,"leaseReleased":false,"dlq":false,"noop":false}',
          'the ack of a replayed message without index entry resolves through the message') FROM r;
SELECT is((pg_temp.cur('t67r', 'Default', 'g')).cursor, 2::bigint, '... and moves the cursor');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67r'), 'consumerGroup', 'g',
                                                'items', '[{"transactionId":"nope"}]'::jsonb)) -> 0 ->> 'error',
          'transaction not found', 'in neither: transaction not found');
-- pushed twice (the first forgotten by the index, so the second is no
-- duplicate): the copy the group was delivered. Above its cursor and up to
-- its leased batch's end, the lowest (not the lowest overall, the consumed
-- one: the ack of the second copy would be a no-op for ever); else the
-- newest at or below the cursor, a no-op (a retried ack of the first copy
-- must not complete the second, never delivered).
SELECT pg_temp.push('t67r', 'Default', 1, 'r');
-- A group still below the first copy resolves it to that one, not to the
-- copy the index remembers: its ack completes offset 1, not 1..4 (which
-- took 2 and 3 as completed, delivered and never acked). Here the index
-- remembers the second copy: it is younger than the horizon, the first older.
UPDATE pgcursor.queues SET transaction_index_from = now() - interval '1 minute' WHERE name = 't67r';
UPDATE pgcursor.messages SET created_at = now() - interval '1 hour'
 WHERE partition_id = pg_temp.pid('t67r') AND msg_offset <= 3;
CREATE TEMP TABLE h ON COMMIT DROP AS
SELECT pgcursor.pop('{"queue":"t67r","consumerGroup":"h","batch":10}') AS a;
SELECT is(pg_temp.offsets(a), '{1,2,3,4}', 'a new group is delivered both copies') FROM h;
SELECT is(pg_temp.ack_r1('h', a ->> 'leaseId') ->> 'leaseReleased',
          'false', 'the ack of the first copy keeps the lease ...') FROM h;
SELECT is((pg_temp.cur('t67r', 'Default', 'h')).cursor, 1::bigint, '... and completes that copy alone');
SELECT is(pg_temp.ack_r1('g') ->> 'noop',
          'true', 'g (cursor 2, leased 1..3) acks r1 (offsets 1 and 4) again: the consumed copy, a no-op ...');
SELECT is((pg_temp.cur('t67r', 'Default', 'g')).cursor, 2::bigint, '... which leaves 3 and the undelivered 4 alone');
SELECT FROM r, LATERAL pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67r'), 'consumerGroup', 'g',
                                                              'leaseId', r.a ->> 'leaseId',
                                                              'items', '[{"transactionId":"r3"}]'::jsonb)) done;
CREATE TEMP TABLE r4 ON COMMIT DROP AS
SELECT pgcursor.pop('{"queue":"t67r","consumerGroup":"g","batch":3}') AS a;
SELECT is(pg_temp.offsets(a), '{4}', '(the second copy delivered to g)') FROM r4;
SELECT is(pg_temp.ack_r1('g', a ->> 'leaseId') ->> 'leaseReleased',
          'true', 'the ack of the delivered second copy resolves to it ...') FROM r4;
SELECT is((pg_temp.cur('t67r', 'Default', 'g')).cursor, 4::bigint, '... and completes it');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67r'), 'consumerGroup', 'g',
                                                'items', '[{"transactionId":"r1", "status":"failed"}]'::jsonb)) -> 0 ->> 'error',
          'already completed', 'with no copy above the cursor, a nack of it is already completed');
SELECT is(pgcursor.message(pg_temp.pid('t67r'), 'r1') -> 'offset', '4',
          'message() names the newest copy, as the index did while it remembered');
SELECT is(pgcursor.delete_message(pg_temp.pid('t67r'), 'r1') ->> 'success', 'true', 'delete_message deletes that copy ...');
SELECT is((SELECT array_agg(m.msg_offset ORDER BY m.msg_offset) FROM pgcursor.messages m
            WHERE m.partition_id = pg_temp.pid('t67r') AND m.transaction_id = 'r1'), '{1}',
          '... and only that one');

-- An ack on a partition the group has no row on yet writes the row where
-- its subscription starts, not at 0: "late" subscribed in mode new after
-- k's three messages, so acking the second is a no-op (which leaves no row
-- behind), and acking a fourth completes that one alone.
SELECT pg_temp.push('t67k', 'k', 3, 'k');
SELECT pg_temp.push('t67k', 'other', 1, 'o');
UPDATE pgcursor.messages m SET created_at = pg_temp.ago(600)
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't67k';
SELECT FROM pgcursor.pop('{"queue":"t67k","partition":"other","consumerGroup":"late","subscriptionMode":"new"}');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67k', 'k'), 'consumerGroup', 'late',
                                                'items', '[{"transactionId":"k2"}]'::jsonb)) -> 0 ->> 'noop',
          'true', 'an ack where a mode-new group has no row yet: below where it stands, a no-op');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors c
            WHERE c.partition_id = pg_temp.pid('t67k', 'k') AND c.consumer_group = 'late'), 0,
          '... and, changing nothing, writes no row');
SELECT pg_temp.push('t67k', 'k', 1, 'k4-');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67k', 'k'), 'consumerGroup', 'late',
                                                'items', '[{"transactionId":"k4-1"}]'::jsonb)) -> 0 ->> 'noop',
          'false', 'acking a fourth is no no-op ...');
SELECT is((SELECT c.cursor || ' ' || c.completed_total FROM pgcursor.cursors c
            WHERE c.partition_id = pg_temp.pid('t67k', 'k') AND c.consumer_group = 'late'),
          '4 1', '... its row written at the head it subscribed at: one message completed');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t67k', 'k'), 'consumerGroup', 'stranger',
                                                'items', '[{"transactionId":"k2"}]'::jsonb)) -> 0 ->> 'noop',
          'false', 'a group that never popped the queue: acking 2 is not a no-op ...');
SELECT is((SELECT c.cursor FROM pgcursor.cursors c
            WHERE c.partition_id = pg_temp.pid('t67k', 'k') AND c.consumer_group = 'stranger'), 2::bigint,
          '... its row started at 0, so 1..2 are completed');

-- A group in mode new on a quiet queue: its first pop writes no row; its
-- second looks at every partition, finds nothing new, and writes the rows
-- then, so later pops need not look again.
SELECT pg_temp.push('t67q', 'a', 1, 'qa'), pg_temp.push('t67q', 'b', 1, 'qb'), pg_temp.push('t67q', 'c', 1, 'qc');
UPDATE pgcursor.messages m SET created_at = pg_temp.ago(600)
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't67q';
SELECT FROM pgcursor.pop('{"queue":"t67q","consumerGroup":"quiet","subscriptionMode":"new"}');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
            WHERE p.queue = 't67q' AND c.consumer_group = 'quiet'), 0, 'mode new, first pop: no row written');
SELECT is(pgcursor.pop('{"queue":"t67q","consumerGroup":"quiet"}') -> 'messages', '[]', 'second pop: nothing new');
SELECT is((SELECT string_agg(p.name || '@' || c.cursor, ' ' ORDER BY p.name) || ' ' || s.cursor_rows
             FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
             JOIN pgcursor.subscriptions s ON s.queue = p.queue AND s.consumer_group = c.consumer_group
            WHERE p.queue = 't67q' AND c.consumer_group = 'quiet' GROUP BY s.cursor_rows),
          'a@1 b@1 c@1 complete', '... having looked at every partition, it wrote the rows, at the head');

-- A group's first pop while a push is creating a partition of the queue
-- (committed through dblink). The pop sees no partition yet, so it has
-- looked at them all and writes the group's rows; the push cannot see the
-- pop's new subscription to mark it pending. Neither may miss the
-- partition: the pop waits for the push, then finds the message. The same
-- for a group whose rows a delete removed (subscription kept, 'none').
\ir lib/dblink.sql
SELECT pg_temp.open_sessions('t67push', 't67pop');
-- Pops group grp on queue q with pop_fn (pop, or pop_messages) while a push
-- creating partition "late" of q is open, then once more after; answers
-- how many messages of "late" the two delivered.
CREATE FUNCTION pg_temp.pops_racing_a_new_partition(q text, grp text, pop_fn text DEFAULT 'pop')
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    pop text := format(CASE pop_fn WHEN 'pop' THEN 'SELECT pgcursor.pop(%L)'
                                   ELSE 'SELECT jsonb_build_object(''partitions'', coalesce(jsonb_agg(b.partition)
                                             FILTER (WHERE b.msg_offset IS NOT NULL), ''[]'')) FROM pgcursor.pop_messages(%L) b' END,
                       jsonb_build_object('queue', q, 'consumerGroup', grp));
    first_pop jsonb;
    second_pop jsonb;
BEGIN
    PERFORM dblink_exec('t67push', 'BEGIN');
    PERFORM * FROM dblink('t67push', format('SELECT pgcursor.push(%L)', jsonb_build_object('items',
        jsonb_build_array(jsonb_build_object('queue', q, 'partition', 'late', 'payload', 1))))) AS t(a jsonb);
    PERFORM dblink_send_query('t67pop', pop);
    PERFORM pg_sleep(0.3);
    PERFORM dblink_exec('t67push', 'COMMIT');
    SELECT r INTO first_pop FROM dblink_get_result('t67pop') AS t(r jsonb);
    PERFORM * FROM dblink_get_result('t67pop') AS t(r jsonb);  -- the end of its answers
    SELECT r INTO second_pop FROM dblink('t67pop', pop) AS t(r jsonb);
    RETURN (SELECT count(*) FROM jsonb_array_elements_text(
                coalesce(first_pop -> 'partitions', jsonb_path_query_array(first_pop, '$.messages[*].partition'))
                || coalesce(second_pop -> 'partitions', jsonb_path_query_array(second_pop, '$.messages[*].partition'))) x
             WHERE x = 'late');
END $$;
-- (t67gone: racer subscribed in mode new after a's message, so its pop
-- finds nothing on a and looks at every partition, as on t67race.)
SELECT FROM dblink('t67push', $q$SELECT pgcursor.configure('{"queue":"t67race"}'),
                                     pgcursor.configure('{"queue":"t67rows"}'),
                                     pgcursor.push('{"items":[{"queue":"t67gone","partition":"a","payload":1}]}')$q$)
    AS t(a jsonb, b jsonb, c jsonb);
SELECT FROM dblink('t67push', $q$SELECT pgcursor.pop('{"queue":"t67gone","consumerGroup":"racer","subscriptionMode":"new"}'),
                                     pgcursor.delete_consumer_group('racer', 't67gone', false)$q$)
    AS t(a jsonb, b jsonb);
SELECT is(pg_temp.pops_racing_a_new_partition('t67race', 'racer'), 1,
          'a first pop racing the push that creates a partition: the message is delivered, not lost');
SELECT is(pg_temp.pops_racing_a_new_partition('t67gone', 'racer'), 1,
          '... and the first pop after the group''s rows were deleted');
-- pop_messages reads the claimed messages after the claim, in a statement
-- of its own: its claim waited for the push, so a read with the snapshot
-- the call started with would find the claimed message missing.
SELECT is(pg_temp.pops_racing_a_new_partition('t67rows', 'racer', 'pop_messages'), 1,
          '... and through pop_messages, which delivers the message it claimed');
SELECT FROM dblink('t67push', $q$SELECT pgcursor.delete_queue('t67race'), pgcursor.delete_queue('t67gone'),
                                     pgcursor.delete_queue('t67rows')$q$)
    AS t(a jsonb, b jsonb, c jsonb);
SELECT pg_temp.close_sessions('t67push', 't67pop');

SELECT * FROM finish();
ROLLBACK;
