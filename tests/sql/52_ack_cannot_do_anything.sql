-- docs/ack-contract.md §11 (acks that cannot do anything) and §12 (every per-item
-- error string): none is ever reported as a plain success, none moves anything.
BEGIN;
SELECT plan(37);
\ir lib/ack_fixture.sql

-- The partition's cursor rows, "group@cursor@acked|never" (a function: on
-- Citus a query reading the table inside is() would run on a worker,
-- where pgTAP's plan does not exist).
CREATE FUNCTION pg_temp.rows_of(p uuid) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(c.consumer_group || '@' || c.cursor || '@'
                      || CASE WHEN c.last_ack_at IS NULL THEN 'never' ELSE 'acked' END, ' ' ORDER BY c.consumer_group)
      FROM pgcursor.cursors c WHERE c.partition_id = p
$$;

-- completed, at or below the cursor
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('completed:9', 'completed:3'))), 'ok noop; ok noop', 'completed at/below cursor: success, noop');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', '... and nothing moved');

-- nack, at or below the cursor: each nack kind
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:9', 'retry:5', 'dlq:1'))),
          'already completed noop; already completed noop; already completed noop', 'nacks at/below cursor: already completed, noop');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', '... charge nothing');
SELECT is(pg_temp.dead(:'p'), '', '... and dead-letter nothing');

-- transactionId never pushed
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', '[{"transactionId": "nope", "status": "failed"}]')),
          'transaction not found noop', 'unknown transactionId: transaction not found');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', '... charges nothing');
SELECT is(pg_temp.rows_of(:'p'), 'g@9@never', '... and writes nothing, not even the time of an ack (it consumed nothing)');

-- transactionId of another partition
SELECT pg_temp.setup() AS p \gset
SELECT pg_temp.setup() AS other \gset
INSERT INTO pgcursor.transaction_index (partition_id, transaction_id, msg_offset) VALUES (:'other', 'elsewhere', 1);
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', '[{"transactionId": "elsewhere"}]')),
          'transaction not found noop', 'transactionId of another partition: transaction not found');

-- purged from the transaction index and the message gone too (retention):
-- the nack charges nothing (with the message still stored it resolves: 67_subscriptions)
SELECT pg_temp.setup() AS p \gset
DELETE FROM pgcursor.messages WHERE partition_id = :'p' AND transaction_id = 't15';
DELETE FROM pgcursor.transaction_index WHERE partition_id = :'p' AND transaction_id = 't15';
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:15', 'dlq:15'))),
          'transaction not found noop; transaction not found noop', 'purged transactionId: transaction not found');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', 'purged: the nack charged nothing, cursor did not move');
SELECT is(pg_temp.dead(:'p'), '', 'purged: nothing dead-lettered');

-- partitionId that names no partition
SELECT is(pg_temp.brief(pg_temp.ack(gen_random_uuid(), NULL, pg_temp.items('completed:1', 'failed:2'))),
          'partition not found noop; partition not found noop', 'unknown partition: partition not found on every item');
SELECT is(pg_temp.brief(pg_temp.ack(gen_random_uuid(), 'L', pg_temp.items('completed:1'))),
          'partition not found noop', 'unknown partition is reported before the lease check');

-- leaseId given, not the live lease
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'X', pg_temp.items('completed:8', 'dlq:12'))),
          'invalid or expired lease noop; invalid or expired lease noop', 'wrong lease: every item refused, even a noop one');
SELECT is(pg_temp.dead(:'p'), '', 'wrong lease: dlq did not dead-letter');

-- superseded
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:19', 'retry:11', 'failed:17', 'completed:11'))),
          'superseded by an earlier nack rel noop; ok rel; superseded by an earlier nack rel noop; superseded by an earlier nack rel noop',
          'items above the lowest nack and weaker items at it are superseded');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=0', 'retry at 11 wins: nothing completed below it, so the cursor stays 9 (10 is a silent gap above no completed offset); counter untouched');

-- A group that never touched the partition: an ack that changes nothing
-- leaves it no cursor row (a row would hold the partition's messages for
-- it, and fix where a later subscription of it starts); one that moves or
-- charges something writes the row, at cursor 0.
SELECT pg_temp.setup() AS p \gset
CREATE FUNCTION pg_temp.ack_as_h(p uuid, lease uuid, items jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    answer text := pg_temp.brief(pgcursor.ack_group(jsonb_build_object(
                       'partitionId', p, 'consumerGroup', 'h', 'leaseId', lease, 'items', items)));
BEGIN
    RETURN answer || ' / ' || coalesce((SELECT format('cursor=%s counter=%s', c.cursor, c.retry_count)
                                          FROM pgcursor.cursors c
                                         WHERE c.partition_id = p AND c.consumer_group = 'h'), 'no row');
END $$;
SELECT is(pg_temp.ack_as_h(:'p', NULL, '[{"transactionId": "nope"}]'),
          'transaction not found rel noop / no row', 'a new group''s ack of an unknown transactionId leaves no row');
SELECT is(pg_temp.ack_as_h(:'p', gen_random_uuid(), pg_temp.items('completed:3')),
          'invalid or expired lease rel noop / no row', '... nor does one refused for its lease');
SELECT is(pg_temp.ack_as_h(:'p', NULL, pg_temp.items('retry:1')),
          'ok rel / no row', '... nor a retry of its first message (nothing to redeliver from but where it stands)');
SELECT is(pg_temp.ack_as_h(:'p', NULL, pg_temp.items('failed:1')),
          'ok rel / cursor=0 counter=1', 'a failed one charges its counter: the row is written');
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.ack_as_h(:'p', NULL, pg_temp.items('completed:3')),
          'ok rel / cursor=3 counter=0', 'a completed one moves it from 0');

-- consumerGroup "" is queue mode, as an empty query parameter is on a pop
-- (a group named "" could never pop): the ack moves the __QUEUE_MODE__ cursor.
SELECT pg_temp.setup() AS p \gset
UPDATE pgcursor.cursors SET consumer_group = '__QUEUE_MODE__' WHERE partition_id = :'p';
SELECT is(pg_temp.brief(pgcursor.ack_group(jsonb_build_object(
              'partitionId', :'p', 'consumerGroup', '', 'leaseId', pg_temp.lease_l(), 'items', pg_temp.items('completed:12')))),
          'ok', 'consumerGroup "": the queue mode lease is its lease');
SELECT is(pg_temp.rows_of(:'p'), '__QUEUE_MODE__@12@acked', '... its cursor moved, and no group "" was made');

-- consumerGroup null is queue mode too, as an absent one is (docs/ack-contract.md §1).
SELECT pg_temp.setup() AS p \gset
UPDATE pgcursor.cursors SET consumer_group = '__QUEUE_MODE__' WHERE partition_id = :'p';
SELECT is(pg_temp.brief(pgcursor.ack_group(jsonb_build_object(
              'partitionId', :'p', 'consumerGroup', NULL, 'leaseId', pg_temp.lease_l(), 'items', pg_temp.items('completed:12')))),
          'ok', 'consumerGroup null: the queue mode lease is its lease');
SELECT is(pg_temp.rows_of(:'p'), '__QUEUE_MODE__@12@acked', '... its cursor moved, and no other row was made');

-- Retention or eviction moved the cursor past a live leased batch and left
-- the lease (sql/80_retention.sql): an ack of a message of that batch is at
-- or below the cursor, noop, and the call releases the lease (R1, R3).
SELECT pg_temp.setup() AS p \gset
UPDATE pgcursor.cursors SET cursor = 19 WHERE partition_id = :'p';
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:15'))), 'ok rel noop',
          'an ack below a cursor retention moved past the batch: noop, the lease released');
SELECT is(pg_temp.state(:'p'), 'cursor=19 lease=none counter=0', '... and nothing else moved');

-- A group name too long for a cursor row's key: refused naming it, as a
-- pop refuses it, before any row is written.
SELECT throws_ok(format($$SELECT pgcursor.ack_group(jsonb_build_object('partitionId', %L::uuid,
                          'consumerGroup', repeat('g', 1025), 'items', '[{"transactionId": "t12"}]'::jsonb))$$, :'p'),
                 '22023', 'consumerGroup must be at most 1024 bytes', 'a consumerGroup over 1024 bytes: 22023 naming it');

-- A psql caller with malformed input gets an error, not a wrong answer.
SELECT throws_ok($$SELECT pgcursor.ack_group('{"partitionId": "not-a-uuid", "items": [{"transactionId": "t1"}]}')$$,
                 '22023', 'partitionId must be a UUID string', 'malformed partitionId: 22023 naming the field');
SELECT throws_ok($$SELECT pgcursor.ack_group('{"partitionId": "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061", "leaseId": 5, "items": [{"transactionId": "t1"}]}')$$,
                 '22023', 'leaseId must be a UUID string', 'malformed leaseId: 22023 naming the field');
SELECT throws_ok($$SELECT pgcursor.ack_group('{"partitionId": "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061"}')$$,
                 '22023', 'items must be an array', 'missing items: 22023');
SELECT throws_ok($$SELECT pgcursor.ack_group('{"partitionId": "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061", "items": []}')$$,
                 '22023', 'items must not be empty', 'empty items: 22023');
SELECT throws_ok(format($$SELECT pgcursor.ack_group('{"partitionId": "b1c2d3e4-5f60-7180-9a0b-1c2d3e4f5061", "items": [{"transactionId": "t1", "index": %s}]}')$$, i),
                 '22023', 'items[0].index must be a non-negative integer', 'index ' || i || ': 22023 naming the item')
  FROM unnest(ARRAY['-1', '1.5', '"2"']) i;

SELECT * FROM finish();
ROLLBACK;
