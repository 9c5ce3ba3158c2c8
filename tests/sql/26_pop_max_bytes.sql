-- maxBytes: a pop stops adding messages once their payloads would weigh
-- more than maxBytes (the first message always comes). The claim where
-- the budget runs out is cut, later claims are given back, and leases and
-- autoAck completions cover only what the pop delivers. Messages are
-- weighed only when partition_heads.max_weight says they could be too
-- heavy (sql/30_pop.sql, fit_claims_to_bytes).
BEGIN;
SELECT plan(33);

\ir lib/queue_helpers.sql

-- Pushes n messages whose payloads are strings of `len` x's to (q, part).
CREATE FUNCTION pg_temp.push_strings(q text, part text, n integer, len integer) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.push(jsonb_build_object('items',
        (SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part, 'payload', repeat('x', len)))
           FROM generate_series(1, n))))
$$;
-- The offsets a pop_messages call delivers, in order.
CREATE FUNCTION pg_temp.popped(req jsonb) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(m.msg_offset ORDER BY n) FILTER (WHERE m.msg_offset IS NOT NULL), '{}')
      FROM pgcursor.pop_messages(req) WITH ORDINALITY AS m(paused, lease_id, consumer_group, partitions_claimed,
           queue, partition, partition_id, retry_count, message_id, transaction_id, msg_offset, payload,
           created_at, trace_id, n)
$$;
-- What one stored message of (q, part) weighs.
CREATE FUNCTION pg_temp.weight(q text, part text DEFAULT 'Default') RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    p uuid := pg_temp.pid(q, part);  -- a value, so the primary key is used
BEGIN
    RETURN (SELECT pgcursor_internal.payload_weight(m.payload) FROM pgcursor.messages m
             WHERE m.partition_id = p ORDER BY m.msg_offset LIMIT 1);
END $$;
CREATE FUNCTION pg_temp.max_weight(q text, part text DEFAULT 'Default') RETURNS integer LANGUAGE sql AS $$
    SELECT h.max_weight FROM pgcursor.partition_heads h WHERE h.partition_id = pg_temp.pid(q, part)
$$;

-- partition_heads.max_weight: the largest payload pushed, as handed over.
SELECT pg_temp.push_strings('t26a', 'Default', 10, 1000);
SELECT is(pg_temp.max_weight('t26a'), pg_column_size(to_jsonb(repeat('x', 1000))),
          'max_weight is the size of the largest payload pushed into the partition');
SELECT is((SELECT h.weighed_from FROM pgcursor.partition_heads h WHERE h.partition_id = pg_temp.pid('t26a')),
          1::bigint, 'and it covers every message of a partition made since');
SELECT pg_temp.push_strings('t26a', 'Default', 1, 10);
SELECT is(pg_temp.max_weight('t26a'), pg_column_size(to_jsonb(repeat('x', 1000))),
          'a push of smaller payloads leaves it: it only grows');
SELECT cmp_ok(pg_temp.weight('t26a'), '>=', 1000, 'a stored message of 1,000 x''s weighs at least 1,000 bytes');

-- Cut: as many as fit, from the first.
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'g1', 'batch', 10,
                                            'maxBytes', 3 * pg_temp.weight('t26a'))),
          '{1,2,3}'::bigint[], 'maxBytes of three messages'' weight: three of the ten asked');
SELECT is((pg_temp.cur('t26a', 'Default', 'g1')).batch_end, 3::bigint,
          'the lease covers the three delivered, no more');
SELECT is(pg_temp.popped('{"queue": "t26a", "consumerGroup": "g1", "batch": 10}'), '{}'::bigint[],
          'and it holds the partition: a pop of the group gets nothing meanwhile');
SELECT is(pgcursor.ack_group(jsonb_build_object(
              'partitionId', pg_temp.pid('t26a'), 'consumerGroup', 'g1',
              'leaseId', (pg_temp.cur('t26a', 'Default', 'g1')).lease_id,
              'items', jsonb_build_array(jsonb_build_object(
                  'transactionId', (SELECT m.transaction_id FROM pgcursor.messages m
                                     WHERE m.partition_id = pg_temp.pid('t26a') AND m.msg_offset = 3),
                  'status', 'completed'))))
          -> 0 ->> 'success', 'true', 'an ack of the third completes the cut lease');
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'g1', 'batch', 10,
                                            'maxBytes', 3 * pg_temp.weight('t26a'))),
          '{4,5,6}'::bigint[], 'the next pop goes on from there');
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'g2', 'batch', 10,
                                            'maxBytes', 3 * pg_temp.weight('t26a') - 1)),
          '{1,2}'::bigint[], 'a byte less: two');
SELECT is(pg_temp.popped('{"queue": "t26a", "consumerGroup": "g3", "batch": 10, "maxBytes": 1}'),
          '{1}'::bigint[], 'a budget below one message still delivers the first');
SELECT is(pg_temp.popped('{"queue": "t26a", "consumerGroup": "g4", "batch": 10}'),
          '{1,2,3,4,5,6,7,8,9,10}'::bigint[], 'without maxBytes: the whole batch');
SELECT is(pg_temp.popped('{"queue": "t26a", "consumerGroup": "g5", "batch": 10, "maxBytes": 2147483647}'),
          '{1,2,3,4,5,6,7,8,9,10}'::bigint[], 'with room for all: the whole batch');

-- The bound: a partition whose max_weight says its payloads are small is
-- not weighed at all.
UPDATE pgcursor.partition_heads SET max_weight = 1 WHERE partition_id = pg_temp.pid('t26a');
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'g6', 'batch', 10,
                                            'maxBytes', 3 * pg_temp.weight('t26a'))),
          '{1,2,3,4,5,6,7,8,9,10}'::bigint[],
          'messages whose max_weight bound fits the budget are not weighed (so max_weight must never be low)');
-- Unless the claim reaches below weighed_from: messages stored before
-- max_weight was kept (migration V14) are weighed whatever it says.
UPDATE pgcursor.partition_heads SET weighed_from = 4 WHERE partition_id = pg_temp.pid('t26a');
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'g7', 'batch', 10,
                                            'maxBytes', 3 * pg_temp.weight('t26a'))),
          '{1,2,3}'::bigint[], 'a claim from below weighed_from is weighed whatever max_weight says');
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'g7', 'batch', 10, 'autoAck', true,
                                            'maxBytes', 3 * pg_temp.weight('t26a'))),
          '{}'::bigint[], '(the group''s lease holds the partition)');
UPDATE pgcursor.cursors SET lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL,
                            cursor = 3
 WHERE partition_id = pg_temp.pid('t26a') AND consumer_group = 'g7';
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'g7', 'batch', 10,
                                            'maxBytes', 3 * pg_temp.weight('t26a'))),
          '{4,5,6,7,8,9,10,11}'::bigint[], 'one from weighed_from on trusts max_weight again');
UPDATE pgcursor.partition_heads SET max_weight = 2000, weighed_from = 1 WHERE partition_id = pg_temp.pid('t26a');

-- autoAck completes what it delivers only.
SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26a', 'consumerGroup', 'auto', 'batch', 10,
                                            'autoAck', true, 'maxBytes', 2 * pg_temp.weight('t26a'))),
          '{1,2}'::bigint[], 'autoAck with room for two: two');
SELECT is(ARRAY[(pg_temp.cur('t26a', 'Default', 'auto')).cursor,
                (pg_temp.cur('t26a', 'Default', 'auto')).completed_total],
          '{2,2}'::bigint[], 'its cursor and completed count stop at the second');

-- Several claims: those past the budget are given back.
SELECT pg_temp.push_strings('t26b', 'p1', 3, 1000);
SELECT pg_temp.push_strings('t26b', 'p2', 3, 1000);
SELECT is((SELECT array_agg(DISTINCT m.partitions_claimed) FROM pgcursor.pop_messages(
              jsonb_build_object('queue', 't26b', 'consumerGroup', 'm1', 'batch', 10, 'partitions', 2,
                                 'maxBytes', 2 * pg_temp.weight('t26b', 'p1'))) m),
          '{1}'::int[], 'a pop of two partitions with room for two messages answers one claim');
SELECT is((SELECT count(*) FROM pgcursor.cursors c
            WHERE c.consumer_group = 'm1' AND c.lease_id IS NOT NULL AND c.batch_end - c.batch_start = 1),
          1::bigint, 'one partition is leased, for its two messages delivered');
SELECT is((SELECT count(*) FROM pgcursor.cursors c
            WHERE c.consumer_group = 'm1' AND c.lease_id IS NULL AND c.batch_start IS NULL AND c.cursor = 0),
          1::bigint, 'the other was given back: no lease, nothing consumed');
SELECT is(cardinality(pg_temp.popped('{"queue": "t26b", "consumerGroup": "m1", "batch": 10}')), 3,
          'so another consumer of the group gets it at once');

SELECT is(pg_temp.popped(jsonb_build_object('queue', 't26b', 'consumerGroup', 'm2', 'batch', 10, 'partitions', 2,
                                            'autoAck', true, 'maxBytes', 1)),
          '{1}'::bigint[], 'autoAck over two partitions with room for none: the first message only');
SELECT is((SELECT array_agg(c.cursor || '/' || c.completed_total ORDER BY c.cursor)
             FROM pgcursor.cursors c WHERE c.consumer_group = 'm2'),
          '{0/0,1/1}'::text[], 'the partition given back is where it was: nothing completed there');

-- A compressed payload is weighed as text, not at its stored size.
SELECT pg_temp.push_strings('t26c', 'Default', 3, 100000);
SELECT cmp_ok((SELECT pg_column_size(m.payload) FROM pgcursor.messages m
                WHERE m.partition_id = pg_temp.pid('t26c') LIMIT 1), '<', 10000,
              '100,000 x''s are stored compressed, in under 10,000 bytes');
SELECT is(pg_temp.popped('{"queue": "t26c", "consumerGroup": "c1", "batch": 3, "maxBytes": 150000}'),
          '{1}'::bigint[], 'room for 150,000 bytes: one message of 100,000 x''s, not three');

-- A claim whose messages retention deleted has nothing to weigh: it stays.
SELECT pg_temp.push_strings('t26d', 'Default', 3, 1000);
SELECT is(pg_temp.popped('{"queue": "t26d", "batch": 1, "autoAck": true}'), '{1}'::bigint[],
          'the queue-mode group consumes the first of three');
DELETE FROM pgcursor.messages WHERE partition_id = pg_temp.pid('t26d') AND msg_offset > 1;
SELECT is((SELECT array_agg(m.partitions_claimed || '/' || coalesce(m.msg_offset::text, 'none'))
             FROM pgcursor.pop_messages('{"queue": "t26d", "batch": 3, "maxBytes": 1}') m),
          '{1/none}'::text[], 'a claim of deleted messages is answered as one without them');
SELECT is((pg_temp.cur('t26d', 'Default', '__QUEUE_MODE__')).batch_end, 3::bigint,
          'and keeps its lease as claimed');

SELECT throws_ok($$SELECT pgcursor.pop('{"queue": "t26a", "maxBytes": 0}')$$, '22023',
                 'maxBytes must be a positive integer', 'maxBytes 0 is refused, named');
SELECT throws_ok($$SELECT pgcursor.pop('{"queue": "t26a", "maxBytes": "lots"}')$$, '22023',
                 'maxBytes must be a positive integer', 'maxBytes "lots" is refused, named');
SELECT is((SELECT count(*) FROM pgcursor.cursors WHERE consumer_group = '__QUEUE_MODE__'
             AND partition_id = pg_temp.pid('t26a')), 0::bigint, 'and a refused pop changed nothing');

SELECT * FROM finish();
ROLLBACK;
