-- The message browser (docs/sql-api.md "Message browser"): list_messages
-- (fields, status rules, busStatus, mode, window, filters, transactionId,
-- paging), the detail's Queen fields in message(), delete_message and
-- retry_message.
BEGIN;
SELECT plan(111);

-- Pushes n messages <q>-<part>-1..n to (q, part); returns the partition id.
CREATE FUNCTION pg_temp.fill(q text, part text, n int) RETURNS uuid LANGUAGE sql AS $$
    SELECT (pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part, 'payload', jsonb_build_object('k', k),
                                            'transactionId', q || '-' || part || '-' || k) ORDER BY k)
        FROM generate_series(1, n) k))) -> 0 ->> 'partitionId')::uuid
$$;
-- The listing as "partition:offset:status" in answer order.
CREATE FUNCTION pg_temp.rows(f jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s:%s:%s', m ->> 'partition', m ->> 'offset', m ->> 'status'), ' ' ORDER BY n), '')
    FROM jsonb_array_elements(pgcursor.list_messages(f) -> 'messages') WITH ORDINALITY AS x(m, n)
$$;
CREATE FUNCTION pg_temp.dlq(pid uuid, grp text, txid text, why text) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.ack_group(jsonb_build_object('partitionId', pid, 'consumerGroup', grp, 'items',
                jsonb_build_array(jsonb_build_object('transactionId', txid, 'status', 'dlq', 'error', why))))
$$;

-- Queue t62q: queue mode. Partition a: 5 messages, 1..2 completed, 3..4
-- leased (processing), 5 pending; offset 2 dead-lettered by another group
-- afterwards wins (dead_letter). Partition b: 2 messages, no cursor at all.
SELECT pgcursor.configure('{"queue": "t62q", "namespace": "t62ns", "task": "t62task", "options": {"priority": 4}}') IS NOT NULL AS configured \gset
SELECT pg_temp.fill('t62q', 'a', 5) AS a \gset
SELECT pg_temp.fill('t62q', 'b', 2) AS b \gset
SELECT pgcursor.pop('{"queue": "t62q", "partition": "a", "batch": 2, "autoAck": true}') IS NOT NULL AS popped \gset
SELECT pgcursor.pop('{"queue": "t62q", "partition": "a", "batch": 2}') ->> 'leaseId' AS lease \gset
SELECT pg_temp.dlq(:'a', 'audit', 't62q-a-1', 'broken');
-- a's messages are newer than b's (b's an hour minus a minute ago).
UPDATE pgcursor.messages SET created_at = now() - interval '59 minutes' WHERE partition_id = :'b';

SELECT is(pg_temp.rows('{"queue": "t62q"}'),
          'a:5:pending a:4:processing a:3:processing a:2:completed a:1:dead_letter b:2:pending b:1:pending',
          'newest first; dead_letter, completed, processing (exactly the leased batch), pending');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(pgcursor.list_messages('{"queue": "t62q"}') -> 'messages' -> 0) k),
          ARRAY['busStatus', 'createdAt', 'id', 'leaseExpiresAt', 'namespace', 'offset', 'partition', 'partitionId',
                'producerSub', 'queue', 'queuePath', 'queuePriority', 'queueStatus', 'status', 'task', 'traceId',
                'transactionId'],
          'every field of a listed message; no payload');
SELECT is((pgcursor.list_messages('{"queue": "t62q", "partition": "a", "limit": 1}') -> 'messages' -> 0)
              - ARRAY['id', 'createdAt', 'leaseExpiresAt', 'partitionId'],
          '{"task": "t62task", "queue": "t62q", "offset": 5, "status": "pending", "traceId": null,
            "busStatus": {"consumedBy": 0, "totalGroups": 1}, "namespace": "t62ns", "partition": "a",
            "queuePath": "t62q/a", "producerSub": null, "queueStatus": "pending", "queuePriority": 4,
            "transactionId": "t62q-a-5"}'::jsonb,
          'the fields of one message');
SELECT is(pgcursor.list_messages('{"queue": "t62q", "partition": "a", "limit": 1}') #>> '{messages,0,leaseExpiresAt}',
          pgcursor_internal.rfc3339_utc((SELECT lease_expires_at FROM pgcursor.cursors
                                          WHERE partition_id = :'a' AND consumer_group = '__QUEUE_MODE__')),
          'leaseExpiresAt: the __QUEUE_MODE__ lease of the partition');
SELECT is(pgcursor.list_messages('{"queue": "t62q", "partition": "b"}') #> '{messages,0,leaseExpiresAt}', 'null'::jsonb,
          'no lease: leaseExpiresAt null');
SELECT is(pgcursor.list_messages('{"queue": "t62q", "partition": "a", "limit": 1}') #>> '{messages,0,id}',
          (SELECT message_id::text FROM pgcursor.messages WHERE partition_id = :'a' AND msg_offset = 5),
          'id: the message_id');
SELECT is(pgcursor.list_messages('{"queue": "t62q"}') -> 'mode',
          '{"type": "hybrid", "hasQueueMode": true, "busGroupsCount": 1}'::jsonb,
          'mode: __QUEUE_MODE__ and a named group (audit, by its dead letter) -> hybrid');

-- Filters: status before limit/offset, other filters, unknown status.
SELECT is(pg_temp.rows('{"queue": "t62q", "status": "pending"}'), 'a:5:pending b:2:pending b:1:pending', 'status filter');
SELECT is(pg_temp.rows('{"queue": "t62q", "status": "pending", "limit": "1", "offset": "1"}'), 'b:2:pending',
          'the status filter applies before limit and offset');
SELECT is(pg_temp.rows('{"queue": "t62q", "status": "processing"}'), 'a:4:processing a:3:processing', 'processing');
SELECT is(pg_temp.rows('{"queue": "t62q", "status": "dead_letter"}'), 'a:1:dead_letter', 'dead_letter');
SELECT is(pg_temp.rows('{"queue": "t62q", "status": "failed"}'), '', 'any other status matches nothing');
SELECT is(pg_temp.rows('{"queue": "t62q", "limit": 2, "offset": 5}'), 'b:2:pending b:1:pending', 'limit and offset');
SELECT is(pg_temp.rows('{"queue": "t62q", "partition": "b"}'), 'b:2:pending b:1:pending', 'partition filter (a name)');
SELECT is(pg_temp.rows('{"ns": "t62ns", "task": "t62task", "partition": "b"}'), 'b:2:pending b:1:pending',
          'ns and task filters');
SELECT is(pg_temp.rows('{"ns": "nowhere-t62"}'), '', 'an unknown namespace: nothing');
SELECT is(pg_temp.rows('{"queue": "t62q", "partition": "", "status": "", "limit": "", "offset": ""}'),
          pg_temp.rows('{"queue": "t62q"}'), 'empty values count as absent');

-- The window: from (default now - 1 hour, inclusive), to (inclusive to the end of its minute).
UPDATE pgcursor.messages SET created_at = now() - interval '2 hours' WHERE partition_id = :'b' AND msg_offset = 1;
SELECT is(pg_temp.rows('{"queue": "t62q", "partition": "b"}'), 'b:2:pending', 'by default: the last hour');
SELECT is(pg_temp.rows(jsonb_build_object('queue', 't62q', 'partition', 'b',
                                          'from', now() - interval '2 hours')), 'b:2:pending b:1:pending',
          'from is inclusive');
SELECT is(pg_temp.rows(jsonb_build_object('queue', 't62q', 'partition', 'b', 'from', now() - interval '3 hours',
                                          'to', date_trunc('minute', now() - interval '2 hours'))),
          'b:1:pending', 'to is inclusive to the end of its minute');
SELECT is(pg_temp.rows(jsonb_build_object('queue', 't62q', 'partition', 'b', 'from', now() - interval '3 hours',
                                          'to', date_trunc('minute', now() - interval '2 hours') - interval '1 second')),
          '', 'and not beyond it');
SELECT is(pgcursor.list_messages(jsonb_build_object('queue', 't62q', 'from', now() + interval '1 day')),
          '{"mode": {"type": "none", "hasQueueMode": false, "busGroupsCount": 0}, "messages": []}'::jsonb,
          'an empty window: no messages, mode none');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"from": "yesterday-ish"}')$$, '22023',
                 'from must be an ISO timestamp', 'a bad from names it');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"to": "x"}')$$, '22023', 'to must be an ISO timestamp', 'a bad to names it');
SELECT lives_ok($$SELECT pgcursor.list_messages('{"to": "9999-12-31 23:59:59"}')$$,
                'a to in the last minute RFC 3339 can write lists (its minute''s end is past it)');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"to": "294276-12-31 23:59:59"}')$$, '22023',
                 'to must be a time from 0001-01-01 to 9999-12-31', 'a to past year 9999 is refused, naming it');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"limit": "0"}')$$, '22023', 'limit must be a positive integer',
                 'a bad limit names it');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"offset": "-1"}')$$, '22023',
                 'offset must be a non-negative integer', 'a bad offset names it');

-- The offset range: fromOffset..toOffset (inclusive) within each partition;
-- with a bound, the window is open where from/to are not given.
SELECT is(pg_temp.rows('{"queue": "t62q", "partition": "a", "fromOffset": 2, "toOffset": 4}'),
          'a:4:processing a:3:processing a:2:completed', 'fromOffset..toOffset, both inclusive');
SELECT is(pg_temp.rows('{"queue": "t62q", "partition": "a", "fromOffset": "4"}'), 'a:5:pending a:4:processing',
          'fromOffset alone, as a query string gives it');
SELECT is(pg_temp.rows('{"queue": "t62q", "partition": "b", "toOffset": "1"}'), 'b:1:pending',
          'toOffset alone reaches a message older than the default hour');
SELECT is(pg_temp.rows(jsonb_build_object('queue', 't62q', 'partition', 'b', 'fromOffset', 1,
                                          'from', now() - interval '1 hour')),
          'b:2:pending', 'a from given still bounds the window');
SELECT is(pg_temp.rows('{"queue": "t62q", "fromOffset": 2, "toOffset": 2}'), 'a:2:completed b:2:pending',
          'without a partition the range applies within each one');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"fromOffset": "-1"}')$$, '22023',
                 'fromOffset must be a non-negative integer', 'a negative fromOffset names it');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"toOffset": 1.5}')$$, '22023',
                 'toOffset must be a non-negative integer', 'a fractional toOffset names it');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"toOffset": "99999999999999999999"}')$$, '22023',
                 'toOffset must be at most 9223372036854775807', 'an offset past bigint names it and the bound');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"fromOffset": 5, "toOffset": "4"}')$$, '22023',
                 'toOffset must not be below fromOffset', 'an empty range is refused, naming toOffset');

-- transactionId: the messages carrying it, in each selected partition, in
-- any window unless from/to narrow it. Two copies in one partition (pushed
-- again once the index forgot it) list both and nothing between them.
UPDATE pgcursor.messages SET transaction_id = 't62q-a-5' WHERE partition_id = :'b' AND msg_offset = 2;
UPDATE pgcursor.messages SET transaction_id = 't62q-a-2' WHERE partition_id = :'a' AND msg_offset = 4;
SELECT is(pg_temp.rows('{"queue": "t62q", "transactionId": "t62q-a-5"}'), 'a:5:pending b:2:pending',
          'transactionId: in every partition of the queue, newest first');
SELECT is(pg_temp.rows('{"queue": "t62q", "partition": "a", "transactionId": "t62q-a-2"}'),
          'a:4:processing a:2:completed', 'transactionId: both copies in a partition, not the message between');
SELECT is(pg_temp.rows('{"queue": "t62q", "transactionId": "t62q-a-2", "status": "completed"}'), 'a:2:completed',
          'transactionId and status together');
SELECT is(pg_temp.rows('{"queue": "t62q", "transactionId": "t62q-a-2", "limit": 1, "offset": 1}'), 'a:2:completed',
          'transactionId: limit and offset page its copies');
SELECT is(pg_temp.rows('{"queue": "t62q", "transactionId": "t62q-a-2", "fromOffset": 3}'), 'a:4:processing',
          'transactionId within an offset range');
UPDATE pgcursor.messages SET transaction_id = 't62q-b-2' WHERE partition_id = :'b' AND msg_offset = 2;
UPDATE pgcursor.messages SET transaction_id = 't62q-a-4' WHERE partition_id = :'a' AND msg_offset = 4;
SELECT is(pg_temp.rows('{"transactionId": "t62q-b-1"}'), 'b:1:pending',
          'transactionId without a queue: every queue''s, older than the default hour');
SELECT is(pg_temp.rows(jsonb_build_object('queue', 't62q', 'transactionId', 't62q-b-1', 'from', now() - interval '1 hour')),
          '', 'a from given still bounds a transactionId''s window');
SELECT is(pg_temp.rows('{"queue": "t62q", "transactionId": "t62q-nowhere"}'), '', 'an unknown transactionId: nothing');
SELECT throws_ok($$SELECT pgcursor.list_messages('{"transactionId": 7}')$$, '22023',
                 'transactionId must be a string', 'a transactionId not a string names it');

-- Bus only (rule 2): completed when every named group is past it.
SELECT pg_temp.fill('t62bus', 'Default', 3) AS bus \gset
SELECT pgcursor.pop('{"queue": "t62bus", "consumerGroup": "g1", "batch": 2, "autoAck": true}') IS NOT NULL AS p1 \gset
SELECT pgcursor.pop('{"queue": "t62bus", "consumerGroup": "g2", "batch": 1, "autoAck": true}') IS NOT NULL AS p2 \gset
SELECT pgcursor.pop('{"queue": "t62bus", "consumerGroup": "g2", "batch": 1}') IS NOT NULL AS p3 \gset
SELECT is(pg_temp.rows('{"queue": "t62bus"}'), 'Default:3:pending Default:2:pending Default:1:completed',
          'named groups only: completed once every one is past it; their leases are not processing');
SELECT is(jsonb_path_query_array(pgcursor.list_messages('{"queue": "t62bus"}'), '$.messages[*].busStatus'),
          '[{"consumedBy": 0, "totalGroups": 2}, {"consumedBy": 1, "totalGroups": 2},
            {"consumedBy": 2, "totalGroups": 2}]'::jsonb, 'busStatus: named groups past it, of those on the partition');
SELECT is(jsonb_path_query_array(pgcursor.list_messages('{"queue": "t62bus"}'), '$.messages[*].queueStatus'),
          '["pending", "pending", "pending"]'::jsonb, 'queueStatus ignores the named groups');
SELECT is(pgcursor.list_messages('{"queue": "t62bus"}') -> 'mode',
          '{"type": "bus", "hasQueueMode": false, "busGroupsCount": 2}'::jsonb, 'mode bus');
-- A named group's dead letter: status dead_letter (rule 1), but not the
-- queueStatus, which is __QUEUE_MODE__'s alone (it said dead_letter).
SELECT pg_temp.dlq(:'bus', 'g2', 't62bus-Default-3', 'named');
SELECT is(jsonb_path_query_array(pgcursor.list_messages('{"queue": "t62bus"}'),
                                 '$.messages[0] ? (@.offset == 3) .status') || jsonb_path_query_array(
              pgcursor.list_messages('{"queue": "t62bus"}'), '$.messages[0] ? (@.offset == 3) .queueStatus'),
          '["dead_letter", "pending"]'::jsonb, 'a named group''s dead letter is no queueStatus dead_letter');
SELECT pg_temp.dlq(:'bus', '__QUEUE_MODE__', 't62bus-Default-3', 'queue mode');
SELECT is(jsonb_path_query_array(pgcursor.list_messages('{"queue": "t62bus"}'), '$.messages[0].queueStatus'),
          '["dead_letter"]'::jsonb, '... queue mode''s own is');
SELECT pg_temp.fill('t62queue', 'Default', 1) AS qm \gset
SELECT pgcursor.pop('{"queue": "t62queue", "autoAck": true}') IS NOT NULL AS p4 \gset
SELECT is(pgcursor.list_messages('{"queue": "t62queue"}') -> 'mode',
          '{"type": "queue", "hasQueueMode": true, "busGroupsCount": 0}'::jsonb, 'mode queue');
SELECT is(pg_temp.rows('{"queue": "t62queue"}'), 'Default:1:completed', 'queue mode: completed past its cursor');

-- The detail: Queen's fields beside pgcursor's own.
SELECT pgcursor.message(:'a', 't62q-a-1') AS d1 \gset
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'d1'::jsonb) k),
          ARRAY['consumerGroups', 'createdAt', 'data', 'errorMessage', 'groups', 'id', 'isEncrypted', 'leaseExpiresAt',
                'mode', 'namespace', 'offset', 'partition', 'partitionId', 'payload', 'producerSub', 'queue',
                'queueConfig', 'queuePath', 'retryCount', 'status', 'task', 'traceId', 'transactionId'],
          'the detail has pgcursor''s keys and Queen''s');
SELECT is(:'d1'::jsonb - ARRAY['id', 'createdAt', 'partitionId', 'leaseExpiresAt', 'consumerGroups', 'groups'],
          '{"data": {"k": 1}, "mode": {"type": "hybrid", "hasQueueMode": true, "busGroupsCount": 1,
                                       "consumedByGroups": 1},
            "task": "t62task", "queue": "t62q", "offset": 1, "status": "dead_letter", "payload": {"k": 1},
            "traceId": null, "namespace": "t62ns", "partition": "a", "queuePath": "t62q/a", "retryCount": 0,
            "isEncrypted": false, "producerSub": null, "errorMessage": "broken", "transactionId": "t62q-a-1",
            "queueConfig": {"ttl": 3600, "priority": 4, "leaseTime": 300, "retryDelay": 1000, "retryLimit": 3}}'::jsonb,
          'status, the dead letter''s reason and counter, config and mode');
SELECT is(jsonb_path_query_array(:'d1'::jsonb, '$.consumerGroups[*] ? (@.name == "audit")'),
          '[{"name": "audit", "consumed": true, "leaseExpiresAt": null}]'::jsonb,
          'consumerGroups: each cursor row, consumed or not');
SELECT is(jsonb_path_query_array(:'d1'::jsonb, '$.consumerGroups[*].name'), '["__QUEUE_MODE__", "audit"]'::jsonb,
          '__QUEUE_MODE__ included');
SELECT is(pgcursor.message(:'a', 't62q-a-3') ->> 'status', 'processing', 'the detail''s processing is exact: in the batch');
SELECT is(pgcursor.message(:'a', 't62q-a-5') ->> 'status', 'pending', 'and outside it, pending');
SELECT is(pgcursor.message(:'a', 't62q-a-5') -> 'errorMessage', 'null'::jsonb, 'no dead letter: errorMessage null');
SELECT is(pgcursor.message(:'a', 't62q-a-5') ->> 'leaseExpiresAt',
          pgcursor_internal.rfc3339_utc((SELECT lease_expires_at FROM pgcursor.cursors
                                          WHERE partition_id = :'a' AND consumer_group = '__QUEUE_MODE__')),
          'leaseExpiresAt of the partition''s __QUEUE_MODE__ lease');
UPDATE pgcursor.messages SET payload = '{"encrypted": "eA==", "iv": "aXY=", "authTag": "dA=="}'
 WHERE partition_id = :'b' AND msg_offset = 2;
SELECT is(pgcursor.message(:'b', 't62q-b-2') -> 'isEncrypted', 'true'::jsonb, 'isEncrypted: stored as an envelope');

-- delete_message.
SELECT pg_temp.fill('t62del', 'Default', 4) AS del \gset
SELECT pgcursor.pop('{"queue": "t62del", "consumerGroup": "g", "batch": 1, "autoAck": true}') IS NOT NULL AS p5 \gset
SELECT pg_temp.dlq(:'del', 'g', 't62del-Default-2', 'x');
SELECT pg_temp.dlq(:'del', 'h', 't62del-Default-2', 'y');
SELECT pgcursor.record_trace(jsonb_build_object('partitionId', :'del', 'transactionId', 't62del-Default-2',
                                                'data', '{"text": "seen"}'::jsonb, 'traceNames', 't62-name'))
       IS NOT NULL AS traced \gset
SELECT is(pgcursor.delete_message(:'del', 't62del-Default-2'),
          jsonb_build_object('success', true, 'partitionId', :'del', 'transactionId', 't62del-Default-2',
                             'message', 'Message deleted successfully'), 'delete answers success');
SELECT is((SELECT count(*) FROM pgcursor.messages WHERE partition_id = :'del' AND msg_offset = 2), 0::bigint,
          'the message row is gone');
SELECT is((SELECT count(*) FROM pgcursor.transaction_index WHERE partition_id = :'del'
            AND transaction_id = 't62del-Default-2'), 0::bigint, 'its transaction index entry is gone');
SELECT is((SELECT count(*) FROM pgcursor.dead_letters WHERE partition_id = :'del'), 0::bigint,
          'its dead letters of every group are gone');
SELECT is((SELECT count(*) FROM pgcursor.trace_events WHERE partition_id = :'del')
          + (SELECT count(*) FROM pgcursor.trace_names WHERE partition_id = :'del'), 0::bigint, 'its traces are gone');
SELECT is((SELECT array_agg(consumer_group || '=' || cursor ORDER BY consumer_group) FROM pgcursor.cursors
            WHERE partition_id = :'del'), ARRAY['g=2', 'h=2'],
          'cursors stay where the dead-lettering acks left them');
SELECT is(pgcursor.delete_message(:'del', 't62del-Default-2') ->> 'message', 'Message not found',
          'deleting again: nothing to delete');
SELECT is(pgcursor.delete_message(:'del', 't62del-Default-2') -> 'success', 'false'::jsonb, 'success false');
SELECT is(pgcursor.push(jsonb_build_object('items', jsonb_build_array(jsonb_build_object(
              'queue', 't62del', 'transactionId', 't62del-Default-2', 'payload', 'again')))) #>> '{0,status}',
          'queued', 'the transactionId can be pushed again');
-- A dead letter whose message retention already removed (index entry purged too).
SELECT pg_temp.dlq(:'del', 'g', 't62del-Default-3', 'late');
DELETE FROM pgcursor.messages WHERE partition_id = :'del' AND msg_offset = 3;
DELETE FROM pgcursor.transaction_index WHERE partition_id = :'del' AND transaction_id = 't62del-Default-3';
SELECT is(pgcursor.delete_message(:'del', 't62del-Default-3') -> 'success', 'true'::jsonb,
          'a dead letter alone is deleted (matched on its own transactionId)');
SELECT is((SELECT count(*) FROM pgcursor.dead_letters WHERE partition_id = :'del'), 0::bigint, 'and it is gone');
-- The next message of a cursor deleted: the pop skips the gap.
SELECT is(pgcursor.delete_message(:'del', 't62del-Default-4') -> 'success', 'true'::jsonb, 'delete the next pending one');
SELECT is(jsonb_path_query_array(pgcursor.pop('{"queue": "t62del", "consumerGroup": "fresh", "batch": 10}'),
                                 '$.messages[*].transactionId'),
          '["t62del-Default-1", "t62del-Default-2"]'::jsonb, 'a new group gets what is left (the re-pushed one too)');

-- A delete inside a live leased batch: the batch ends at its last message
-- still stored, so its holder's ack of that one releases the lease; with
-- nothing left above the cursor the lease goes at once. (The holder could
-- never ack the deleted one, and m4 waited out the lease.)
SELECT pg_temp.fill('t62lease', 'Default', 4) AS ls \gset
SELECT pgcursor.pop('{"queue": "t62lease", "consumerGroup": "a", "batch": 3}') ->> 'leaseId' AS la \gset
SELECT pgcursor.pop('{"queue": "t62lease", "consumerGroup": "b", "batch": 3}') ->> 'leaseId' AS lb \gset
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', :'ls', 'consumerGroup', 'b', 'leaseId', :'lb',
                                                'items', '[{"transactionId": "t62lease-Default-2"}]'::jsonb))
          #>> '{0,leaseReleased}', 'false', '(b acks up to 2 before the delete)');
SELECT FROM pgcursor.delete_message(:'ls', 't62lease-Default-3');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', :'ls', 'consumerGroup', 'a', 'leaseId', :'la',
                                                'items', '[{"transactionId": "t62lease-Default-2"}]'::jsonb))
          #>> '{0,leaseReleased}', 'true', 'the last stored message of a trimmed batch releases the lease');
SELECT is(jsonb_path_query_array(pgcursor.pop('{"queue": "t62lease", "consumerGroup": "a", "batch": 3}'),
                                 '$.messages[*].transactionId'), '["t62lease-Default-4"]'::jsonb, '... and m4 comes next');
SELECT is((SELECT lease_id FROM pgcursor.cursors WHERE partition_id = :'ls' AND consumer_group = 'b'), NULL,
          'a batch with nothing left above its cursor is released by the delete');
SELECT is(jsonb_path_query_array(pgcursor.pop('{"queue": "t62lease", "consumerGroup": "b", "batch": 3}'),
                                 '$.messages[*].transactionId'), '["t62lease-Default-4"]'::jsonb, '... and m4 comes next there too');

-- retry_message.
SELECT pg_temp.fill('t62retry', 'Default', 2) AS rt \gset
SELECT pg_temp.dlq(:'rt', 'g', 't62retry-Default-1', 'boom');
SELECT pgcursor.retry_message(:'rt', 't62retry-Default-1') AS retried \gset
SELECT is(:'retried'::jsonb - 'requeued',
          jsonb_build_object('success', true, 'partitionId', :'rt', 'transactionId', 't62retry-Default-1'),
          'retry answers success');
SELECT is(:'retried'::jsonb #> '{requeued,0,offset}', '3'::jsonb, 'the payload went back as a new message (offset 3)');
SELECT is((SELECT payload FROM pgcursor.messages WHERE partition_id = :'rt' AND msg_offset = 3), '{"k": 1}'::jsonb,
          'with the dead letter''s payload');
SELECT is((SELECT count(*) FROM pgcursor.dead_letters WHERE partition_id = :'rt'), 0::bigint, 'the dead letter is gone');
SELECT throws_ok(format('SELECT pgcursor.retry_message(%L, %L)', :'rt', 't62retry-Default-1'), 'P0002',
                 'no dead letter for message t62retry-Default-1 in partition ' || :'rt', 'no dead letter: P0002');
-- Two groups dead-lettered message 2: one new message for both (each group
-- sees every new message: a copy per dead letter would give each two).
SELECT pg_temp.dlq(:'rt', 'g', 't62retry-Default-2', 'boom');
SELECT pg_temp.dlq(:'rt', 'h', 't62retry-Default-2', 'bang');
SELECT pgcursor.retry_message(:'rt', 't62retry-Default-2') AS retried \gset
SELECT is(jsonb_path_query_array(:'retried'::jsonb, '$.requeued[*].offset'), '[4, 4]'::jsonb,
          'two dead letters retried: one new message (offset 4), named for each');
SELECT is((SELECT count(*) FROM pgcursor.messages WHERE partition_id = :'rt' AND msg_offset > 3), 1::bigint,
          '... and only one was pushed');
SELECT is((SELECT count(*) FROM pgcursor.dead_letters WHERE partition_id = :'rt'), 0::bigint, '... both dead letters gone');

-- Without a status filter only the offset + limit partitions whose newest
-- listed message is newest are read. Queue t62w: w1 (3 messages, 1 min
-- old), w2 (1, 2 min), w3 (3, 3 min), w4 (2, 4 min), w5 (1, 5 min), and w6
-- and w7 (2 each, all 10 min old: ties, ordered by partitionId).
SELECT count(pg_temp.fill('t62w', 'w' || k, n)) AS filled
  FROM (VALUES (1, 3), (2, 1), (3, 3), (4, 2), (5, 1), (6, 2), (7, 2)) v(k, n) \gset
SELECT id AS w3 FROM pgcursor.partitions WHERE queue = 't62w' AND name = 'w3' \gset
UPDATE pgcursor.messages m SET created_at = now() - interval '1 minute' * (CASE WHEN p.name IN ('w6', 'w7') THEN 10
                                                                              ELSE substr(p.name, 2)::int END)
                                            - interval '1 second' * (CASE WHEN p.name IN ('w6', 'w7') THEN 0
                                                                          ELSE 10 - m.msg_offset END)
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't62w';
-- The order the listing promises, from the table itself.
CREATE FUNCTION pg_temp.expected(lim int, skip int, without text DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s:%s:pending', x.name, x.msg_offset), ' ' ORDER BY x.created_at DESC, x.id DESC, x.msg_offset DESC)
    FROM (SELECT p.name, p.id, m.msg_offset, m.created_at FROM pgcursor.messages m
            JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't62w' AND p.name IS DISTINCT FROM without
           ORDER BY m.created_at DESC, p.id DESC, m.msg_offset DESC OFFSET skip LIMIT lim) x
$$;
CREATE FUNCTION pg_temp.listed_reads() RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(pg_stat_get_xact_function_calls(
        'pgcursor_internal.listed_messages(uuid,timestamptz,timestamptz,bigint,bigint,text,bigint,bigint,bigint,text,bigint)'::regprocedure), 0)
$$;
SET LOCAL track_functions = 'pl';
SELECT pg_temp.listed_reads() AS reads0 \gset
SELECT is(pg_temp.rows('{"queue": "t62w", "limit": 4}'), pg_temp.expected(4, 0),
          'limit 4: newest first across partitions (w1 gives three, w2 one)');
SELECT is(pg_temp.listed_reads() - :reads0, 4::bigint, '... and only the four partitions with the newest messages were read');
SELECT is(pg_temp.rows('{"queue": "t62w", "limit": 3, "offset": 8}'), pg_temp.expected(3, 8),
          'offset 8, limit 3: into the tied partitions w6 and w7, by partitionId');
SELECT pg_temp.listed_reads() AS reads1 \gset
SELECT is(pg_temp.rows('{"queue": "t62w", "limit": 2, "status": "pending"}'), pg_temp.expected(2, 0),
          'with a status filter the same first rows ...');
SELECT is(pg_temp.listed_reads() - :reads1, 9::bigint,
          '... from every partition its newest pending message (7), then the page from the two that have the newest');
SELECT is(pg_temp.rows('{"queue": "t62w", "limit": 1000}'), pg_temp.expected(1000, 0), 'the whole queue, in order');
-- w1's three messages leased: w1 has the newest messages but none pending.
SELECT pgcursor.pop('{"queue": "t62w", "partition": "w1", "batch": 3}') ->> 'leaseId' IS NOT NULL AS w1_leased \gset
SELECT pg_temp.listed_reads() AS reads2 \gset
SELECT is(pg_temp.rows('{"queue": "t62w", "limit": 3, "status": "pending"}'), pg_temp.expected(3, 0, 'w1'),
          'status pending ranks partitions by their newest pending message, not their newest message');
SELECT is(pg_temp.listed_reads() - :reads2, 10::bigint, '... (7 partitions looked at, the page read from 3)');
SELECT is(pg_temp.rows('{"queue": "t62w", "limit": 2, "offset": 1, "status": "processing"}'),
          'w1:2:processing w1:1:processing', 'status processing: the leased batch, paged');

-- A status few messages have reads only where it can stand (status_offsets),
-- not every message of the window: queue t62s, 3 partitions of 100
-- pending messages, nothing completed, nothing dead-lettered.
SELECT count(pg_temp.fill('t62s', 's' || k, 100)) AS filled_s FROM generate_series(1, 3) k \gset
SELECT pg_stat_get_xact_tuples_fetched('pgcursor.messages_pkey'::regclass) AS fetched0 \gset
SELECT is(pg_temp.rows('{"queue": "t62s", "status": "completed"}') || pg_temp.rows('{"queue": "t62s", "status": "dead_letter"}')
          || pg_temp.rows('{"queue": "t62s", "status": "processing"}'), '', 'no completed, dead-lettered or processing message');
SELECT cmp_ok(pg_stat_get_xact_tuples_fetched('pgcursor.messages_pkey'::regclass) - :fetched0, '<', 90::bigint,
              '... found without reading the 300 messages three times over (900 rows before status_offsets; counted on the primary key, which an index scan fetches through)');
-- A page reads each ranked partition only from the oldest of their newest
-- messages on (page_floor): queue t62f, 100 partitions of 100 messages a
-- minute apart, partition fk's newest k half-seconds old. The first 100 are the
-- newest of each; the 59 older ones of each partition in the hour's window
-- are not read (about 6,000 rows before page_floor).
SELECT count(pg_temp.fill('t62f', 'f' || k, 100)) AS filled_f FROM generate_series(1, 100) k \gset
UPDATE pgcursor.messages m SET created_at = now() - interval '1 minute' * (100 - m.msg_offset)
                                            - interval '500 milliseconds' * substr(p.name, 2)::int
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't62f';
SELECT pg_stat_get_xact_tuples_fetched('pgcursor.messages_pkey'::regclass) AS fetched1 \gset
SELECT is(pg_temp.rows('{"queue": "t62f", "limit": 100}'),
          (SELECT string_agg(format('f%s:100:pending', k), ' ' ORDER BY k) FROM generate_series(1, 100) k),
          'a page of 100 over 100 partitions: the newest message of each');
SELECT cmp_ok(pg_stat_get_xact_tuples_fetched('pgcursor.messages_pkey'::regclass) - :fetched1, '<', 3000::bigint,
              '... read without the older messages of each partition');
-- status_offsets: where each status can stand in offsets 1..100, with done_to 10.
SELECT is(ARRAY(SELECT format('%s..%s', o.first, o.past)
                  FROM unnest(ARRAY['completed', 'pending', 'processing', NULL]) WITH ORDINALITY w(want, k),
                       pgcursor_internal.status_offsets(:'w3', w.want, 1, 100, 10, 11, 15) o ORDER BY w.k),
          ARRAY['1..10', '11..100', '11..15', '1..100'],
          'status_offsets: completed to done_to, pending above it, processing the lease above it, any status all');
SELECT is((SELECT format('%s..%s', o.first, o.past) FROM pgcursor_internal.status_offsets(:'w3', 'processing', 1, 100, 10, NULL, NULL) o),
          '11..0', 'status_offsets: no processing without a live lease (empty: past below first)');
SELECT is(ARRAY(SELECT format('%s..%s', o.first, o.past)
                  FROM unnest(ARRAY[1, 2]) WITH ORDINALITY w(lo, k),
                       pgcursor_internal.status_offsets(:'a', 'dead_letter', w.lo, 100, 2, NULL, NULL) o ORDER BY w.k),
          ARRAY['1..1', '2..0'], 'status_offsets: dead letters up to the newest dead letter in the offsets given');
-- newest_listed_at: the newest message a listing shows
SELECT is(pgcursor_internal.newest_listed_at(:'w3', '-infinity', now() - interval '3 minutes' - interval '8 seconds', NULL, NULL, NULL),
          now() - interval '3 minutes' - interval '9 seconds', 'newest_listed_at: a window ending before the newest message');
SELECT is(array[pgcursor_internal.newest_listed_at(:'w3', '-infinity', 'infinity', NULL, 2, NULL),
                pgcursor_internal.newest_listed_at(:'w3', '-infinity', 'infinity', 4, NULL, NULL),
                pgcursor_internal.newest_listed_at(:'w3', now(), 'infinity', NULL, NULL, NULL)],
          array[now() - interval '3 minutes' - interval '8 seconds', NULL, NULL]::timestamptz[],
          'newest_listed_at: below toOffset; null above the newest offset or after the newest message');

-- A message retention deleted while its queue's transaction index still
-- remembers its transactionId: the detail answers with a null payload
-- (wire-admin §2.2), not P0002.
SELECT pgcursor.configure('{"queue": "t62ret", "options": {"retentionSeconds": 60}}') IS NOT NULL AS made \gset
SELECT pg_temp.fill('t62ret', 'Default', 2) AS ret \gset
UPDATE pgcursor.messages SET created_at = now() - interval '1 hour' WHERE partition_id = :'ret';
SELECT is(pgcursor.purge_messages() >= 2, true, '(retention deleted both)');
SELECT is(pgcursor.message(:'ret', 't62ret-Default-1') -> 'payload', 'null'::jsonb, 'the detail of a purged message: payload null');
SELECT is(pgcursor.message(:'ret', 't62ret-Default-1') -> 'offset', '1'::jsonb, '... at its offset');

-- The message list reads no consumerGroup (queenctl sends one): the answer is the same.
SELECT is(pgcursor.list_messages('{"queue": "t62q", "consumerGroup": "g1"}'), pgcursor.list_messages('{"queue": "t62q"}'),
          'consumerGroup is not read by the message list');

SELECT * FROM finish();
ROLLBACK;
