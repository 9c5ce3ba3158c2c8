-- make test-citus: an ack through pgcursor_citus.ack_group (sql/citus/delegate.sql)
-- runs on the worker holding the partition, and acks as pgcursor.ack_group does.
-- Not in a transaction block: Citus delegates a call only outside one. The
-- queue is deleted at the end.
SELECT plan(4);
SELECT pgcursor.delete_queue('citus_delegated') IS NOT NULL AS deleted \gset
SELECT pgcursor.push('{"items": [{"queue": "citus_delegated", "payload": 1, "transactionId": "t1"},
                                 {"queue": "citus_delegated", "payload": 2, "transactionId": "t2"}]}')
       -> 0 ->> 'partitionId' AS p \gset
SELECT pgcursor.pop('{"queue": "citus_delegated", "consumerGroup": "g", "batch": 2}') ->> 'leaseId' AS l \gset

-- The plan: one task, the whole call, on the worker that holds the partition's
-- shard. (EXPLAIN by a psql of its own: a call made inside a function, or in
-- this session's pgTAP transaction, is not delegated.)
\set plan `psql -X -tA -h :HOST -p :PORT -U :USER -d :DBNAME -c "EXPLAIN (FORMAT JSON) SELECT pgcursor_citus.ack_group(':p', '{}')"`
SELECT is(:'plan'::jsonb #>> '{0,Plan,Distributed Query,Job,Task Count}', '1',
          'the delegated ack is one task');
SELECT is((:'plan'::jsonb #>> '{0,Plan,Distributed Query,Job,Tasks,0,Node}'),
          (SELECT format('host=%s port=%s dbname=pgcursor', s.nodename, s.nodeport)
             FROM pg_dist_shard_placement s
            WHERE s.shardid = get_shard_id_for_distribution_column('pgcursor.messages', :'p'::uuid)),
          'it runs on the worker holding the partition''s shard');

SELECT is(pgcursor_citus.ack_group(:'p', jsonb_build_object('consumerGroup', 'g', 'leaseId', :'l',
              'items', '[{"transactionId": "t1"}, {"transactionId": "t2"}]'::jsonb)) -> 1 ->> 'leaseReleased',
          'true', 'acking both releases the lease');
-- (read first: a query on one partition goes to its worker whole, pgTAP's is() included)
SELECT c.cursor FROM pgcursor.cursors c WHERE c.partition_id = :'p' AND c.consumer_group = 'g' \gset
SELECT is(:'cursor'::bigint, 2::bigint, 'the cursor moved to 2');

SELECT pgcursor.delete_queue('citus_delegated') IS NOT NULL AS deleted \gset
SELECT * FROM finish();
