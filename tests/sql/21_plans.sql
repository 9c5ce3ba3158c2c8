-- The hot path's cached plans stay index probes whatever the statistics
-- say. Cached generic plans are planned once from the statistics of the
-- moment; with skewed or stale ones they chose scans that grew with other
-- groups' cursor rows or with a partition's messages (bench (i) after (g):
-- a pop 0.6 -> 1.8 ms, an ack 0.07 -> 1.2 ms). Each test skews the
-- statistics the way that misled the planner, then counts, in this
-- transaction, the scans the call made (pg_stat_xact_*: this backend's
-- own counts so far). ANALYZE writes a table's size (pg_class.reltuples)
-- in place, past the ROLLBACK, and the rolled-back messages leave thousands
-- of dead rows: the file notes the sizes first, and after the ROLLBACK
-- vacuums the tables and puts the sizes back, so that later files' plans
-- (the EXPLAIN of 69_metrics) see the tables as they were.
SELECT string_agg(format('UPDATE pg_class SET reltuples = %s WHERE oid = %s;', reltuples, oid), ' ')
       AS restore_sizes
  FROM pg_class
 WHERE oid IN ('pgcursor.cursors'::regclass, 'pgcursor.partitions'::regclass,
               'pgcursor.messages'::regclass, 'pgcursor.transaction_index'::regclass) \gset
BEGIN;
SELECT plan(11);

\ir lib/queue_helpers.sql

-- (for a table's oid, the count is of its sequential scans)
CREATE FUNCTION pg_temp.seq_scans(t regclass) RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_stat_get_xact_numscans(t)
$$;

SELECT FROM pgcursor.push(jsonb_build_object('items', (
    SELECT jsonb_agg(jsonb_build_object('queue', 't21', 'partition', 'p' || (k % 3), 'payload', k,
                                        'transactionId', 't21-' || k) ORDER BY k)
      FROM generate_series(1, 3000) k)));
-- a group with cursor rows on every partition
SELECT FROM pgcursor.pop('{"queue":"t21","consumerGroup":"g1","autoAck":true,"partitions":3}');
SELECT pgcursor_internal.materialize_cursors();

-- claim_batches: the statistics say every cursor row is one group's, so a
-- generic plan would read the table through; the claim reads the group's
-- rows through its index and looks up each partition by key.
ALTER TABLE pgcursor.cursors ALTER consumer_group SET (n_distinct = 1);
ALTER TABLE pgcursor.partitions ALTER queue SET (n_distinct = 1);
ANALYZE pgcursor.cursors, pgcursor.partitions;
CREATE TEMP TABLE before_claim ON COMMIT DROP AS
    SELECT pg_temp.seq_scans('pgcursor.cursors') AS cursors, pg_temp.seq_scans('pgcursor.partitions') AS partitions;
CREATE TEMP TABLE claimed ON COMMIT DROP AS
    SELECT * FROM pgcursor_internal.claim_batches(ARRAY['t21'], NULL, 'g1', 2500, 3, NULL);
SELECT is((SELECT count(*) FROM claimed), 3::bigint, 'the claim was made (3 partitions)');
SELECT is(pg_temp.seq_scans('pgcursor.cursors') - b.cursors, 0::bigint,
          'claim_batches: no scan of every cursor row when statistics call the group huge') FROM before_claim b;
SELECT is(pg_temp.seq_scans('pgcursor.partitions') - b.partitions, 0::bigint,
          'claim_batches: no scan of every partition') FROM before_claim b;

-- An ack's transactionId: the statistics say a partition holds one message
-- (as when it was analysed young), so reading the partition along the
-- primary key or the transaction index's (partition_id, created_at) index
-- looks as cheap as the transactionId one; the probe goes by transactionId.
ALTER TABLE pgcursor.messages ALTER partition_id SET (n_distinct = -0.5);
ALTER TABLE pgcursor.transaction_index ALTER partition_id SET (n_distinct = -0.5);
ANALYZE pgcursor.messages, pgcursor.transaction_index;
SET LOCAL plan_cache_mode = force_generic_plan;
CREATE TEMP TABLE leased ON COMMIT DROP AS
    SELECT pgcursor.pop('{"queue":"t21","consumerGroup":"g3","batch":15,"partitions":1}') AS r;
CREATE TEMP TABLE before_ack ON COMMIT DROP AS
    SELECT pg_stat_get_xact_numscans('pgcursor.messages_pkey'::regclass) AS by_offset,
           pg_stat_get_xact_numscans('pgcursor.transaction_index_created_at'::regclass) AS index_by_time,
           pg_stat_get_xact_numscans('pgcursor.messages_transaction_id'::regclass) AS by_id;
SELECT is(pgcursor.ack_group(jsonb_build_object(
              'partitionId', r ->> 'partitionId', 'consumerGroup', 'g3', 'leaseId', r ->> 'leaseId',
              'items', jsonb_build_array(jsonb_build_object(
                  'index', 0, 'status', 'completed', 'transactionId', r -> 'messages' -> -1 ->> 'transactionId'))))
          -> 0 ->> 'success', 'true', 'the ack of the batch''s last message succeeds') FROM leased;
SELECT ok(pg_stat_get_xact_numscans('pgcursor.messages_transaction_id'::regclass) > b.by_id,
          'the ack resolved its transactionId through the (partition_id, transaction_id) index') FROM before_ack b;
SELECT is(pg_stat_get_xact_numscans('pgcursor.messages_pkey'::regclass) - b.by_offset
          + pg_stat_get_xact_numscans('pgcursor.transaction_index_created_at'::regclass) - b.index_by_time, 0::bigint,
          'no probe read a partition''s messages by offset or by time') FROM before_ack b;


-- A transaction's requiredLeases: lease_id has no index, but a lease the
-- bundle's own acks hold is found by key, and only a lease held elsewhere
-- costs a scan of every cursor row. (enable_seqscan off: on a table this
-- small a scan is cheaper than the key, so the plan shows what the function
-- asks for, not what the planner prefers here. Custom plans, so that plans
-- cached earlier in the session, while the table was smaller still when
-- this file runs alone, do not count their scans here.)
SET LOCAL enable_seqscan = off;
SET LOCAL plan_cache_mode = force_custom_plan;
CREATE TEMP TABLE pipeline ON COMMIT DROP AS
    SELECT pgcursor.pop('{"queue":"t21","consumerGroup":"g4","batch":1,"partitions":1}') AS r;
CREATE TEMP TABLE before_tx ON COMMIT DROP AS SELECT pg_temp.seq_scans('pgcursor.cursors') AS cursors;
SELECT is(pgcursor.transaction(jsonb_build_object(
              'requiredLeases', jsonb_build_array(r ->> 'leaseId'),
              'operations', jsonb_build_array(jsonb_build_object(
                  'type', 'ack', 'partitionId', r ->> 'partitionId', 'consumerGroup', 'g4', 'status', 'completed',
                  'transactionId', r -> 'messages' -> 0 ->> 'transactionId'),
                  jsonb_build_object('type', 'push', 'items', jsonb_build_array(
                      jsonb_build_object('queue', 't21-next', 'payload', 1))))))
          ->> 'success', 'true', 'a pipeline bundle acking its leased message commits') FROM pipeline;
SELECT is(pg_temp.seq_scans('pgcursor.cursors') - b.cursors, 0::bigint,
          'transaction: the required lease on the acked row is found without a scan of the cursors') FROM before_tx b;
UPDATE before_tx SET cursors = pg_temp.seq_scans('pgcursor.cursors');
SELECT pgcursor.pop('{"queue":"t21","consumerGroup":"g5","batch":1,"partitions":1}') ->> 'leaseId' AS elsewhere \gset
SELECT is(pg_temp.seq_scans('pgcursor.cursors') - b.cursors, 1::bigint,
          'transaction: a required lease held on a row no ack names is looked for in every cursor row')
  FROM before_tx b, LATERAL (SELECT pgcursor.transaction(jsonb_build_object(
      'requiredLeases', jsonb_build_array(:'elsewhere'),
      'operations', jsonb_build_array(jsonb_build_object('type', 'push', 'items', jsonb_build_array(
          jsonb_build_object('queue', 't21-next', 'payload', 2)))))) AS r) t
 WHERE t.r ->> 'success' = 'true';
-- No JIT in the API (sql/99_jit.sql): compiling a listing's statements
-- took longer than running them once the tables were large.
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'pgcursor'::regnamespace AND p.prokind = 'f' AND p.provolatile <> 'i'
       AND NOT coalesce('jit=off' = ANY (p.proconfig), false)$$,
    'every function of the pgcursor schema that reads tables runs with jit = off');
-- ... but the immutable ones carry no setting: a SQL function with one is
-- never inlined, and its body is then parsed again in every transaction
-- (normalise_status: 30-55 of an ack's 270-300 us). track_functions counts
-- the calls of a SQL function only when it runs as a call of its own.
SET LOCAL track_functions = 'all';
SELECT is(pg_stat_get_xact_function_calls('pgcursor.normalise_status(jsonb)'::regprocedure), NULL,
          'an ack runs normalise_status inlined, not as a call')
  FROM (SELECT pgcursor.ack_group(jsonb_build_object(
            'partitionId', p.partition_id, 'leaseId', p.lease_id, 'consumerGroup', 'g21-jit',
            'items', jsonb_build_array(jsonb_build_object('transactionId', p.transaction_id,
                                                          'status', 'completed')))) AS answer
          FROM pgcursor.pop_messages('{"queue":"t21","consumerGroup":"g21-jit","batch":1}') p) a
 WHERE a.answer -> 0 ->> 'success' = 'true';  -- (no ack, no test: the plan's count fails)

SELECT * FROM finish();
ROLLBACK;
-- (outside the transaction: VACUUM cannot run in one)
VACUUM pgcursor.cursors, pgcursor.partitions, pgcursor.messages, pgcursor.transaction_index;
:restore_sizes
