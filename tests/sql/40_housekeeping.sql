-- The transaction index: a stored message is its own entry while its
-- queue's horizon (transactionIndexRetentionSeconds) covers it; a deleted
-- one's id moves to transaction_index; pgcursor.purge_transaction_index
-- forgets by per-queue retention or an explicit cutoff.
BEGIN;
SELECT plan(20);

-- Push n items tn..t1 into q, message ti created i hours ago (at offset
-- n + 1 - i: createdAt never decreases with the offset, as pushes stamp it).
CREATE FUNCTION pg_temp.aged(q text, n int) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'payload', k, 'transactionId', 't' || k) ORDER BY k DESC)
        FROM generate_series(1, n) k)));
    UPDATE pgcursor.messages m SET created_at = now() - substr(m.transaction_id, 2)::int * interval '1 hour'
    FROM pgcursor.partitions p WHERE p.id = m.partition_id AND p.queue = q;
$$;
-- How many of t1..t40 the queue's Default partition still remembers.
CREATE FUNCTION pg_temp.remembered(q text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM pgcursor.partitions p JOIN pgcursor.queues x ON x.name = p.queue,
           generate_series(1, 40) k,
           LATERAL pgcursor_internal.indexed_message(p.id, 't' || k,
                                                     pgcursor_internal.transaction_index_horizon(
                                                         x.transaction_index_from,
                                                         x.transaction_index_retention_seconds)) i
    WHERE p.queue = q AND p.name = 'Default'
$$;
CREATE FUNCTION pg_temp.index_rows(q text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM pgcursor.transaction_index t JOIN pgcursor.partitions p ON p.id = t.partition_id
    WHERE p.queue = q
$$;
CREATE FUNCTION pg_temp.pushed_again(q text, txid text) RETURNS text LANGUAGE sql AS $$
    SELECT pgcursor.push(jsonb_build_object('items', jsonb_build_array(
               jsonb_build_object('queue', q, 'payload', 'again', 'transactionId', txid)))) -> 0 ->> 'status'
$$;

SELECT FROM pgcursor.configure('{"queue":"t40short","options":{"transactionIndexRetentionSeconds":9000}}');  -- 2.5 h
SELECT FROM pgcursor.configure('{"queue":"t40forever","options":{"transactionIndexRetentionSeconds":0}}');
SELECT FROM pg_temp.aged('t40short', 4);
SELECT FROM pg_temp.aged('t40default', 30);
SELECT FROM pg_temp.aged('t40forever', 30);

-- Stored messages: the clock alone moves the horizon, no purge needed, and a push writes no index row.
SELECT is(pg_temp.index_rows('t40default'), 0, 'a push writes one row: the message is its own entry');
SELECT is(pg_temp.remembered('t40short'), 2, 'short retention: ids older than 2.5 h forgotten');
SELECT is(pg_temp.remembered('t40default'), 24, 'default retention: ids older than 24 h forgotten');
SELECT is(pg_temp.remembered('t40forever'), 30, 'retention 0: remembered forever');
SELECT is(pg_temp.pushed_again('t40short', 't4'), 'queued', 'a forgotten transactionId can be pushed again');
SELECT is(pg_temp.pushed_again('t40short', 't2'), 'duplicate', 'a remembered one is a duplicate');

-- Deleted messages: retention 5.5 h deletes t6..t12; the index (9.5 h) keeps the ids of t6..t9.
SELECT FROM pgcursor.configure('{"queue":"t40gone","options":{"retentionSeconds":19800,
                                  "transactionIndexRetentionSeconds":34200}}');
SELECT FROM pg_temp.aged('t40gone', 12);
SELECT cmp_ok(pgcursor.purge_messages(), '>=', 7::bigint, 'retention deletes t6..t12');
SELECT is(pg_temp.index_rows('t40gone'), 4, 'the ids of deleted messages within the horizon move to the index');
SELECT is(pg_temp.remembered('t40gone'), 9, '... so t1..t9 are remembered, stored or not');
SELECT is(pg_temp.pushed_again('t40gone', 't7'), 'duplicate', 'a deleted, remembered id is still a duplicate');
-- What a transactionId resolves to (docs/ack-contract.md §3; the message
-- detail resolves as an ack does): a deleted message the index remembers,
-- not one past the horizon.
SELECT is(pgcursor.message((SELECT id FROM pgcursor.partitions WHERE queue = 't40gone'), 't8') ->> 'offset', '5',
          'a deleted, remembered id resolves to its offset');
SELECT throws_ok(format('SELECT pgcursor.message(%L, %L)',
                        (SELECT id FROM pgcursor.partitions WHERE queue = 't40gone'), 't12'),
                 'P0002', NULL, 'one deleted past the horizon: not found');
SELECT is(pg_temp.pushed_again('t40gone', 't11'), 'queued', 'a deleted id past the horizon is new');

-- Per-queue purge: the index's retention shortened to 7.5 h forgets t8, t9.
SELECT FROM pgcursor.configure('{"queue":"t40gone","options":{"retentionSeconds":19800,
                                  "transactionIndexRetentionSeconds":27000}}');
SELECT cmp_ok(pgcursor.purge_transaction_index(), '>=', 2::bigint, 'per-queue purge reports what it deleted');
SELECT is(pg_temp.index_rows('t40gone'), 2, 'entries past the queue''s horizon deleted');

-- Explicit cutoff (6.5 h ago): every queue, whatever its retention, stored or deleted.
SELECT cmp_ok(pgcursor.purge_transaction_index(now() - interval '6 hours 30 minutes'), '>=', 1::bigint,
              'cutoff purge reports the entries it deleted');
SELECT is(pg_temp.remembered('t40forever'), 6, 'cutoff applies to a keep-forever queue too');
SELECT is(pg_temp.remembered('t40default'), 6, 'and to every other queue');
SELECT is(pgcursor.purge_transaction_index(now() - interval '6 hours 30 minutes'), 0::bigint, 'nothing left to purge');
-- A cutoff still to come counts as now: a horizon tomorrow forgot, until
-- tomorrow, every id pushed after the call (a push stored duplicates).
SELECT FROM pgcursor.purge_transaction_index(now() + interval '1 day');
SELECT ok((SELECT bool_and(q.transaction_index_from <= clock_timestamp()) FROM pgcursor.queues q),
          'a cutoff tomorrow leaves every queue''s horizon at now, not tomorrow');

SELECT * FROM finish();
ROLLBACK;
