-- Advisory locks take entries of PostgreSQL's shared lock table, which
-- every session of the database needs: pgcursor's are bucketed
-- (lock_bucket, sql/02_shared.sql), so no call holds more than 256 of a
-- kind however many queues or partitions it touches. With one per queue a
-- push to 3,000 new queues failed "out of shared memory" on a small
-- cluster, and so did every other session meanwhile. (The long-poll
-- waits keep a lock per queue, for at most 1,000 queues: the gateway's
-- notify.rs tests.)
BEGIN;
SELECT plan(7);

-- The advisory locks this transaction holds, all classes and key forms
-- (a lock held both shared and exclusive counts twice, as in the table).
CREATE FUNCTION pg_temp.my_advisory_locks() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
$$;

SELECT is((SELECT count(pgcursor.configure(jsonb_build_object('queue', 't15q' || i, 'namespace', 't15ns')))
             FROM generate_series(1, 1000) i),
          1000::bigint, '1,000 queues in namespace t15ns');
SELECT is(pg_temp.my_advisory_locks(), 0::bigint, 'no advisory lock so far');

-- A push creating a partition in each: lock_partition_sets, shared.
SELECT is((SELECT count(*) FROM pgcursor.push_items(
              ARRAY(SELECT 't15q' || i FROM generate_series(1, 1000) i),
              ARRAY(SELECT to_jsonb(i) FROM generate_series(1, 1000) i))),
          1000::bigint, 'a push of one message to each of the 1,000 queues');
SELECT cmp_ok(pg_temp.my_advisory_locks(), '<=', 256::bigint,
              'it holds at most 256 advisory locks');

-- A new group's first pop over all of them: subscribe's lock_partition_sets,
-- exclusive (the same locks), and add_claimable_cursors' try-locks.
SELECT is((SELECT count(*) FROM pgcursor.pop_messages(
              '{"namespace": "t15ns", "consumerGroup": "t15g", "batch": 1000, "partitions": 1000}')
            WHERE msg_offset = 1),
          1000::bigint, 'a first pop of the namespace claims every queue''s message');
SELECT cmp_ok(pg_temp.my_advisory_locks(), '<=', 768::bigint,
              'with the push, this transaction holds at most 768 advisory locks '
              '(256 buckets, held shared, exclusive, and by the claims)');
SELECT is((SELECT count(*) FROM pgcursor.cursors WHERE consumer_group = 't15g'), 1000::bigint,
          'the pop wrote the group''s 1,000 cursor rows, bucket locks held by itself notwithstanding');
