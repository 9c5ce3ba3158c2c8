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
SELECT is((SELECT array_agg((d ->> 'messages')::bigint ORDER BY d ->> 'timestamp')
             FROM jsonb_array_elements(pgcursor.status_analytics(
                      '{"queue": "citus_analytics", "from": "2026-01-05T00:00:00Z", "to": "2026-01-05T05:59:00Z"}')
                      -> 'dataPoints') d),
          (SELECT array_agg(n ORDER BY h)
             FROM (SELECT date_trunc('hour', m.created_at AT TIME ZONE 'UTC') AS h, count(*) AS n
                     FROM pgcursor.messages m WHERE m.partition_id = (SELECT id FROM part)
                      AND m.created_at < '2026-01-05 06:00:00Z' GROUP BY 1) x),
          'six hours of 300 messages (299 in the first), counted per hour as the table has them');
SELECT is(pg_stat_get_xact_function_calls('pgcursor_internal.first_offset_at'::regproc) - :before, 2::bigint,
          '... with two searches, the window''s ends: none per hour');

SELECT * FROM finish();
ROLLBACK;
