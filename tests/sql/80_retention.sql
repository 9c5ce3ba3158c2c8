-- Retention: purge_messages (and cursors moved off what it deleted),
-- purge_completed_messages, evict_expired_messages (maxWaitTimeSeconds),
-- purge_dead_letters, the retentionEnabled switch, housekeeping. Explicit
-- cutoffs and aged rows: no sleeps.
BEGIN;
SELECT plan(71);

\ir lib/queue_helpers.sql

-- Queue q (options opts) with n messages <q>-1..<q>-n in partition Default,
-- offset k created (n - k + 1) hours ago; returns the partition id.
CREATE FUNCTION pg_temp.aged(q text, n int, opts jsonb DEFAULT '{}') RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    pid uuid;
BEGIN
    PERFORM pgcursor.configure(jsonb_build_object('queue', q, 'options', opts));
    pid := (pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'payload', k, 'transactionId', q || '-' || k) ORDER BY k)
        FROM generate_series(1, n) k))) -> 0 ->> 'partitionId')::uuid;
    UPDATE pgcursor.messages SET created_at = now() - (n - msg_offset + 1) * interval '1 hour'
     WHERE partition_id = pid;
    RETURN pid;
END $$;
CREATE FUNCTION pg_temp.offsets(pid uuid) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(msg_offset::text, ',' ORDER BY msg_offset), '')
    FROM pgcursor.messages WHERE partition_id = pid
$$;
CREATE FUNCTION pg_temp.cur(pid uuid, grp text DEFAULT '__QUEUE_MODE__') RETURNS pgcursor.cursors LANGUAGE sql AS $$
    SELECT * FROM pgcursor.cursors WHERE partition_id = pid AND consumer_group = grp
$$;
CREATE FUNCTION pg_temp.pop_offsets(q text, grp text, batch int DEFAULT 10) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(m ->> 'offset', ',' ORDER BY (m ->> 'offset')::int), '')
    FROM jsonb_array_elements(pgcursor.pop(jsonb_build_object('queue', q, 'consumerGroup', grp, 'batch', batch,
                                                              'autoAck', true)) -> 'messages') m
$$;

-- purge_messages, per queue: retentionSeconds 9000 (2.5 h) deletes offsets 1..3 of 5.
SELECT pg_temp.aged('t80a', 5, '{"retentionSeconds":9000}') AS a \gset
SELECT pg_temp.aged('t80keep', 5) AS keep \gset
SELECT pgcursor.pop('{"queue":"t80a","consumerGroup":"behind","batch":1}') IS NOT NULL AS popped \gset
SELECT cmp_ok(pgcursor.purge_messages(), '>=', 3::bigint, 'purge_messages reports what it deleted');
SELECT is(pg_temp.offsets(:'a'), '4,5', 'older than retentionSeconds: deleted, pending or not');
SELECT is(pg_temp.offsets(:'keep'), '1,2,3,4,5', 'retentionSeconds 0: kept forever');
SELECT is((SELECT string_agg(transaction_id, ',' ORDER BY msg_offset) FROM pgcursor.transaction_index
            WHERE partition_id = :'a'), 't80a-1,t80a-2,t80a-3',
          'the deleted messages'' ids stay in the transaction index (its own clock, 24 h)');
SELECT is((pg_temp.cur(:'a', 'behind')).cursor, 3::bigint, 'a cursor inside the deleted range moved past it');
SELECT is((pg_temp.cur(:'a', 'behind')).lease_id IS NOT NULL, true, '... its lease left alone');
-- The lease over the deleted offset 1 still lets the cursor move: acks resolve through the index.
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', :'a', 'consumerGroup', 'behind',
              'leaseId', (pg_temp.cur(:'a', 'behind')).lease_id,
              'items', '[{"transactionId":"t80a-1"}]'::jsonb)) -> 0 ->> 'leaseReleased', 'true',
          'an ack of the deleted, still-indexed message releases the lease');
SELECT is(pg_temp.pop_offsets('t80a', 'behind'), '4,5', 'the group goes on with what is left');
SELECT is(pg_temp.pop_offsets('t80a', 'newcomer'), '4,5', 'a new group starts past the deleted range');
SELECT is(pgcursor.purge_messages(), 0::bigint, 'nothing left to purge');

-- A whole pending range deleted: the cursor goes to the head, the partition is not wedged.
SELECT pg_temp.aged('t80b', 3, '{"retentionSeconds":60,"retryLimit":5}') AS b \gset
SELECT pgcursor.ack_group(jsonb_build_object('partitionId', :'b', 'consumerGroup', 'g',
           'items', '[{"transactionId":"t80b-1","status":"failed"}]'::jsonb)) IS NOT NULL AS charged \gset
SELECT is((pg_temp.cur(:'b', 'g')).retry_count, 1, 'counter charged before the purge');
SELECT cmp_ok(pgcursor.purge_messages(), '>=', 3::bigint, 'all of t80b is older than a minute');
SELECT is(ARRAY[(pg_temp.cur(:'b', 'g')).cursor, (pg_temp.cur(:'b', 'g')).retry_count], '{3,0}',
          'cursor at the head; the counter of the vanished message restarts');
SELECT is(pgcursor.pop('{"queue":"t80b","consumerGroup":"g"}'), '{"success":true,"messages":[]}',
          'nothing to pop, and no empty lease taken');
SELECT FROM pgcursor.push('{"items":[{"queue":"t80b","payload":"new","transactionId":"t80b-4"}]}');
SELECT is(pg_temp.pop_offsets('t80b', 'g'), '4', 'the next push is delivered');

-- Explicit cutoff: only queues with retention on.
SELECT pg_temp.aged('t80c', 4, '{"retentionSeconds":86400}') AS c \gset
SELECT cmp_ok(pgcursor.purge_messages(now() - interval '150 minutes'), '>=', 2::bigint, 'cutoff purge');
SELECT is(pg_temp.offsets(:'c'), '3,4', 'cutoff overrides the queue''s retention');
SELECT is(pg_temp.offsets(:'keep'), '1,2,3,4,5', 'retention off: a cutoff does not apply');

-- A cursor row created by hand (or by an ack) starts past deleted offsets too.
INSERT INTO pgcursor.cursors (partition_id, consumer_group) VALUES (:'c', 'inserted');
SELECT is((pg_temp.cur(:'c', 'inserted')).cursor, 2::bigint, 'a new cursor row starts past the deleted range');
INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor) VALUES (:'keep', 'mid', 2);
SELECT is((pg_temp.cur(:'keep', 'mid')).cursor, 2::bigint, 'and stays where it was put when nothing is missing');

-- purge_completed_messages: completed by every group with a cursor there, and old enough.
SELECT pg_temp.aged('t80d', 6, '{"completedRetentionSeconds":9000}') AS d \gset
SELECT pg_temp.aged('t80e', 3, '{"completedRetentionSeconds":60}') AS e \gset
SELECT pg_temp.pop_offsets('t80d', 'fast', 6) AS x \gset
SELECT pg_temp.pop_offsets('t80d', 'slow', 5) AS x \gset
SELECT pg_temp.pop_offsets('t80keep', 'fast', 5) AS x \gset
UPDATE pgcursor.cursors SET cursor = 5 WHERE partition_id = :'d' AND consumer_group = 'fast';  -- fast 5, slow 5
UPDATE pgcursor.messages SET created_at = now() WHERE partition_id = :'d' AND msg_offset = 2;  -- young
SELECT cmp_ok(pgcursor.purge_completed_messages(), '>=', 3::bigint, 'purge_completed_messages reports');
SELECT is(pg_temp.offsets(:'d'), '2,5,6', 'completed by all groups and older than 2.5 h: 1,3,4 deleted');
SELECT is(pg_temp.offsets(:'e'), '1,2,3', 'a partition no group has a cursor on keeps everything');
SELECT is(pg_temp.offsets(:'keep'), '1,2,3,4,5', 'completedRetentionSeconds 0: kept');
SELECT is(pgcursor.purge_completed_messages(now() + interval '1 second') >= 1, true, 'cutoff purge');
SELECT is(pg_temp.offsets(:'d'), '6', 'with a cutoff, age no longer protects a completed message');
SELECT is(pg_temp.offsets(:'keep'), '1,2,3,4,5', 'but a cutoff does not turn the rule on');
-- A group's first pop writes its cursor row only where it claimed; it still
-- holds its messages on the queue's other partitions. (Rows pending before
-- are written first, so the count below is t80s's alone.)
SELECT pgcursor_internal.materialize_cursors() AS x \gset
SELECT pgcursor.configure('{"queue":"t80s","options":{"completedRetentionSeconds":60}}');
SELECT pgcursor.push('{"items":[{"queue":"t80s","partition":"a","payload":1},
                                {"queue":"t80s","partition":"b","payload":1},
                                {"queue":"t80s","partition":"b","payload":2}]}') IS NOT NULL AS pushed \gset
UPDATE pgcursor.messages m SET created_at = now() - interval '2 hours'
  FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = 't80s';
SELECT pgcursor.pop('{"queue":"t80s","partition":"a","consumerGroup":"one","autoAck":true}') IS NOT NULL AS popped \gset
SELECT pgcursor.pop('{"queue":"t80s","partition":"b","consumerGroup":"two","autoAck":true,"batch":5}') IS NOT NULL AS popped \gset
SELECT pgcursor.purge_completed_messages() AS x \gset
SELECT is(ARRAY[pg_temp.offsets(pg_temp.pid('t80s', 'a')), pg_temp.offsets(pg_temp.pid('t80s', 'b'))],
          '{1,"1,2"}', 'a: "two" stands before 1; b: "one" has no row there yet and consumed nothing: all kept');
SELECT is((pgcursor.housekeeping(now() - interval '10 years') ->> 'cursorRows')::int, 2,
          'housekeeping writes the rows the subscriptions lack: one on b, two on a');
SELECT is((SELECT string_agg(p.name || ':' || c.consumer_group || '@' || c.cursor, ' ' ORDER BY p.name, c.consumer_group)
             FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id WHERE p.queue = 't80s'),
          'a:one@1 a:two@0 b:one@0 b:two@2', '... where each group stands');

-- evict_expired_messages: maxWaitTimeSeconds 9000 (2.5 h); offsets 1..4 of 6 are older.
-- Group fast has consumed 1..2, slow 1: only offset 1 is consumed by every group.
-- (It evicts from every queue: whatever a reused database holds goes first,
-- so the count below is t80i's and t80j's alone.)
SELECT pgcursor.evict_expired_messages() AS x \gset
SELECT pg_temp.aged('t80i', 6, '{"maxWaitTimeSeconds":9000}') AS i \gset
SELECT pg_temp.pop_offsets('t80i', 'fast', 2) AS x \gset
SELECT pg_temp.pop_offsets('t80i', 'slow', 1) AS x \gset
SELECT pg_temp.aged('t80j', 3, '{"maxWaitTimeSeconds":9000}') AS j \gset
SELECT is(pgcursor.evict_expired_messages(), 4::bigint, 'evict_expired_messages reports what it deleted');
SELECT is(pg_temp.offsets(:'i'), '1,5,6',
          'old messages some group has not consumed are evicted; one every group consumed stays, young ones stay');
SELECT is(pg_temp.offsets(:'j'), '2,3', 'a partition no group has a cursor on loses every old message');
SELECT is(pg_temp.offsets(:'keep'), '1,2,3,4,5', 'maxWaitTimeSeconds 0: off');
SELECT is((SELECT count(*)::int FROM pgcursor.dead_letters WHERE partition_id IN (:'i', :'j')), 0,
          'evicted, not dead-lettered');
SELECT is((SELECT string_agg(msg_offset::text, ',' ORDER BY msg_offset) FROM pgcursor.transaction_index
            WHERE partition_id = :'i'), '2,3,4',
          'the evicted messages'' ids stay in the transaction index (its own clock)');
SELECT is(ARRAY[(pg_temp.cur(:'i', 'fast')).cursor, (pg_temp.cur(:'i', 'slow')).cursor], '{4,4}',
          'cursors moved past the evicted range');
SELECT is(pg_temp.pop_offsets('t80i', 'slow'), '5,6', 'a pop after eviction delivers the next retained message');
SELECT is(pg_temp.pop_offsets('t80i', 'newcomer'), '1,5,6',
          'a new group gets what every other group had consumed, then what is left');
SELECT is(pg_temp.pop_offsets('t80j', 'first'), '2,3', 'a first cursor on a partition starts past the evicted range');
SELECT is(pgcursor.evict_expired_messages(), 0::bigint, 'nothing left to evict');

-- A whole pending range evicted: the cursor goes to the head, the partition is not wedged.
SELECT pg_temp.aged('t80k', 3, '{"maxWaitTimeSeconds":60}') AS k \gset
INSERT INTO pgcursor.cursors (partition_id, consumer_group) VALUES (:'k', 'g');
SELECT is(pgcursor.evict_expired_messages(), 3::bigint, 'all of t80k waited more than a minute');
SELECT is((pg_temp.cur(:'k', 'g')).cursor, 3::bigint, 'the cursor is at the head');
SELECT is(pgcursor.pop('{"queue":"t80k","consumerGroup":"g"}'), '{"success":true,"messages":[]}',
          'nothing to pop, and no empty lease taken');
SELECT FROM pgcursor.push('{"items":[{"queue":"t80k","payload":"new","transactionId":"t80k-4"}]}');
SELECT is(pg_temp.pop_offsets('t80k', 'g'), '4', 'the next push is delivered');

-- Explicit cutoff: only queues with maxWaitTimeSeconds > 0.
SELECT pg_temp.aged('t80l', 4, '{"maxWaitTimeSeconds":86400}') AS l \gset
SELECT is(pgcursor.evict_expired_messages(now() - interval '150 minutes'), 2::bigint, 'cutoff eviction');
SELECT is(pg_temp.offsets(:'l'), '3,4', 'the cutoff overrides the queue''s maxWaitTimeSeconds');
SELECT is(pgcursor.evict_expired_messages(now() + interval '1 second') >= 2, true, 'cutoff after now');
SELECT is(pg_temp.offsets(:'keep'), '1,2,3,4,5', 'maxWaitTimeSeconds 0: a cutoff does not apply');

-- purge_dead_letters: follows the queue's retentionSeconds, on failedAt.
SELECT pg_temp.aged('t80f', 3, '{"retentionSeconds":7200}') AS f \gset
SELECT pg_temp.aged('t80g', 1) AS g \gset
SELECT pgcursor.ack_group(jsonb_build_object('partitionId', :'f', 'items',
           '[{"transactionId":"t80f-1","status":"dlq"},{"transactionId":"t80f-2","status":"dlq"}]'::jsonb)) IS NOT NULL AS x \gset
SELECT pgcursor.ack_group(jsonb_build_object('partitionId', :'f', 'items',
           '[{"transactionId":"t80f-2","status":"dlq"}]'::jsonb)) IS NOT NULL AS x \gset
SELECT pgcursor.ack_group(jsonb_build_object('partitionId', :'g', 'items',
           '[{"transactionId":"t80g-1","status":"dlq"}]'::jsonb)) IS NOT NULL AS x \gset
UPDATE pgcursor.dead_letters SET failed_at = now() - interval '3 hours' WHERE partition_id IN (:'f', :'g')
   AND msg_offset = 1;
SELECT cmp_ok(pgcursor.purge_dead_letters(), '>=', 1::bigint, 'purge_dead_letters reports');
SELECT is((SELECT string_agg(msg_offset::text, ',') FROM pgcursor.dead_letters WHERE partition_id = :'f'), '2',
          'failed longer ago than retentionSeconds: gone; younger: kept');
SELECT is((SELECT count(*)::int FROM pgcursor.dead_letters WHERE partition_id = :'g'), 1,
          'retentionSeconds 0 keeps dead letters forever');
SELECT cmp_ok(pgcursor.purge_dead_letters(now() + interval '1 second'), '>=', 1::bigint, 'cutoff purge');
SELECT is((SELECT count(*)::int FROM pgcursor.dead_letters WHERE partition_id IN (:'f', :'g')), 1,
          'a cutoff purges retention-on queues only');

-- retentionEnabled false: message and completed-message retention off,
-- dead-letter retention (retentionSeconds) still on. (Counts are not
-- asserted: the cutoffs below purge the queues above too.)
SELECT pg_temp.aged('t80m', 3, '{"retentionSeconds":60,"completedRetentionSeconds":60,"retentionEnabled":false}') AS m \gset
SELECT pg_temp.pop_offsets('t80m', 'all', 3) AS x \gset
SELECT pgcursor.ack_group(jsonb_build_object('partitionId', :'m', 'consumerGroup', 'dl', 'items',
           '[{"transactionId":"t80m-1","status":"dlq"}]'::jsonb)) IS NOT NULL AS x \gset
UPDATE pgcursor.dead_letters SET failed_at = now() - interval '3 hours' WHERE partition_id = :'m';
SELECT pgcursor.purge_messages() + pgcursor.purge_completed_messages() + pgcursor.purge_messages(now() + interval '1 second')
       + pgcursor.purge_completed_messages(now() + interval '1 second') AS x \gset
SELECT is(pg_temp.offsets(:'m'), '1,2,3',
          'retentionEnabled false: neither message nor completed retention runs, with or without a cutoff');
SELECT pgcursor.purge_dead_letters() AS x \gset
SELECT is((SELECT count(*)::int FROM pgcursor.dead_letters WHERE partition_id = :'m'), 0,
          'retentionEnabled false: dead letters keep their own retention');
-- retentionEnabled null (unset) and true: on.
SELECT pgcursor.configure('{"queue":"t80m","options":{"retentionEnabled":null}}') IS NOT NULL AS x \gset
SELECT pgcursor.purge_completed_messages() AS x \gset
SELECT is(pg_temp.offsets(:'m'), '2,3', 'retentionEnabled null: completed retention runs (offset 1, completed by all)');
SELECT pg_temp.aged('t80n', 2, '{"retentionSeconds":60,"retentionEnabled":true}') AS n \gset
SELECT pgcursor.purge_messages() AS x \gset
SELECT is(pg_temp.offsets(:'m') || '|' || pg_temp.offsets(:'n'), '|',
          'retentionEnabled null and true: message retention runs');

-- housekeeping: all five, with their counts.
SELECT pg_temp.aged('t80h', 2, '{"retentionSeconds":60,"transactionIndexRetentionSeconds":60}') AS h \gset
-- Two ids of messages deleted earlier, now past the index's 60 s.
INSERT INTO pgcursor.transaction_index (partition_id, transaction_id, msg_offset, created_at)
VALUES (:'h', 'gone-1', 1, now() - interval '1 hour'), (:'h', 'gone-2', 2, now() - interval '1 hour');
SELECT pgcursor.housekeeping() AS hk \gset
SELECT is((SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(:'hk'::jsonb) k),
          '["completedMessages","cursorRows","deadLetters","evictedMessages","messages","partitions","skipped","statsSnapshots","transactionIndex"]',
          'housekeeping answers six counts, the snapshot and cursor rows it wrote and that it ran');
SELECT ok(((:'hk'::jsonb) ->> 'messages')::int >= 2 AND ((:'hk'::jsonb) ->> 'transactionIndex')::int >= 2,
          'and ran the message and index purges');
SELECT is(ARRAY[pg_temp.offsets(:'h'), (SELECT count(*)::text FROM pgcursor.transaction_index WHERE partition_id = :'h')],
          '{"",0}', 't80h emptied');
SELECT is(pgcursor.housekeeping(now() - interval '10 years'),
          '{"skipped":false,"completedMessages":0,"messages":0,"evictedMessages":0,"deadLetters":0,"transactionIndex":0,
            "partitions":0,"statsSnapshots":0,"cursorRows":0}',
          'an old cutoff removes nothing (and this minute has its snapshot already)');

-- What each purge deleted, per queue, for GET /api/v1/analytics/retention
-- (every run above happened in this transaction: one minute, now()'s).
CREATE FUNCTION pg_temp.retention_totals(q text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.analytics('retention', jsonb_build_object('queue', q)) -> 'totals'
$$;
SELECT is(pg_temp.retention_totals('t80a'),
          '{"retentionMsgs":5,"completedRetentionMsgs":0,"evictionMsgs":0,"totalMsgs":5,"eventCount":2}',
          'retention: t80a lost 3 messages to retentionSeconds, then 2 to a cutoff, in two runs');
SELECT is(pg_temp.retention_totals('t80d'),
          '{"retentionMsgs":0,"completedRetentionMsgs":5,"evictionMsgs":0,"totalMsgs":5,"eventCount":2}',
          'retention: t80d lost 3, then 2, to completedRetentionSeconds');
SELECT is(pg_temp.retention_totals('t80i'),
          '{"retentionMsgs":0,"completedRetentionMsgs":0,"evictionMsgs":5,"totalMsgs":5,"eventCount":2}',
          'retention: t80i lost 3, then 2, to eviction');
SELECT is(pg_temp.retention_totals('t80keep'),
          '{"retentionMsgs":0,"completedRetentionMsgs":0,"evictionMsgs":0,"totalMsgs":0,"eventCount":0}',
          'retention: a queue that lost nothing has no figures');
SELECT is(pgcursor.analytics('retention', '{"queue":"t80a"}') -> 'series',
          jsonb_build_array(jsonb_build_object('bucket', pgcursor_internal.bucket_label(date_trunc('minute', now())),
                                               'retentionMsgs', 5, 'completedRetentionMsgs', 0, 'evictionMsgs', 0,
                                               'totalMsgs', 5, 'eventCount', 2)),
          'retention: the series has this minute''s bucket');
SELECT is(pgcursor.analytics('retention', '{"queue":"t80a","from":"2020-01-01T00:00:00Z","to":"2020-01-01T01:00:00Z"}')
            -> 'totals' ->> 'totalMsgs', '0', 'retention: nothing outside the window');

-- One run at a time: this transaction's runs above hold the housekeeping
-- lock until it ends, so a run from another session (a gateway's clock, a
-- psql user) does nothing and says so; this session's own runs go on.
\ir lib/dblink.sql
SELECT pg_temp.open_sessions('t80lock');
SELECT is((SELECT x FROM dblink('t80lock', 'SELECT pgcursor.housekeeping()') AS t(x jsonb)),
          '{"skipped":true,"reason":"another housekeeping run holds the lock"}',
          'a run in another session while one holds the lock is skipped, and says so');
SELECT is((SELECT x FROM dblink('t80lock', 'SELECT pg_try_advisory_lock(pgcursor_internal.housekeeping_lock())') AS t(x boolean)),
          false, 'the lock is pgcursor_internal.housekeeping_lock(), held by this transaction');
SELECT is((pgcursor.housekeeping() ->> 'skipped')::boolean, false, 'this session''s next run runs');
SELECT pg_temp.close_sessions('t80lock');

SELECT * FROM finish();
ROLLBACK;
