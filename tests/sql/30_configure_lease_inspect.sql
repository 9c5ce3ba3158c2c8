-- pgcursor.configure / delete_queue, extend_lease, leases, cursors, message and the resource views.
BEGIN;
-- one snapshot for the whole file: overview() deltas ignore concurrent test files
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SELECT plan(70);

\ir lib/queue_helpers.sql

-- configure: defaults, effective values, updates, unknown options refused
SELECT is(pgcursor.configure('{"queue":"t30"}'),
          '{"configured":true,"queue":"t30","namespace":null,"task":null,"options":{"leaseTime":300,"retryLimit":3,
            "deadLetterQueue":null,"dlqAfterMaxRetries":null,"transactionIndexRetentionSeconds":86400,
            "retentionSeconds":0,"completedRetentionSeconds":0,"delayedProcessing":0,"maxSize":0,"priority":0,
            "windowBuffer":0,"maxWaitTimeSeconds":0,"retentionEnabled":null,"encryptionEnabled":false}}',
          'configure a new queue: every option at its default');
SELECT is(pgcursor.configure('{"queue":"t30","namespace":"shop","task":"ship","options":{"leaseTime":60,
            "retryLimit":5,"deadLetterQueue":false,"dlqAfterMaxRetries":true,"transactionIndexRetentionSeconds":3600,
            "retentionSeconds":7,"completedRetentionSeconds":8,"delayedProcessing":9,"maxSize":10,"priority":-2,
            "windowBuffer":11,"maxWaitTimeSeconds":12,"retentionEnabled":false,"encryptionEnabled":true}}'),
          '{"configured":true,"queue":"t30","namespace":"shop","task":"ship","options":{"leaseTime":60,"retryLimit":5,
            "deadLetterQueue":false,"dlqAfterMaxRetries":true,"transactionIndexRetentionSeconds":3600,
            "retentionSeconds":7,"completedRetentionSeconds":8,"delayedProcessing":9,"maxSize":10,"priority":-2,
            "windowBuffer":11,"maxWaitTimeSeconds":12,"retentionEnabled":false,"encryptionEnabled":true}}',
          'every option applied and echoed');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"leaseTime":61,"somethingElse":1}}')$$,
                 '22023', 'options.somethingElse is not a queue option', 'an unknown option is refused, naming it');
SELECT is((SELECT lease_time FROM pgcursor.queues WHERE name = 't30'), 60, '... and nothing of that request applied');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"leaseTime":2147483648}}')$$,
                 '22023', 'options.leaseTime must be at most 2147483647', 'an integer past int4 names the bound');
SELECT is((SELECT ARRAY[lease_time, retry_limit, transaction_index_retention_seconds, priority]
           FROM pgcursor.queues WHERE name = 't30'), '{60,5,3600,-2}', 'options stored');
SELECT is(pgcursor.configure('{"queue":"t30","options":{"retryLimit":0,"deadLetterQueue":null}}') -> 'options'
          @> '{"leaseTime":60,"retryLimit":0,"deadLetterQueue":null,"dlqAfterMaxRetries":true}', true,
          'an update changes only the options given; null unsets a flag');
SELECT is(pgcursor.configure('{"queue":"t30"}') ->> 'namespace', 'shop', 'namespace kept when not given');
SELECT is((SELECT count(*)::int FROM pgcursor.queues WHERE name = 't30'), 1, 'one queue row');

SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"retryLimit":"3"}}')$$,
                 '22023', 'options.retryLimit must be a non-negative integer', 'retryLimit as a string');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"retryLimit":1.5}}')$$,
                 '22023', 'options.retryLimit must be a non-negative integer', 'retryLimit fractional');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"maxSize":-1}}')$$,
                 '22023', 'options.maxSize must be a non-negative integer', 'maxSize negative');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"leaseTime":0}}')$$,
                 '22023', 'options.leaseTime must be a positive integer', 'leaseTime 0');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"priority":true}}')$$,
                 '22023', 'options.priority must be an integer', 'priority not a number');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":{"deadLetterQueue":"yes"}}')$$,
                 '22023', 'options.deadLetterQueue must be a boolean or null', 'deadLetterQueue not a boolean');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","options":[]}')$$,
                 '22023', 'options must be an object', 'options not an object');
SELECT throws_ok($$SELECT pgcursor.configure('{"options":{}}')$$,
                 '22023', 'queue is required and must be a string', 'queue missing');
SELECT throws_ok($$SELECT pgcursor.configure('{"queue":"t30","namespace":3}')$$,
                 '22023', 'namespace must be a string', 'namespace not a string');
SELECT is((SELECT retry_limit FROM pgcursor.queues WHERE name = 't30'), 0, 'a rejected configure changes nothing');

-- rfc3339_utc: answers' timestamps, in UTC whatever the session TimeZone
SET LOCAL TimeZone = 'America/New_York';
SELECT is(pgcursor_internal.rfc3339_utc('2025-01-31 10:30:00.5+01'), '2025-01-31T09:30:00.500000Z', 'rendered in UTC');
SELECT is(pgcursor_internal.rfc3339_utc('2025-07-01 23:59:59.999999-07'), '2025-07-02T06:59:59.999999Z', 'crosses midnight');
SELECT is(pgcursor_internal.rfc3339_utc(NULL), NULL, 'null stays null');
RESET TimeZone;

-- delete_queue
SELECT FROM pgcursor.push('{"items":[{"queue":"t30del","payload":1}]}');
SELECT is(pgcursor.delete_queue('t30del'), '{"deleted":true,"queue":"t30del"}', 'delete an existing queue');
SELECT is((SELECT count(*)::int FROM pgcursor.partitions WHERE queue = 't30del'), 0, 'its partitions went with it');
SELECT is((SELECT count(*)::int FROM pgcursor.messages m
           WHERE NOT EXISTS (SELECT 1 FROM pgcursor.partitions p WHERE p.id = m.partition_id)), 0,
          'and its messages');
SELECT is((SELECT count(*)::int FROM pgcursor.transaction_index x
           WHERE NOT EXISTS (SELECT 1 FROM pgcursor.partitions p WHERE p.id = x.partition_id)), 0,
          'and its transaction index');
SELECT is(pgcursor.delete_queue('t30del'), '{"deleted":false,"queue":"t30del"}', 'delete an unknown queue');

-- extend_lease (t30's delay and window off again, so its messages pop at
-- once, and its encryption, so psql may push plaintext: 12_push_encrypted.sql)
SELECT FROM pgcursor.configure('{"queue":"t30","options":{"delayedProcessing":0,"windowBuffer":0,
                                                          "encryptionEnabled":false}}');
SELECT FROM pgcursor.push('{"items":[{"queue":"t30","payload":1,"transactionId":"m1"},
                                     {"queue":"t30","payload":2,"transactionId":"m2"},
                                     {"queue":"t30","payload":3,"transactionId":"m3"},
                                     {"queue":"t30","partition":"b","payload":4}]}');
CREATE TEMP TABLE l ON COMMIT DROP AS
SELECT (pgcursor.pop('{"queue":"t30","batch":4,"partitions":2}') ->> 'leaseId')::uuid AS lease;
SELECT is((SELECT count(*)::int FROM pgcursor.cursors WHERE lease_id = lease), 2, 'a lease over two partitions') FROM l;
SELECT is(pgcursor.extend_lease(jsonb_build_object('leaseId', lease, 'seconds', 1000)),
          jsonb_build_object('leaseId', lease, 'success', true,
                             'newExpiresAt', pgcursor_internal.rfc3339_utc(now() + interval '1000 s'),
                             'renewed', 2, 'error', NULL), 'extend both rows to now + seconds') FROM l;
SELECT is((SELECT max(lease_expires_at) FROM pgcursor.cursors WHERE lease_id = lease), now() + interval '1000 s',
          'rows extended') FROM l;
SELECT is(pgcursor.extend_lease(jsonb_build_object('leaseId', lease, 'seconds', 5)) -> 'newExpiresAt',
          to_jsonb(pgcursor_internal.rfc3339_utc(now() + interval '1000 s')), 'never shortens a lease') FROM l;
-- No seconds: 60 s, whatever the leaseTime (120 here, so the two differ).
UPDATE pgcursor.cursors SET lease_expires_at = now() + interval '1 s' WHERE lease_id = (SELECT lease FROM l);
UPDATE pgcursor.queues SET lease_time = 120 WHERE name = 't30';
SELECT is((pgcursor.extend_lease(jsonb_build_object('leaseId', lease)) ->> 'newExpiresAt')::timestamptz,
          now() + interval '60 s', 'no seconds: now + 60 s, not the queue''s leaseTime (120)') FROM l;
UPDATE pgcursor.queues SET lease_time = 60 WHERE name = 't30';
UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 s' WHERE lease_id = (SELECT lease FROM l);
SELECT is(pgcursor.extend_lease(jsonb_build_object('leaseId', lease, 'seconds', 100)),
          jsonb_build_object('leaseId', lease, 'success', false, 'newExpiresAt', NULL, 'renewed', 0,
                             'error', 'invalid or expired lease'), 'an expired lease is not extended') FROM l;
SELECT is((SELECT max(lease_expires_at) FROM pgcursor.cursors WHERE lease_id = lease), now() - interval '1 s',
          'expired rows untouched') FROM l;
SELECT is(pgcursor.extend_lease('{"leaseId":"00000000-0000-7000-8000-000000000000"}') -> 'success', 'false',
          'unknown lease: success false');
SELECT throws_ok($$SELECT pgcursor.extend_lease('{"leaseId":"nope"}')$$, '22023',
                 'leaseId is required and must be a UUID string', 'malformed leaseId');
SELECT throws_ok($$SELECT pgcursor.extend_lease('{"leaseId":"00000000-0000-7000-8000-000000000000","seconds":0}')$$,
                 '22023', 'seconds must be a positive integer', 'seconds 0');

-- cursors(): t30/Default has m1..m3; group "live" holds 1..2, "done" completed 3, "idle" nothing
SELECT FROM pgcursor.pop('{"queue":"t30","partition":"Default","consumerGroup":"live","batch":2}');
SELECT FROM pgcursor.pop('{"queue":"t30","partition":"Default","consumerGroup":"done","batch":3,"autoAck":true}');
UPDATE pgcursor.cursors SET retry_count = 1, discarded_total = 4, dead_lettered_total = 5,
                            implicitly_completed_total = 6
WHERE partition_id = pg_temp.pid('t30') AND consumer_group = 'live';
CREATE TEMP TABLE cs ON COMMIT DROP AS SELECT pgcursor.cursors(pg_temp.pid('t30')) AS r;
SELECT is((SELECT jsonb_agg(x ->> 'consumerGroup') FROM jsonb_array_elements(r) x),
          '["__QUEUE_MODE__","done","live"]', 'one entry per group, sorted') FROM cs;
SELECT is((SELECT x FROM jsonb_array_elements(r) x WHERE x ->> 'consumerGroup' = 'live') - 'lease',
          '{"consumerGroup":"live","cursor":0,"head":3,"lag":3,"retryCount":1,"retryLimit":0,"retriesLeft":0,
            "completedTotal":0,"implicitlyCompletedTotal":6,"deadLetteredTotal":5,"discardedTotal":4,"lastAckAt":null}',
          'counters, budget and lag of a leased group') FROM cs;
SELECT is((SELECT x -> 'lease' FROM jsonb_array_elements(r) x WHERE x ->> 'consumerGroup' = 'live'),
          jsonb_build_object('leaseId', (pg_temp.cur('t30', 'Default', 'live')).lease_id,
                             'expiresAt', pgcursor_internal.rfc3339_utc(now() + interval '60 s'), 'batchStart', 1, 'batchEnd', 2),
          'the live lease') FROM cs;
SELECT is((SELECT x - 'lastAckAt' FROM jsonb_array_elements(r) x WHERE x ->> 'consumerGroup' = 'done'),
          '{"consumerGroup":"done","cursor":3,"head":3,"lag":0,"lease":null,"retryCount":0,"retryLimit":0,
            "retriesLeft":0,"completedTotal":3,"implicitlyCompletedTotal":0,"deadLetteredTotal":0,"discardedTotal":0}',
          'a completed group: no lease') FROM cs;
SELECT is((SELECT (x ->> 'lastAckAt')::timestamptz FROM jsonb_array_elements(r) x WHERE x ->> 'consumerGroup' = 'done'),
          now(), 'lastAckAt') FROM cs;
SELECT is((SELECT x -> 'lease' FROM jsonb_array_elements(r) x WHERE x ->> 'consumerGroup' = '__QUEUE_MODE__'),
          'null', 'an expired lease shows as null') FROM cs;
SELECT throws_ok($$SELECT pgcursor.cursors('00000000-0000-4000-8000-000000000000')$$, 'P0002',
                 'partition not found: 00000000-0000-4000-8000-000000000000', 'unknown partition: P0002');
SELECT is(pgcursor.cursors(pg_temp.pid('t30', 'b')) -> 0 ->> 'consumerGroup', '__QUEUE_MODE__', 'other partition');

-- message(): per group completed / leased / pending
-- (Queen's detail fields, docs/sql-api.md "message", are tested in
-- 62_messages.sql.)
SELECT is(pgcursor.message(pg_temp.pid('t30'), 'm2') - 'groups' - 'createdAt'
              - ARRAY['queuePath', 'namespace', 'task', 'producerSub', 'status', 'isEncrypted', 'errorMessage',
                      'retryCount', 'leaseExpiresAt', 'queueConfig', 'mode', 'consumerGroups'],
          jsonb_build_object('transactionId', 'm2', 'offset', 2, 'partitionId', pg_temp.pid('t30'),
                             'partition', 'Default', 'queue', 't30', 'payload', 2, 'data', 2, 'traceId', NULL,
                             'id', (SELECT message_id FROM pgcursor.messages
                                     WHERE partition_id = pg_temp.pid('t30') AND msg_offset = 2)),
          'the message, with its id (the message_id its push answered)');
SELECT is(pgcursor.message(pg_temp.pid('t30'), 'm2') -> 'groups',
          '[{"consumerGroup":"__QUEUE_MODE__","state":"pending"},{"consumerGroup":"done","state":"completed"},
            {"consumerGroup":"live","state":"leased"}]', 'states: pending (expired lease), completed, leased');
SELECT is(pgcursor.message(pg_temp.pid('t30'), 'm3') -> 'groups' -> 2 ->> 'state', 'pending',
          'outside the leased batch: pending');
SELECT throws_ok(format('SELECT pgcursor.message(%L, %L)', pg_temp.pid('t30'), 'nope'),
                 'P0002', format('message not found: nope in partition %s', pg_temp.pid('t30')),
                 'unknown transactionId: P0002, like every other lookup');
SELECT throws_ok(format('SELECT pgcursor.message(%L, %L)', pg_temp.pid('t30', 'b'), 'm1'),
                 'P0002', NULL, 'another partition''s transactionId: P0002');
SELECT throws_ok(format('SELECT pgcursor.message(%L, %L)', gen_random_uuid(), 'm1'),
                 'P0002', NULL, 'an unknown partition: P0002');
SELECT FROM pgcursor.purge_transaction_index(now() + interval '1 second');  -- forget every id pushed so far
SELECT is(pgcursor.message(pg_temp.pid('t30'), 'm3') ->> 'offset', '3', 'found in the partition after an index purge');

-- resource views
CREATE TEMP TABLE ov ON COMMIT DROP AS SELECT pgcursor.queues_overview() -> 'queues' AS r;
SELECT is((SELECT x - '{options,createdAt,id,name,partitionCount,messages,priority,leaseTime,retryLimit,maxSize,encryptionEnabled}'::text[]
           FROM jsonb_array_elements(r) x WHERE x ->> 'queue' = 't30'),
          '{"queue":"t30","namespace":"shop","task":"ship","partitions":2,"depth":4,
            "consumerGroups":["__QUEUE_MODE__","done","live"]}', 'queues_overview: partitions, depth, groups') FROM ov;
SELECT is((SELECT x -> 'options' ->> 'leaseTime' FROM jsonb_array_elements(r) x WHERE x ->> 'queue' = 't30'), '60',
          'queues_overview: options') FROM ov;
CREATE TEMP TABLE qd ON COMMIT DROP AS SELECT pgcursor.queue_detail('t30') AS r;
SELECT is(r - '{partitions,options,createdAt,id,name,totals}'::text[],
          '{"queue":"t30","namespace":"shop","task":"ship","depth":4,"consumerGroups":["__QUEUE_MODE__","done","live"]}',
          'queue_detail header') FROM qd;
SELECT is((SELECT jsonb_agg(jsonb_build_array(x ->> 'partition', x -> 'head', x -> 'depth')) FROM jsonb_array_elements(r -> 'partitions') x),
          '[["Default",3,3],["b",1,1]]', 'queue_detail partitions: head and depth') FROM qd;
SELECT is((SELECT jsonb_agg(jsonb_build_array(g ->> 'consumerGroup', g -> 'cursor', g -> 'lag', g -> 'leased'))
           FROM jsonb_array_elements(r -> 'partitions' -> 0 -> 'consumerGroups') g),
          '[["__QUEUE_MODE__",0,3,false],["done",3,0,false],["live",0,3,true]]', 'queue_detail cursors') FROM qd;
SET LOCAL TimeZone = 'Pacific/Auckland';
SELECT is((SELECT x ->> 'createdAt' FROM jsonb_array_elements(pgcursor.queues_overview() -> 'queues') x
           WHERE x ->> 'queue' = 't30'), (SELECT pgcursor_internal.rfc3339_utc(created_at) FROM pgcursor.queues WHERE name = 't30'),
          'queues_overview: createdAt in UTC');
SELECT matches(pgcursor.queue_detail('t30') #>> '{partitions,0,createdAt}', 'Z$', 'queue_detail: partition createdAt in UTC');
RESET TimeZone;
SELECT throws_ok($$SELECT pgcursor.queue_detail('t30-nope')$$, 'P0002', 'queue not found: t30-nope', 'queue_detail unknown: P0002');
CREATE TEMP TABLE o1 ON COMMIT DROP AS SELECT pgcursor.overview() AS r;
SELECT FROM pgcursor.push('{"items":[{"queue":"t30o","payload":1},{"queue":"t30o","payload":2}]}');
INSERT INTO pgcursor.dead_letters (partition_id, consumer_group, msg_offset, transaction_id, error, retry_count)
VALUES (pg_temp.pid('t30o'), 'g', 1, 'x', 'boom', 3);
SELECT is(jsonb_build_object('queues', (o.r ->> 'queues')::int - (o1.r ->> 'queues')::int,
                             'partitions', (o.r ->> 'partitions')::int - (o1.r ->> 'partitions')::int,
                             'messages', (o.r #>> '{messages,total}')::int - (o1.r #>> '{messages,total}')::int,
                             'deadLetters', (o.r ->> 'deadLetters')::int - (o1.r ->> 'deadLetters')::int),
          '{"queues":1,"partitions":1,"messages":2,"deadLetters":1}', 'overview counts')
FROM o1, (SELECT pgcursor.overview() AS r) o;

-- leases(): live leases, longest held first, one row per partition. g1
-- leases a, g2 then b (2 ms later: a leaseId orders by its millisecond),
-- g1 pops c with autoAck (no lease), g3's lease on d has expired.
SELECT pg_temp.push('t30l', x, 2) FROM unnest('{a,b,c,d}'::text[]) x;
CREATE TEMP TABLE ll (l1 uuid, l2 uuid, l3 uuid) ON COMMIT DROP;
INSERT INTO ll (l1) SELECT (pg_temp.pop('t30l', 'a', 'g1', 2) ->> 'leaseId')::uuid;
SELECT FROM pg_sleep(0.002);
UPDATE ll SET l2 = (pg_temp.pop('t30l', 'b', 'g2', 1) ->> 'leaseId')::uuid;
SELECT FROM pg_temp.pop('t30l', 'c', 'g1', 2, true);
UPDATE ll SET l3 = (pg_temp.pop('t30l', 'd', 'g3', 2) ->> 'leaseId')::uuid;
UPDATE pgcursor.cursors c SET lease_expires_at = now() - interval '1 s'
  FROM ll WHERE c.lease_id = ll.l3;
SELECT is(pgcursor.leases('{"queue":"t30l"}'),
          jsonb_build_object('total', 2, 'leases', jsonb_build_array(
              jsonb_build_object('leaseId', l1, 'takenAt', pgcursor_internal.rfc3339_utc(pgcursor_internal.uuidv7_time(l1)),
                                 'expiresAt', pgcursor_internal.rfc3339_utc(now() + interval '300 s'),
                                 'consumerGroup', 'g1', 'queue', 't30l', 'partition', 'a',
                                 'partitionId', pg_temp.pid('t30l', 'a'), 'batchStart', 1, 'batchEnd', 2),
              jsonb_build_object('leaseId', l2, 'takenAt', pgcursor_internal.rfc3339_utc(pgcursor_internal.uuidv7_time(l2)),
                                 'expiresAt', pgcursor_internal.rfc3339_utc(now() + interval '300 s'),
                                 'consumerGroup', 'g2', 'queue', 't30l', 'partition', 'b',
                                 'partitionId', pg_temp.pid('t30l', 'b'), 'batchStart', 1, 'batchEnd', 1))),
          'leases: the live ones, oldest first; no autoAck pop, no expired lease') FROM ll;
SELECT is(pgcursor.leases('{"queue":"t30l","limit":1}') #>> '{leases,0,leaseId}', l1::text,
          'leases: limit keeps the longest held') FROM ll;
SELECT is(pgcursor.leases('{"queue":"t30l","limit":"1"}') -> 'total', '2', '... and total counts them all');
SELECT is(pgcursor.leases('{"queue":"t30l","consumerGroup":"g2"}') #>> '{leases,0,leaseId}', l2::text,
          'leases: by consumerGroup') FROM ll;
SELECT is(pgcursor.leases('{"queue":"t30l-none"}'), '{"total":0,"leases":[]}', 'leases: none held');
SELECT throws_ok($$SELECT pgcursor.leases('{"limit":0}')$$, '22023', 'limit must be a positive integer',
                 'leases: a bad limit names it');
SELECT throws_ok($$SELECT pgcursor.leases('{"limit":"99999999999"}')$$, '22023', 'limit must be at most 2147483647',
                 '... and one past what an integer holds says the bound, not that it is no positive integer');
SELECT is(pgcursor_internal.uuidv7_time('01a2464c-51b6-7e1e-ad63-3379478d5314'),
          '2026-12-05T13:02:16.502Z'::timestamptz, 'uuidv7_time: the first 48 bits, in milliseconds');
SELECT is(pgcursor_internal.uuidv7_time('01a2464c-51b6-4e1e-ad63-3379478d5314'), NULL,
          'uuidv7_time: null for another version');

SELECT * FROM finish();
ROLLBACK;
