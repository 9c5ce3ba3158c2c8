-- docs/ack-contract.md §16: every row of the worked example. Each row starts from
-- cursor 9, lease L over 10-19, retryLimit 3, counter 0.
BEGIN;
SELECT plan(30);
\ir lib/ack_fixture.sql

-- completed 19 (L)
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:19'))), 'ok rel', 'completed 19 (L): success, lease released');
SELECT is(pg_temp.state(:'p'), 'cursor=19 lease=none counter=0', 'completed 19 (L): cursor 19, released, counter 0');

-- completed 14 (L)
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:14'))), 'ok', 'completed 14 (L): success, lease kept');
SELECT is(pg_temp.state(:'p'), 'cursor=14 lease=L counter=0', 'completed 14 (L): cursor 14, lease kept');

-- completed 12, failed 15, completed 18 (L)
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:12', 'failed:15', 'completed:18'))),
          'ok rel; ok rel; superseded by an earlier nack rel noop', 'completed 12, failed 15, completed 18: 18 superseded');
SELECT is(pg_temp.state(:'p'), 'cursor=12 lease=none counter=1', 'completed 12, failed 15, completed 18: cursor 12, released, counter 1');

-- failed 15 (L)
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:15'))), 'ok rel', 'failed 15 (L): success, released');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=1', 'failed 15 (L): cursor 9 (10-14 redeliver too), counter 1');

-- retry 15, failed 15 (L)
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('retry:15', 'failed:15'))),
          'superseded by an earlier nack rel noop; ok rel', 'retry 15, failed 15: failed wins, retry superseded');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=1', 'retry 15, failed 15: cursor 9, counter 1');

-- dlq 15, completed 13 (L)
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('dlq:15', 'completed:13'))),
          'ok rel dlq; ok rel', 'dlq 15, completed 13: dlq:true on 15');
SELECT is(pg_temp.state(:'p'), 'cursor=15 lease=none counter=0', 'dlq 15, completed 13: cursor 15, released, counter 0');
SELECT is(pg_temp.dead(:'p'), '15:Retries exhausted:0', 'dlq 15: dead-lettered with the default reason');

-- completed 19 (no lease) while L is held
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('completed:19'))), 'ok rel', 'completed 19 without lease while L is held: success');
SELECT is(pg_temp.state(:'p'), 'cursor=19 lease=none counter=0', 'completed 19 without lease: cursor 19, L released');

-- completed 19 (L) after L expired
SELECT pg_temp.setup() AS p \gset
UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 second' WHERE partition_id = :'p';
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:19'))), 'invalid or expired lease noop', 'completed 19 (L) after expiry: refused');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', 'completed 19 (L) after expiry: cursor stays 9');

-- completed 8
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:8'))), 'ok noop', 'completed 8: success, noop');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', 'completed 8: nothing moves, lease kept');

-- failed 8
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:8'))), 'already completed noop', 'failed 8: already completed, noop');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', 'failed 8: nothing moves, nothing charged');

-- The same rows without a leaseId behave the same where the lease does not matter.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('completed:14'))), 'ok', 'completed 14 without lease: lease kept');
SELECT is(pg_temp.state(:'p'), 'cursor=14 lease=L counter=0', 'completed 14 without lease: cursor 14');

-- A wrong lease is refused like an expired one and moves nothing.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'X', pg_temp.items('completed:19', 'failed:15'))),
          'invalid or expired lease noop; invalid or expired lease noop', 'mismatched lease: every item refused');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', 'mismatched lease: nothing moves');

-- A released lease is refused too.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:19'))), 'ok rel', 'release L by completing the batch');
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:19'))), 'invalid or expired lease rel noop', 'released lease: refused');

-- Exact per-item field set.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.ack(:'p', 'L', pg_temp.items('completed:12', 'failed:15', 'completed:18')),
          '[{"index":0,"transactionId":"t12","success":true,"error":null,"leaseReleased":true,"dlq":false,"noop":false},
            {"index":1,"transactionId":"t15","success":true,"error":null,"leaseReleased":true,"dlq":false,"noop":false},
            {"index":2,"transactionId":"t18","success":false,"error":"superseded by an earlier nack","leaseReleased":true,"dlq":false,"noop":true}]'::jsonb,
          'per-item objects carry exactly index, transactionId, success, error, leaseReleased, dlq, noop');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', :'p', 'consumerGroup', 'g',
              'items', '[{"index": 7, "transactionId": "t13"}]'::jsonb)) -> 0 -> 'index',
          '7'::jsonb, 'the caller''s index is echoed');
SELECT is(pgcursor.ack_group(jsonb_build_object('partitionId', :'p', 'consumerGroup', 'g',
              'items', '[{"transactionId": "t13"}, {"transactionId": "t14"}]'::jsonb)) -> 1 -> 'index',
          '1'::jsonb, 'without an index, the position in items is used');

SELECT * FROM finish();
ROLLBACK;
