-- pgcursor.pop: leasing, capping, live-lease skip, re-lease after expiry,
-- multi-partition pops, groups, subscription modes, autoAck, concurrency.
BEGIN;
SELECT plan(95);

\ir lib/queue_helpers.sql

-- offsets of a pop answer's messages, in answer order
CREATE FUNCTION pg_temp.offs(answer jsonb) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((m ->> 'offset')::bigint ORDER BY n), '{}')
    FROM jsonb_array_elements(answer -> 'messages') WITH ORDINALITY AS a(m, n)
$$;
CREATE FUNCTION pg_temp.fill(q text, part text, n int) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part, 'payload', jsonb_build_object('k', k),
                                            'transactionId', part || '-' || k) ORDER BY k)
        FROM generate_series(1, n) k)))
$$;
SELECT pg_temp.fill('t20', 'p1', 5);

-- errors
SELECT throws_ok($$SELECT pgcursor.pop('{"queue":"t20-nope"}')$$, 'P0002', 'queue not found: t20-nope', 'unknown queue: P0002');
SELECT throws_ok($$SELECT pgcursor.pop('{"queue":"t20","batch":0}')$$, '22023', 'batch must be a positive integer', 'batch 0');
SELECT throws_ok($$SELECT pgcursor.pop('{"queue":"t20","batch":"x"}')$$, '22023', 'batch must be a positive integer', 'batch not a number');
SELECT throws_ok($$SELECT pgcursor.pop('{"queue":"t20","partitions":-1}')$$, '22023', 'partitions must be a positive integer', 'partitions < 1');
SELECT throws_ok($$SELECT pgcursor.pop('{"queue":"t20","subscriptionMode":5}')$$, '22023', 'subscriptionMode must be a string', 'subscriptionMode not a string');
SELECT throws_ok($$SELECT pgcursor.pop('{"queue":"t20","subscriptionFrom":"yesterday-ish"}')$$, '22023', 'subscriptionFrom must be an ISO timestamp', 'bad subscriptionFrom');
SELECT throws_ok(format($$SELECT pgcursor.pop('{"queue":"t20","subscriptionFrom":%s}')$$, t), '22023',
                 'subscriptionFrom must be a time from 0001-01-01 to 9999-12-31', 'subscriptionFrom ' || t || ': refused, naming it')
  FROM unnest(ARRAY['"0044-03-15 BC"', '"-infinity"', '"infinity"', '"12345-01-01T00:00:00Z"']) t;
SELECT throws_ok($$SELECT pgcursor.pop('{"queue":"t20","autoAck":"maybe"}')$$, '22023', 'autoAck must be a boolean', 'bad autoAck');
SELECT throws_ok($$SELECT pgcursor.pop('{"batch":1}')$$, '22023', 'queue, or namespace and/or task, is required', 'no selection');

-- a first pop leases cursor+1 .. cursor+batch
CREATE TEMP TABLE a1 ON COMMIT DROP AS SELECT pgcursor.pop('{"queue":"t20","batch":2}') AS r;
SELECT is(pg_temp.offs(r), '{1,2}', 'first pop: offsets 1..2') FROM a1;
SELECT is(r - 'leaseId' - 'messages' - 'partitionId',
          '{"success":true,"queue":"t20","partition":"p1","consumerGroup":"__QUEUE_MODE__","partitionsClaimed":1}',
          'answer header') FROM a1;
SELECT is((r ->> 'partitionId')::uuid, (SELECT id FROM pgcursor.partitions WHERE queue = 't20' AND name = 'p1'), 'partitionId') FROM a1;
SELECT matches(r ->> 'leaseId', '^[0-9a-f]{8}-[0-9a-f]{4}-7', 'leaseId is a UUIDv7') FROM a1;
SELECT is((r -> 'messages' -> 0) - 'leaseId' - 'partitionId' - 'createdAt' - 'id',
          '{"transactionId":"p1-1","partition":"p1","queue":"t20","offset":1,"consumerGroup":"__QUEUE_MODE__",
            "data":{"k":1},"payload":{"k":1},"traceId":null,"producerSub":null,"retryCount":0}',
          'message fields (producerSub: null, there is no JWT subject)') FROM a1;
SELECT is(r -> 'messages' -> 0 ->> 'id', (SELECT m.message_id::text FROM pgcursor.messages m
                                          JOIN pgcursor.partitions p ON p.id = m.partition_id
                                         WHERE p.queue = 't20' AND p.name = 'p1' AND m.msg_offset = 1),
          'id: the message_id its push answered') FROM a1;
SELECT is(r -> 'messages' -> 1 ->> 'leaseId', r ->> 'leaseId', 'message carries the leaseId') FROM a1;
SELECT is((r -> 'messages' -> 0 ->> 'createdAt')::timestamptz, now(), 'createdAt is an RFC 3339 timestamp') FROM a1;
SELECT matches(r -> 'messages' -> 0 ->> 'createdAt', '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$',
               'createdAt is rendered in UTC with a Z') FROM a1;
SELECT is((c).lease_id, (r ->> 'leaseId')::uuid, 'cursor row holds the lease')
FROM a1, pg_temp.cur('t20', 'p1', '__QUEUE_MODE__') c;
SELECT is(ARRAY[(c).cursor, (c).batch_start, (c).batch_end], '{0,1,2}', 'cursor 0, batch 1..2')
FROM pg_temp.cur('t20', 'p1', '__QUEUE_MODE__') c;
SELECT is((c).lease_expires_at, now() + interval '300 seconds', 'expires after the queue leaseTime')
FROM pg_temp.cur('t20', 'p1', '__QUEUE_MODE__') c;

-- a live lease is skipped; other groups are independent and capped at the head
SELECT is(pgcursor.pop('{"queue":"t20","batch":2}'), '{"success":true,"messages":[]}',
          'live lease: nothing to pop, answered exactly as docs/http-api.md says');
SELECT is(pgcursor.pop('{"queue":"t20","batch":2,"consumerGroup":""}'), '{"success":true,"messages":[]}',
          'consumerGroup "" is queue mode, as an empty query parameter is: its lease is live');
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","batch":10,"consumerGroup":"g2"}')), '{1,2,3,4,5}',
          'another group gets everything, capped at the head');
SELECT is((pg_temp.cur('t20', 'p1', 'g2')).batch_end, 5::bigint, 'capped batch end = head');

-- after expiry the next pop re-leases from cursor+1; the retry counter is not touched
UPDATE pgcursor.cursors c SET lease_expires_at = now() - interval '1 s', retry_count = 2
FROM pgcursor.partitions p WHERE p.id = c.partition_id AND p.queue = 't20' AND c.consumer_group = '__QUEUE_MODE__';
CREATE TEMP TABLE a2 ON COMMIT DROP AS SELECT pgcursor.pop('{"queue":"t20","batch":3}') AS r;
SELECT is(pg_temp.offs(r), '{1,2,3}', 'expired lease: re-leased from cursor+1') FROM a2;
SELECT isnt(r ->> 'leaseId', (SELECT r ->> 'leaseId' FROM a1), 'with a new leaseId') FROM a2;
SELECT is((pg_temp.cur('t20', 'p1', '__QUEUE_MODE__')).retry_count, 2, 'retry counter untouched by pop');
SELECT is((r -> 'messages' -> 0 ->> 'retryCount')::int, 2, 'messages report the retry counter') FROM a2;
-- once the cursor moved (as an ack would), the next batch follows it
UPDATE pgcursor.cursors c SET cursor = 3, lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL
FROM pgcursor.partitions p WHERE p.id = c.partition_id AND p.queue = 't20' AND c.consumer_group = '__QUEUE_MODE__';
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","batch":3}')), '{4,5}', 'next pop starts after the cursor');
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","batch":"3","consumerGroup":"g3"}')), '{1,2,3}', 'batch as a digit string');

-- several partitions under one leaseId, total capped at batch
SELECT pg_temp.fill('t20m', part, 3) FROM unnest(ARRAY['a', 'b', 'c']) part;
CREATE TEMP TABLE m1 ON COMMIT DROP AS SELECT pgcursor.pop('{"queue":"t20m","batch":5,"partitions":3}') AS r;
SELECT is(pg_temp.offs(r), '{1,2,3,1,2}', 'first partition whole, second capped: partition then offset order') FROM m1;
SELECT is((r ->> 'partitionsClaimed')::int, 2, 'two partitions claimed') FROM m1;
SELECT is((SELECT count(DISTINCT x ->> 'leaseId')::int FROM jsonb_array_elements(r -> 'messages') x), 1,
          'one leaseId for all messages') FROM m1;
SELECT is((SELECT count(DISTINCT x ->> 'partitionId')::int FROM jsonb_array_elements(r -> 'messages') x), 2,
          'messages from two partitions') FROM m1;
SELECT is((SELECT array_agg(c.batch_end - c.batch_start + 1 ORDER BY c.batch_end DESC) FROM pgcursor.cursors c
           WHERE c.lease_id = (r ->> 'leaseId')::uuid), '{3,2}'::bigint[], 'two cursor rows leased: 3 + 2') FROM m1;
SELECT is(r ->> 'partitionId', r -> 'messages' -> 0 ->> 'partitionId', 'header names the first claimed partition') FROM m1;
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20m","batch":10,"partitions":3}')), '{1,2,3}',
          'the next pop gets only the unleased partition');
SELECT is(pgcursor.pop('{"queue":"t20m","batch":10,"partitions":3}') -> 'messages', '[]', 'then nothing');
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20m","partition":"b","consumerGroup":"gb","batch":9}')), '{1,2,3}',
          'a partition-scoped pop');
SELECT is((SELECT count(*)::int FROM pgcursor_internal.cursor_rows() c JOIN pgcursor.partitions p ON p.id = c.partition_id
           WHERE p.queue = 't20m' AND c.consumer_group = 'gb' AND c.lease_id IS NULL AND c.cursor = 0), 2,
          'the group stands at 0 on its other partitions, unleased');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
           WHERE p.queue = 't20m' AND c.consumer_group = 'gb'), 1,
          'a first pop writes a cursor row only on the partition it claimed');
SELECT is(pgcursor_internal.materialize_cursors('gb'), 2::bigint, 'materialize_cursors writes the other two');
SELECT is((SELECT array_agg(s.cursor_rows || ' ' || (SELECT count(*) FROM pgcursor.cursors c
                                                       JOIN pgcursor.partitions p ON p.id = c.partition_id
                                                      WHERE p.queue = s.queue AND c.consumer_group = s.consumer_group
                                                        AND c.cursor = 0 AND c.lease_id IS NULL))
             FROM pgcursor.subscriptions s WHERE s.consumer_group = 'gb' AND s.queue = 't20m'),
          '{"complete 2"}', 'where the group stood, and the subscription is complete');

-- namespace / task selection
SELECT FROM pgcursor.configure('{"queue":"t20ns","namespace":"ns20","task":"task20"}');
SELECT pg_temp.fill('t20ns', 'Default', 2);
SELECT is(pg_temp.offs(pgcursor.pop('{"namespace":"ns20","batch":5}')), '{1,2}', 'pop by namespace');
SELECT is(pg_temp.offs(pgcursor.pop('{"task":"task20","consumerGroup":"gt","batch":5}')), '{1,2}', 'pop by task');
SELECT is(pgcursor.pop('{"namespace":"ns20","task":"other"}') -> 'messages', '[]', 'no matching queue: empty, not an error');

-- subscriptionMode new: a new group starts with the messages created at or
-- after its first pop (this file is one transaction: the older ones are
-- made older than now())
UPDATE pgcursor.messages m SET created_at = now() - interval '1 minute'
FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't20';
SELECT is(pgcursor.pop('{"queue":"t20","consumerGroup":"late","subscriptionMode":"new"}') -> 'messages', '[]',
          'mode new: nothing old is delivered');
SELECT is((pg_temp.cur('t20', 'p1', 'late')).cursor, 5::bigint, 'cursor created at the head');
SELECT pg_temp.fill('t20', 'p1', 6);  -- 1..5 duplicates, 6 new
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","consumerGroup":"late","subscriptionMode":"new","batch":5}')), '{6}',
          'mode new: later messages are delivered');
-- a group already on the queue starts new partitions at 0, whatever the mode
SELECT pg_temp.fill('t20', 'p9', 2);
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","partition":"p9","consumerGroup":"late","subscriptionMode":"new","batch":5}')),
          '{1,2}', 'a known group gets a new partition from the start');
-- mode only applies at creation: an existing cursor is left alone
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","partition":"p1","consumerGroup":"g3","subscriptionMode":"new","batch":10}')),
          '{}', 'existing group with a live lease: nothing, no reset');
SELECT is((pg_temp.cur('t20', 'p1', 'g3')).cursor, 0::bigint, 'existing cursor not moved by subscriptionMode');

-- subscriptionFrom: offsets 1..6 created 5h ago .. now
UPDATE pgcursor.messages m SET created_at = now() - (6 - m.msg_offset) * interval '1 hour' - interval '1 minute'
FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't20' AND p.name = 'p1';
SELECT is(pg_temp.offs(pgcursor.pop(jsonb_build_object('queue', 't20', 'partition', 'p1', 'consumerGroup', 'from',
                                                       'subscriptionFrom', now() - interval '150 minutes', 'batch', 10))),
          '{4,5,6}', 'subscriptionFrom: starts at the first message created at or after it');
SELECT is((pg_temp.cur('t20', 'p1', 'from')).cursor, 3::bigint, 'cursor just before it');
SELECT is(pgcursor.pop(jsonb_build_object('queue', 't20', 'partition', 'p1', 'consumerGroup', 'future',
                                          'subscriptionFrom', now() + interval '1 hour')) -> 'messages', '[]',
          'subscriptionFrom after every message: nothing');
SELECT is((pg_temp.cur('t20', 'p1', 'future')).cursor, 6::bigint, 'cursor at the head');
-- A time still to come counts as the pop's: what is pushed from then on is
-- delivered on every partition, also on one made after the first pop.
SELECT pg_temp.fill('t20f', 'a', 1);
UPDATE pgcursor.messages m SET created_at = now() - interval '1 minute'
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't20f';
SELECT is(pgcursor.pop(jsonb_build_object('queue', 't20f', 'consumerGroup', 'future',
                                          'subscriptionFrom', now() + interval '1 day')) -> 'messages', '[]',
          'subscriptionFrom tomorrow: nothing already pushed');
SELECT FROM pgcursor.push('{"items": [{"queue": "t20f", "partition": "a", "payload": "a2"},
                                      {"queue": "t20f", "partition": "b", "payload": "b1"}]}');
SELECT is((SELECT string_agg(m ->> 'payload', ' ' ORDER BY m ->> 'payload')
             FROM jsonb_array_elements(pgcursor.pop('{"queue": "t20f", "consumerGroup": "future", "partitions": 2,
                                                     "batch": 10}') -> 'messages') m),
          'a2 b1', '... then what is pushed after, on the old partition and on a new one alike');
-- Queue mode has no subscription (as in Queen): its first pop starts at the
-- beginning whatever it sends; the backlog would be consumed by nobody.
SELECT is(jsonb_array_length(pgcursor.pop(jsonb_build_object('queue', 't20f', 'subscriptionMode', 'new',
                                                             'subscriptionFrom', now() + interval '1 day',
                                                             'partitions', 2, 'batch', 10)) -> 'messages'),
          3, 'queue mode ignores subscriptionMode and subscriptionFrom: every message');

-- autoAck completes on delivery
CREATE TEMP TABLE aa ON COMMIT DROP AS
SELECT pgcursor.pop('{"queue":"t20","partition":"p1","consumerGroup":"auto","autoAck":true,"batch":4}') AS r;
SELECT is(pg_temp.offs(r), '{1,2,3,4}', 'autoAck delivers the batch') FROM aa;
SELECT is(r -> 'leaseId', 'null', 'no leaseId under autoAck') FROM aa;
SELECT is(ARRAY[(c).cursor, (c).completed_total], '{4,4}', 'cursor and completed_total moved')
FROM pg_temp.cur('t20', 'p1', 'auto') c;
SELECT ok((c).lease_id IS NULL AND (c).lease_expires_at IS NULL AND (c).batch_start IS NULL, 'no lease left behind')
FROM pg_temp.cur('t20', 'p1', 'auto') c;
SELECT is((c).last_ack_at, now(), 'last_ack_at set')
FROM pg_temp.cur('t20', 'p1', 'auto') c;
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","partition":"p1","consumerGroup":"auto","autoAck":true,"batch":4}')),
          '{5,6}', 'the next autoAck pop continues');

-- messages removed by retention inside the range are simply absent
DELETE FROM pgcursor.messages m USING pgcursor.partitions p
WHERE p.id = m.partition_id AND p.queue = 't20' AND p.name = 'p1' AND m.msg_offset = 2;
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20","partition":"p1","consumerGroup":"gap","batch":3}')), '{1,3}',
          'deleted offset absent from the batch');

-- createdAt does not depend on the session's TimeZone
SET LOCAL TimeZone = 'Asia/Kolkata';
SELECT pg_temp.fill('t20tz', 'p', 1);
SELECT is(pgcursor.pop('{"queue":"t20tz"}') -> 'messages' -> 0 ->> 'createdAt',
          to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
          'createdAt in UTC under TimeZone Asia/Kolkata');
RESET TimeZone;

-- pop_messages: the same pop as rows, one per message. Twin groups on one
-- queue: the rows say what pop's messages say, in pop's order.
SELECT pg_temp.fill('t20b', 'x', 3), pg_temp.fill('t20b', 'y', 2);
CREATE TEMP TABLE b ON COMMIT DROP AS
SELECT * FROM pgcursor.pop_messages('{"queue":"t20b","partitions":2,"batch":10,"consumerGroup":"rows"}') WITH ORDINALITY;
CREATE TEMP TABLE j ON COMMIT DROP AS
SELECT pgcursor.pop('{"queue":"t20b","partitions":2,"batch":10,"consumerGroup":"json"}') AS j;
CREATE TEMP VIEW jm AS SELECT m, n FROM j, jsonb_array_elements(j -> 'messages') WITH ORDINALITY a(m, n);
SELECT is((SELECT array_agg(DISTINCT partitions_claimed) FROM b), '{2}', 'pop_messages: two partitions claimed, said on every row');
SELECT is((SELECT ARRAY[paused::text, consumer_group, queue, partition] FROM b WHERE ordinality = 1),
          (SELECT ARRAY['false', 'rows', j ->> 'queue', j ->> 'partition'] FROM j), '... the first row''s partition is pop''s header');
SELECT is((SELECT array_agg(transaction_id ORDER BY ordinality) FROM b), (SELECT array_agg(m ->> 'transactionId' ORDER BY n) FROM jm),
          '... the messages in pop''s order');
SELECT is((SELECT array_agg(partition ORDER BY ordinality) FROM b), (SELECT array_agg(m ->> 'partition' ORDER BY n) FROM jm),
          '... each row with its own partition');
SELECT is((SELECT array_agg(payload ORDER BY ordinality) FROM b), (SELECT array_agg(m -> 'payload' ORDER BY n) FROM jm), '... their payloads');
SELECT is((SELECT array_agg(pgcursor_internal.rfc3339_utc(created_at) ORDER BY ordinality) FROM b),
          (SELECT array_agg(m ->> 'createdAt' ORDER BY n) FROM jm), '... their createdAt');
SELECT is((SELECT array_agg(DISTINCT lease_id) FROM b),
          (SELECT array_agg(DISTINCT lease_id) FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
            WHERE p.queue = 't20b' AND c.consumer_group = 'rows'), '... and the one lease it took');
SELECT is((SELECT array_agg(ARRAY[partitions_claimed::text, paused::text, coalesce(msg_offset::text, 'none'),
                                   coalesce(lease_id::text, 'none')])
             FROM pgcursor.pop_messages('{"queue":"t20b","consumerGroup":"rows"}')),
          '{{0,false,none,none}}', 'pop_messages with nothing available: one row, 0 claimed, no message, no lease');
SELECT pgcursor.set_maintenance('pop', true);
SELECT is((SELECT array_agg(ARRAY[partitions_claimed::text, paused::text, coalesce(msg_offset::text, 'none'),
                                   coalesce(lease_id::text, 'none')])
             FROM pgcursor.pop_messages('{"queue":"t20b","consumerGroup":"late"}')),
          '{{0,true,none,none}}', 'pop_messages while pops are paused: one row, paused, no lease');
SELECT pgcursor.set_maintenance('pop', false);
SELECT throws_ok($$SELECT pgcursor.pop_messages('{"queue":"t20b","batch":0}')$$, '22023', 'batch must be a positive integer',
                 'pop_messages checks its request as pop does');
-- A claimed range whose messages retention deleted: the claim still shows
-- (one row, no message), as pop's header with no messages. (Offset 1 is
-- consumed first: a group's first pop starts past what was deleted.)
SELECT pg_temp.fill('t20d', 'x', 2), pg_temp.fill('t20d2', 'x', 2);
SELECT pgcursor.pop('{"queue":"t20d","batch":1,"autoAck":true}'), pgcursor.pop('{"queue":"t20d2","batch":1,"autoAck":true}');
DELETE FROM pgcursor.messages m USING pgcursor.partitions p
 WHERE p.id = m.partition_id AND p.queue IN ('t20d', 't20d2') AND m.msg_offset = 2;
SELECT is((SELECT array_agg(ARRAY[partitions_claimed::text, partition, coalesce(msg_offset::text, 'none')])
             FROM pgcursor.pop_messages('{"queue":"t20d"}')),
          '{{1,x,none}}', 'pop_messages of a range retention deleted: the claim''s row, without a message');
SELECT is(pgcursor.pop('{"queue":"t20d2"}') - 'leaseId' - 'partitionId',
          '{"success": true, "queue": "t20d2", "partition": "x", "consumerGroup": "__QUEUE_MODE__",
            "partitionsClaimed": 1, "messages": []}'::jsonb, '... and pop answers the claim with no messages');

-- A new group's cursor rows are written while its pops look through the
-- partitions in id order, 64 at a time: a claimable partition past the
-- first 64 is found. 100 partitions; the first pop claims 99 (lowest ids
-- first), the second one finds the last.
SELECT FROM pgcursor.push(jsonb_build_object('items', (
    SELECT jsonb_agg(jsonb_build_object('queue', 't20w', 'partition', 'w' || k, 'payload', k)) FROM generate_series(1, 100) k)));
SELECT is((pgcursor.pop('{"queue":"t20w","consumerGroup":"wide","batch":99,"partitions":99}') ->> 'partitionsClaimed')::int,
          99, 'a new group on 100 partitions: its first pop claims 99');
SELECT is(pgcursor_internal.add_claimable_cursors(ARRAY['t20w'], NULL, 'wide', 1), 1,
          'the partitions looked through, 64 at a time: the 100th is found (not left to the fallback that writes every row)');
SELECT is((pgcursor.pop('{"queue":"t20w","consumerGroup":"wide","batch":10}') ->> 'partitionId')::uuid,
          (SELECT id FROM pgcursor.partitions WHERE queue = 't20w' ORDER BY id DESC LIMIT 1),
          '... and the second pop claims it');

-- With more than 64 partitions in the pop's queues and fewer cursor rows
-- for the group, the claim reads the group's rows: those on another queue
-- are not the pop's, even of a queue of higher priority.
SELECT FROM pgcursor.configure('{"queue":"t20x","options":{"priority":10}}');
SELECT FROM pgcursor.push('{"items":[{"queue":"t20x","payload":1},{"queue":"t20x","payload":2}]}');
SELECT is(pg_temp.offs(pgcursor.pop('{"queue":"t20x","consumerGroup":"mixed","autoAck":true}')), '{1}',
          'a group with a row on a small queue of priority 10, a message left there');
SELECT is((SELECT array_agg(DISTINCT m ->> 'queue') FROM jsonb_array_elements(
              pgcursor.pop('{"queue":"t20w","consumerGroup":"mixed","batch":10,"partitions":2}') -> 'messages') m),
          '{t20w}', 'its pop of a queue of 100 partitions claims none of the small queue''s');

-- 8 concurrent pops of one group never share a partition (committed through
-- dblink: 4 partitions x 10 messages; each pop holds its locks for 0.3 s).
-- A group of their own: this session's earlier pops still hold, until the
-- file's transaction ends, the locks a first pop takes on buckets of
-- partitions for its group (add_claimable_cursors), and a pop passes over a
-- partition whose bucket is held: with the default group (9 buckets held
-- here), about one run in eight had a partition in a held bucket, and under
-- load it could go unclaimed.
\ir lib/dblink.sql
DO $$ BEGIN
    PERFORM pg_temp.open_sessions(VARIADIC ARRAY(SELECT 't20c' || i FROM generate_series(1, 8) i));
    PERFORM * FROM dblink('t20c1', $q$SELECT pgcursor.delete_queue('t20_concurrent'),
        pgcursor.push(jsonb_build_object('items', (SELECT jsonb_agg(jsonb_build_object('queue', 't20_concurrent',
            'partition', 'p' || (k % 4), 'payload', k)) FROM generate_series(0, 39) k)))$q$) AS t(a jsonb, b jsonb);
    FOR i IN 1..8 LOOP
        PERFORM dblink_send_query('t20c' || i, $q$SELECT pgcursor.pop('{"queue":"t20_concurrent","consumerGroup":"t20c","batch":100}'),
                                                         pg_sleep(0.3)$q$);
    END LOOP;
END $$;
CREATE TEMP TABLE cc ON COMMIT DROP AS
SELECT i, (SELECT r FROM dblink_get_result('t20c' || i) AS t(r jsonb, s text)) AS r FROM generate_series(1, 8) i;
SELECT is((SELECT count(*)::int FROM cc WHERE jsonb_array_length(r -> 'messages') = 10), 4, 'four pops got a whole partition');
SELECT is((SELECT count(*)::int FROM cc WHERE jsonb_array_length(r -> 'messages') = 0), 4, 'four pops got nothing');
SELECT is((SELECT count(DISTINCT r ->> 'partitionId')::int FROM cc WHERE r ->> 'partitionId' IS NOT NULL), 4,
          'no partition handed out twice');
DO $$ BEGIN
    FOR i IN 1..8 LOOP PERFORM * FROM dblink_get_result('t20c' || i) AS t(r jsonb, s text); END LOOP;
    PERFORM * FROM dblink('t20c1', $q$SELECT pgcursor.delete_queue('t20_concurrent')$q$) AS t(x jsonb);
    PERFORM pg_temp.close_sessions(VARIADIC ARRAY(SELECT 't20c' || i FROM generate_series(1, 8) i));
END $$;

-- give_back_lease: a pop whose client hung up while it ran gives its lease
-- back (the gateway calls it), as if never taken.
SELECT pg_temp.fill('t20gb', 'Default', 3);
SELECT pgcursor.pop('{"queue": "t20gb", "consumerGroup": "gb", "batch": 3}') AS gb_pop \gset
SELECT is(pgcursor_internal.give_back_lease(gen_random_uuid(), 'gb', ARRAY[pg_temp.pid('t20gb')]), 0,
          'give_back_lease of another lease gives nothing back');
SELECT is(pgcursor_internal.give_back_lease((:'gb_pop'::jsonb ->> 'leaseId')::uuid, 'gb',
                                            ARRAY[pg_temp.pid('t20gb')]), 1,
          'give_back_lease of the pop''s lease gives its partition back');
SELECT is((SELECT ROW(c.cursor, c.lease_id, c.lease_expires_at, c.batch_start, c.batch_end)::text
             FROM pgcursor.cursors c WHERE c.partition_id = pg_temp.pid('t20gb') AND c.consumer_group = 'gb'),
          ROW(0::bigint, NULL::uuid, NULL::timestamptz, NULL::bigint, NULL::bigint)::text,
          'the cursor row is as before the pop: not moved, no lease');
SELECT is(pg_temp.offs(pgcursor.pop('{"queue": "t20gb", "consumerGroup": "gb", "batch": 3}')), '{1,2,3}'::bigint[],
          'the next pop of the group gets the same messages at once');

SELECT * FROM finish();
ROLLBACK;
