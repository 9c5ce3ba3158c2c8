-- pgcursor.dead_letters (listing, filters, pagination) and requeue_dead_letter.
BEGIN;
SELECT plan(44);

-- Dead-letters offsets of queue q (partition part, group grp) with reason 'why-<offset>'.
CREATE FUNCTION pg_temp.kill(q text, part text, grp text, VARIADIC offs int[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    pid uuid;
    o int;
BEGIN
    SELECT id INTO pid FROM pgcursor.partitions WHERE queue = q AND name = part;
    FOREACH o IN ARRAY offs LOOP
        PERFORM pgcursor.ack_group(jsonb_build_object('partitionId', pid, 'consumerGroup', grp, 'items',
                    jsonb_build_array(jsonb_build_object('transactionId', q || part || o, 'status', 'dlq',
                                                         'error', 'why-' || o))));
    END LOOP;
END $$;
CREATE FUNCTION pg_temp.fill(q text, part text, n int) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'partition', part, 'payload', jsonb_build_object('o', k),
                                            'transactionId', q || part || k) ORDER BY k)
        FROM generate_series(1, n) k)))
$$;
-- The listing as "queue/partition/group/offset" strings, in answer order.
CREATE FUNCTION pg_temp.ids(r jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s/%s/%s/%s', m ->> 'queue', m ->> 'partition', m ->> 'consumerGroup', m ->> 'offset'),
                      ' ' ORDER BY n)
    FROM jsonb_array_elements(r -> 'messages') WITH ORDINALITY AS x(m, n)
$$;

SELECT pg_temp.fill('t70a', 'Default', 5);
SELECT pg_temp.fill('t70a', 'eu', 3);
SELECT pg_temp.fill('t70b', 'Default', 2);
SELECT pg_temp.kill('t70a', 'Default', 'g1', 2, 4);
SELECT pg_temp.kill('t70a', 'Default', 'g2', 1);
SELECT pg_temp.kill('t70a', 'eu', 'g1', 3);
SELECT pg_temp.kill('t70b', 'Default', 'g1', 1);
-- failed_at spread out so from/to have something to select: b is oldest, then eu, then Default.
UPDATE pgcursor.dead_letters d SET failed_at = now() - CASE p.queue || p.name
        WHEN 't70bDefault' THEN interval '3 hours' WHEN 't70aeu' THEN interval '2 hours' ELSE interval '0' END
  FROM pgcursor.partitions p WHERE p.id = d.partition_id AND p.queue IN ('t70a', 't70b');

-- The fields, for one entry.
SELECT pgcursor.dead_letters('{"queue":"t70b"}') AS r \gset
SELECT is((:'r'::jsonb) ->> 'total', '1', 'total');
SELECT is((SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys((:'r'::jsonb) -> 'messages' -> 0) k),
          '["consumerGroup","createdAt","data","errorMessage","failedAt","id","offset","partition","partitionId",
            "queue","retryCount","transactionId"]', 'exactly the documented fields');
SELECT is(((:'r'::jsonb) -> 'messages' -> 0) - 'id' - 'partitionId' - 'createdAt' - 'failedAt',
          '{"queue":"t70b","partition":"Default","consumerGroup":"g1","offset":1,"transactionId":"t70bDefault1",
            "data":{"o":1},"errorMessage":"why-1","retryCount":0}', 'values: data is the payload snapshot');
SELECT is((:'r'::jsonb) #>> '{messages,0,partitionId}',
          (SELECT id::text FROM pgcursor.partitions WHERE queue = 't70b'), 'partitionId');
SELECT is((:'r'::jsonb) #>> '{messages,0,failedAt}', pgcursor_internal.rfc3339_utc(now() - interval '3 hours'),
          'failedAt, RFC 3339 UTC');
SELECT is((:'r'::jsonb) #>> '{messages,0,createdAt}', pgcursor_internal.rfc3339_utc(now()), 'createdAt: the message''s');

-- Filters, each alone and combined; newest first, ties by queue, partition, group, offset.
SELECT is(pg_temp.ids(pgcursor.dead_letters('{"queue":"t70a"}')),
          't70a/Default/g1/2 t70a/Default/g1/4 t70a/Default/g2/1 t70a/eu/g1/3', 'queue');
SELECT is(pg_temp.ids(pgcursor.dead_letters('{"queue":"t70a","consumerGroup":"g1"}')),
          't70a/Default/g1/2 t70a/Default/g1/4 t70a/eu/g1/3', 'queue + consumerGroup');
SELECT is(pg_temp.ids(pgcursor.dead_letters('{"queue":"t70a","partition":"eu"}')), 't70a/eu/g1/3', 'queue + partition');
SELECT is(pgcursor.dead_letters('{"queue":"t70a","partition":"Default","consumerGroup":"g2"}') ->> 'total', '1',
          'queue + partition + consumerGroup');
SELECT is(pg_temp.ids(pgcursor.dead_letters(jsonb_build_object('queue', 't70a',
          'from', pgcursor_internal.rfc3339_utc(now() - interval '1 hour')))),
          't70a/Default/g1/2 t70a/Default/g1/4 t70a/Default/g2/1', 'from (inclusive, on failedAt)');
SELECT is(pg_temp.ids(pgcursor.dead_letters(jsonb_build_object('consumerGroup', 'g1',
          'from', now() - interval '150 minutes', 'to', now() - interval '2 hours'))),
          't70a/eu/g1/3', 'from + to (inclusive), any queue');
SELECT is(pgcursor.dead_letters('{"queue":"nope"}'), '{"messages":[],"total":0}', 'nothing matches');
SELECT is(pgcursor.dead_letters('{"queue":"","partition":"","consumerGroup":"","from":"","to":""}') ->> 'total',
          (SELECT count(*)::text FROM pgcursor.dead_letters), 'empty strings mean "not given"');

-- Pagination: limit/offset as numbers or query-string digits; total ignores them.
SELECT is(pg_temp.ids(pgcursor.dead_letters('{"queue":"t70a","limit":2}')),
          't70a/Default/g1/2 t70a/Default/g1/4', 'limit');
SELECT is(pg_temp.ids(pgcursor.dead_letters('{"queue":"t70a","limit":"2","offset":"2"}')),
          't70a/Default/g2/1 t70a/eu/g1/3', 'limit + offset (strings)');
SELECT is(pgcursor.dead_letters('{"queue":"t70a","limit":2,"offset":4}'), '{"messages":[],"total":4}',
          'past the end: no messages, the total');
SELECT throws_ok($$SELECT pgcursor.dead_letters('{"limit":0}')$$, '22023', 'limit must be a positive integer', 'limit 0');
SELECT throws_ok($$SELECT pgcursor.dead_letters('{"offset":"-1"}')$$, '22023', 'offset must be a non-negative integer',
                 'negative offset');
SELECT throws_ok($$SELECT pgcursor.dead_letters('{"from":"yesterday-ish"}')$$, '22023', 'from must be an ISO timestamp',
                 'bad from');

-- data survives the message's deletion (by retention: cursors move past what went).
SELECT FROM pgcursor.configure('{"queue":"t70b","options":{"retentionSeconds":3600}}');
SELECT cmp_ok(pgcursor.purge_messages(now() + interval '1 second'), '>=', 2::bigint, 't70b''s messages purged');
SELECT is(pgcursor.dead_letters('{"queue":"t70b"}') #> '{messages,0,data}', '{"o":1}', 'the snapshot outlives the message');

-- requeue: a new message with a fresh transactionId at the head, the dead letter gone.
SELECT (pgcursor.dead_letters('{"queue":"t70b"}') #>> '{messages,0,id}')::uuid AS dl \gset
SELECT pgcursor.requeue_dead_letter(:'dl') AS rq \gset
SELECT is((:'rq'::jsonb) - 'transactionId' - 'partitionId',
          jsonb_build_object('requeued', true, 'id', :'dl', 'queue', 't70b', 'partition', 'Default', 'offset', 3),
          'requeue answers where the message went');
SELECT isnt((:'rq'::jsonb) ->> 'transactionId', 't70bDefault1', 'with a fresh transactionId');
SELECT is((SELECT payload FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't70b' AND m.msg_offset = 3), '{"o":1}', 'the snapshot is the new message''s payload');
SELECT is((SELECT head FROM pgcursor.partitions JOIN pgcursor.partition_heads ON partition_id = id WHERE queue = 't70b'), 3::bigint, 'offsets stay dense: head 3');
SELECT is((SELECT i.msg_offset FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue,
                  LATERAL pgcursor_internal.indexed_message(p.id, (:'rq'::jsonb) ->> 'transactionId',
                                                            pgcursor_internal.transaction_index_horizon(
                                                                q.transaction_index_from,
                                                                q.transaction_index_retention_seconds)) i
           WHERE p.queue = 't70b'), 3::bigint, 'indexed: ackable');
SELECT is(pgcursor.dead_letters('{"queue":"t70b"}') ->> 'total', '0', 'the dead letter is gone');
SELECT throws_ok(format('SELECT pgcursor.requeue_dead_letter(%L)', :'dl'), 'P0002',
                 format('dead letter not found: %s', :'dl'), 'requeue twice: P0002');
SELECT is(pgcursor.pop('{"queue":"t70b","consumerGroup":"g1"}') #>> '{messages,0,offset}', '3',
          'the group that dead-lettered it gets it again');

-- A queue at its maxSize takes no dead letter back: the requeue is refused
-- (PC409, the gateway's 409) and the dead letter stays; once there is room
-- it goes, push maintenance or not (only the push route pauses).
SELECT FROM pgcursor.configure('{"queue":"t70f","options":{"maxSize":2}}');
SELECT pg_temp.fill('t70f', 'Default', 2);
SELECT pg_temp.kill('t70f', 'Default', 'g1', 1);
SELECT pg_temp.fill('t70f', 'Default', 3);  -- 1 and 2 are duplicates: 2 and 3 stored for g1
SELECT (pgcursor.dead_letters('{"queue":"t70f"}') #>> '{messages,0,id}')::uuid AS fdl,
       (SELECT id FROM pgcursor.partitions WHERE queue = 't70f') AS fpid \gset
SELECT throws_ok(format('SELECT pgcursor.requeue_dead_letter(%L)', :'fdl'), 'PC409',
                 format('queue t70f cannot take dead letter %s: queue is full', :'fdl'),
                 'a requeue into a full queue is refused');
SELECT throws_ok(format('SELECT pgcursor.retry_message(%L, %L)', :'fpid', 't70fDefault1'), 'PC409', NULL,
                 'so is a retry of the message');
SELECT is(pgcursor.dead_letters('{"queue":"t70f"}') ->> 'total', '1', '... and the dead letter stays');
SELECT ok(pgcursor.ack_group(jsonb_build_object('partitionId', :'fpid', 'consumerGroup', 'g1',
          'items', '[{"transactionId": "t70fDefault2"}]'::jsonb)) -> 0 -> 'success' = 'true', 'g1 consumes one');
SELECT FROM pgcursor.set_maintenance('push', true);
SELECT is(pgcursor.requeue_dead_letter(:'fdl') ->> 'offset', '4', 'then the requeue goes, in push maintenance too');
SELECT FROM pgcursor.set_maintenance('push', false);
SELECT is(pgcursor.pop('{"queue":"t70b","consumerGroup":"fresh","batch":5}') #>> '{messages,0,offset}', '3',
          'a new group starts past the deleted messages, at the requeued one');

-- maxBytes: every dead letter of the page is listed, its payload only while
-- the page's payloads fit (the first in any case). (One transaction: one
-- failedAt, so the page is in offset order.)
SELECT FROM pgcursor.push(jsonb_build_object('items', (
    SELECT jsonb_agg(jsonb_build_object('queue', 't70big', 'payload', repeat('x', 1000),
                                        'transactionId', 't70bigDefault' || k) ORDER BY k)
      FROM generate_series(1, 3) k)));
SELECT pg_temp.kill('t70big', 'Default', 'g', 1, 2, 3);
CREATE FUNCTION pg_temp.with_data(r jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s:%s%s', m ->> 'offset', CASE WHEN m -> 'data' = 'null' THEN 'no data' ELSE 'data' END,
                             CASE WHEN m ? 'dataOmitted' THEN ' (omitted)' ELSE '' END), ' ' ORDER BY n)
    FROM jsonb_array_elements(r -> 'messages') WITH ORDINALITY AS x(m, n)
$$;
SELECT is(pg_temp.with_data(pgcursor.dead_letters('{"queue": "t70big"}')), '1:data 2:data 3:data',
          'by default (16 MiB) every payload of a small page is there');
SELECT is(pg_temp.with_data(pgcursor.dead_letters('{"queue": "t70big", "maxBytes": 2500}')),
          '1:data 2:data 3:no data (omitted)',
          'room for two payloads of 1,000 characters: the third is listed without its data, saying so');
SELECT is(pg_temp.with_data(pgcursor.dead_letters('{"queue": "t70big", "maxBytes": 1}')),
          '1:data 2:no data (omitted) 3:no data (omitted)', 'the first of the page has its data in any case');
SELECT is(pg_temp.with_data(pgcursor.dead_letters('{"queue": "t70big", "maxBytes": 1, "offset": 2}')),
          '3:data', 'a page of its own shows a payload omitted from a larger one');
SELECT throws_ok($$SELECT pgcursor.dead_letters('{"queue": "t70big", "maxBytes": 0}')$$, '22023',
                 'maxBytes must be a positive integer', 'maxBytes 0 is refused, named');

-- limit: 100 when absent, at most 1000 (wire.md's default; docs' cap).
SELECT pg_temp.fill('t70many', 'Default', 1005);
INSERT INTO pgcursor.dead_letters (partition_id, consumer_group, msg_offset, transaction_id, payload, error, retry_count)
SELECT p.id, 'g', o, 't70manyDefault' || o, '{}'::jsonb, 'bulk', 0
  FROM pgcursor.partitions p, generate_series(1, 1005) o WHERE p.queue = 't70many';
SELECT is(jsonb_array_length(pgcursor.dead_letters('{"queue": "t70many"}') -> 'messages'), 100, 'limit absent: 100 dead letters');
SELECT is(pgcursor.dead_letters('{"queue": "t70many"}') -> 'total', '1005'::jsonb, '... of a total of 1005');
SELECT is(jsonb_array_length(pgcursor.dead_letters('{"queue": "t70many", "limit": 5000}') -> 'messages'), 1000,
          'limit 5000: capped at 1000');

SELECT * FROM finish();
ROLLBACK;
