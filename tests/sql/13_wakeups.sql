-- Long-poll wake-ups (sql/03_wakeups.sql): a push notifies pgcursor_push
-- only for the queues some session waits on, and a session that starts
-- waiting misses no push. Sessions: t13w waits, t13l listens, t13p pushes
-- and looks for waiters (committed at once; its queues are removed at the
-- end). This transaction looks for waiters itself only at the end: from
-- then on it holds up every session starting to wait.
BEGIN;
SELECT plan(15);
\ir lib/dblink.sql
CREATE FUNCTION pg_temp.on(session text, sql text) RETURNS void LANGUAGE sql AS $$
    SELECT FROM dblink(session, sql) AS t(x text)
$$;
-- The payloads t13l has received since the last call, in order.
CREATE FUNCTION pg_temp.heard() RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(n.extra), '{}') FROM dblink_get_notify('t13l') n
$$;
-- wake_pops(queues) in session t13p, committed.
CREATE FUNCTION pg_temp.woken(VARIADIC queues text[]) RETURNS text[] LANGUAGE sql AS $$
    SELECT x::text[] FROM dblink('t13p', format('SELECT pgcursor_internal.wake_pops(%L)::text', queues))
        AS t(x text)
$$;
CREATE FUNCTION pg_temp.push(session text, queue text) RETURNS void LANGUAGE sql AS $$
    SELECT pg_temp.on(session, format($q$SELECT pgcursor.push(jsonb_build_object('items', jsonb_build_array(
        jsonb_build_object('queue', %L, 'payload', 1))))::text$q$, queue))
$$;

SELECT pg_temp.open_sessions('t13w', 't13l', 't13p');
SELECT dblink_exec('t13l', 'LISTEN pgcursor_push');
SELECT dblink_exec('t13w', $$SET statement_timeout = '5s'$$);  -- a wait held up by mistake fails, not hangs

-- Nobody waits: nothing to notify.
SELECT is(pg_temp.woken('t13a', 't13b'), '{}'::text[], 'nobody waits: no queue is notified');

SELECT pg_temp.on('t13w', $$SELECT pgcursor.wait_for_pushes('t13a')::text$$);
SELECT is(pg_temp.woken('t13b', 't13a', 't13a'), '{t13a}'::text[],
          'a session waits on t13a: t13a is notified, once, and t13b is not');

SELECT pg_temp.on('t13w', $$SELECT pgcursor.wait_for_pushes('t13a')::text$$);
SELECT pg_temp.on('t13w', $$SELECT pgcursor.stop_waiting_for_pushes('t13a')::text$$);
SELECT is(pg_temp.woken('t13a'), '{t13a}'::text[],
          'waits nest: after two waits and one stop, t13a is still waited on');
SELECT pg_temp.on('t13w', $$SELECT pgcursor.stop_waiting_for_pushes('t13a')::text$$);
SELECT is(pg_temp.woken('t13a'), '{}'::text[], 'after the last stop, nobody waits');

SELECT pg_temp.on('t13w', $$SELECT pgcursor.wait_for_pushes()::text$$);
SELECT is(pg_temp.woken('t13b', 't13a'), '{t13a,t13b}'::text[],
          'a wait on every queue (a namespace pop): every queue is notified');
SELECT pg_temp.on('t13w', $$SELECT pgcursor.stop_waiting_for_pushes()::text$$);

-- The pushes themselves, committed by t13p, heard by t13l.
DO $$ BEGIN PERFORM pg_temp.heard(); END $$;  -- forget what the looks above notified
SELECT pg_temp.push('t13p', 't13a');
SELECT pg_sleep(0.1);
SELECT is(pg_temp.heard(), '{}'::text[], 'a push nobody waits for notifies nothing');
SELECT pg_temp.on('t13w', $$SELECT pgcursor.wait_for_pushes('t13a')::text$$);
SELECT pg_temp.push('t13p', 't13a');
SELECT pg_temp.push('t13p', 't13b');
SELECT pg_sleep(0.1);
SELECT is(pg_temp.heard(), '{t13a}'::text[], 'a push to a queue waited on notifies it; one to another queue does not');
SELECT pg_temp.on('t13w', $$SELECT pgcursor.stop_waiting_for_pushes('t13a')::text$$);

-- A nack wakes the same way (wake_waiters): t13a has a message past the
-- cursor once the batch is nacked.
SELECT pg_temp.on('t13w', $$SELECT pgcursor.wait_for_pushes('t13a')::text$$);
SELECT pg_temp.on('t13p', $$SELECT (SELECT pgcursor.ack_group(jsonb_build_object(
    'partitionId', r.partition_id, 'leaseId', r.lease_id,
    'items', jsonb_build_array(jsonb_build_object('transactionId', r.transaction_id, 'status', 'retry'))))::text
    FROM pgcursor.pop_messages('{"queue": "t13a", "batch": 1}') r)$$);
SELECT pg_sleep(0.1);
SELECT is(pg_temp.heard(), '{t13a}'::text[], 'a nack of a queue waited on notifies it');
SELECT pg_temp.on('t13w', $$SELECT pgcursor.stop_waiting_for_pushes('t13a')::text$$);

-- The drain: once this transaction has looked for waiters, a session
-- starting to wait is held until it ends: its first look then comes after
-- this transaction's messages are visible. (Until here, every wait above
-- answered at once: t13w's statement_timeout would have failed it.)
SELECT is(pgcursor_internal.wake_pops(ARRAY['t13c']), '{}'::text[], 'this transaction looks for waiters: none');
SELECT dblink_send_query('t13w', $$SELECT pgcursor.wait_for_pushes('t13c')::text$$);
SELECT pg_sleep(0.3);
SELECT is(dblink_is_busy('t13w'), 1, 'wait_for_pushes waits for a transaction that looked for waiters before it');
SELECT is(pgcursor_internal.wake_pops(ARRAY['t13c']), '{t13c}'::text[],
          'meanwhile its queue counts as waited on already');
SELECT dblink_cancel_query('t13w');
SELECT * FROM dblink_get_result('t13w', false) AS t(x text);  -- the cancelled wait
SELECT * FROM dblink_get_result('t13w', false) AS t(x text);  -- (and the end of its results)

-- Under lock_timeout (the gateway's listener: it delivers no notification
-- while it waits for a lock) the await gives up with 55P03, and the wait
-- stays taken.
SELECT dblink_exec('t13w', $$SET lock_timeout = '100ms'$$);
SELECT is((SELECT x FROM dblink('t13w', $q$SELECT coalesce((SELECT 'answered' FROM pgcursor.await_pushes_in_flight()), '')$q$,
                                false) AS t(x text)),
          NULL, 'await_pushes_in_flight gives up at lock_timeout while a waking transaction is open');
SELECT is(dblink_error_message('t13w') LIKE '%lock timeout%', true, '... with a lock timeout error');
SELECT pg_temp.on('t13w', $$SELECT pgcursor.stop_waiting_for_pushes('t13c')::text$$);  -- the cancelled wait's
SELECT is(pgcursor_internal.wake_pops(ARRAY['t13c']), '{}'::text[],
          'the wait taken before the cancelled await is given back by one stop');
SELECT lives_ok($$SELECT pgcursor.stop_waiting_for_pushes('never-waited')$$,
                'stopping a wait that was never started is harmless');

SELECT pg_temp.on('t13p', $$SELECT pgcursor.delete_queue('t13a')::text$$);
SELECT pg_temp.on('t13p', $$SELECT pgcursor.delete_queue('t13b')::text$$);
SELECT pg_temp.close_sessions('t13w', 't13l', 't13p');
SELECT * FROM finish();
ROLLBACK;
