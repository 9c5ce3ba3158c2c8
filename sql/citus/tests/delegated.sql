-- make test-citus: an ack through pgcursor_citus.ack_group and a push
-- through pgcursor_citus.push (sql/citus/delegate.sql) run on the worker
-- holding the partition, and do what pgcursor.ack_group and pgcursor.push
-- do; push_partition names the partitions a push may be sent to. Not in a
-- transaction block: Citus delegates a call only outside one. The queues
-- are deleted at the end.
SELECT plan(11);
SELECT pgcursor.delete_queue('citus_delegated') IS NOT NULL AS deleted \gset
SELECT pgcursor.push('{"items": [{"queue": "citus_delegated", "payload": 1, "transactionId": "t1"},
                                 {"queue": "citus_delegated", "payload": 2, "transactionId": "t2"}]}')
       -> 0 ->> 'partitionId' AS p \gset
SELECT pgcursor.pop('{"queue": "citus_delegated", "consumerGroup": "g", "batch": 2}') ->> 'leaseId' AS l \gset

-- A call's plan: how many tasks, and on which node the first runs; and
-- what that is for a call sent whole to the worker holding a partition.
-- (EXPLAIN by a psql of its own: a call made inside a function, or in this
-- session's pgTAP transaction, is not delegated.)
CREATE FUNCTION pg_temp.tasks(plan jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT format('%s task(s), on %s', plan #>> '{0,Plan,Distributed Query,Job,Task Count}',
                  plan #>> '{0,Plan,Distributed Query,Job,Tasks,0,Node}')
$$;
CREATE FUNCTION pg_temp.on_worker_of(p uuid) RETURNS text LANGUAGE sql AS $$
    SELECT format('1 task(s), on host=%s port=%s dbname=pgcursor', s.nodename, s.nodeport)
      FROM pg_dist_shard_placement s
     WHERE s.shardid = get_shard_id_for_distribution_column('pgcursor.messages', p)
$$;

\set plan `psql -X -tA -h :HOST -p :PORT -U :USER -d :DBNAME -c "EXPLAIN (FORMAT JSON) SELECT pgcursor_citus.ack_group(':p', '{}', '300')"`
SELECT is(pg_temp.tasks(:'plan'), pg_temp.on_worker_of(:'p'),
          'the delegated ack is one task, on the worker holding the partition''s shard');

SELECT is(pgcursor_citus.ack_group(:'p', jsonb_build_object('consumerGroup', 'g', 'leaseId', :'l',
              'items', '[{"transactionId": "t1"}, {"transactionId": "t2"}]'::jsonb)) -> 1 ->> 'leaseReleased',
          'true', 'acking both releases the lease');
-- (read first: a query on one partition goes to its worker whole, pgTAP's is() included)
SELECT c.cursor FROM pgcursor.cursors c WHERE c.partition_id = :'p' AND c.consumer_group = 'g' \gset
SELECT is(:'cursor'::bigint, 2::bigint, 'the cursor moved to 2');

-- The push.
SELECT is(pgcursor_citus.push_partition('citus_delegated', NULL), :'p'::uuid,
          'a push to the queue''s existing partition can go to its worker');
SELECT is(pgcursor_citus.push_partition('citus_delegated', 'p9'), NULL,
          'one to a partition not made yet cannot (making it writes a reference table)');
-- (maxSize set after the first push: a push into a capped queue is one of
-- the things Citus refuses so far, sql/citus/tests/http-not-yet.txt)
SELECT pgcursor.push('{"items": [{"queue": "citus_delegated_capped", "payload": 1}]}') IS NOT NULL AS pushed \gset
SELECT pgcursor.configure('{"queue": "citus_delegated_capped", "options": {"maxSize": 10}}') IS NOT NULL AS configured \gset
SELECT is(pgcursor_citus.push_partition('citus_delegated_capped', 'Default'), NULL,
          'nor one to a queue with a maxSize (its room is counted on every shard)');

\set plan `psql -X -tA -h :HOST -p :PORT -U :USER -d :DBNAME -c "EXPLAIN (FORMAT JSON) SELECT pgcursor_citus.push(':p', '{}', '300')"`
SELECT is(pg_temp.tasks(:'plan'), pg_temp.on_worker_of(:'p'),
          'the delegated push is one task, on the worker holding the partition''s shard');

SELECT pgcursor_citus.push(:'p', '{"items": [{"queue": "citus_delegated", "payload": 3, "transactionId": "t3"},
                                             {"queue": "citus_delegated", "payload": 4, "transactionId": "t1"}]}') AS pushed \gset
SELECT is(jsonb_path_query_array(:'pushed'::jsonb, '$[*].status'), '["queued", "duplicate"]',
          'a new transactionId is queued, a known one is a duplicate');
SELECT is(jsonb_path_query_array(:'pushed'::jsonb, '$[*].offset'), '[3, 1]',
          'the new message takes the next offset; the duplicate names the first');

-- The lock_timeout given is set in the worker's session: one it cannot
-- take is refused there, before anything is written. (Called by a psql of
-- its own, as the EXPLAINs: inside throws_ok the call would not be
-- delegated.)
\set refused `psql -X -tA -h :HOST -p :PORT -U :USER -d :DBNAME -c "SELECT pgcursor_citus.ack_group(':p', '{}', 'soon')" 2>&1`
SELECT matches(:'refused'::text, 'invalid value for parameter "lock_timeout": "soon".*while executing command on',
               'the delegated ack sets the lock_timeout it is given, on the worker');
\set refused `psql -X -tA -h :HOST -p :PORT -U :USER -d :DBNAME -c "SELECT pgcursor_citus.push(':p', '{\"items\": [{\"queue\": \"citus_delegated\", \"payload\": 5}]}', 'soon')" 2>&1`
SELECT matches(:'refused'::text, 'invalid value for parameter "lock_timeout": "soon".*while executing command on',
               'and so does the delegated push');

SELECT pgcursor.delete_queue('citus_delegated') IS NOT NULL AS deleted \gset
SELECT pgcursor.delete_queue('citus_delegated_capped') IS NOT NULL AS deleted \gset
SELECT * FROM finish();
