-- createdAt never decreases with the offset in a partition, and lookups by
-- time rely on it: messages keep no index by time, first_offset_at finds
-- the first message at or after a time by a binary search of the offsets.
-- Times are set by hand (UPDATE created_at): now() does not move inside
-- this one transaction.
-- Empty, as a fresh broker's (the earlier files roll back): the plans
-- this file's calls cache are made for a table of a page or two, and must
-- still probe the primary key once it holds 110,000 messages.
VACUUM pgcursor.messages;
BEGIN;
SELECT plan(18);

\ir lib/queue_helpers.sql

\ir lib/messages_reads.sql

CREATE FUNCTION pg_temp.stamp(q text, off bigint) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT created_at FROM pgcursor.messages WHERE partition_id = pg_temp.pid(q) AND msg_offset = off
$$;

-- Pushes, pops and acks while the table is all but empty, past the five
-- calls after which PostgreSQL keeps a generic plan: the plans the hot path
-- keeps for the session are made now (checked after the big run below).
CREATE FUNCTION pg_temp.cycle() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    popped jsonb;
    last jsonb;
BEGIN
    PERFORM pg_temp.push('t22p', 'Default', 2);
    popped := pgcursor.pop('{"queue":"t22p","batch":2}');
    last := popped -> 'messages' -> -1;
    RETURN pgcursor.ack_group(jsonb_build_object(
        'partitionId', last ->> 'partitionId', 'leaseId', popped ->> 'leaseId',
        'items', jsonb_build_array(jsonb_build_object('transactionId', last ->> 'transactionId'))));
END $$;
SELECT pg_temp.cycle() FROM generate_series(1, 8);

-- push_stamps: a push stamps now, or its partition's newest createdAt when
-- that is later (a clock stepped back, a transaction older than the last push).
SELECT pg_temp.push('t22s', 'Default', 2);
SELECT is(pg_temp.stamp('t22s', 2), now(), 'a push stamps its messages now');
UPDATE pgcursor.messages SET created_at = now() + interval '1 hour'
 WHERE partition_id = pg_temp.pid('t22s') AND msg_offset = 2;
SELECT pg_temp.push('t22s', 'Default', 2);
SELECT is(ARRAY[pg_temp.stamp('t22s', 3), pg_temp.stamp('t22s', 4)],
          ARRAY[now() + interval '1 hour', now() + interval '1 hour'],
          'after a later-stamped newest message, a push takes its createdAt, not an earlier one');
SELECT pg_temp.push('t22t', 'Default', 1);
SELECT is(pg_temp.stamp('t22t', 1), now(), 'another partition is not held to it');
SELECT is((SELECT count(*) FROM pgcursor.push_items(ARRAY['t22s', 't22s'], ARRAY['1', '2']::jsonb[],
                                                     NULL, ARRAY['x1', 'x2'])),
          2::bigint, 'push_items with transactionIds (the other write path)');
SELECT is(pg_temp.stamp('t22s', 6), now() + interval '1 hour', '... stamps the same way');

-- first_offset_at against the rule it replaces, min(offset) with createdAt
-- at or after the time: 40 messages one second apart, every third deleted
-- (retention and deletes leave gaps), every time from before the first to
-- after the last, and every lower bound `after`.
SELECT pg_temp.push('t22b', 'Default', 40);
UPDATE pgcursor.messages SET created_at = '2026-01-01 00:00:00Z'::timestamptz + msg_offset * interval '1 second'
 WHERE partition_id = pg_temp.pid('t22b');
DELETE FROM pgcursor.messages WHERE partition_id = pg_temp.pid('t22b') AND msg_offset % 3 = 0;
CREATE TEMP TABLE probes ON COMMIT DROP AS
    SELECT t, a,
           pgcursor_internal.first_offset_at(pg_temp.pid('t22b'), t, a) AS found,
           (SELECT min(m.msg_offset) FROM pgcursor.messages m
             WHERE m.partition_id = pg_temp.pid('t22b') AND m.msg_offset > a AND m.created_at >= t) AS wanted
      FROM generate_series('2026-01-01 00:00:00Z'::timestamptz, '2026-01-01 00:00:42Z', interval '500 ms') t,
           generate_series(0, 41) a;
SELECT is((SELECT count(*) FROM probes WHERE found IS DISTINCT FROM wanted), 0::bigint,
          'first_offset_at agrees with min(offset) at every time and lower bound (3,570 probes)');
SELECT is((SELECT count(*) FROM probes WHERE found IS NOT NULL), 3240::bigint,
          '... of which 3,240 find a message (the rest: none at or after the time)');
SELECT is(pgcursor_internal.first_offset_at(pg_temp.pid('t22b'), '-infinity'), 1::bigint, 'before everything: the first');
SELECT is(pgcursor_internal.first_offset_at(pg_temp.pid('t22b'), 'infinity'), NULL::bigint, 'after everything: none');
SELECT is(pgcursor_internal.first_offset_at(pg_temp.pid('t22b'), '2026-01-01 00:00:05Z'), 5::bigint,
          'a message created exactly at the time is found');
SELECT is(pgcursor_internal.first_offset_at(pg_temp.pid('t22b'), '2026-01-01 00:00:06Z'), 7::bigint,
          'a deleted offset is stepped over');
SELECT is(pgcursor_internal.first_offset_at(pg_temp.pid('t22x'), now()), NULL::bigint,
          'a partition without messages: none');

-- A big partition is searched, not read: 100,000 offsets, a handful of reads.
INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, created_at)
SELECT pg_temp.pid('t22b'), 100 + k, 'big-' || k, '1', '2026-01-02 00:00:00Z'::timestamptz + k * interval '1 ms'
  FROM generate_series(1, 100000) k;
CREATE TEMP TABLE before_search ON COMMIT DROP AS SELECT pg_temp.messages_read('entries') AS read;
SELECT is(pgcursor_internal.first_offset_at(pg_temp.pid('t22b'), '2026-01-02 00:00:50Z'), 50100::bigint,
          'the first message at 50 s into the big run');
SELECT cmp_ok(pg_temp.messages_read('entries') - b.read, '<=', 40::bigint,
              '... found reading at most 40 rows (a binary search: about 2 + log2(100,000))') FROM before_search b;

CREATE TEMP TABLE before_cycle ON COMMIT DROP AS SELECT pg_temp.messages_read('entries') AS read;
SELECT is(pg_temp.cycle() -> 0 ->> 'success', 'true', 'a push, pop and ack of 2 messages after the big run');
SELECT cmp_ok(pg_temp.messages_read('entries') - b.read, '<=', 100::bigint,
              '... reading a few rows, not the table: plans made while it was empty probe the keys')
  FROM before_cycle b;

-- status_analytics counts a window's messages from their offset range:
-- 10,000 messages a second apart, one minute asked for, the rows read are
-- that minute's and the searches', not the partition's.
SELECT pg_temp.push('t22a', 'Default', 1);
DELETE FROM pgcursor.messages WHERE partition_id = pg_temp.pid('t22a');
INSERT INTO pgcursor.messages (partition_id, msg_offset, transaction_id, payload, created_at)
SELECT pg_temp.pid('t22a'), k, 'a-' || k, '1', '2026-01-03 00:00:00Z'::timestamptz + k * interval '1 second'
  FROM generate_series(1, 10000) k;
CREATE TEMP TABLE before_analytics ON COMMIT DROP AS SELECT pg_temp.messages_read('entries') AS read;
SELECT is(pgcursor.status_analytics('{"queue":"t22a","interval":"minute",
                                      "from":"2026-01-03T01:00:00Z","to":"2026-01-03T01:00:30Z"}') -> 'dataPoints',
          '[{"timestamp":"2026-01-03T01:00:00Z","messages":60}]', 'status_analytics: the minute''s 60 messages');
SELECT cmp_ok(pg_temp.messages_read('entries') - b.read, '<=', 200::bigint,
              '... read from their offset range: at most 200 rows of the 10,000') FROM before_analytics b;

SELECT * FROM finish();
ROLLBACK;
