-- make test-citus: purge_idle_partitions (sql/80_retention.sql) on Citus:
-- the idle check over the partitions' rows (idle_partitions) and the locks run
-- on the partitions' workers, and the delete (delete_partitions, sql/citus/functions.sql)
-- keeps what the partition counted in retired_totals, as the triggers
-- Citus cannot run do elsewhere. In a transaction, rolled back.
BEGIN;
SELECT plan(6);
SELECT pgcursor.push('{"items": [{"queue": "citus_idle", "partition": "old", "payload": 1, "transactionId": "o1"},
                                 {"queue": "citus_idle", "partition": "old", "payload": 2, "transactionId": "o2"},
                                 {"queue": "citus_idle", "partition": "new", "payload": 3}]}') AS pushed \gset
SELECT (:'pushed'::jsonb) -> 0 ->> 'partitionId' AS old, (:'pushed'::jsonb) -> 2 ->> 'partitionId' AS new \gset
SELECT pgcursor.pop('{"queue": "citus_idle", "partition": "old", "consumerGroup": "g", "batch": 2}') ->> 'leaseId' AS l \gset
SELECT pgcursor.ack_group(jsonb_build_object('partitionId', :'old', 'consumerGroup', 'g', 'leaseId', :'l',
                          'items', '[{"transactionId": "o2"}]'::jsonb)) IS NOT NULL AS acked \gset
-- 'old' emptied and idle for 40 days; 'new' keeps its message.
DELETE FROM pgcursor.messages WHERE partition_id = :'old';
DELETE FROM pgcursor.transaction_index WHERE partition_id = :'old';
UPDATE pgcursor.partitions SET created_at = '2020-01-01' WHERE queue = 'citus_idle';
UPDATE pgcursor.partition_heads SET pushed_at = '2020-01-01' WHERE partition_id IN (:'old', :'new');
UPDATE pgcursor.cursors SET last_ack_at = '2020-01-01', lease_expires_at = NULL WHERE partition_id = :'old';

SELECT array_agg(i) AS idle
  FROM pgcursor_internal.idle_partitions(ARRAY[:'old', :'new']::uuid[], now() - interval '30 days') i \gset
SELECT is(:'idle'::uuid[], ARRAY[:'old']::uuid[], 'idle_partitions reads the partitions'' rows on their workers');
SELECT pgcursor.housekeeping() -> 'partitions' AS gone \gset
SELECT is(:'gone'::text, '1', 'housekeeping deletes the idle partition');
SELECT array_agg(name ORDER BY name) AS names FROM pgcursor.partitions WHERE queue = 'citus_idle' \gset
SELECT is(:'names'::text, '{new}', '... and keeps the one with a message');
SELECT count(*) AS cursor_rows FROM pgcursor.cursors WHERE partition_id = :'old' \gset
SELECT is(:'cursor_rows'::int, 0, 'its cursor rows went with it');
SELECT pushed, completed FROM pgcursor.retired_totals WHERE partition_id = :'old' \gset
SELECT is(ARRAY[:'pushed'::bigint, :'completed'::bigint], '{2,2}', 'what it counted is in retired_totals');
SELECT pgcursor.push('{"items": [{"queue": "citus_idle", "partition": "old", "payload": 4}]}') -> 0 ->> 'offset' AS again \gset
SELECT is(:'again'::text, '1', 'a push to its name creates it again, at offset 1');

SELECT * FROM finish();
ROLLBACK;
