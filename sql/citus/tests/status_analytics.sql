-- make test-citus: status analytics on Citus reads a partition's window
-- rather than searching each interval's first offset, since every probe of
-- a search is a round trip to a worker (rows_per_probe, replaced in
-- sql/citus/functions.sql). 300 messages an hour for six hours: one
-- PostgreSQL would search each hour (a search there costs about 170 rows
-- of a partition this size); here the rows are read.
BEGIN;
SELECT plan(3);
SET LOCAL track_functions = 'pl';

SELECT FROM pgcursor.push('{"items": [{"queue": "citus_analytics", "payload": 0}]}');
CREATE TEMP TABLE part ON COMMIT DROP AS SELECT id FROM pgcursor.partitions WHERE queue = 'citus_analytics';
DELETE FROM pgcursor.messages WHERE partition_id = (SELECT id FROM part);
-- 1,800 messages 12 s apart: 2026-01-05 00:00:12 to 06:00:00.
INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, created_at)
SELECT (SELECT id FROM part), k, 'c-' || k, '1', '2026-01-05 00:00:00Z'::timestamptz + k * interval '12 seconds'
  FROM generate_series(1, 1800) k;
UPDATE pgcursor.partition_heads SET head = 1800 WHERE partition_id = (SELECT id FROM part);

SELECT is(pgcursor_internal.rows_per_probe(), 250, 'a probe weighs as 250 rows read, not 13');

SELECT coalesce(pg_stat_get_xact_function_calls('pgcursor_internal.first_offset_at'::regproc), 0) AS before \gset
SELECT is(pgcursor.status_analytics('{"queue": "citus_analytics", "from": "2026-01-05T00:00:00Z", "to": "2026-01-05T05:59:00Z"}')
          -> 'dataPoints',
          '[{"timestamp": "2026-01-05T00:00:00Z", "messages": 299}, {"timestamp": "2026-01-05T01:00:00Z", "messages": 300},
            {"timestamp": "2026-01-05T02:00:00Z", "messages": 300}, {"timestamp": "2026-01-05T03:00:00Z", "messages": 300},
            {"timestamp": "2026-01-05T04:00:00Z", "messages": 300}, {"timestamp": "2026-01-05T05:00:00Z", "messages": 300}]',
          'six hours of 300 messages, counted per hour');
SELECT is(pg_stat_get_xact_function_calls('pgcursor_internal.first_offset_at'::regproc) - :before, 2::bigint,
          '... with two searches, the window''s ends: none per hour');

SELECT * FROM finish();
ROLLBACK;
