-- pgcursor.consumer_groups / lagging_partitions / delete_consumer_group /
-- seek_consumer_group / seek_partition (docs/sql-api.md "Consumer groups").
-- now() does not move inside the transaction: messages are aged by setting
-- their created_at.
BEGIN;
SELECT plan(61);

\ir lib/queue_helpers.sql
-- A cursor row as "cursor lease? batch retry acked?" for compact comparisons.
CREATE FUNCTION pg_temp.state(q text, part text, grp text) RETURNS text LANGUAGE sql AS $$
    SELECT format('cursor=%s lease=%s batch=%s..%s retry=%s last_ack_now=%s', c.cursor, c.lease_id IS NOT NULL,
                  c.batch_start, c.batch_end, c.retry_count, c.last_ack_at = now())
    FROM pg_temp.cur(q, part, grp) c
$$;
CREATE FUNCTION pg_temp.ago(secs integer) RETURNS text LANGUAGE sql AS $$
    SELECT pgcursor_internal.rfc3339_utc(now() - secs * interval '1 second')
$$;
-- The offsets a pop delivered, in order.
CREATE FUNCTION pg_temp.offsets(answer jsonb) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((m ->> 'offset')::bigint ORDER BY ord), '{}')
    FROM jsonb_array_elements(answer -> 'messages') WITH ORDINALITY AS x(m, ord)
$$;
-- This file's part of an answer array: the elements whose key `k` starts with t65.
CREATE FUNCTION pg_temp.mine(answer jsonb, k text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(e ORDER BY ord), '[]')
    FROM jsonb_array_elements(answer) WITH ORDINALITY AS x(e, ord) WHERE e ->> k LIKE 't65%'
$$;

-- Fixture. t65: partitions p1 (3 messages, 1000/900/800 s old), p2 (2
-- messages, 100/50 s old) and "empty" (never pushed to).
-- t65b: one message, 10 s old.
SELECT FROM pgcursor.push('{"items":[{"queue":"t65","partition":"p1","payload":1},
                                     {"queue":"t65","partition":"p1","payload":2},
                                     {"queue":"t65","partition":"p1","payload":3},
                                     {"queue":"t65","partition":"p2","payload":4},
                                     {"queue":"t65","partition":"p2","payload":5},
                                     {"queue":"t65b","payload":6}]}');
WITH p AS (INSERT INTO pgcursor.partitions (id, queue, name) VALUES (gen_random_uuid(), 't65', 'empty') RETURNING id)
INSERT INTO pgcursor.partition_heads (partition_id) SELECT id FROM p;
UPDATE pgcursor.messages SET created_at = now() - interval '1 second' * (1100 - 100 * msg_offset)
 WHERE partition_id = pg_temp.pid('t65', 'p1');
UPDATE pgcursor.messages SET created_at = now() - interval '1 second' * (150 - 50 * msg_offset)
 WHERE partition_id = pg_temp.pid('t65', 'p2');
UPDATE pgcursor.messages SET created_at = now() - interval '10 seconds' WHERE partition_id = pg_temp.pid('t65b');

-- g1t65 consumes p1's first message (autoAck); its rows on p2 and empty are at 0.
-- On t65b: "dead" and g1t65 hold leases, "stable" consumed everything.
SELECT FROM pgcursor.pop('{"queue":"t65","partition":"p1","consumerGroup":"g1t65","autoAck":true}');
SELECT FROM pgcursor.pop('{"queue":"t65b","consumerGroup":"dead"}');
SELECT FROM pgcursor.pop('{"queue":"t65b","consumerGroup":"g1t65"}');
SELECT FROM pgcursor.pop('{"queue":"t65b","consumerGroup":"stable","autoAck":true}');

-- consumer_groups
SELECT is(pg_temp.mine(pgcursor.consumer_groups(), 'queueName') -> 1,
          jsonb_build_object('name', 'g1t65', 'queueName', 't65', 'queue', 't65', 'topics', '["t65"]'::jsonb,
                             'members', 3, 'partitions', 3, 'partitionsWithLag', 2,
                             'maxTimeLag', 900, 'lagSeconds', 900, 'totalLag', 4, 'lagMessages', 4,
                             'state', 'Lagging', 'subscriptionMode', NULL, 'subscriptionTimestamp', NULL,
                             'subscriptionCreatedAt', pgcursor_internal.rfc3339_utc(now()),
                             'oldestPartition', jsonb_build_object(
                                 'partition', 'p1', 'partitionId', pg_temp.pid('t65', 'p1'), 'offsetLag', 2,
                                 'timeLagSeconds', 900, 'oldestUnconsumedAt', pg_temp.ago(900))),
          'list: every field of a lagging group; maxTimeLag is the age of the OLDEST unconsumed message, '
          'oldestPartition where it is');
SELECT is((SELECT jsonb_object_agg(e ->> 'name', e -> 'oldestPartition' ->> 'partition')
           FROM jsonb_array_elements(pg_temp.mine(pgcursor.consumer_groups(), 'queueName')) e
           WHERE e ->> 'queueName' = 't65b'),
          '{"dead":"Default","g1t65":"Default","stable":null}', 'list: oldestPartition is null when nothing lags');
-- u65: gz has consumed all of partition a and lags on b by a message
-- pushed now, 0 s old: b is its oldest partition although a sorts first.
SELECT FROM pgcursor.push('{"items":[{"queue":"u65","partition":"a","payload":1},
                                     {"queue":"u65","partition":"b","payload":2}]}');
SELECT FROM pgcursor.pop('{"queue":"u65","partition":"a","consumerGroup":"gz","autoAck":true}');
SELECT FROM pgcursor.pop('{"queue":"u65","partition":"b","consumerGroup":"gz","autoAck":true}');
SELECT FROM pgcursor.push('{"items":[{"queue":"u65","partition":"b","payload":3}]}');
SELECT is((SELECT jsonb_build_object('partition', o -> 'partition', 'offsetLag', o -> 'offsetLag',
                                      'timeLagSeconds', o -> 'timeLagSeconds')
             FROM (SELECT e -> 'oldestPartition' AS o FROM jsonb_array_elements(pgcursor.consumer_groups()) e
                    WHERE e ->> 'name' = 'gz' AND e ->> 'queueName' = 'u65') x),
          '{"partition":"b","offsetLag":1,"timeLagSeconds":0}',
          'list: a lagging row 0 s behind is the oldest partition, not a caught-up one');
SELECT is((SELECT count(*)::int FROM jsonb_array_elements(pgcursor.consumer_groups()) e
           WHERE (e -> 'maxTimeLag') IS DISTINCT FROM coalesce(e #> '{oldestPartition,timeLagSeconds}', '0')),
          0, 'list: maxTimeLag is always the oldestPartition''s age');
SELECT is((SELECT string_agg(format('%s/%s %s lag=%s/%s msgs=%s members=%s', e ->> 'name', e ->> 'queueName',
                                    e ->> 'state', e ->> 'partitionsWithLag', e ->> 'maxTimeLag',
                                    e ->> 'totalLag', e ->> 'members'), '; ')
           FROM jsonb_array_elements(pg_temp.mine(pgcursor.consumer_groups(), 'queueName')) e),
          'dead/t65b Dead lag=1/10 msgs=1 members=1; g1t65/t65 Lagging lag=2/900 msgs=4 members=3; '
          'g1t65/t65b Dead lag=1/10 msgs=1 members=1; stable/t65b Stable lag=0/0 msgs=0 members=1',
          'list: one element per (group, queue), by group then queue; Dead without acks, Stable with');
UPDATE pgcursor.messages SET created_at = now() - interval '301 seconds' WHERE partition_id = pg_temp.pid('t65b');
SELECT is((SELECT e ->> 'state' FROM jsonb_array_elements(pgcursor.consumer_groups()) e
           WHERE e ->> 'name' = 'dead' AND e ->> 'queueName' = 't65b'), 'Lagging', 'Lagging past 300 s');
UPDATE pgcursor.messages SET created_at = now() - interval '300 seconds' WHERE partition_id = pg_temp.pid('t65b');
SELECT is((SELECT e ->> 'state' FROM jsonb_array_elements(pgcursor.consumer_groups()) e
           WHERE e ->> 'name' = 'dead' AND e ->> 'queueName' = 't65b'), 'Dead', '... not at exactly 300 s');
UPDATE pgcursor.messages SET created_at = now() - interval '10 seconds' WHERE partition_id = pg_temp.pid('t65b');
DELETE FROM pgcursor.messages WHERE partition_id = pg_temp.pid('t65', 'p1') AND msg_offset = 2;
SELECT is((SELECT e -> 'maxTimeLag' FROM jsonb_array_elements(pgcursor.consumer_groups()) e
           WHERE e ->> 'name' = 'g1t65' AND e ->> 'queueName' = 't65'), '800',
          'a message deleted by retention: the first stored one above the cursor is the oldest');
SELECT is((SELECT e #>> '{oldestPartition,oldestUnconsumedAt}' FROM jsonb_array_elements(pgcursor.consumer_groups()) e
           WHERE e ->> 'name' = 'g1t65' AND e ->> 'queueName' = 't65'), pg_temp.ago(800),
          '... and oldestPartition says when it was pushed');
-- (put back: the lagging tests below expect it)
INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, created_at)
VALUES (pg_temp.pid('t65', 'p1'), 2, 'x2', '2', now() - interval '900 seconds');

-- lagging_partitions
SELECT is(pg_temp.mine(pgcursor.lagging_partitions(0), 'queue_name') -> 0,
          jsonb_build_object('consumer_group', 'g1t65', 'queue_name', 't65', 'partition_name', 'p1',
                             'partition_id', pg_temp.pid('t65', 'p1'), 'worker_id', NULL, 'offset_lag', 2,
                             'time_lag_seconds', 900, 'lag_hours', 0.25, 'oldest_unconsumed_at', pg_temp.ago(900),
                             'last_consumed_at', pgcursor_internal.rfc3339_utc(now())),
          'lagging: every field, snake_case');
SELECT is((SELECT string_agg(format('%s/%s/%s %s', e ->> 'consumer_group', e ->> 'queue_name',
                                    e ->> 'partition_name', e ->> 'time_lag_seconds'), '; ')
           FROM jsonb_array_elements(pg_temp.mine(pgcursor.lagging_partitions(0), 'queue_name')) e),
          'g1t65/t65/p1 900; g1t65/t65/p2 100; dead/t65b/Default 10; g1t65/t65b/Default 10',
          'lagging: rows with a message after the cursor, oldest first (fully consumed and empty rows left out)');
SELECT is(pg_temp.mine(pgcursor.lagging_partitions(0), 'queue_name') -> 2 -> 'worker_id',
          to_jsonb((pg_temp.cur('t65b', 'Default', 'dead')).lease_id), 'worker_id is the row''s leaseId');
SELECT is((SELECT string_agg(e ->> 'partition_name', ',')
           FROM jsonb_array_elements(pg_temp.mine(pgcursor.lagging_partitions(100), 'queue_name')) e),
          'p1', 'lagging: strictly more than min_lag_seconds (100 s is not past 100)');
SELECT is((SELECT string_agg(e ->> 'partition_name', ',')
           FROM jsonb_array_elements(pg_temp.mine(pgcursor.lagging_partitions(99), 'queue_name')) e),
          'p1,p2', '... but past 99');
SELECT is(pg_temp.mine(pgcursor.lagging_partitions(), 'queue_name'), '[]', 'default threshold: an hour');

-- delete_consumer_group
INSERT INTO pgcursor.dead_letters (partition_id, consumer_group, msg_offset, transaction_id, error, retry_count)
VALUES (pg_temp.pid('t65', 'p1'), 'g1t65', 1, 'x1', 'boom', 0);
SELECT is(pgcursor.delete_consumer_group('g1t65', 't65b'),
          '{"success":true,"consumerGroup":"g1t65","deletedPartitions":1,"metadataDeleted":true,"queueName":"t65b"}',
          'delete for one queue');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
           WHERE c.consumer_group = 'g1t65' AND p.queue = 't65'), 3, '... its rows on other queues stay');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors WHERE partition_id = pg_temp.pid('t65b')), 2,
          '... and other groups'' rows on that queue');
SELECT is(pgcursor.delete_consumer_group('g1t65'),
          '{"success":true,"consumerGroup":"g1t65","deletedPartitions":3,"metadataDeleted":true}',
          'delete everywhere');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors WHERE consumer_group = 'g1t65'), 0, '... no row left');
SELECT is((SELECT count(*)::int FROM pgcursor.dead_letters WHERE consumer_group = 'g1t65'), 1, '... dead letters kept');
SELECT is(pgcursor.delete_consumer_group('nobody') -> 'deletedPartitions', '0', 'unknown group: 0');
SELECT is(pgcursor.delete_consumer_group('g1t65', 'nowhere') -> 'deletedPartitions', '0', 'unknown queue: 0');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t65","partition":"p1","consumerGroup":"g1t65",
                                         "subscriptionMode":"new","batch":10}')), '{}',
          'after a delete the next pop is a new group''s: mode new starts at the head');
SELECT is(ARRAY[(pg_temp.cur('t65', 'p1', 'g1t65')).cursor, (pg_temp.cur('t65', 'p2', 'g1t65')).cursor], '{3,2}',
          '... on every partition of the queue');
SELECT is(pgcursor.delete_consumer_group('g1t65', 't65') -> 'deletedPartitions', '3', 'deleted again');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t65","partition":"p1","consumerGroup":"g1t65","batch":10}')),
          '{1,2,3}', '... and mode all starts from the start');

-- seek_consumer_group. t65s: Default with offsets 1..5, 500/400/300/200/100 s
-- old, and "empty". Group s holds a live lease over 1..2, its counter at 2.
SELECT FROM pgcursor.push('{"items":[{"queue":"t65s","payload":1,"transactionId":"s1"},
                                     {"queue":"t65s","payload":2,"transactionId":"s2"},
                                     {"queue":"t65s","payload":3,"transactionId":"s3"},
                                     {"queue":"t65s","payload":4,"transactionId":"s4"},
                                     {"queue":"t65s","payload":5,"transactionId":"s5"}]}');
WITH p AS (INSERT INTO pgcursor.partitions (id, queue, name) VALUES (gen_random_uuid(), 't65s', 'empty') RETURNING id)
INSERT INTO pgcursor.partition_heads (partition_id) SELECT id FROM p;
UPDATE pgcursor.messages SET created_at = now() - interval '1 second' * (600 - 100 * msg_offset)
 WHERE partition_id = pg_temp.pid('t65s');
CREATE TEMP TABLE l ON COMMIT DROP AS
SELECT (pgcursor.pop('{"queue":"t65s","consumerGroup":"s","batch":2}') ->> 'leaseId')::uuid AS lease;
UPDATE pgcursor.cursors SET retry_count = 2 WHERE consumer_group = 's';
SELECT is(pg_temp.state('t65s', 'Default', 's'), 'cursor=0 lease=t batch=1..2 retry=2 last_ack_now=',
          'before: a live lease, counter 2');

SELECT is(pgcursor.seek_consumer_group('s', 't65s', now() - interval '300 seconds'),
          jsonb_build_object('success', true, 'consumerGroup', 's', 'queueName', 't65s', 'seekToEnd', false,
                             'targetTimestamp', pg_temp.ago(300), 'partitionsUpdated', 2),
          'seek to T: every row counts, the empty partition''s too');
SELECT is(pg_temp.state('t65s', 'Default', 's'), 'cursor=2 lease=f batch=.. retry=0 last_ack_now=t',
          '... the message created exactly at T is next; lease released, counter reset, last_ack_at now');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', pg_temp.pid('t65s'), 'consumerGroup', 's',
                                                'leaseId', lease, 'items', '[{"transactionId":"s1"}]'::jsonb))
          -> 0 ->> 'error', 'invalid or expired lease', 'an ack with the old leaseId fails') FROM l;
CREATE TEMP TABLE p ON COMMIT DROP AS SELECT pgcursor.pop('{"queue":"t65s","consumerGroup":"s","batch":2,"autoAck":true}') AS a;
SELECT is(pg_temp.offsets(a), '{3,4}', 'the next pop starts at the message created at T') FROM p;
SELECT is((SELECT array_agg(DISTINCT (m ->> 'retryCount')::int) FROM p, jsonb_array_elements(a -> 'messages') m),
          '{0}', '... with retryCount 0');
SELECT is((pg_temp.cur('t65s', 'Default', 's')).completed_total, 2::bigint, 'completed 2');

SELECT is(pgcursor.seek_consumer_group('s', 't65s', to_end => true),
          '{"success":true,"consumerGroup":"s","queueName":"t65s","seekToEnd":true,"targetTimestamp":null,
            "partitionsUpdated":1}', 'seek to end: only rows on non-empty partitions count');
SELECT is(pg_temp.state('t65s', 'Default', 's'), 'cursor=5 lease=f batch=.. retry=0 last_ack_now=t',
          '... cursor at the head');
SELECT is((pg_temp.cur('t65s', 'Default', 's')).completed_total, 2::bigint, '... totals unchanged');
SELECT is((pg_temp.cur('t65s', 'empty', 's')).cursor, 0::bigint, '... the empty partition left alone');

SELECT is(pgcursor.seek_consumer_group('s', 't65s', now() - interval '1 hour') -> 'partitionsUpdated', '2',
          'seek to before every message');
SELECT is((pg_temp.cur('t65s', 'Default', 's')).cursor, 0::bigint, '... cursor 0');
SELECT is(pg_temp.offsets(pgcursor.pop('{"queue":"t65s","consumerGroup":"s","batch":10}')), '{1,2,3,4,5}',
          '... everything redelivered, in offset order');
SELECT is(pgcursor.seek_consumer_group('s', 't65s', now() - interval '299 seconds') -> 'partitionsUpdated', '2',
          'seek to just after a message (with a live lease again)');
SELECT is(pg_temp.state('t65s', 'Default', 's'), 'cursor=3 lease=f batch=.. retry=0 last_ack_now=t',
          '... the first message created after T is next');
SELECT is(pgcursor.seek_consumer_group('s', 't65s', now()) ->> 'targetTimestamp',
          pgcursor_internal.rfc3339_utc(now()), 'seek to after every message');
SELECT is((pg_temp.cur('t65s', 'Default', 's')).cursor, 5::bigint, '... cursor at the head');
SELECT is(pgcursor.seek_consumer_group('s', 't65s', now() - interval '1 hour', true) -> 'targetTimestamp',
          'null', 'toEnd wins over a timestamp');
SELECT is(pgcursor.seek_consumer_group('nobody', 't65s', to_end => true) -> 'partitionsUpdated', '0',
          'a group without rows: 0, none created');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors WHERE consumer_group = 'nobody'), 0, '... really none');
SELECT throws_ok($$SELECT pgcursor.seek_consumer_group('s', 't65s')$$, '22023',
                 'Must specify either ''toEnd'': true or ''timestamp''', 'neither toEnd nor a timestamp');
SELECT throws_ok($$SELECT pgcursor.seek_consumer_group('s', 't65s', NULL, false)$$, '22023',
                 'Must specify either ''toEnd'': true or ''timestamp''', 'toEnd false without a timestamp');
SELECT throws_ok($$SELECT pgcursor.seek_consumer_group('s', 't65s', '-infinity')$$, '22023',
                 'timestamp must be a time from 0001-01-01 to 9999-12-31', 'a seek to -infinity is refused (it would read as a seek to the end)');
SELECT throws_ok($$SELECT pgcursor.seek_consumer_group('s', 't65s', '0044-03-15 BC')$$, '22023',
                 'timestamp must be a time from 0001-01-01 to 9999-12-31', 'a seek to a BC time is refused (it would be echoed as AD)');
SELECT throws_ok($$SELECT pgcursor.update_subscription('s', '0044-03-15 BC')$$, '22023',
                 'subscriptionTimestamp must be a time from 0001-01-01 to 9999-12-31', 'a subscription from a BC time is refused');

-- seek_partition
SELECT FROM pgcursor.seek_consumer_group('s', 't65s', now() - interval '1 hour');
SELECT FROM pgcursor.pop('{"queue":"t65s","consumerGroup":"s","batch":1}');
UPDATE pgcursor.cursors SET retry_count = 1 WHERE consumer_group = 's';
SELECT is(pgcursor.seek_partition('s', 't65s', 'Default'),
          jsonb_build_object('success', true, 'consumerGroup', 's', 'queueName', 't65s', 'partitionName', 'Default',
                             'updated', true, 'cursorMovedTo', pg_temp.ago(100)),
          'seek one partition to its end: cursorMovedTo is the newest message''s createdAt');
SELECT is(pg_temp.state('t65s', 'Default', 's'), 'cursor=5 lease=f batch=.. retry=0 last_ack_now=t',
          '... lease released, counter reset');
SELECT is(pgcursor.seek_partition('s', 't65s', 'empty') - 'success' - 'consumerGroup' - 'queueName',
          '{"partitionName":"empty","updated":false,"cursorMovedTo":null}', 'an empty partition: not updated');
SELECT is(pgcursor.seek_partition('nobody', 't65s', 'Default') -> 'updated', 'false', 'no cursor row: not updated');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors WHERE consumer_group = 'nobody'), 0, '... and none created');
-- The message at the head deleted: cursorMovedTo is the newest one stored
-- (it said null, though the cursor moved and messages are stored).
DELETE FROM pgcursor.messages m USING pgcursor.partitions p
 WHERE p.id = m.partition_id AND p.queue = 't65s' AND p.name = 'Default' AND m.msg_offset = 5;
SELECT FROM pgcursor.seek_consumer_group('s', 't65s', now() - interval '1 day');
SELECT is(pgcursor.seek_partition('s', 't65s', 'Default') -> 'cursorMovedTo',
          (SELECT to_jsonb(pgcursor_internal.rfc3339_utc(m.created_at)) FROM pgcursor.messages m
             JOIN pgcursor.partitions p ON p.id = m.partition_id
            WHERE p.queue = 't65s' AND p.name = 'Default' AND m.msg_offset = 4),
          'the head deleted: cursorMovedTo is the newest message stored');
SELECT throws_ok($$SELECT pgcursor.seek_partition('s', 't65s', 'nope')$$, 'P0002',
                 'Partition not found', 'unknown partition');
SELECT throws_ok($$SELECT pgcursor.seek_partition('s', 'no-such-queue', 'Default')$$, 'P0002',
                 'Partition not found', 'unknown queue');

SELECT * FROM finish();
ROLLBACK;
