-- pgcursor.transaction: acks (through ack_group) and pushes in one transaction;
-- a refused ack or requiredLease rolls everything back and still answers.
BEGIN;
SELECT plan(52);

-- Queue q with messages <q>-1..<q>-n in partition Default; returns its id.
CREATE FUNCTION pg_temp.fill(q text, n int) RETURNS uuid LANGUAGE sql AS $$
    SELECT (pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'payload', jsonb_build_object('k', k),
                                            'transactionId', q || '-' || k) ORDER BY k)
        FROM generate_series(1, n) k))) -> 0 ->> 'partitionId')::uuid
$$;
CREATE FUNCTION pg_temp.depth(q text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
    WHERE p.queue = q
$$;
CREATE FUNCTION pg_temp.cursor_of(pid uuid, grp text DEFAULT '__QUEUE_MODE__') RETURNS text LANGUAGE sql AS $$
    SELECT format('cursor=%s lease=%s counter=%s', cursor, CASE WHEN lease_id IS NULL THEN 'none' ELSE 'held' END,
                  retry_count)
    FROM pgcursor.cursors WHERE partition_id = pid AND consumer_group = grp
$$;
CREATE FUNCTION pg_temp.ack(pid uuid, txid text, lease text, status text DEFAULT 'completed',
                            grp text DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object('type', 'ack', 'transactionId', txid, 'partitionId', pid,
                                                'leaseId', lease, 'status', status, 'consumerGroup', grp))
$$;
CREATE FUNCTION pg_temp.push(q text, payload jsonb, txid text DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('type', 'push', 'items', jsonb_build_array(
        jsonb_strip_nulls(jsonb_build_object('queue', q, 'transactionId', txid)) || jsonb_build_object('payload', payload)))
$$;
CREATE FUNCTION pg_temp.tx(VARIADIC ops jsonb[]) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pgcursor.transaction(jsonb_build_object('operations', to_jsonb(ops)))
$$;

-- The pipeline handoff: pop from A, ack A + push to B in one bundle.
SELECT pg_temp.fill('t60a', 2) AS a \gset
SELECT pgcursor.pop('{"queue":"t60a","batch":2}') ->> 'leaseId' AS lease \gset
SELECT pg_temp.tx(pg_temp.ack(:'a', 't60a-2', :'lease'), pg_temp.push('t60b', '{"from":"a2"}')) AS r \gset
SELECT is((:'r'::jsonb) ->> 'success', 'true', 'handoff: success');
SELECT ok((:'r'::jsonb) ->> 'transactionId' ~ '^[0-9a-f-]{36}$', 'handoff: a bundle transactionId');
SELECT is((:'r'::jsonb) -> 'results' -> 0,
          '{"index":0,"transactionId":"t60a-2","success":true,"error":null,"leaseReleased":true,"dlq":false,"noop":false}',
          'handoff: results[0] is the ack''s item result');
SELECT is(jsonb_typeof((:'r'::jsonb) -> 'results' -> 1), 'array', 'handoff: results[1] is the push''s array');
SELECT is((:'r'::jsonb) -> 'results' -> 1 -> 0 ->> 'status', 'queued', 'handoff: pushed');
SELECT is(pg_temp.cursor_of(:'a'), 'cursor=2 lease=none counter=0', 'handoff: A''s cursor moved, lease released');
SELECT is((SELECT payload FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't60b'), '{"from":"a2"}', 'handoff: B has the message');
SELECT isnt(pg_temp.tx(pg_temp.push('t60b', '1')) ->> 'transactionId', (:'r'::jsonb) ->> 'transactionId',
            'every bundle gets a fresh transactionId');

-- A refused ack (wrong lease) rolls back the push before it.
SELECT pg_temp.fill('t60c', 3) AS c \gset
SELECT pgcursor.pop('{"queue":"t60c","batch":3}') ->> 'leaseId' AS lease \gset
SELECT pg_temp.tx(pg_temp.push('t60d', '"early"'), pg_temp.ack(:'c', 't60c-1', gen_random_uuid()::text),
                  pg_temp.push('t60d', '"late"')) AS r \gset
SELECT is((:'r'::jsonb) - 'results',
          '{"success":false,"error":"invalid or expired lease","failedIndex":1}', 'wrong lease: refused at index 1');
SELECT is(jsonb_array_length((:'r'::jsonb) -> 'results'), 2, 'results: the answers up to the failing operation');
SELECT is((:'r'::jsonb) -> 'results' -> 1 ->> 'error', 'invalid or expired lease', '... including the refusal');
SELECT is(pg_temp.depth('t60d'), 0, 'wrong lease: the push before it was rolled back');
SELECT is(pg_temp.cursor_of(:'c'), 'cursor=0 lease=held counter=0', 'wrong lease: nothing moved');

-- Every other refusal rolls back too.
SELECT is(pg_temp.tx(pg_temp.ack(:'c', 'nope', :'lease'), pg_temp.push('t60d', '1')) - 'results',
          '{"success":false,"error":"transaction not found","failedIndex":0}', 'unknown transactionId refuses');
SELECT is(pg_temp.tx(pg_temp.push('t60d', '1'), pg_temp.ack(gen_random_uuid(), 'x', NULL)) - 'results',
          '{"success":false,"error":"partition not found","failedIndex":1}', 'unknown partition refuses');
SELECT is(pg_temp.depth('t60d'), 0, 'nothing pushed by refused bundles');
-- A push item the queue refuses (maxSize) refuses the bundle: the ack before it is undone.
SELECT FROM pgcursor.configure('{"queue": "t60full", "options": {"maxSize": 1}}');
SELECT FROM pgcursor.push('{"items": [{"queue": "t60full", "payload": 0}]}');
SELECT pg_temp.tx(pg_temp.ack(:'c', 't60c-1', :'lease'), pg_temp.push('t60full', '1')) AS r \gset
SELECT is((:'r'::jsonb) - 'results', '{"success":false,"error":"queue is full","failedIndex":1}',
          'a push item refused for room refuses the bundle');
SELECT is(pg_temp.cursor_of(:'c'), 'cursor=0 lease=held counter=0', '... and the ack before it is undone');
SELECT is(pg_temp.depth('t60full'), 1, '... as is the push');
SELECT is(pg_temp.tx(pg_temp.ack(:'c', 't60c-1', :'lease'), pg_temp.ack(:'c', 't60c-1', :'lease', 'failed'))
          - 'results', '{"success":false,"error":"already completed","failedIndex":1}',
          'a nack of a completed message refuses the bundle');
SELECT is(pg_temp.cursor_of(:'c'), 'cursor=0 lease=held counter=0', '... and the ack before it is undone');

-- Two acks of one batch in one bundle: the same semantics as two ack calls.
SELECT is(pg_temp.tx(pg_temp.ack(:'c', 't60c-1', :'lease'), pg_temp.ack(:'c', 't60c-3', :'lease'))
          #>> '{results,0,leaseReleased}', 'false', 'first ack keeps the lease (batch end not reached)');
SELECT is(pg_temp.cursor_of(:'c'), 'cursor=3 lease=none counter=0', 'second ack completes the batch');

-- Idempotent retry of a bundle: completed again = noop success, push again = duplicate.
SELECT pg_temp.fill('t60e', 1) AS e \gset
SELECT pg_temp.tx(pg_temp.ack(:'e', 't60e-1', NULL), pg_temp.push('t60f', '1', 'f-1')) AS r \gset
SELECT pg_temp.tx(pg_temp.ack(:'e', 't60e-1', NULL), pg_temp.push('t60f', '1', 'f-1')) AS r2 \gset
SELECT is(ARRAY[(:'r2'::jsonb) ->> 'success', (:'r2'::jsonb) #>> '{results,0,noop}',
                (:'r2'::jsonb) #>> '{results,1,0,status}'], '{true,true,duplicate}',
          'a retried bundle succeeds: ack noop, push duplicate');
SELECT is(pg_temp.depth('t60f'), 1, 'the retried push wrote nothing');

-- Nacks inside a bundle: budget, dead letter, normalisation (same as ack_group).
SELECT pg_temp.fill('t60g', 2) AS g \gset
SELECT is(pg_temp.tx(pg_temp.ack(:'g', 't60g-1', NULL, 'failed', 'billing')) ->> 'success', 'true',
          'a failed ack is an accepted instruction');
SELECT is(pg_temp.cursor_of(:'g', 'billing'), 'cursor=0 lease=none counter=1', 'the budget is charged, per group');
SELECT is(pg_temp.tx(pg_temp.ack(:'g', 't60g-1', NULL, 'dlq', 'billing')) #>> '{results,0,dlq}', 'true',
          'dlq in a bundle dead-letters');
SELECT is((SELECT count(*)::int FROM pgcursor.dead_letters WHERE partition_id = :'g'), 1, 'one dead letter');
SELECT is(pg_temp.tx(pg_temp.ack(:'g', 't60g-2', NULL, 'Completed', 'billing')) ->> 'success', 'true',
          '"Completed" is normalised to failed, an accepted nack');
SELECT is(pg_temp.cursor_of(:'g', 'billing'), 'cursor=1 lease=none counter=1', '... which charged the budget');

-- requiredLeases: every listed lease must be live when the bundle starts.
SELECT pg_temp.fill('t60h', 1) AS h \gset
SELECT pgcursor.pop('{"queue":"t60h"}') ->> 'leaseId' AS hl \gset
SELECT is(pgcursor.transaction(jsonb_build_object('requiredLeases', jsonb_build_array(:'hl'),
          'operations', jsonb_build_array(pg_temp.ack(:'h', 't60h-1', :'hl')))) ->> 'success', 'true',
          'a live required lease (released by the ack itself) passes');
SELECT is(pgcursor.transaction(jsonb_build_object('requiredLeases', jsonb_build_array(:'hl'),
          'operations', jsonb_build_array(pg_temp.push('t60i', '1')))),
          '{"success":false,"error":"invalid or expired lease","failedIndex":null,"results":[]}',
          'a released required lease refuses the bundle before any operation');
SELECT is(pg_temp.depth('t60i'), 0, '... nothing pushed');
SELECT is(pgcursor.transaction('{"requiredLeases":[],"operations":[{"type":"push","items":[]}]}') ->> 'success',
          'true', 'requiredLeases [] and an empty push are fine');

-- A required lease is looked for in the rows the acks name first, then
-- anywhere: one held on a partition no operation names still counts.
SELECT pg_temp.fill('t60k', 2) AS k \gset
SELECT pg_temp.fill('t60l', 1) AS l \gset
SELECT pgcursor.pop('{"queue":"t60k","batch":1}') ->> 'leaseId' AS kl \gset
SELECT pgcursor.pop('{"queue":"t60l","consumerGroup":"audit"}') ->> 'leaseId' AS ll \gset
SELECT is(pgcursor.transaction(jsonb_build_object('requiredLeases', jsonb_build_array(:'ll'),
          'operations', jsonb_build_array(pg_temp.ack(:'k', 't60k-1', :'kl')))) ->> 'success', 'true',
          'a required lease live on a partition the bundle does not ack passes');
SELECT is(pg_temp.cursor_of(:'l', 'audit'), 'cursor=0 lease=held counter=0', '... and is left as it was');
SELECT pgcursor.pop('{"queue":"t60k","batch":1}') ->> 'leaseId' AS kl2 \gset
SELECT is(pgcursor.transaction(jsonb_build_object('requiredLeases', jsonb_build_array(:'kl2', :'ll'),
          'operations', jsonb_build_array(pg_temp.ack(:'k', 't60k-2', :'kl2')))) ->> 'success', 'true',
          'two required leases, one on the acked row and one elsewhere, pass');
SELECT pg_temp.fill('t60m', 1) AS m \gset
SELECT pgcursor.pop('{"queue":"t60m"}') ->> 'leaseId' AS ml \gset
SELECT is(pgcursor.transaction(jsonb_build_object('requiredLeases', jsonb_build_array(:'ml', :'kl2'),
          'operations', jsonb_build_array(pg_temp.ack(:'m', 't60m-1', :'ml')))),
          '{"success":false,"error":"invalid or expired lease","failedIndex":null,"results":[]}',
          'a lease on the acked row does not excuse another required lease that is gone');
SELECT is(pg_temp.cursor_of(:'m'), 'cursor=0 lease=held counter=0', '... nothing acked');

-- Malformed requests: 22023 naming the field, nothing written.
SELECT throws_ok($$SELECT pgcursor.transaction('[]')$$, '22023', 'request body must be a JSON object', 'not an object');
SELECT throws_ok($$SELECT pgcursor.transaction('{}')$$, '22023', 'operations is required and must be an array',
                 'operations missing');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[]}')$$, '22023', 'operations must not be empty',
                 'operations empty');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"push","items":[]},{"type":"kv"}]}')$$,
                 '22023', 'operations[1].type must be "ack" or "push"', 'unknown type');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"push","items":[{"queue":"t60j","payload":1}]},
                   {"type":"ack","partitionId":"00000000-0000-4000-8000-000000000000"}]}')$$,
                 '22023', 'operations[1].transactionId must be a string', 'ack without transactionId');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"ack","transactionId":"x","partitionId":"p"}]}')$$,
                 '22023', 'operations[0].partitionId must be a UUID string', 'bad partitionId');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"ack","transactionId":"x",
                   "partitionId":"00000000-0000-4000-8000-000000000000","leaseId":7}]}')$$,
                 '22023', 'operations[0].leaseId must be a UUID string', 'bad leaseId');
-- The three mistakes ack_group refuses (a number where a string goes), refused alike in an ack operation.
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"ack","transactionId":"x",
                   "partitionId":"00000000-0000-4000-8000-000000000000","consumerGroup":5}]}')$$,
                 '22023', 'operations[0].consumerGroup must be a string', 'consumerGroup a number');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"ack","transactionId":"x",
                   "partitionId":"00000000-0000-4000-8000-000000000000","status":"failed","error":42}]}')$$,
                 '22023', 'operations[0].error must be a string', 'error a number');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"ack","transactionId":7,
                   "partitionId":"00000000-0000-4000-8000-000000000000"}]}')$$,
                 '22023', 'operations[0].transactionId must be a string', 'transactionId a number');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"push","items":[{"queue":"t60j"}]}]}')$$,
                 '22023', 'operations[0].items[0].payload is required', 'push item without payload');
SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"push"}],"requiredLeases":["x"]}')$$,
                 '22023', 'requiredLeases[0] must be a UUID string', 'bad required lease');

SELECT * FROM finish();
ROLLBACK;
