-- The queue options as pop and push enforce them (docs/http-api.md, Queue
-- options), subscriptionMode as Queen reads it, message_id, the 60-second
-- lease extension default and maintenance mode. Ages are made by moving
-- created_at back: now() does not move inside this one transaction.
BEGIN;
SELECT plan(53);
\ir lib/dblink.sql

CREATE FUNCTION pg_temp.push(q text, n int, part text DEFAULT 'Default') RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part, 'payload', k,
                                            'transactionId', part || '-' || k) ORDER BY k)
          FROM generate_series(1, n) k)))
$$;
CREATE FUNCTION pg_temp.age(q text, offsets int[], seconds int) RETURNS void LANGUAGE sql AS $$
    UPDATE pgcursor.messages m SET created_at = now() - seconds * interval '1 second'
      FROM pgcursor.partitions p
     WHERE p.id = m.partition_id AND p.queue = q AND m.msg_offset = ANY (offsets)
$$;
CREATE FUNCTION pg_temp.offs(answer jsonb) RETURNS int[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((m ->> 'offset')::int ORDER BY (m ->> 'offset')::int), '{}')
      FROM jsonb_array_elements(answer -> 'messages') m
$$;
CREATE FUNCTION pg_temp.pop(q text, extra jsonb DEFAULT '{}') RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.pop(jsonb_build_object('queue', q, 'batch', 10) || extra)
$$;

-- delayedProcessing: only the prefix of old-enough messages, in order.
SELECT FROM pgcursor.configure('{"queue": "t25d", "options": {"delayedProcessing": 60}}');
SELECT FROM pg_temp.push('t25d', 3);
SELECT is(pg_temp.offs(pg_temp.pop('t25d')), '{}', 'delayed: nothing younger than 60 s pops');
-- (createdAt never decreases with the offset: a push stamps no message
-- earlier than its partition's newest, so ages fall along the offsets)
SELECT pg_temp.age('t25d', '{1}', 120);
SELECT is(pg_temp.offs(pg_temp.pop('t25d')), '{1}', 'message 2 is still young: it and 3 wait, order kept');
SELECT pg_temp.age('t25d', '{2}', 61);
SELECT is(pg_temp.offs(pg_temp.pop('t25d', '{"consumerGroup": "other"}')), '{1,2}',
          'once 2 is old enough, everything up to the first young message');

-- delayedProcessing's read runs once per candidate partition (it ran twice
-- for each one it let through: once in the claim's filter, once for its batch).
SET LOCAL track_functions = 'pl';
SELECT FROM pgcursor.configure('{"queue": "t25e", "options": {"delayedProcessing": 60}}');
SELECT FROM unnest(ARRAY['a', 'b', 'c']) part, LATERAL pg_temp.push('t25e', 2, part);
SELECT pg_temp.age('t25e', '{1,2}', 120);
SELECT coalesce(pg_stat_get_xact_function_calls('pgcursor_internal.delayed_ready'::regproc), 0) AS before \gset
SELECT is(jsonb_array_length(pg_temp.pop('t25e', '{"partitions": 3}') -> 'messages'), 6, 'delayed: three ready partitions claimed');
SELECT is(pg_stat_get_xact_function_calls('pgcursor_internal.delayed_ready'::regproc) - :before, 3::bigint,
          'delayed: one delayed_ready per candidate partition');
SET LOCAL track_functions = 'none';

-- windowBuffer: a partition is served only once its newest message is that old.
SELECT FROM pgcursor.configure('{"queue": "t25w", "options": {"windowBuffer": 30}}');
SELECT FROM pg_temp.push('t25w', 2);
SELECT pg_temp.age('t25w', '{1}', 100);
SELECT is(pg_temp.offs(pg_temp.pop('t25w')), '{}', 'window: the newest message is younger than 30 s');
SELECT is(pgcursor.pop('{"queue": "t25w", "partition": "Default"}'),
          '{"success": true, "messages": [], "windowBufferActive": true, "leaseId": ""}',
          'window: a pop naming the partition says so, as Queen');
SELECT is(pgcursor.pop('{"queue": "t25w"}'), '{"success": true, "messages": []}',
          'window: a pop of the queue does not (it may have other partitions)');
SELECT pg_temp.age('t25w', '{2}', 31);
SELECT is(pg_temp.offs(pg_temp.pop('t25w')), '{1,2}', 'quiet for 30 s: every pending message');
-- The newest message deleted by hand: the partition is still as young as
-- the newest one stored (the deleted one made it look quiet at once).
SELECT FROM pgcursor.configure('{"queue": "t25u", "options": {"windowBuffer": 30}}');
SELECT FROM pg_temp.push('t25u', 2);
SELECT pg_temp.age('t25u', '{2}', 100);
SELECT FROM pgcursor.delete_message((SELECT id FROM pgcursor.partitions WHERE queue = 't25u'), 'Default-2');
SELECT is(pg_temp.offs(pg_temp.pop('t25u')), '{}', 'window: the newest stored message counts, not a deleted one');

-- pop_due_in: when a pop that claimed nothing could claim without a push.
-- t25v (delayedProcessing 60): partition a's first pending message is 20 s
-- old (due in 40 s), b's was leased just now (300 s), c's is ready now and
-- left unclaimed (a pop takes one partition): not reported, as not due.
CREATE FUNCTION pg_temp.due(q text, extra jsonb DEFAULT '{}') RETURNS numeric LANGUAGE sql AS $$
    SELECT round(pgcursor_internal.pop_due_in(jsonb_build_object('queue', q) || extra)::numeric, 3)
$$;
SELECT FROM pgcursor.configure('{"queue": "t25v", "options": {"delayedProcessing": 60}}');
SELECT FROM unnest(ARRAY['a', 'b', 'c']) part, LATERAL pg_temp.push('t25v', 1, part);
UPDATE pgcursor.messages m SET created_at = now() - CASE p.name WHEN 'a' THEN interval '20 s' ELSE interval '100 s' END
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't25v';
SELECT is(pg_temp.offs(pg_temp.pop('t25v', '{"partition": "b"}')), '{1}', 'due: b leased');
SELECT is(pg_temp.offs(pg_temp.pop('t25v', '{"partition": "a"}')), '{}', 'due: a held back');
SELECT is(pg_temp.due('t25v'), 40.000, 'due: the earliest of a delay passing and a lease expiring, in seconds');
SELECT is(pg_temp.due('t25v', '{"partition": "b"}'), 300.000, 'due: a lease expiring');
-- windowBuffer 30 and a newest message 10 s old: due in 20 s.
SELECT FROM pgcursor.configure('{"queue": "t25y", "options": {"windowBuffer": 30}}');
SELECT FROM pg_temp.push('t25y', 1);
SELECT pg_temp.age('t25y', '{1}', 10);
SELECT is(pg_temp.offs(pg_temp.pop('t25y')), '{}', 'due: t25y held back');
SELECT is(pg_temp.due('t25y'), 20.000, 'due: a partition becoming quiet');
-- Nothing due: a caught-up group; a group without rows; a pop over more than 64 partitions.
SELECT FROM pg_temp.push('t25c', 1);
SELECT FROM pg_temp.pop('t25c', '{"autoAck": true}');
SELECT FROM pgcursor.push(jsonb_build_object('items', (SELECT jsonb_agg(jsonb_build_object(
           'queue', 't25z', 'partition', 'p' || k, 'payload', k)) FROM generate_series(1, 65) k)));
SELECT FROM pgcursor.configure('{"queue": "t25z", "options": {"leaseTime": 90}}');
SELECT FROM pg_temp.pop('t25z', '{"partition": "p1"}');
SELECT is(ARRAY[pg_temp.due('t25c'), pg_temp.due('t25y', '{"consumerGroup": "nobody"}'),
                pg_temp.due('t25z'), pg_temp.due('t25z', '{"partition": "p1"}')],
          ARRAY[NULL, NULL, NULL, 90.000]::numeric[],
          'due: none for a caught-up group, a group without rows, or 65 partitions (one of which is leased)');

-- maxSize: items past capacity fail, the others go in.
SELECT FROM pgcursor.configure('{"queue": "t25m", "options": {"maxSize": 2}}');
SELECT pgcursor.push('{"items": [{"queue": "t25m", "payload": 1, "transactionId": "a"},
                                 {"queue": "t25m", "partition": "p2", "payload": 2, "transactionId": "b"},
                                 {"queue": "t25m", "payload": 3, "transactionId": "c"},
                                 {"queue": "t25m", "payload": 4, "transactionId": "c"},
                                 {"queue": "t25m", "payload": 5, "transactionId": "a"}]}') AS r \gset
SELECT is(ARRAY(SELECT x ->> 'status' FROM jsonb_array_elements(:'r'::jsonb) x),
          '{queued,queued,failed,failed,duplicate}',
          'the third new message fails, its repeat too; a duplicate is still a duplicate');
SELECT is(((:'r'::jsonb) -> 2) - 'partitionId' - 'transactionId',
          '{"index": 2, "queue": "t25m", "partition": "Default", "offset": null, "message_id": null,
            "status": "failed", "error": "queue is full"}', 'a refused item: failed, "queue is full"');
SELECT is((SELECT count(*)::int FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
            WHERE p.queue = 't25m'), 2, 'nothing past capacity is stored');
SELECT is((SELECT head FROM pgcursor.partitions JOIN pgcursor.partition_heads ON partition_id = id WHERE queue = 't25m' AND name = 'Default'), 1::bigint,
          'offsets stay dense: the refused item took none');
SELECT ok(pgcursor.ack_group(jsonb_build_object('partitionId', (:'r'::jsonb) -> 0 -> 'partitionId',
          'items', '[{"transactionId": "a"}]'::jsonb)) -> 0 -> 'success' = 'true', 'consume one');
SELECT is(pgcursor.push('{"items": [{"queue": "t25m", "payload": 6, "transactionId": "d"}]}') -> 0 ->> 'status',
          'queued', 'consumed messages make room again');
-- A queue nobody consumes: what retention deleted makes room too.
SELECT FROM pgcursor.configure('{"queue": "t25r", "options": {"maxSize": 2, "retentionSeconds": 60}}');
SELECT is(ARRAY(SELECT x ->> 'status' FROM jsonb_array_elements(pgcursor.push(
              '{"items": [{"queue": "t25r", "payload": 1}, {"queue": "t25r", "payload": 2},
                          {"queue": "t25r", "payload": 3}]}')) x),
          '{queued,queued,failed}', 'a queue nobody consumes takes maxSize messages');
UPDATE pgcursor.messages m SET created_at = now() - interval '2 minutes'
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't25r';
SELECT cmp_ok(pgcursor.purge_messages(), '>=', 2::bigint, 'retention deletes them');
SELECT is(ARRAY(SELECT x ->> 'status' FROM jsonb_array_elements(pgcursor.push(
              '{"items": [{"queue": "t25r", "payload": 4}, {"queue": "t25r", "payload": 5},
                          {"queue": "t25r", "payload": 6}]}')) x),
          '{queued,queued,failed}', '... and the queue takes maxSize more: only stored messages count');

-- A push to a queue with a maxSize takes its queue's turn (an advisory lock,
-- lock_capped_queues) before it locks a head; other pushes take none.
SELECT FROM pgcursor.configure('{"queue": "t25turn", "options": {"maxSize": 5}}');
SELECT pg_temp.open_sessions('t25turn');
SELECT FROM dblink_exec('t25turn', 'BEGIN');
SELECT FROM dblink('t25turn', $q$SELECT pg_advisory_xact_lock(pgcursor_internal.capped_queue_class(), hashtext('t25turn'))::text$q$) AS t(x text);
SET LOCAL lock_timeout = '200ms';
SELECT throws_ok($$SELECT pgcursor.push('{"items": [{"queue": "t25turn", "payload": 7}]}')$$,
                 '55P03', NULL, 'a push to a queue with a maxSize waits for the queue''s turn');
SELECT lives_ok($$SELECT pgcursor.push('{"items": [{"queue": "t25i-turn", "payload": 1}]}')$$,
                'a push to a queue without one does not');
SET LOCAL lock_timeout = 0;
SELECT FROM dblink_exec('t25turn', 'ROLLBACK');
SELECT pg_temp.close_sessions('t25turn');

-- message_id: one per stored message; a duplicate answers the original's.
SELECT pgcursor.push('{"items": [{"queue": "t25i", "payload": 1, "transactionId": "x"}]}') -> 0 AS first \gset
SELECT is(pgcursor.push('{"items": [{"queue": "t25i", "payload": 2, "transactionId": "x"}]}') -> 0 -> 'message_id',
          (:'first'::jsonb) -> 'message_id', 'a duplicate answers the stored message_id');
SELECT is((pg_temp.pop('t25i') -> 'messages' -> 0 ->> 'id')::uuid,
          (SELECT message_id FROM pgcursor.messages WHERE partition_id = ((:'first'::jsonb) ->> 'partitionId')::uuid),
          'pop shows the stored message_id as id');
SELECT matches((:'first'::jsonb) ->> 'message_id', '^[0-9a-f]{8}-[0-9a-f]{4}-7', 'message_id is a UUIDv7');

-- subscriptionMode: new and new-only start at the head; anything else means all.
SELECT FROM pg_temp.push('t25s', 2);
SELECT is(pg_temp.offs(pg_temp.pop('t25s', '{"consumerGroup": "g1", "subscriptionMode": "new-only"}')), '{}',
          'new-only: from the head');
SELECT is(pg_temp.offs(pg_temp.pop('t25s', '{"consumerGroup": "g2", "subscriptionMode": "from_beginning"}')),
          '{1,2}', 'from_beginning: all');
SELECT is(pg_temp.offs(pg_temp.pop('t25s', '{"consumerGroup": "g3", "subscriptionMode": ""}')), '{1,2}',
          'an empty mode: all');
SELECT is(pgcursor.push('{"items": [{"queue": "", "payload": 1, "transactionId": "t25-empty"}]}') -> 0 ->> 'status',
          'queued', 'the empty string is a queue name');
SELECT is((SELECT count(*)::int FROM jsonb_array_elements(
              pgcursor.pop('{"queue": "", "batch": 1000, "consumerGroup": "t25e"}') -> 'messages') m
            WHERE m ->> 'transactionId' = 't25-empty' AND m ->> 'queue' = ''), 1,
          '... and pops by that name');

-- priority: a namespace pop serves the higher-priority queue first. t25pa
-- sorts first by name and has the older partition: only priority puts t25pb first.
SELECT FROM pgcursor.configure('{"queue": "t25pa", "namespace": "ns25p", "options": {"priority": 0}}');
SELECT FROM pgcursor.configure('{"queue": "t25pb", "namespace": "ns25p", "options": {"priority": 5}}');
SELECT FROM pg_temp.push('t25pa', 2);
SELECT FROM pg_temp.push('t25pb', 2);
CREATE FUNCTION pg_temp.popped_queues(answer jsonb) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(m ->> 'queue' ORDER BY k), '{}')  -- in answer order
      FROM jsonb_array_elements(answer -> 'messages') WITH ORDINALITY AS x(m, k)
$$;
SELECT is(pg_temp.popped_queues(pgcursor.pop('{"namespace": "ns25p", "batch": 2, "autoAck": true}')),
          '{t25pb,t25pb}', 'priority: the priority-5 queue first');
SELECT is(pg_temp.popped_queues(pgcursor.pop('{"namespace": "ns25p", "batch": 2, "autoAck": true}')),
          '{t25pa,t25pa}', 'then the priority-0 queue');
SELECT is(pg_temp.popped_queues(pgcursor.pop('{"namespace": "ns25p", "batch": 10, "consumerGroup": "t25pg",
                                                 "partitions": 2}')),
          '{t25pb,t25pb,t25pa,t25pa}', 'one pop over both: the higher priority''s messages first');

-- extend_lease without seconds: 60 s, whatever the queue's leaseTime.
SELECT FROM pgcursor.configure('{"queue": "t25l", "options": {"leaseTime": 2}}');
SELECT FROM pg_temp.push('t25l', 1);
SELECT pg_temp.pop('t25l') ->> 'leaseId' AS lease \gset
SELECT is(pgcursor.extend_lease(jsonb_build_object('leaseId', :'lease')) ->> 'newExpiresAt',
          pgcursor_internal.rfc3339_utc(now() + interval '60 seconds'), 'no seconds: now + 60 s');

-- configure: an option name outside the list is refused, naming it.
SELECT throws_ok($$SELECT pgcursor.configure('{"queue": "t25l", "options": {"ttl": 5}}')$$,
                 '22023', 'options.ttl is not a queue option', 'an unknown option is a 22023');

-- Maintenance mode.
SELECT is(pgcursor.set_maintenance('push', true) ->> 'maintenanceMode', 'true', 'push maintenance on');
SELECT throws_ok($$SELECT pgcursor.push('{"items": [{"queue": "t25x", "payload": 1}]}')$$,
                 'PC503', 'maintenance mode', 'a push is refused (the gateway''s 503)');
SELECT is((SELECT count(*)::int FROM pgcursor.partitions WHERE queue = 't25x'), 0, '... before writing anything');
SELECT throws_ok($$SELECT * FROM pgcursor.push_items(ARRAY['t25x'], ARRAY['1'::jsonb])$$,
                 'PC503', 'maintenance mode', 'so is push_items');
SELECT throws_ok($$SELECT pgcursor.push('{"items": [{"payload": 1}]}')$$,
                 '22023', NULL, 'a malformed push is still told what is wrong with it');
SELECT is(pgcursor.transaction('{"operations": [{"type": "push", "items": [{"queue": "t25x", "payload": 1}]}]}')
            -> 'results' -> 0 -> 0 ->> 'status',
          'queued', 'a transaction''s push goes on (only the push itself pauses)');
SELECT is(pgcursor.set_maintenance('pop', true) ->> 'popMaintenanceMode', 'true', 'pop maintenance on');
SELECT is(pg_temp.pop('t25s', '{"consumerGroup": "g4"}'), '{"success": true, "messages": [], "paused": true}',
          'a pop answers paused, claiming nothing');
SELECT is((SELECT row(paused, partitions_claimed, window_buffer_active)::text
             FROM pgcursor.pop_messages('{"queue": "t25s", "consumerGroup": "g4"}')),
          '(t,0,f)', 'pop_messages: paused, nothing claimed, no window (never null: the gateway reads every column)');
SELECT is(pgcursor.pop('{"queue": "t25-no-such-queue"}'), '{"success": true, "messages": [], "paused": true}',
          'a pop of a queue that does not exist answers paused too, as Queen''s does before any lookup');
SELECT throws_ok($$SELECT pgcursor.pop('{"queue": "t25s", "batch": 0}')$$, '22023', 'batch must be a positive integer',
                 '... and a malformed one is still told what is wrong with it');
SELECT is(pgcursor.set_maintenance('pop', false) || pgcursor.set_maintenance('push', false),
          '{"maintenanceMode": false, "popMaintenanceMode": false, "bufferedMessages": 0, "bufferHealthy": true,
            "bufferStats": {"pendingCount": 0, "failedCount": 0, "dbHealthy": true,
                            "failedFiles": {"count": 0, "totalBytes": 0, "totalMB": 0, "failoverCount": 0, "qos0Count": 0}},
            "message": "Push maintenance mode disabled"}', 'both off again');

SELECT * FROM finish();
ROLLBACK;
