-- status_analytics counts a window's messages along the primary key: an
-- interval's first offset by binary search, its messages by an index-only
-- count, no stored row read per message. An index-only count skips the
-- table only on pages the visibility map marks all-visible, which rows
-- inserted by the test's own transaction never are: so the partition is
-- committed and vacuumed first, and its queue deleted at the end.
SELECT FROM pgcursor.push('{"items": [{"queue": "t23a", "payload": 0}]}');
DELETE FROM pgcursor.messages WHERE partition_id = (SELECT id FROM pgcursor.partitions WHERE queue = 't23a');
-- 20,000 messages a second apart: 2026-01-04 00:00:01 to 05:33:20.
INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, created_at)
SELECT p.id, k, 't23-' || k, '1', '2026-01-04 00:00:00Z'::timestamptz + k * interval '1 second'
  FROM pgcursor.partitions p, generate_series(1, 20000) k
 WHERE p.queue = 't23a';
UPDATE pgcursor.partition_heads SET head = 20000
 WHERE partition_id = (SELECT id FROM pgcursor.partitions WHERE queue = 't23a');
VACUUM pgcursor.messages;

BEGIN;
SELECT plan(4);

\ir lib/messages_reads.sql

CREATE TEMP TABLE before_hours ON COMMIT DROP AS SELECT pg_temp.messages_read('rows') AS n;
SELECT is(pgcursor.status_analytics('{"queue": "t23a", "from": "2026-01-04T00:00:00Z", "to": "2026-01-04T05:59:00Z"}')
          -> 'dataPoints',
          '[{"timestamp": "2026-01-04T00:00:00Z", "messages": 3599}, {"timestamp": "2026-01-04T01:00:00Z", "messages": 3600},
            {"timestamp": "2026-01-04T02:00:00Z", "messages": 3600}, {"timestamp": "2026-01-04T03:00:00Z", "messages": 3600},
            {"timestamp": "2026-01-04T04:00:00Z", "messages": 3600}, {"timestamp": "2026-01-04T05:00:00Z", "messages": 2001}]',
          'six hours of 20,000 messages, counted per hour');
SELECT cmp_ok(pg_temp.messages_read('rows') - b.n, '<', 300::bigint,
              '... visiting under 300 of the rows (the searches''), not 20,000') FROM before_hours b;

-- Minutes of 60 messages, fewer than a search costs (about 13 rows a
-- probe, 2 + log2(20,000) probes): read and grouped instead.
CREATE TEMP TABLE before_minutes ON COMMIT DROP AS SELECT pg_temp.messages_read('rows') AS n;
SELECT is(pgcursor.status_analytics('{"queue": "t23a", "interval": "minute",
                                      "from": "2026-01-04T01:00:00Z", "to": "2026-01-04T01:02:10Z"}') -> 'dataPoints',
          '[{"timestamp": "2026-01-04T01:00:00Z", "messages": 60}, {"timestamp": "2026-01-04T01:01:00Z", "messages": 60},
            {"timestamp": "2026-01-04T01:02:00Z", "messages": 60}]',
          'three minutes of 180 messages, counted per minute');
SELECT cmp_ok(pg_temp.messages_read('rows') - b.n, '<', 300::bigint,
              '... visiting the 180 rows and the window''s two searches: under 300') FROM before_minutes b;

SELECT * FROM finish();
ROLLBACK;

SELECT FROM pgcursor.delete_queue('t23a');
