-- ack_group together with push and pop (docs/ack-contract.md §1, §8): expiry redelivers without charging,
-- a failed ack redelivers from the cursor with the charged counter visible,
-- and an expired lease is refused while a lease-less ack still lands.
BEGIN;
SELECT plan(18);

SELECT (pgcursor.push(jsonb_build_object('items',
           (SELECT jsonb_agg(jsonb_build_object('queue', 'ackpop', 'payload', o, 'transactionId', 'm' || o))
              FROM generate_series(1, 6) AS o))) -> 0 ->> 'partitionId') AS p \gset

CREATE FUNCTION pg_temp.pop(batch integer) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.pop(jsonb_build_object('queue', 'ackpop', 'consumerGroup', 'g', 'batch', batch))
$$;
CREATE FUNCTION pg_temp.offsets(popped jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(m ->> 'offset', ',' ORDER BY (m ->> 'offset')::bigint) FROM jsonb_array_elements(popped -> 'messages') AS m
$$;
CREATE FUNCTION pg_temp.ack(p uuid, lease text, tx text, status text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.ack_group(jsonb_build_object('partitionId', p, 'consumerGroup', 'g', 'leaseId', lease,
               'items', jsonb_build_array(jsonb_build_object('transactionId', tx, 'status', status)))) -> 0
$$;

SELECT pg_temp.pop(3) AS first \gset
SELECT is(pg_temp.offsets(:'first'), '1,2,3', 'pop leases 1-3');
UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 second' WHERE partition_id = :'p';
SELECT pg_temp.pop(3) AS again \gset
SELECT is(pg_temp.offsets(:'again'), '1,2,3', 'after expiry the same batch redelivers from cursor+1');
SELECT retry_count AS v FROM pgcursor.cursors WHERE partition_id = :'p' \gset
SELECT is(:'v'::int, 0, 'expiry charged nothing');
SELECT is(pg_temp.ack(:'p', :'first'::jsonb ->> 'leaseId', 'm3', 'completed') ->> 'error', 'invalid or expired lease',
          'the expired first lease is refused');
SELECT is(pg_temp.ack(:'p', :'again'::jsonb ->> 'leaseId', 'm2', 'failed') ->> 'success', 'true', 'failed 2 with the live lease');
SELECT pg_temp.pop(3) AS third \gset
SELECT is(pg_temp.offsets(:'third'), '1,2,3', 'failed 2: 1 and 2 and 3 redeliver (nothing completed)');
SELECT is(:'third'::jsonb -> 'messages' -> 0 -> 'retryCount', '1'::jsonb, 'the charged counter is visible on delivery');
SELECT is(pg_temp.ack(:'p', :'third'::jsonb ->> 'leaseId', 'm3', 'completed') ->> 'leaseReleased', 'true',
          'completing the batch end releases the lease');
SELECT retry_count AS v FROM pgcursor.cursors WHERE partition_id = :'p' \gset
SELECT is(:'v'::int, 0, 'and resets the counter');
SELECT pg_temp.pop(10) AS fourth \gset
SELECT is(pg_temp.offsets(:'fourth'), '4,5,6', 'the next pop starts after the cursor, capped at the head');
UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 second' WHERE partition_id = :'p';
SELECT is(pg_temp.ack(:'p', NULL, 'm6', 'completed') ->> 'success', 'true', 'a post-expiry ack without leaseId lands');
SELECT is(pg_temp.offsets(pg_temp.pop(10)), NULL, 'nothing left to deliver');

-- One pop leasing two partitions under one leaseId (docs/ack-contract.md §1):
-- each (partition, group) row holds the lease on its own, so an ack on one
-- partition releases that one only, and the lease is then no longer live there.
SELECT pgcursor.push(jsonb_build_object('items', jsonb_build_array(
           jsonb_build_object('queue', 'ackpop2', 'partition', 'a', 'transactionId', 'a1', 'payload', 1),
           jsonb_build_object('queue', 'ackpop2', 'partition', 'a', 'transactionId', 'a2', 'payload', 2),
           jsonb_build_object('queue', 'ackpop2', 'partition', 'b', 'transactionId', 'b1', 'payload', 1),
           jsonb_build_object('queue', 'ackpop2', 'partition', 'b', 'transactionId', 'b2', 'payload', 2)))) AS pushed \gset
SELECT :'pushed'::jsonb -> 0 ->> 'partitionId' AS pa, :'pushed'::jsonb -> 2 ->> 'partitionId' AS pb \gset
SELECT pgcursor.pop(jsonb_build_object('queue', 'ackpop2', 'consumerGroup', 'g', 'batch', 4, 'partitions', 2)) AS two \gset
SELECT is((SELECT count(DISTINCT m ->> 'partitionId') FROM jsonb_array_elements(:'two'::jsonb -> 'messages') m),
          2::bigint, 'one pop leased both partitions');
SELECT :'two'::jsonb ->> 'leaseId' AS lease \gset
SELECT is(pg_temp.ack(:'pa', :'lease', 'a1', 'failed') - 'index' - 'transactionId',
          '{"success": true, "error": null, "leaseReleased": true, "dlq": false, "noop": false}'::jsonb,
          'failed a1 with the shared lease: accepted, a''s lease released');
SELECT format('a: lease=%s counter=%s', coalesce(lease_id::text, 'none'), retry_count) AS v
  FROM pgcursor.cursors WHERE partition_id = :'pa' AND consumer_group = 'g' \gset
SELECT is(:'v'::text, 'a: lease=none counter=1', '... a''s row: no lease, counter charged');
SELECT format('b: lease=%s cursor=%s', CASE WHEN lease_id = :'lease'::uuid THEN 'shared' ELSE 'other' END, cursor) AS v
  FROM pgcursor.cursors WHERE partition_id = :'pb' AND consumer_group = 'g' \gset
SELECT is(:'v'::text, 'b: lease=shared cursor=0', '... b''s row still holds the shared lease');
SELECT is(pg_temp.ack(:'pb', :'lease', 'b2', 'completed') ->> 'leaseReleased', 'true',
          'completing b''s batch with the shared lease releases b');
SELECT is(pg_temp.ack(:'pa', :'lease', 'a2', 'completed') ->> 'error', 'invalid or expired lease',
          'the shared lease is no longer live on a');

SELECT * FROM finish();
ROLLBACK;
