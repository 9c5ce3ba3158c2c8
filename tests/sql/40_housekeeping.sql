-- pgcursor.purge_transaction_index: explicit cutoff and per-queue retention.
BEGIN;
SELECT plan(10);

CREATE FUNCTION pg_temp.index_rows(q text) RETURNS int LANGUAGE sql AS $$
    SELECT count(*)::int FROM pgcursor.transaction_index t JOIN pgcursor.partitions p ON p.id = t.partition_id
    WHERE p.queue = q
$$;
-- Push n items t1..tn into q and age their index rows: ti created i hours ago.
CREATE FUNCTION pg_temp.aged(q text, n int) RETURNS void LANGUAGE sql AS $$
    SELECT FROM pgcursor.push(jsonb_build_object('items', (
        SELECT jsonb_agg(jsonb_build_object('queue', q, 'payload', k, 'transactionId', 't' || k))
        FROM generate_series(1, n) k)));
    UPDATE pgcursor.transaction_index t SET created_at = now() - substr(t.transaction_id, 2)::int * interval '1 hour'
    FROM pgcursor.partitions p WHERE p.id = t.partition_id AND p.queue = q;
$$;

SELECT FROM pgcursor.configure('{"queue":"t40short","options":{"transactionIndexRetentionSeconds":9000}}');  -- 2.5 h
SELECT FROM pgcursor.configure('{"queue":"t40forever","options":{"transactionIndexRetentionSeconds":0}}');
SELECT FROM pg_temp.aged('t40short', 4);
SELECT FROM pg_temp.aged('t40default', 30);
SELECT FROM pg_temp.aged('t40forever', 30);

-- per-queue retention: t40short keeps t1, t2; t40default (86400 s) keeps t1..t24; t40forever keeps all.
-- (>=: the count covers the whole database; the per-queue checks below are exact.)
SELECT cmp_ok(pgcursor.purge_transaction_index(), '>=', 2::bigint + 6, 'per-queue purge reports what it deleted');
SELECT is(pg_temp.index_rows('t40short'), 2, 'short retention: rows older than 2.5 h purged');
SELECT is(pg_temp.index_rows('t40default'), 24, 'default retention: rows older than 24 h purged');
SELECT is(pg_temp.index_rows('t40forever'), 30, 'retention 0: kept forever');
SELECT is((SELECT count(*)::int FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
           WHERE p.queue = 't40short'), 4, 'messages are not touched');

-- explicit cutoff: every queue, whatever its retention
SELECT cmp_ok(pgcursor.purge_transaction_index(now() - interval '10 hours 30 minutes'), '>=', 14::bigint + 20,
              'cutoff purge reports what it deleted');
SELECT is(pg_temp.index_rows('t40forever'), 10, 'cutoff applies to a keep-forever queue too');
SELECT is(pg_temp.index_rows('t40default'), 10, 'and to every other queue');
SELECT is(pgcursor.purge_transaction_index(now() - interval '10 hours 30 minutes'), 0::bigint, 'nothing left to purge');

-- a purged transactionId is no longer a duplicate
SELECT is(pgcursor.push('{"items":[{"queue":"t40short","payload":"again","transactionId":"t4"}]}') -> 0
          -> 'status', '"queued"', 'a purged transactionId can be pushed again');

SELECT * FROM finish();
ROLLBACK;
