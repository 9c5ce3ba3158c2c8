-- The resource views' figures (docs/http-api.md "Queue views and deletion"):
-- per partition stats, lifetime totals kept through deletes by the
-- retired-totals triggers, the per-minute snapshots and the throughput
-- computed from them, the lag figures, namespaces and tasks.
BEGIN;
-- one snapshot for the whole file: concurrent sessions change nothing here
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SELECT plan(41);

\ir lib/queue_helpers.sql
CREATE FUNCTION pg_temp.life(q text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(t) - 'queue' FROM pgcursor_internal.lifetime_totals() t WHERE t.queue = q
$$;
CREATE FUNCTION pg_temp.stats(q text, part text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(s) - 'partition_id' - 'queue' FROM pgcursor_internal.partition_stats(q) s
    WHERE s.partition_id = pg_temp.pid(q, part)
$$;

-- A clean slate inside this transaction (rolled back at the end): only this
-- file's queues, no retired totals, no snapshots, so every global figure is exact.
DELETE FROM pgcursor.queues;
DELETE FROM pgcursor.retired_totals;
DELETE FROM pgcursor.stats_snapshots;

-- Fixture: t35 partition a (5 messages) and b (2); t35x (1 message).
SELECT pgcursor.configure('{"queue":"t35","namespace":"shop","task":"ship"}');
SELECT pgcursor.configure('{"queue":"t35x","namespace":"shop","task":""}');
SELECT pgcursor.configure('{"queue":"t35y","namespace":"","task":"bill"}');
SELECT pg_temp.push('t35', 'a', 5), pg_temp.push('t35', 'b', 2), pg_temp.push('t35x', 'Default', 1);

-- per partition: pending (slowest group, outside its lease), processing (exact)
SELECT is(pg_temp.stats('t35', 'a'),
          '{"total":5,"depth":5,"pending":5,"processing":0,"completed":0,"dead_lettered":0,"discarded":0}',
          'no group yet: every offset pending');
SELECT FROM pg_temp.pop('t35', 'a', 'fast', 4, true);      -- fast completes 1..4
SELECT FROM pg_temp.pop('t35', 'a', 'slow', 3);            -- slow leases 1..3
SELECT is(pg_temp.stats('t35', 'a'),
          '{"total":5,"depth":5,"pending":2,"processing":3,"completed":4,"dead_lettered":0,"discarded":0}',
          'pending: the slowest group''s 5 less its 3 leased; processing: the leased batch; completed: lifetime');
SELECT FROM pg_temp.pop('t35', 'a', 'fast', 1, false);     -- fast leases 5
SELECT pgcursor_internal.materialize_cursors();             -- fast's and slow's rows on b, at 0
SELECT is(pg_temp.stats('t35', 'a') -> 'processing', '4', 'processing sums every group''s live lease');
UPDATE pgcursor.cursors SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = pg_temp.pid('t35', 'a');
SELECT is(pg_temp.stats('t35', 'a') - 'completed' - 'dead_lettered' - 'discarded',
          '{"total":5,"depth":5,"pending":5,"processing":0}', 'an expired lease is pending again');
SELECT is(pgcursor_internal.leased_offsets(ROW(gen_random_uuid(), 'g', 3, gen_random_uuid(), now() + interval '1 minute',
                                              2, 5, 0, 0, 0, 0, 0, NULL, now(), 0)::pgcursor.cursors),
          2::bigint, 'leased offsets: only those of the batch above the cursor');

-- queues_overview: Queen's fields, newest first, filters
SELECT is((SELECT jsonb_agg(x ->> 'name') FROM jsonb_array_elements(pgcursor.queues_overview() -> 'queues') x),
          '["t35","t35x","t35y"]'::jsonb, 'one transaction, one created_at: by name');
UPDATE pgcursor.queues SET created_at = now() - interval '1 hour' WHERE name = 't35';
SELECT is((SELECT jsonb_agg(x ->> 'name') FROM jsonb_array_elements(pgcursor.queues_overview() -> 'queues') x),
          '["t35x","t35y","t35"]'::jsonb, 'newest first');
SELECT is((SELECT x -> 'messages' FROM jsonb_array_elements(pgcursor.queues_overview() -> 'queues') x
           WHERE x ->> 'name' = 't35'),
          '{"total":7,"pending":7,"processing":0}', 'queue messages: total, pending, processing');
SELECT is((SELECT jsonb_build_object('id', x -> 'id', 'partitionCount', x -> 'partitionCount', 'leaseTime', x -> 'leaseTime',
                                     'retryLimit', x -> 'retryLimit', 'priority', x -> 'priority', 'maxSize', x -> 'maxSize',
                                     'encryptionEnabled', x -> 'encryptionEnabled')
           FROM jsonb_array_elements(pgcursor.queues_overview() -> 'queues') x WHERE x ->> 'name' = 't35'),
          '{"id":"t35","partitionCount":2,"leaseTime":300,"retryLimit":3,"priority":0,"maxSize":0,"encryptionEnabled":false}',
          'id and the options C reads at the top level');
SELECT is((SELECT jsonb_agg(x ->> 'name') FROM jsonb_array_elements(pgcursor.queues_overview(
               '{"search":"T35X"}') -> 'queues') x), '["t35x"]', 'search: part of the name, any case');
SELECT is((SELECT jsonb_agg(x ->> 'name') FROM jsonb_array_elements(pgcursor.queues_overview(
               '{"namespace":"shop","task":"ship"}') -> 'queues') x), '["t35"]', 'namespace and task: exact');
SELECT is((SELECT jsonb_agg(x ->> 'name') FROM jsonb_array_elements(pgcursor.queues_overview(
               '{"limit":"1","offset":"1"}') -> 'queues') x), '["t35y"]', 'limit and offset');
SELECT pgcursor.configure('{"queue": "t35-ärger-ζ"}') IS NOT NULL AS configured \gset
SELECT is((SELECT jsonb_agg(x ->> 'name') FROM jsonb_array_elements(pgcursor.queues_overview(
               '{"search":"ÄRGER-Ζ"}') -> 'queues') x), '["t35-ärger-ζ"]', 'search: any case of any letter, not only ASCII');
SELECT throws_ok($$SELECT pgcursor.queues_overview('{"limit":0}')$$, '22023', 'limit must be a positive integer',
                 'a bad limit: 22023');
SELECT throws_ok($$SELECT pgcursor.queues_overview('{"search":5}')$$, '22023', 'search must be a string',
                 'a non-string filter: 22023');

-- queue_detail: per partition stats, oldest/newest stored message, totals
UPDATE pgcursor.messages SET created_at = now() - (10 - msg_offset) * interval '1 minute'
 WHERE partition_id = pg_temp.pid('t35', 'a');
SELECT is((SELECT jsonb_build_object('id', p -> 'id' = to_jsonb(pg_temp.pid('t35', 'a')), 'name', p -> 'name',
                                     'oldest', p -> 'oldestMessage', 'newest', p -> 'newestMessage')
           FROM jsonb_array_elements(pgcursor.queue_detail('t35') -> 'partitions') p WHERE p ->> 'name' = 'a'),
          jsonb_build_object('id', true, 'name', 'a',
                             'oldest', pgcursor_internal.rfc3339_utc(now() - interval '9 minutes'),
                             'newest', pgcursor_internal.rfc3339_utc(now() - interval '5 minutes')),
          'partition id, name, oldest and newest stored message');
SELECT is(pgcursor.queue_detail('t35') -> 'totals',
          '{"total":7,"pending":7,"processing":0,"completed":4,"failed":0,"deadLetter":0}', 'totals over the partitions');
DELETE FROM pgcursor.messages WHERE partition_id = pg_temp.pid('t35', 'b');
SELECT is((SELECT jsonb_build_array(p -> 'oldestMessage', p -> 'newestMessage')
           FROM jsonb_array_elements(pgcursor.queue_detail('t35') -> 'partitions') p WHERE p ->> 'name' = 'b'),
          '[null,null]', 'no stored message: null');

-- lag: message age at pop over the last 5 minutes, from the gateways'
-- per-minute figures; offsets behind per (queue, group)
DELETE FROM pgcursor.gateway_minutes;
SELECT is(pgcursor_internal.lag_figures() -> 'time', '{"avg":0,"median":0,"min":0,"max":0}',
          'no pops in the last 5 minutes: zeros');
SELECT pgcursor.record_gateway_minutes(format(
    '[{"minute": %s, "queue": "t35", "popRequests": 1, "popMessages": 2, "ageSumMs": 1000, "ageMaxMs": 700},
      {"minute": %s, "queue": "t35b", "popRequests": 1, "popMessages": 1, "ageSumMs": 4000, "ageMaxMs": 4000},
      {"minute": %s, "queue": "t35", "popRequests": 1, "popMessages": 0},
      {"minute": %s, "queue": "t35", "popRequests": 1, "popMessages": 1, "ageSumMs": 90000, "ageMaxMs": 90000}]',
    extract(epoch FROM date_trunc('minute', now()))::bigint,
    extract(epoch FROM date_trunc('minute', now()) - interval '1 minute')::bigint,
    extract(epoch FROM date_trunc('minute', now()) - interval '2 minutes')::bigint,
    extract(epoch FROM date_trunc('minute', now()) - interval '10 minutes')::bigint)::jsonb);
SELECT is(pgcursor_internal.lag_figures(),
          '{"time":{"avg":1.667,"median":2.25,"min":0,"max":4},"offset":{"avg":5,"median":5,"min":3,"max":7}}',
          'ages of the 3 messages popped in the last 5 minutes (not the 10-minute-old pop); 3 and 7 behind');
SELECT is(pgcursor_internal.spread('{}'), '{"avg":0,"median":0,"min":0,"max":0}', 'nothing to measure: zeros');

-- retired totals: deleting a group keeps what it counted
SELECT is(ARRAY(SELECT format('%s.%s %s', c.relname, t.tgname, CASE WHEN t.tgtype & 1 = 1 THEN 'row' ELSE 'statement' END)
                FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                WHERE t.tgname LIKE '%retire_totals' ORDER BY 1),
          '{"cursors.cursors_retire_totals statement","partition_heads.partition_heads_retire_totals statement","partitions.partitions_retire_totals statement"}'::text[],
          'one statement-level trigger on each of cursors, partition_heads and partitions (no per-row work)');
SELECT is(pg_temp.life('t35'), '{"pushed":7,"completed":4,"dead_lettered":0,"discarded":0}', 'lifetime totals of t35');
DELETE FROM pgcursor.cursors WHERE consumer_group = 'fast';
SELECT is(pg_temp.life('t35'), '{"pushed":7,"completed":4,"dead_lettered":0,"discarded":0}',
          'a group deleted: lifetime completed unchanged');
SELECT is((SELECT jsonb_build_array(r.queue, r.completed, r.pushed) FROM pgcursor.retired_totals r
           WHERE r.partition_id = pg_temp.pid('t35', 'a')),
          '["t35",4,0]', 'its counters are retired on its partition');
SELECT is(pg_temp.stats('t35', 'a') -> 'completed', '4', 'and still count in the partition''s stats');
-- a queue deleted (both cascaded triggers, in whichever order) keeps them too
SELECT pgcursor.delete_queue('t35');
SELECT is(pg_temp.life('t35'), '{"pushed":7,"completed":4,"dead_lettered":0,"discarded":0}',
          'the queue deleted: its lifetime totals stay, under its name');
SELECT is((SELECT count(*) FROM pgcursor.retired_totals WHERE queue IS NULL), 0::bigint,
          'every retired row knows its queue');
SELECT FROM pg_temp.pop('t35x', 'Default', 'g', 1, true);
DELETE FROM pgcursor.partitions WHERE queue = 't35x';      -- a raw delete: the cascade to cursors
SELECT is(pg_temp.life('t35x'), '{"pushed":1,"completed":1,"dead_lettered":0,"discarded":0}',
          'partitions deleted by hand: pushed and the cascaded cursors'' counters retired');
SELECT is(pgcursor.overview() -> 'messages',
          '{"total":8,"pending":0,"processing":0,"completed":5,"failed":0,"deadLetter":0}',
          'overview: lifetime totals survive every delete');

-- snapshots: once a minute, bounded
SELECT pg_temp.push('t35y', 'Default', 3);
INSERT INTO pgcursor.stats_snapshots VALUES (now() - interval '25 hours', 'old', now() - interval '25 hours', 1, 1, 0, 0);
SELECT is(pgcursor.record_stats_snapshot() - 'minute', '{"rows":3,"purged":1}',
          'a snapshot row per existing queue and one for the deleted ones; older than 24 h purged');
SELECT is(pgcursor.record_stats_snapshot() - 'minute', '{"rows":0,"purged":0}', 'the same minute again: nothing');
SELECT throws_ok($$SELECT pgcursor.record_stats_snapshot(interval '-1 day')$$, '22023',
                 'keep must be an interval above 0 and at most 100 years', 'a negative keep purges nothing: 22023');
SELECT is((SELECT jsonb_agg(jsonb_build_array(queue, pushed, completed) ORDER BY queue) FROM pgcursor.stats_snapshots),
          '[["t35x",1,1],["t35y",3,0],[null,7,4]]',
          'each queue''s lifetime totals at that minute; t35, deleted, in the null row');

-- throughput: (now's totals - the newest snapshot at least 5 minutes old) / its age
SELECT is(pgcursor_internal.throughput(300), '{"ingestedPerSecond":0,"processedPerSecond":0,"windowSeconds":null}',
          'no snapshot 5 minutes old yet: 0');
-- the base: this minute's rows, made 10 minutes old with 600 fewer pushed and
-- 300 fewer completed; a 3-minute-old one that must not be used
INSERT INTO pgcursor.stats_snapshots
SELECT to_timestamp(floor(extract(epoch FROM now() - interval '10 minutes') / 60) * 60), s.queue,
       now() - interval '10 minutes', s.pushed - CASE s.queue WHEN 't35y' THEN 600 ELSE 0 END,
       s.completed - CASE WHEN s.queue IS NULL THEN 300 ELSE 0 END, 0, 0
FROM pgcursor.stats_snapshots s;
INSERT INTO pgcursor.stats_snapshots
SELECT to_timestamp(floor(extract(epoch FROM now() - interval '3 minutes') / 60) * 60), NULL,
       now() - interval '3 minutes', 0, 0, 0, 0;
SELECT is(pgcursor_internal.throughput(300),
          '{"ingestedPerSecond":1,"processedPerSecond":0.5,"windowSeconds":600}',
          '600 pushed and 300 completed in 600 s; the 3-minute-old snapshot is too young');
SELECT is(pgcursor.overview() -> 'throughput', pgcursor_internal.throughput(300), 'the overview''s throughput');

-- namespaces and tasks: non-empty names, sorted
SELECT pgcursor.configure('{"queue":"t35z","namespace":"alpha"}');
SELECT is(pgcursor.namespaces(),
          '{"namespaces":[{"namespace":"alpha","queues":1,"partitions":0,"messages":{"total":0,"pending":0}},
                          {"namespace":"shop","queues":1,"partitions":0,"messages":{"total":0,"pending":0}}]}',
          'namespaces, sorted: t35y''s empty one left out (t35x has lost its partitions)');
SELECT is(pgcursor.tasks(),
          '{"tasks":[{"task":"bill","queues":1,"partitions":1,"messages":{"total":3,"pending":3}}]}',
          'tasks');

-- Retention empties a partition no group reads: what it deleted is no
-- longer pending (as maxSize's partition_depth counts), so a depth alert on
-- a buffer queue clears. (It stayed at the head: 3 for ever.)
SELECT pgcursor.configure('{"queue":"t35r","options":{"retentionSeconds":60}}');
SELECT pg_temp.push('t35r', 'a', 3);
SELECT is(pgcursor.purge_messages(now() + interval '1 second'), 3::bigint, 'retention deletes the 3 messages');
SELECT is(pg_temp.stats('t35r', 'a') - 'completed' - 'dead_lettered' - 'discarded',
          '{"total":3,"depth":0,"pending":0,"processing":0}',
          'a partition without groups that retention emptied: nothing pending, total kept');

SELECT * FROM finish();
ROLLBACK;
