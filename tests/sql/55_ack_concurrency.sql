-- ack_group locks the cursor row (docs/ack-contract.md §3): concurrent calls for one (partition,
-- group) serialise, and calls for other partitions never wait on it. Two
-- dblink sessions work on committed data (cleaned up at the end).
BEGIN;
SELECT plan(9);
\ir lib/dblink.sql
CREATE FUNCTION pg_temp.ack_sql(queue text, tx text) RETURNS text LANGUAGE sql AS $$
    SELECT format($q$SELECT pgcursor.ack_group(jsonb_build_object(
               'partitionId', (SELECT id FROM pgcursor.partitions WHERE queue = %L),
               'consumerGroup', 'g',
               'items', jsonb_build_array(jsonb_build_object('transactionId', %L))))::text$q$, queue, tx)
$$;
-- The committed cursor of group 'g' on the queue's one partition.
CREATE FUNCTION pg_temp.committed_cursor(queue text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT c.cursor FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
     WHERE p.queue = committed_cursor.queue AND c.consumer_group = 'g');
END $$;
CREATE FUNCTION pg_temp.drop_queues() RETURNS void LANGUAGE sql AS $$
    SELECT FROM dblink('t55a', $q$SELECT pgcursor.delete_queue(q) FROM unnest(ARRAY['t55_one', 't55_two']) q$q$) AS t(x jsonb)
$$;

DO $$ BEGIN
    PERFORM pg_temp.open_sessions('t55a', 't55b');
    PERFORM pg_temp.drop_queues();
    PERFORM * FROM dblink('t55a', $q$SELECT pgcursor.push('{"items": [
        {"queue": "t55_one", "payload": 1, "transactionId": "a1"}, {"queue": "t55_one", "payload": 2, "transactionId": "a2"},
        {"queue": "t55_two", "payload": 1, "transactionId": "b1"}]}')$q$) AS t(x jsonb);
END $$;

-- Session A acks t55_one and keeps its transaction open: it holds the cursor row.
SELECT is(dblink_exec('t55a', 'BEGIN'), 'BEGIN', 'session A opens a transaction');
SELECT is((SELECT x FROM dblink('t55a', pg_temp.ack_sql('t55_one', 'a1')) AS t(x text))::jsonb -> 0 ->> 'success',
          'true', 'session A acks a1 on partition one (row locked until it commits)');
-- Session B: another partition goes straight through; the same one waits (lock_timeout shows it).
-- (B's lock_timeout is a SET LOCAL in a transaction block, with
-- citus.propagate_set_commands = 'local': on Citus the wait happens in a
-- worker's backend, which only a propagated SET LOCAL reaches.)
SELECT is(dblink_exec('t55b', $q$SET citus.propagate_set_commands = 'local'$q$), 'SET',
          'session B passes SET LOCAL on to Citus workers (a mere placeholder setting elsewhere)');
SELECT is((SELECT x FROM dblink('t55b', pg_temp.ack_sql('t55_two', 'b1')) AS t(x text))::jsonb -> 0 ->> 'success',
          'true', 'an ack on another partition never waits on session A');
SELECT is(pg_temp.committed_cursor('t55_two'), 1::bigint, 'B''s ack on partition two committed: its cursor is 1');
SELECT dblink_exec('t55b', 'BEGIN'), dblink_exec('t55b', $q$SET LOCAL lock_timeout = '300ms'$q$);  -- B waits at most 300 ms
SELECT throws_like(format($q$SELECT * FROM dblink('t55b', %L) AS t(x text)$q$, pg_temp.ack_sql('t55_one', 'a2')),
                   '%lock timeout%', 'an ack of the same (partition, group) waits for session A');
SELECT dblink_exec('t55b', 'ROLLBACK');
SELECT is(pg_temp.committed_cursor('t55_one'), NULL, 'meanwhile partition one has no committed cursor row: A''s is uncommitted');
-- Once A commits, B's call goes through and sees A's cursor.
SELECT dblink_exec('t55a', 'COMMIT');
SELECT is((SELECT x FROM dblink('t55b', pg_temp.ack_sql('t55_one', 'a2')) AS t(x text))::jsonb -> 0 ->> 'success',
          'true', 'after A commits, B acks a2 on top of A''s cursor');
SELECT is(pg_temp.committed_cursor('t55_one'), 2::bigint, 'partition one''s cursor is 2: both acks landed, in order');

DO $$ BEGIN
    PERFORM pg_temp.drop_queues();
    PERFORM pg_temp.close_sessions('t55a', 't55b');
END $$;
SELECT * FROM finish();
ROLLBACK;
