-- docs/ack-contract.md §7–§9: the retry budget, budget-free retry, dead-lettering
-- and discard, the reason rule, the payload snapshot, counters, and the
-- lease-less path's teeth.
BEGIN;
SELECT plan(55);
\ir lib/ack_fixture.sql

-- Budget: exhausted after exactly retryLimit failed calls, charged once per call.
SELECT pg_temp.setup(retry_limit => 2) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('failed:12', 'failed:14', 'failed:15'))), 'ok rel; superseded by an earlier nack rel noop; superseded by an earlier nack rel noop', 'failed call 1');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=1', 'several failed items charge once per call');
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('failed:12'))), 'ok rel', 'failed call 2');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=2', 'counter at the limit, not yet dead-lettered');
SELECT is(pg_temp.dead(:'p'), '', 'no dead letter before the budget is spent');
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('completed:11', 'failed:12'))), 'ok rel; ok rel dlq', 'failed call 3 dead-letters');
SELECT is(pg_temp.state(:'p'), 'cursor=12 lease=none counter=0', 'cursor past the poison message, counter reset');
SELECT is(pg_temp.dead(:'p'), '12:Retries exhausted:2', 'dead letter at 12, default reason, retry count recorded');

-- retryLimit 0: the first failure dead-letters.
SELECT pg_temp.setup(retry_limit => 0) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:10:boom'))), 'ok rel dlq', 'retryLimit 0: first failure dead-letters');
SELECT is(pg_temp.dead(:'p'), '10:boom:0', '... with its own reason');

-- retry never charges, however often.
SELECT pg_temp.setup(retry_limit => 1) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:11', 'retry:12'))), 'ok rel; ok rel', 'retry: accepted, lease released');
SELECT is(pg_temp.state(:'p'), 'cursor=11 lease=none counter=0', 'retry: cursor at the completed prefix, counter untouched');
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('retry:12'))), 'ok rel', 'retry again');
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('retry:12'))), 'ok rel', 'and again');
SELECT is(pg_temp.state(:'p'), 'cursor=11 lease=none counter=0', 'retries never charge the budget');
SELECT is(pg_temp.dead(:'p'), '', 'retries never dead-letter');

-- retry leaves an already charged counter as it is.
SELECT pg_temp.setup(counter => 2) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('retry:10'))), 'ok rel', 'retry with counter 2');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=2', 'retry leaves the counter at 2');

-- A completed call that does not reach the batch end keeps the counter.
SELECT pg_temp.setup(counter => 2) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:12'))), 'ok', 'partial completion');
SELECT is(pg_temp.state(:'p'), 'cursor=12 lease=L counter=2', 'partial completion keeps lease and counter');
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:19'))), 'ok rel', 'completing the batch');
SELECT is(pg_temp.state(:'p'), 'cursor=19 lease=none counter=0', 'completing the batch resets the counter');

-- Dead-lettering is off only when both flags are explicitly false (four combinations + nulls).
SELECT pg_temp.setup(retry_limit => 0, dlq => false, dlq_after => false) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:13'))), 'ok rel', 'both false: exhausted failure is not dlq');
SELECT ' discarded=' || discarded_total AS disc FROM pgcursor.cursors WHERE partition_id = :'p' \gset
SELECT is(pg_temp.state(:'p') || ' ' || pg_temp.dead(:'p') || :'disc',
          'cursor=13 lease=none counter=0  discarded=1', 'both false: discarded, cursor past it, nothing stored');
SELECT pg_temp.setup(retry_limit => 0, dlq => true, dlq_after => false) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:13'))), 'ok rel dlq', 'deadLetterQueue true, dlqAfterMaxRetries false: dead-letters');
SELECT pg_temp.setup(retry_limit => 0, dlq => false, dlq_after => true) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:13'))), 'ok rel dlq', 'deadLetterQueue false, dlqAfterMaxRetries true: dead-letters');
SELECT pg_temp.setup(retry_limit => 0, dlq => true, dlq_after => true) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:13'))), 'ok rel dlq', 'both true: dead-letters');
SELECT pg_temp.setup(retry_limit => 0, dlq => false, dlq_after => NULL) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:13'))), 'ok rel dlq', 'one false, one unset: dead-letters (unset counts as on)');
SELECT pg_temp.setup(retry_limit => 0, dlq => false, dlq_after => false) AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('dlq:13'))), 'ok rel dlq', 'explicit dlq dead-letters even with dead-lettering off');

-- Reason rule: own reason, then first available, then the default.
SELECT pg_temp.setup(retry_limit => 0) AS p \gset
SELECT pg_temp.ack(:'p', 'L', pg_temp.items('retry:17:later', 'failed:12:first', 'failed:12:own', 'failed:16:other'));
SELECT is(pg_temp.dead(:'p'), '12:first:0', 'the poison message''s own reason wins (first in request order at N)');
SELECT pg_temp.setup(retry_limit => 0) AS p \gset
SELECT pg_temp.ack(:'p', 'L', pg_temp.items('retry:17:later', 'failed:12', 'failed:16:other'));
SELECT is(pg_temp.dead(:'p'), '12:later:0', 'else the first reason among the nacks in request order');
SELECT pg_temp.setup(retry_limit => 0) AS p \gset
SELECT pg_temp.ack(:'p', 'L', pg_temp.items('failed:12', 'completed:11:ignored'));
SELECT is(pg_temp.dead(:'p'), '12:Retries exhausted:0', 'else Retries exhausted (a completed item''s error is no reason)');

-- The payload snapshot survives deleting the message.
SELECT pg_temp.setup() AS p \gset
SELECT pg_temp.ack(:'p', 'L', pg_temp.items('dlq:14'));
DELETE FROM pgcursor.messages WHERE partition_id = :'p';
SELECT payload AS v FROM pgcursor.dead_letters WHERE partition_id = :'p' \gset
SELECT is(:'v'::jsonb, '{"n": 14}'::jsonb, 'payload snapshot survives the message');
SELECT transaction_id AS v FROM pgcursor.dead_letters WHERE partition_id = :'p' \gset
SELECT is(:'v'::text, 't14', 'dead letter keeps the transactionId');

-- Counters: explicit vs implicit completions, dead letters.
SELECT pg_temp.setup() AS p \gset
SELECT pg_temp.ack(:'p', NULL, pg_temp.items('completed:11', 'completed:14'));
SELECT pg_temp.ack(:'p', NULL, pg_temp.items('completed:15', 'dlq:18'));
SELECT format('%s/%s/%s/%s', completed_total, implicitly_completed_total, dead_lettered_total, discarded_total) AS v
             FROM pgcursor.cursors WHERE partition_id = :'p' \gset
SELECT is(:'v'::text,
          '8/5/1/0', 'completed 10-17 (8); 10,12,13,16,17 were silent gaps (5 implicit); 18 dead-lettered');

-- A repeat of an offset counts once in the totals: 11, 14 named twice, 16 a gap.
SELECT pg_temp.setup() AS p \gset
SELECT pg_temp.ack(:'p', NULL, pg_temp.items('completed:14', 'completed:11', 'completed:14', 'completed:17'));
SELECT format('%s/%s', completed_total, implicitly_completed_total) AS v
             FROM pgcursor.cursors WHERE partition_id = :'p' \gset
SELECT is(:'v'::text, '8/5', 'completed 10-17 (8); 11, 14, 17 named (14 twice), the other 5 implicit');

-- tally_ack_items (§4-§6) on its own: (ord, index, transactionId, status, error, offset), cursor 9.
CREATE FUNCTION pg_temp.tally(cursor_at bigint, VARIADIC items text[]) RETURNS text LANGUAGE sql AS $$
    SELECT format('N=%s at=%s P=%s named=%s', coalesce(t.nack_at::text, '-'), coalesce(t.nack_status, '-'),
                  t.prefix, t.completed_named)
      FROM pgcursor_internal.tally_ack_items(ARRAY(
               SELECT ROW(x.n, x.n - 1, 't', split_part(x.item, ':', 1), NULL,
                          nullif(split_part(x.item, ':', 2), '')::bigint)::pgcursor_internal.ack_item
                 FROM unnest(items) WITH ORDINALITY x(item, n)), cursor_at) t
$$;
SELECT is(pg_temp.tally(9, 'completed:11', 'completed:14', 'completed:14', 'dlq:18', 'completed:20',
                        'completed:', 'completed:5'),
          'N=18 at=dlq P=14 named=2', 'tally: lowest nack, prefix below it, repeats, unresolved and passed items ignored');
SELECT is(pg_temp.tally(9, 'completed:12', 'completed:12', 'completed:17'),
          'N=- at=- P=17 named=2', 'tally: no nack, the prefix is the highest completed');
SELECT is(pg_temp.tally(9, 'retry:15', 'completed:15', 'failed:15', 'completed:13', 'retry:16'),
          'N=15 at=failed P=13 named=1', 'tally: the strongest status at N; completed at N is not counted');
SELECT is(pg_temp.tally(9, 'completed:15', 'retry:15'),
          'N=15 at=retry P=9 named=0', 'tally: retry outranks completed at one offset');
SELECT is(pg_temp.tally(9, 'failed:14', 'dlq:14', 'completed:12'),
          'N=14 at=dlq P=12 named=1', 'tally: dlq outranks failed at one offset');
SELECT is(pg_temp.tally(9, 'completed:3', 'failed:7'),
          'N=- at=- P=9 named=0', 'tally: items at or below the cursor decide nothing');

-- Lease-less ack while another worker holds the batch; the holder is then refused.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', NULL, pg_temp.items('failed:12'))), 'ok rel', 'lease-less nack releases the holder''s lease');
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('completed:19'))), 'invalid or expired lease rel noop', 'the holder''s later ack is refused');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=1', 'the holder''s refused ack moved nothing');

-- A plain nack's error text is stored nowhere (docs/ack-contract.md §8).
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:15:SECRET-REASON'))), 'ok rel', 'a plain nack within the budget');
SELECT (SELECT count(*) FROM pgcursor.cursors c WHERE c.partition_id = :'p' AND to_jsonb(c)::text LIKE '%SECRET-REASON%')
       + (SELECT count(*) FROM pgcursor.dead_letters d WHERE d.partition_id = :'p')
       + (SELECT count(*) FROM pgcursor.trace_events e WHERE e.partition_id = :'p') AS v \gset
SELECT is(:'v'::bigint, 0::bigint, '... its error text is stored nowhere: not on the cursor row, no dead letter, no trace');

-- An empty string is no reason (§17 R5): the next nack's reason is taken.
SELECT pg_temp.setup(retry_limit => 0) AS p \gset
SELECT pg_temp.ack(:'p', 'L', '[{"transactionId": "t12", "status": "failed", "error": ""},
                                 {"transactionId": "t14", "status": "retry", "error": "second"}]');
SELECT is(pg_temp.dead(:'p'), '12:second:0', 'an empty error at N is no reason: the first non-empty one of the call''s nacks is');

-- Equal strongest items at N all hold and all get dlq: true (§17 R6); the
-- first one's reason is the dead letter's.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('dlq:15:a', 'dlq:15:b', 'failed:15:c'))),
          'ok rel dlq; ok rel dlq; superseded by an earlier nack rel noop',
          'two dlq items at N both hold with dlq: true; the weaker failed at N is superseded');
SELECT is(pg_temp.dead(:'p'), '15:a:0', '... one dead letter, with the first reason in request order');

-- A weaker item at N is superseded and noop, yet its reason counts (R2, R5):
-- it is the first nack at N with an error.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('failed:15:x', 'dlq:15'))),
          'superseded by an earlier nack rel noop; ok rel dlq', 'failed then dlq at N: the dlq item holds, the failed one is superseded');
SELECT is(pg_temp.dead(:'p'), '15:x:0', '... and the superseded item''s reason is the dead letter''s');

-- The budget is counted per (partition, group): another group's failure
-- leaves g's counter alone.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pgcursor.ack_group(jsonb_build_object('partitionId', :'p', 'consumerGroup', 'h',
                                                              'items', pg_temp.items('failed:1')))),
          'ok rel', 'group h fails message 1');
SELECT c.retry_count AS v FROM pgcursor.cursors c WHERE c.partition_id = :'p' AND c.consumer_group = 'h' \gset
SELECT is(:'v'::integer, 1, '... h''s counter is charged');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=L counter=0', '... g''s counter and lease are untouched');

SELECT * FROM finish();
ROLLBACK;
