-- Idle partitions go (docs/sql-api.md "purge_idle_partitions"): one that
-- holds no message, dead letter or remembered transactionId, and saw no
-- push, ack or lease for 30 days (or since a cutoff), is deleted with its
-- cursor rows; its figures stay in the queue's lifetime totals, a push to
-- its name creates it again, and a partition busy now waits for the next
-- run. Ages are made by moving the timestamps back. Two dblink sessions
-- hold locks on committed rows of queue t81busy (removed at the end).
BEGIN;
SELECT plan(21);
\ir lib/dblink.sql

CREATE FUNCTION pg_temp.pid(part text, q text DEFAULT 't81') RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT id FROM pgcursor.partitions WHERE queue = q AND name = part);
END $$;
-- Moves partition `part`'s creation and last push back by `days`.
CREATE FUNCTION pg_temp.age(part text, days int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    pid uuid := pg_temp.pid(part);
    at timestamptz := now() - days * interval '1 day';
BEGIN
    UPDATE pgcursor.partitions SET created_at = at WHERE id = pid;
    UPDATE pgcursor.partition_heads SET pushed_at = at WHERE partition_id = pid;
END $$;
CREATE FUNCTION pg_temp.names(q text DEFAULT 't81') RETURNS text[] LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT array_agg(name ORDER BY name) FROM pgcursor.partitions WHERE queue = q);
END $$;

-- Nine partitions of t81, none with a message but 'stored'.
SELECT pgcursor_internal.ensure_partitions(array_fill('t81'::text, ARRAY[8]),
    '{idle,old-lease,fresh,pushed,dead,remembered,acked,leased}');
SELECT pgcursor.push('{"items": [{"queue": "t81", "partition": "stored", "payload": 1}]}') IS NOT NULL AS pushed \gset
SELECT pg_temp.age(n, 31) FROM unnest(ARRAY['idle','old-lease','pushed','dead','remembered','acked','leased','stored']) n;
UPDATE pgcursor.partitions SET created_at = now() - interval '31 days' WHERE id = pg_temp.pid('fresh');
UPDATE pgcursor.partition_heads SET pushed_at = now() - interval '2 days' WHERE partition_id = pg_temp.pid('pushed');
INSERT INTO pgcursor.dead_letters (partition_id, consumer_group, msg_offset, transaction_id, error, retry_count, failed_at)
VALUES (pg_temp.pid('dead'), 'g', 1, 'd-1', 'boom', 1, now() - interval '40 days');
INSERT INTO pgcursor.transaction_index (partition_id, transaction_id, msg_offset, created_at)
VALUES (pg_temp.pid('remembered'), 'r-1', 1, now() - interval '1 hour');
-- 'old-lease' pushed 5 and a group completed them, acked and leased 40 days ago.
UPDATE pgcursor.partition_heads SET head = 5 WHERE partition_id = pg_temp.pid('old-lease');
INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor, completed_total, last_ack_at, lease_id, lease_expires_at)
VALUES (pg_temp.pid('old-lease'), 'g', 5, 5, now() - interval '40 days', gen_random_uuid(), now() - interval '40 days'),
       (pg_temp.pid('acked'), 'g', 0, 0, now() - interval '1 day', NULL, NULL),
       (pg_temp.pid('leased'), 'g', 0, 0, NULL, gen_random_uuid(), now() - interval '1 day');

SELECT pg_temp.pid('old-lease') AS old_lease \gset
SELECT is(pgcursor.purge_idle_partitions(), 2::bigint, 'purge_idle_partitions deletes the two idle for 30 days');
SELECT is(pg_temp.names(), '{acked,dead,fresh,leased,pushed,remembered,stored}',
          '... and keeps one created, pushed to, acked or leased since, or holding a message, a dead letter or a remembered transactionId');
SELECT is((SELECT count(*)::int FROM pgcursor.cursors c WHERE c.partition_id IN (pg_temp.pid('idle'), pg_temp.pid('old-lease'))
             OR c.partition_id NOT IN (SELECT id FROM pgcursor.partitions)), 0, 'their cursor rows went with them');
SELECT is((SELECT jsonb_build_object('pushed', sum(pushed), 'completed', sum(completed)) FROM pgcursor.retired_totals
            WHERE queue = 't81'), '{"pushed": 5, "completed": 5}', 'what they counted stays in the queue''s lifetime totals');

-- An ack naming a deleted partition answers as for any unknown one
-- (docs/ack-contract.md: partitionId names no partition).
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', :'old_lease', 'consumerGroup', 'g',
              'items', '[{"transactionId": "x"}]'::jsonb)) -> 0 ->> 'error',
          'partition not found', 'an ack on a deleted partition: partition not found');

-- The analytics' queue-ops: deleted in this minute's bucket; counted before it.
SELECT pgcursor.analytics('queue-ops', '{"queue": "t81"}') -> 'series' -> -1 AS ops \gset
SELECT is(jsonb_build_object('deleted', (:'ops'::jsonb) -> 'partitionsDeleted', 'count', (:'ops'::jsonb) -> 'partitionCount'),
          '{"deleted": 2, "count": 7}', 'queue-ops: partitionsDeleted 2 in this minute''s bucket, partitionCount 7 at its end');
SELECT is((SELECT partitions_deleted FROM pgcursor.retention_minutes WHERE queue = 't81'), 2::bigint,
          'recorded in this minute''s retention_minutes row');

-- A push to a deleted partition's name makes it anew, from offset 1, and a
-- group stands at its start there.
SELECT pgcursor.push('{"items": [{"queue": "t81", "partition": "idle", "payload": "again"}]}') -> 0 AS again \gset
SELECT is(ARRAY[(:'again'::jsonb) ->> 'status', (:'again'::jsonb) ->> 'offset'], '{queued,1}', 'a push to its name creates it again, at offset 1');
SELECT is((pgcursor.pop('{"queue": "t81", "partition": "idle", "consumerGroup": "g"}') -> 'messages' -> 0 ->> 'data'),
          'again', 'group g, which had a row on the old one, gets the new message');

-- The default is 30 days; a cutoff says since when.
SELECT pgcursor_internal.ensure_partitions('{t81}', '{month}');
SELECT pg_temp.age('month', 29);
SELECT is(pgcursor.purge_idle_partitions(), 0::bigint, 'idle for 29 days: kept');
SELECT is(pgcursor.purge_idle_partitions(now() - interval '28 days'), 1::bigint, 'a cutoff 28 days back: deleted');
SELECT is(pgcursor_internal.idle_partition_days(), 30, 'the default is 30 days, as Queen''s PARTITION_CLEANUP_DAYS');

-- Housekeeping runs it last, after the purges that can empty a partition:
-- the id of a message deleted today is remembered for the queue's
-- transactionIndexRetentionSeconds (a day), and keeps the partition; once
-- the index purge forgot it, the partition goes in the same run.
SELECT pgcursor_internal.ensure_partitions('{t81}', '{emptied}');
SELECT pgcursor.push('{"items": [{"queue": "t81", "partition": "emptied", "payload": 1, "transactionId": "e-1"}]}') IS NOT NULL AS p \gset
DELETE FROM pgcursor.messages WHERE partition_id = pg_temp.pid('emptied');
SELECT pg_temp.age('emptied', 31);
SELECT is(pgcursor.housekeeping() ->> 'partitions', '0', 'a deleted message''s id is remembered: the partition is not idle yet');
UPDATE pgcursor.transaction_index SET created_at = now() - interval '2 days' WHERE partition_id = pg_temp.pid('emptied');
SELECT is(pgcursor.housekeeping() -> 'partitions', '1', 'once the index purge forgot it, housekeeping deletes the partition');
SELECT is(pg_temp.names(), '{acked,dead,fresh,idle,leased,pushed,remembered,stored}', '... that one');

-- The gateway passes PGCURSOR_PARTITION_CLEANUP_DAYS as idle_days: 0 keeps
-- every partition, another number of days replaces the 30.
SELECT pgcursor_internal.ensure_partitions('{t81}', '{days}');
SELECT pg_temp.age('days', 31);
SELECT is(ARRAY[pgcursor.housekeeping(NULL, 0) ->> 'partitions', pgcursor.housekeeping(NULL, 40) ->> 'partitions'],
          '{0,0}', 'housekeeping with idle_days 0 deletes none, with 40 not one idle for 31 days');
SELECT is(pgcursor.housekeeping(NULL, 20) ->> 'partitions', '1', '... with 20 it does');
SELECT throws_ok($$SELECT pgcursor.housekeeping(NULL, -1)$$, '22023', 'idle_days must be a non-negative integer',
                 'a negative idle_days is refused');

-- A partition busy now is kept for the next run: its head locked (a push),
-- a cursor row locked (a pop or an ack), or its queue's partition set held
-- (a push creating a partition, a pop subscribing).
SELECT pg_temp.open_sessions('t81a', 't81b');
DO $$ BEGIN
    PERFORM * FROM dblink('t81a', $q$SELECT pgcursor.delete_queue('t81busy')$q$) AS t(x jsonb);
    PERFORM * FROM dblink('t81a', $q$SELECT pgcursor_internal.ensure_partitions('{t81busy,t81busy,t81busy}', '{head,row,free}')::text$q$) AS t(x text);
    PERFORM dblink_exec('t81a', $q$INSERT INTO pgcursor.cursors (partition_id, consumer_group)
                                   SELECT id, 'g' FROM pgcursor.partitions WHERE queue = 't81busy' AND name = 'row'$q$);
    PERFORM dblink_exec('t81a', $q$UPDATE pgcursor.partitions SET created_at = now() - interval '40 days' WHERE queue = 't81busy'$q$);
    PERFORM dblink_exec('t81a', $q$UPDATE pgcursor.partition_heads h SET pushed_at = now() - interval '40 days'
                                     FROM pgcursor.partitions p WHERE p.id = h.partition_id AND p.queue = 't81busy'$q$);
    PERFORM dblink_exec('t81a', 'BEGIN');
    PERFORM * FROM dblink('t81a', $q$SELECT pg_advisory_xact_lock_shared(pgcursor_internal.partition_set_class(),
                                                                    pgcursor_internal.lock_bucket('t81busy'))::text$q$) AS t(x text);
END $$;
SAVEPOINT busy;
SELECT pgcursor.purge_idle_partitions() AS ignored \gset
SELECT is(pg_temp.names('t81busy'), '{free,head,row}', 'a queue whose partition set another session holds keeps every partition');
ROLLBACK TO SAVEPOINT busy;
DO $$ BEGIN
    PERFORM dblink_exec('t81a', 'ROLLBACK');
    PERFORM dblink_exec('t81a', 'BEGIN');
    PERFORM * FROM dblink('t81a', $q$SELECT 1 FROM pgcursor.partition_heads h JOIN pgcursor.partitions p ON p.id = h.partition_id
                                    WHERE p.queue = 't81busy' AND p.name = 'head' FOR UPDATE OF h$q$) AS t(x int);
    PERFORM dblink_exec('t81b', 'BEGIN');
    PERFORM * FROM dblink('t81b', $q$SELECT 1 FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
                                    WHERE p.queue = 't81busy' AND p.name = 'row' FOR UPDATE OF c$q$) AS t(x int);
END $$;
SELECT pgcursor.purge_idle_partitions() AS ignored \gset
SELECT is(pg_temp.names('t81busy'), '{head,row}',
          'a partition whose head or cursor row another session holds is kept, without waiting; the free one goes');
ROLLBACK TO SAVEPOINT busy;
DO $$ BEGIN
    PERFORM dblink_exec('t81a', 'ROLLBACK');
    PERFORM dblink_exec('t81b', 'ROLLBACK');
    PERFORM * FROM dblink('t81a', $q$SELECT pgcursor.delete_queue('t81busy')$q$) AS t(x jsonb);
    PERFORM pg_temp.close_sessions('t81a', 't81b');
END $$;
SELECT is(pgcursor.purge_idle_partitions(now() - interval '10 years'), 0::bigint, 'an old cutoff deletes nothing');

SELECT * FROM finish();
ROLLBACK;
