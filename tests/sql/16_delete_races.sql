-- A queue deleted while other calls work on it (sql/10_queues.sql,
-- delete_queue): a call that looked the queue up before the delete
-- committed and writes after it finds the queue gone, as if it had come
-- after the delete, and never fails on a foreign key or a missing row; an
-- ack holding its cursor row does not deadlock with the delete. Session
-- 'd' deletes and holds its transaction open; session 'w' makes the call,
-- which waits for it; then 'd' commits ('c' holds a lock where a case
-- needs the delete to wait). Three dblink sessions work on committed data
-- (cleaned up at the end).
BEGIN;
SELECT plan(22);
\ir lib/dblink.sql

-- Session 'd' deletes queue t16 and holds its transaction open; session
-- 'w' sends `call`, which must wait for the delete.
CREATE FUNCTION pg_temp.behind_a_delete(call text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dblink_exec('d', 'BEGIN');
    PERFORM * FROM dblink('d', $q$SELECT pgcursor.delete_queue('t16')$q$) AS t(x jsonb);
    PERFORM dblink_send_query('w', call);
    RETURN pg_temp.until_blocked('w');
END $$;
-- Commits the delete and answers the waiting call's one text column, or
-- its error.
CREATE FUNCTION pg_temp.after_the_delete() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dblink_exec('d', 'COMMIT');
    RETURN pg_temp.answer('w');
END $$;
-- Queue t16 anew: two partitions a and b, three messages each (committed).
CREATE FUNCTION pg_temp.fill() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM * FROM dblink('d', $q$
        SELECT pgcursor.delete_queue('t16'),
               pgcursor.configure('{"queue": "t16", "options": {"retryLimit": 0}}'),
               (SELECT count(*) FROM pgcursor.push_items(ARRAY['t16', 't16', 't16', 't16', 't16', 't16'],
                                                         ARRAY['1', '2', '3', '4', '5', '6']::jsonb[],
                                                         ARRAY['a', 'a', 'a', 'b', 'b', 'b']))$q$)
        AS t(x jsonb, y jsonb, z bigint);
END $$;

DO $$ BEGIN
    PERFORM pg_temp.open_sessions('d', 'w', 'c');
    PERFORM pg_temp.fill();
END $$;

-- A push whose partitions the delete removes while it waits for their
-- heads: it creates the queue and partition again, as a push after the
-- delete would (it failed "a partition of this push has no head row").
SELECT ok(pg_temp.behind_a_delete($q$SELECT status || ' ' || msg_offset
                                     FROM pgcursor.push_items(ARRAY['t16'], ARRAY['"late"'::jsonb], ARRAY['a'])$q$),
          'a push waits for the delete');
SELECT is(pg_temp.after_the_delete(), 'queued 1', 'then goes to a new queue t16, at offset 1');
SELECT is((SELECT x FROM dblink('d', $q$SELECT string_agg(p.name || ' ' || h.head, ',')
                                          FROM pgcursor.partitions p
                                          JOIN pgcursor.partition_heads h ON h.partition_id = p.id
                                         WHERE p.queue = 't16'$q$) AS t(x text)),
          'a 1', '... which has that one partition, and its message');

-- A group's first pop on the queue: it subscribes after the delete, to a
-- queue no longer there, so takes nothing (it failed on the foreign key
-- of subscriptions).
SELECT pg_temp.fill();
SELECT ok(pg_temp.behind_a_delete($q$SELECT pgcursor.pop('{"queue": "t16", "consumerGroup": "first"}')::text$q$),
          'a first pop waits for the delete');
SELECT is(pg_temp.after_the_delete(), '{"success": true, "messages": []}', 'then answers no messages');

-- A group whose subscription still lacks rows (its first pop claimed one
-- partition of two) pops again: the rows it would write are on deleted
-- partitions (it failed on the foreign key of cursors).
SELECT pg_temp.fill();
SELECT is((SELECT x FROM dblink('d', $q$SELECT pgcursor.pop('{"queue": "t16", "consumerGroup": "second"}')
                                               ->> 'partitionsClaimed'$q$) AS t(x text)),
          '1', 'a group''s first pop claims one partition of two ...');
SELECT is((SELECT x FROM dblink('d', $q$SELECT cursor_rows FROM pgcursor.subscriptions
                                          WHERE consumer_group = 'second' AND queue = 't16'$q$) AS t(x text)),
          'pending', '... and its subscription lacks the other one''s row');
SELECT ok(pg_temp.behind_a_delete($q$SELECT pgcursor.pop('{"queue": "t16", "consumerGroup": "second"}')::text$q$),
          'its next pop waits for the delete');
SELECT is(pg_temp.after_the_delete(), '{"success": true, "messages": []}', 'then answers no messages');

-- A trace on a message the delete removes: not found (it failed on the
-- foreign key of trace_events).
SELECT pg_temp.fill();
SELECT ok(pg_temp.behind_a_delete($q$
              SELECT pgcursor.record_trace(jsonb_build_object(
                         'transactionId', m.transaction_id, 'partitionId', m.partition_id, 'data', '{"x": 1}'))::text
                FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
               WHERE p.queue = 't16' LIMIT 1$q$),
          'a trace waits for the delete');
SELECT is(pg_temp.after_the_delete(), 'error: Message not found', 'then finds no message');

-- Acks the delete overtakes: one whose group's cursor row the delete
-- removes while the ack waits for it, and one of a group with no row
-- there yet, which the ack would create (both failed on the foreign key
-- of cursors): the partition is not found.
CREATE FUNCTION pg_temp.ack_call(grp text) RETURNS text LANGUAGE sql AS $$
    SELECT format($q$SELECT pgcursor.ack_group(jsonb_build_object(
               'partitionId', %L, 'consumerGroup', %L,
               'items', jsonb_build_array(jsonb_build_object('transactionId', 'none')))) -> 0 ->> 'error'$q$,
           x, grp)
      FROM dblink('d', $q$SELECT id FROM pgcursor.partitions WHERE queue = 't16' AND name = 'a'$q$) AS t(x uuid)
$$;
SELECT pg_temp.fill();
SELECT is((SELECT x FROM dblink('d', $q$SELECT pgcursor.pop('{"queue": "t16", "consumerGroup": "rowed", "partition": "a", "autoAck": true}')
                                               ->> 'partitionsClaimed'$q$) AS t(x text)),
          '1', 'group rowed has a cursor row on partition a');
SELECT ok(pg_temp.behind_a_delete(pg_temp.ack_call('rowed')), 'its ack waits for the delete');
SELECT is(pg_temp.after_the_delete(), 'partition not found', 'then finds no partition');
SELECT pg_temp.fill();
SELECT ok(pg_temp.behind_a_delete(pg_temp.ack_call('rowless')), 'an ack of a group without a row waits for the delete');
SELECT is(pg_temp.after_the_delete(), 'partition not found', 'then finds no partition');

-- An ack holding its cursor row when the delete starts, which then
-- dead-letters (retryLimit 0) and so refers to the partition: it goes
-- through, and the delete after it (they deadlocked: the delete held the
-- partitions and waited for the cursor row).
SELECT pg_temp.fill();
DO $$
DECLARE
    popped jsonb := (SELECT x FROM dblink('d', $q$SELECT pgcursor.pop('{"queue": "t16", "consumerGroup": "acker", "partition": "a"}')$q$)
                       AS t(x jsonb));
BEGIN
    PERFORM dblink_exec('w', 'BEGIN');
    PERFORM * FROM dblink('w', format($q$SELECT 1 FROM pgcursor.cursors WHERE partition_id = %L AND consumer_group = 'acker'
                                         FOR UPDATE$q$, popped ->> 'partitionId')) AS t(x integer);
    PERFORM dblink_send_query('d', $q$SELECT pgcursor.delete_queue('t16')::text$q$);
    PERFORM pg_temp.until_blocked('d');
    CREATE TEMP TABLE acked ON COMMIT DROP AS
    SELECT x FROM dblink('w', format($q$SELECT pgcursor.ack_group(jsonb_build_object(
                   'partitionId', %L, 'consumerGroup', 'acker', 'leaseId', %L,
                   'items', jsonb_build_array(jsonb_build_object('transactionId', %L, 'status', 'failed'))))::text$q$,
                   popped ->> 'partitionId', popped ->> 'leaseId', popped -> 'messages' -> 0 ->> 'transactionId'))
        AS t(x text);
    PERFORM dblink_exec('w', 'COMMIT');
END $$;
SELECT is((SELECT x::jsonb -> 0 -> 'dlq' FROM acked), 'true', 'an ack holding its row dead-letters the message');
SELECT is((SELECT x FROM dblink_get_result('d') AS t(x text)), '{"queue": "t16", "deleted": true}',
          'and the delete goes through after it');
SELECT FROM dblink_get_result('d') AS t(x text);

-- A transaction that acks on the queue and pushes to a new partition of
-- it, sent while a delete of the queue waits for its partition set (held
-- by session 'c'). It took its cursor row with the ack, then waited for
-- the set behind the delete, which then waited for the row: deadlock. It
-- now takes the set first, so it comes after the delete.
SELECT pg_temp.fill();
DO $$
DECLARE
    popped jsonb := (SELECT x FROM dblink('d', $q$SELECT pgcursor.pop('{"queue": "t16", "consumerGroup": "bundler", "partition": "a"}')$q$)
                       AS t(x jsonb));
BEGIN
    PERFORM dblink_exec('c', 'BEGIN');
    PERFORM * FROM dblink('c', $q$SELECT pg_advisory_xact_lock(pgcursor_internal.partition_set_class(),
                                                             pgcursor_internal.lock_bucket('t16'))$q$) AS t(x text);
    PERFORM dblink_send_query('d', $q$SELECT pgcursor.delete_queue('t16') ->> 'deleted'$q$);
    PERFORM pg_temp.until_blocked('d');
    PERFORM dblink_send_query('w', format($q$SELECT pgcursor.transaction(jsonb_build_object('operations', jsonb_build_array(
        jsonb_build_object('type', 'ack', 'partitionId', %L, 'consumerGroup', 'bundler', 'leaseId', %L,
                           'transactionId', %L),
        jsonb_build_object('type', 'push', 'items', jsonb_build_array(
            jsonb_build_object('queue', 't16', 'partition', 'new', 'payload', 1)))))) ->> 'error'$q$,
        popped ->> 'partitionId', popped ->> 'leaseId', popped -> 'messages' -> 0 ->> 'transactionId'));
END $$;
SELECT ok(pg_temp.until_blocked('w'), 'a transaction acking on the queue and pushing to it waits');
SELECT dblink_exec('c', 'COMMIT');
SELECT is(pg_temp.answer('d'), 'true', 'the delete goes through');
SELECT is(pg_temp.answer('w'), 'partition not found', '... then the transaction, refused whole: its ack''s partition is gone');
SELECT is((SELECT x FROM dblink('d', $q$SELECT count(*)::text FROM pgcursor.partitions WHERE queue = 't16'$q$) AS t(x text)),
          '0', '... its push undone with it');

DO $$ BEGIN
    PERFORM * FROM dblink('d', $q$SELECT pgcursor.delete_queue('t16')$q$) AS t(x jsonb);
    PERFORM pg_temp.close_sessions('d', 'w', 'c');
END $$;
SELECT * FROM finish();
ROLLBACK;
