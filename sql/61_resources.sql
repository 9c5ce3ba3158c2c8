-- Resources: the queue views, the overview and the namespace/task lists behind
-- /api/v1/resources/* (docs/http-api.md "Queue views and deletion"), and the
-- lifetime figures they show.
--
--   SELECT pgcursor.queues_overview();
--   SELECT pgcursor.queues_overview('{"namespace":"shop","limit":10}');
--   SELECT pgcursor.queue_detail('orders');
--   SELECT pgcursor.overview();
--   SELECT pgcursor.namespaces();
--   SELECT pgcursor.tasks();
--   SELECT pgcursor.record_stats_snapshot();   -- housekeeping calls it
--
-- Lifetime figures cost the hot path nothing: messages pushed to a partition
-- = its head (offsets are dense from 1); completed, dead-lettered and
-- discarded = the counters of its cursor rows. Rows that are deleted (a
-- consumer group, a queue with its partitions) leave what they counted in
-- pgcursor.retired_totals, through the two statement-level triggers below.

-- Cursor rows deleted: their counters go to their partition's retired row.
-- Deleted with their queue (a foreign-key cascade), the partition may already
-- be gone here; its own trigger then supplies the queue, whichever runs first.
CREATE OR REPLACE FUNCTION pgcursor_internal.retire_cursor_totals()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.retired_totals AS r (partition_id, queue, completed, dead_lettered, discarded)
    SELECT g.partition_id, min(p.queue), sum(g.completed_total), sum(g.dead_lettered_total),
           sum(g.discarded_total)
    FROM gone g LEFT JOIN pgcursor.partitions p ON p.id = g.partition_id
    GROUP BY g.partition_id
    ON CONFLICT (partition_id) DO UPDATE
       SET queue = coalesce(r.queue, excluded.queue),
           completed = r.completed + excluded.completed,
           dead_lettered = r.dead_lettered + excluded.dead_lettered,
           discarded = r.discarded + excluded.discarded,
           retired_at = now();
    RETURN NULL;
END $$;

-- Partitions deleted (only ever with their queue): their queue, kept for
-- the totals of their cursor rows and heads, whichever trigger fires first.
CREATE OR REPLACE FUNCTION pgcursor_internal.retire_partition_totals()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.retired_totals AS r (partition_id, queue)
    SELECT g.id, g.queue FROM gone g
    ON CONFLICT (partition_id) DO UPDATE SET queue = excluded.queue, retired_at = now();
    RETURN NULL;
END $$;

-- Heads deleted (with their partitions, by the foreign key's cascade): what
-- was pushed there.
CREATE OR REPLACE FUNCTION pgcursor_internal.retire_head_totals()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.retired_totals AS r (partition_id, pushed)
    SELECT g.partition_id, g.head FROM gone g
    ON CONFLICT (partition_id) DO UPDATE SET pushed = r.pushed + excluded.pushed, retired_at = now();
    RETURN NULL;
END $$;

-- The triggers, created once (re-creating them at every start would lock the
-- hot tables against pushes and pops while a gateway bootstraps).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'pgcursor.cursors'::regclass
                                              AND tgname = 'cursors_retire_totals') THEN
        CREATE TRIGGER cursors_retire_totals AFTER DELETE ON pgcursor.cursors
            REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
            EXECUTE FUNCTION pgcursor_internal.retire_cursor_totals();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'pgcursor.partitions'::regclass
                                              AND tgname = 'partitions_retire_totals') THEN
        CREATE TRIGGER partitions_retire_totals AFTER DELETE ON pgcursor.partitions
            REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
            EXECUTE FUNCTION pgcursor_internal.retire_partition_totals();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'pgcursor.partition_heads'::regclass
                                              AND tgname = 'partition_heads_retire_totals') THEN
        CREATE TRIGGER partition_heads_retire_totals AFTER DELETE ON pgcursor.partition_heads
            REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
            EXECUTE FUNCTION pgcursor_internal.retire_head_totals();
    END IF;
END $$;

-- Lifetime totals per queue name: live counters plus retired ones (a queue
-- deleted and created again under its name continues its totals). The queue
-- is null only for retired rows whose queue is not known yet.
CREATE OR REPLACE FUNCTION pgcursor_internal.lifetime_totals()
RETURNS TABLE (queue text, pushed bigint, completed bigint, dead_lettered bigint, discarded bigint)
LANGUAGE sql STABLE AS $$
    SELECT t.queue, sum(t.pushed)::bigint, sum(t.completed)::bigint, sum(t.dead_lettered)::bigint,
           sum(t.discarded)::bigint
    FROM (SELECT p.queue, h.head AS pushed, 0::bigint AS completed, 0::bigint AS dead_lettered,
                 0::bigint AS discarded
          FROM pgcursor.partitions p JOIN pgcursor.partition_heads h ON h.partition_id = p.id
          UNION ALL
          SELECT p.queue, 0, c.completed_total, c.dead_lettered_total, c.discarded_total
          FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
          UNION ALL
          SELECT r.queue, r.pushed, r.completed, r.dead_lettered, r.discarded
          FROM pgcursor.retired_totals r) t
    GROUP BY t.queue
$$;

-- Offsets of a cursor row's live leased batch that it has not completed (0
-- without a live lease): processing counts exactly the leased batch.
CREATE OR REPLACE FUNCTION pgcursor_internal.leased_offsets(c pgcursor.cursors)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN pgcursor_internal.lease_is_live(c.lease_expires_at) AND c.batch_end IS NOT NULL
                THEN greatest(c.batch_end - greatest(c.batch_start - 1, c.cursor), 0)
                ELSE 0 END
$$;

-- Each partition of a queue (of every queue when qname is null) with its
-- head. Its own function so that Citus can read the two tables apart
-- (sql/citus/functions.sql): it refuses their join with cursor_rows().
CREATE OR REPLACE FUNCTION pgcursor_internal.partitions_with_heads(qname text)
RETURNS TABLE (id uuid, queue text, name text, head bigint) LANGUAGE sql STABLE AS $$
    SELECT p.id, p.queue, p.name, h.head
      FROM pgcursor.partitions p JOIN pgcursor.partition_heads h ON h.partition_id = p.id
     WHERE qname IS NULL OR p.queue = qname
$$;

-- Per partition of a queue (of every queue when qname is null):
--   total       messages ever pushed (its head)
--   depth       unconsumed by the slowest group (head - lowest cursor; as partition_depth)
--   pending     the slowest group's unconsumed offsets outside its live
--               lease; with no cursor row, every offset still stored (as
--               partition_depth: retention and eviction move cursors past
--               what they delete, and a partition without one past it too)
--   processing  offsets under a live lease, summed over the groups
--   completed, dead_lettered, discarded: lifetime, over its groups, retired included
CREATE OR REPLACE FUNCTION pgcursor_internal.partition_stats(qname text)
RETURNS TABLE (partition_id uuid, queue text, total bigint, depth bigint, pending bigint, processing bigint,
               completed bigint, dead_lettered bigint, discarded bigint)
LANGUAGE sql STABLE AS $$
    -- (coalesce looks for the first retained message only without a cursor row)
    SELECT p.id, p.queue, p.head,
           p.head - coalesce(min(c.cursor), pgcursor_internal.retained_cursor(p.id, 0)),
           greatest(coalesce(max(p.head - c.cursor - pgcursor_internal.leased_offsets(c)),
                             p.head - pgcursor_internal.retained_cursor(p.id, 0)), 0),
           coalesce(sum(pgcursor_internal.leased_offsets(c)), 0)::bigint,
           coalesce(sum(c.completed_total), 0)::bigint + coalesce(max(r.completed), 0),
           coalesce(sum(c.dead_lettered_total), 0)::bigint + coalesce(max(r.dead_lettered), 0),
           coalesce(sum(c.discarded_total), 0)::bigint + coalesce(max(r.discarded), 0)
    FROM pgcursor_internal.partitions_with_heads(qname) p
    LEFT JOIN pgcursor_internal.cursor_rows() c ON c.partition_id = p.id
    LEFT JOIN pgcursor.retired_totals r ON r.partition_id = p.id
    GROUP BY p.id, p.queue, p.head
$$;

-- Per queue: partitions, and total / depth / pending / processing summed over them.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_stats()
RETURNS TABLE (queue text, partitions bigint, total bigint, depth bigint, pending bigint, processing bigint)
LANGUAGE sql STABLE AS $$
    SELECT s.queue, count(*), sum(s.total)::bigint, sum(s.depth)::bigint, sum(s.pending)::bigint,
           sum(s.processing)::bigint
    FROM pgcursor_internal.partition_stats(NULL) s
    GROUP BY s.queue
$$;

-- The consumer groups that have a cursor on any partition of the queue, sorted.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_groups(qname text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(g ORDER BY g), '[]'::jsonb)
    FROM (SELECT DISTINCT c.consumer_group AS g
          FROM pgcursor.partitions p JOIN pgcursor_internal.cursor_rows() c ON c.partition_id = p.id
          WHERE p.queue = qname) d
$$;

-- queue_groups of every queue that has one, in one pass over the cursor
-- rows (the queue list; on Citus a pass per queue is a distributed query per
-- queue).
CREATE OR REPLACE FUNCTION pgcursor_internal.groups_by_queue()
RETURNS TABLE (queue text, groups jsonb) LANGUAGE sql STABLE AS $$
    SELECT d.queue, jsonb_agg(d.g ORDER BY d.g)
    FROM (SELECT DISTINCT p.queue, c.consumer_group AS g
          FROM pgcursor.partitions p JOIN pgcursor_internal.cursor_rows() c ON c.partition_id = p.id) d
    GROUP BY d.queue
$$;

-- One entry of the queue list: pgcursor's keys, Queen's beside them.
-- groups: the queue's consumer groups (queue_groups), null for none.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_entry(q pgcursor.queues, partitions bigint, total bigint,
                                                         depth bigint, pending bigint, processing bigint,
                                                         groups jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', q.name, 'name', q.name, 'queue', q.name, 'namespace', q.namespace, 'task', q.task,
        'partitions', coalesce(partitions, 0), 'partitionCount', coalesce(partitions, 0),
        'depth', coalesce(depth, 0),
        'messages', jsonb_build_object('total', coalesce(total, 0), 'pending', coalesce(pending, 0),
                                       'processing', coalesce(processing, 0)),
        'consumerGroups', coalesce(groups, '[]'::jsonb),
        'options', pgcursor_internal.queue_options(q),
        'priority', q.priority, 'leaseTime', q.lease_time, 'retryLimit', q.retry_limit,
        'maxSize', q.max_size, 'encryptionEnabled', q.encryption_enabled,
        'createdAt', pgcursor_internal.rfc3339_utc(q.created_at))
$$;

-- A name in lower case for a search that ignores case: by ICU's rules where
-- the server has ICU, since the database's C locale lowers only ASCII
-- letters ("ÄRGER" would not find "ärger"); else by the database's.
DO $$
BEGIN
    EXECUTE format('CREATE OR REPLACE FUNCTION pgcursor_internal.folded(t text) RETURNS text '
                   'LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
                   CASE WHEN EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu')
                        THEN 'SELECT lower(t COLLATE "und-x-icu")' ELSE 'SELECT lower(t)' END);
END $$;

-- queues_overview: {"queues":[...]}, newest queue first (then by name). Each
-- entry: id and name (the queue's name), queue, namespace, task, partitions
-- (= partitionCount), depth, messages {total, pending, processing},
-- consumerGroups, options, the options C reads at the top level, createdAt.
-- Filters, all optional: search (part of the name, any case), namespace,
-- task (exact), limit, offset.
CREATE OR REPLACE FUNCTION pgcursor.queues_overview(req jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    search text := pgcursor_internal.optional_text(req, 'search');
    ns     text := pgcursor_internal.optional_text(req, 'namespace');
    tk     text := pgcursor_internal.optional_text(req, 'task');
    lim    integer := pgcursor_internal.positive_int_arg(req, 'limit', NULL);
    skip   integer := pgcursor_internal.non_negative_int_arg(req, 'offset', 0);
BEGIN
    RETURN jsonb_build_object('queues', (
        SELECT coalesce(jsonb_agg(pgcursor_internal.queue_entry(q, s.partitions, s.total, s.depth, s.pending,
                                                                s.processing, g.groups)
                                  ORDER BY q.created_at DESC, q.name), '[]'::jsonb)
        FROM (SELECT * FROM pgcursor.queues x
              WHERE (search IS NULL OR strpos(pgcursor_internal.folded(x.name), pgcursor_internal.folded(search)) > 0)
                AND (ns IS NULL OR x.namespace = ns) AND (tk IS NULL OR x.task = tk)
              ORDER BY x.created_at DESC, x.name LIMIT lim OFFSET skip) q
        LEFT JOIN pgcursor_internal.queue_stats() s ON s.queue = q.name
        LEFT JOIN pgcursor_internal.groups_by_queue() g ON g.queue = q.name));
END $$;

-- Queen's stats object from total / pending / processing / completed /
-- discarded (Queen's failed) / dead-lettered figures.
CREATE OR REPLACE FUNCTION pgcursor_internal.stats_json(total bigint, pending bigint, processing bigint,
                                                        completed bigint, discarded bigint, dead_lettered bigint)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('total', total, 'pending', pending, 'processing', processing,
                              'completed', completed, 'failed', discarded, 'deadLetter', dead_lettered)
$$;

-- The createdAt of a partition's first and last stored message (null when
-- none is stored) and how many dead letters it holds: index probes, for the
-- queue views. A function of the partition's id, so that on Citus a view's
-- statement over the partitions (a reference table) names no distributed
-- table and runs on the coordinator.
CREATE OR REPLACE FUNCTION pgcursor_internal.stored_span(pid uuid)
RETURNS TABLE (oldest timestamptz, newest timestamptz, dead bigint) LANGUAGE sql STABLE AS $$
    SELECT (SELECT m.created_at FROM pgcursor.messages m WHERE m.partition_id = pid ORDER BY m.msg_offset LIMIT 1),
           (SELECT m.created_at FROM pgcursor.messages m WHERE m.partition_id = pid ORDER BY m.msg_offset DESC LIMIT 1),
           (SELECT count(*) FROM pgcursor.dead_letters d WHERE d.partition_id = pid)
$$;

-- queue_detail: one queue with its options, partitions (each with Queen's
-- stats, oldest/newest message and every group's cursor, lag and whether it
-- holds a live lease) and totals over them. Unknown -> P0002.
CREATE OR REPLACE FUNCTION pgcursor.queue_detail(qname text)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    q pgcursor.queues;
    parts jsonb;
BEGIN
    q := pgcursor_internal.known_queue(qname);
    -- One pass: per partition its stats, its oldest and newest stored
    -- message, and its cursor rows.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', p.id, 'name', p.name, 'partitionId', p.id, 'partition', p.name, 'head', s.total,
               'depth', s.depth, 'createdAt', pgcursor_internal.rfc3339_utc(p.created_at),
               'stats', pgcursor_internal.stats_json(s.total, s.pending, s.processing, s.completed,
                                                     s.discarded, s.dead_lettered),
               'oldestMessage', pgcursor_internal.rfc3339_utc(e.oldest),
               'newestMessage', pgcursor_internal.rfc3339_utc(e.newest),
               'consumerGroups', g.groups)
             ORDER BY p.name), '[]'::jsonb)
    INTO parts
    FROM pgcursor.partitions p
    JOIN pgcursor_internal.partition_stats(qname) s ON s.partition_id = p.id
    CROSS JOIN LATERAL pgcursor_internal.stored_span(p.id) e
    CROSS JOIN LATERAL (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'consumerGroup', c.consumer_group, 'cursor', c.cursor,
                   'lag', s.total - c.cursor, 'leased', pgcursor_internal.lease_is_live(c.lease_expires_at),
                   'retryCount', c.retry_count, 'lastAckAt', pgcursor_internal.rfc3339_utc(c.last_ack_at))
                 ORDER BY c.consumer_group), '[]'::jsonb) AS groups
        FROM pgcursor_internal.cursor_rows() c WHERE c.partition_id = p.id) g
    WHERE p.queue = qname;
    RETURN jsonb_build_object(
        'id', q.name, 'name', q.name, 'queue', q.name, 'namespace', q.namespace, 'task', q.task,
        'options', pgcursor_internal.queue_options(q), 'createdAt', pgcursor_internal.rfc3339_utc(q.created_at),
        'depth', (SELECT coalesce(sum((x ->> 'depth')::bigint), 0) FROM jsonb_array_elements(parts) x),
        'consumerGroups', pgcursor_internal.queue_groups(qname), 'partitions', parts,
        'totals', (SELECT pgcursor_internal.stats_json(
                              coalesce(sum(s.total), 0)::bigint, coalesce(sum(s.pending), 0)::bigint,
                              coalesce(sum(s.processing), 0)::bigint, coalesce(sum(s.completed), 0)::bigint,
                              coalesce(sum(s.discarded), 0)::bigint, coalesce(sum(s.dead_lettered), 0)::bigint)
                   FROM pgcursor_internal.partition_stats(qname) s));
END $$;

-- {avg, median, min, max} of some figures, rounded to 3 decimals; all 0 for none.
CREATE OR REPLACE FUNCTION pgcursor_internal.spread(vs numeric[])
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'avg', coalesce(round(avg(v), 3)::float8, 0),
        'median', coalesce(round((percentile_cont(0.5) WITHIN GROUP (ORDER BY v::float8))::numeric, 3)::float8, 0),
        'min', coalesce(round(min(v), 3)::float8, 0),
        'max', coalesce(round(max(v), 3)::float8, 0))
    FROM unnest(vs) v
$$;

-- The lag figures of the overview, in seconds and in offsets:
--   time    message age at pop over the last 5 minutes, as the gateways
--           counted it (gateway_minutes, per minute and queue): avg over
--           every message popped, max the oldest, median over the
--           per-(minute, queue) averages, min 0 (Queen's).
--   offset  over every (queue, group): the offsets it has not consumed.
-- {avg, median, min, max} each, all 0 when there is nothing to measure.
CREATE OR REPLACE FUNCTION pgcursor_internal.lag_figures()
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$  -- plpgsql: gateway_figures comes later (sql/63_status.sql)
BEGIN
    RETURN (WITH popped AS (
        SELECT g.pop_messages, g.age_sum_ms, g.age_max_ms
        FROM pgcursor_internal.gateway_figures(now() - interval '5 minutes', now(), 1, NULL) g
        WHERE g.pop_messages > 0
    ), behind AS (
        SELECT sum(h.head - c.cursor)::numeric AS v
        FROM pgcursor_internal.cursor_rows() c JOIN pgcursor.partitions p ON p.id = c.partition_id
        JOIN pgcursor.partition_heads h ON h.partition_id = c.partition_id
        GROUP BY p.queue, c.consumer_group
    )
    SELECT jsonb_build_object(
        'time', (SELECT pgcursor_internal.spread(array_agg(p.age_sum_ms / 1000.0 / p.pop_messages))
                        || jsonb_build_object(
                               'avg', coalesce(round(sum(p.age_sum_ms) / 1000.0 / sum(p.pop_messages), 3)::float8, 0),
                               'min', 0,
                               'max', coalesce(round(max(p.age_max_ms) / 1000.0, 3)::float8, 0))
                 FROM popped p),
        'offset', (SELECT pgcursor_internal.spread(array_agg(v)) FROM behind)));
END $$;

-- Messages pushed and completed per second since the newest snapshot at
-- least window_seconds old (pgcursor.record_stats_snapshot):
-- {ingestedPerSecond, processedPerSecond, windowSeconds}; 0 with no such
-- snapshot yet (windowSeconds null).
CREATE OR REPLACE FUNCTION pgcursor_internal.throughput(window_seconds integer)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH base AS (
        SELECT s.minute FROM pgcursor.stats_snapshots s
        WHERE s.minute <= now() - make_interval(secs => window_seconds)
          AND s.taken_at <= now() - make_interval(secs => window_seconds)
        ORDER BY s.minute DESC LIMIT 1
    ), earlier AS (
        SELECT sum(s.pushed) AS pushed, sum(s.completed) AS completed,
               extract(epoch FROM now() - min(s.taken_at)) AS seconds
        FROM pgcursor.stats_snapshots s JOIN base USING (minute)
    ), current AS (  -- the grand totals, as a snapshot's rows add up to them
        SELECT sum(t.pushed) AS pushed, sum(t.completed) AS completed
        FROM pgcursor_internal.lifetime_totals() t
    )
    SELECT jsonb_build_object(
        'ingestedPerSecond',
            coalesce(round(greatest(cur.pushed - e.pushed, 0) / nullif(e.seconds, 0), 3)::float8, 0),
        'processedPerSecond',
            coalesce(round(greatest(cur.completed - e.completed, 0) / nullif(e.seconds, 0), 3)::float8, 0),
        'windowSeconds', round(e.seconds))
    FROM current cur LEFT JOIN earlier e ON true
$$;

-- overview: counts (queues, partitions, namespaces, tasks), messages
-- {total (lifetime pushed), pending, processing, completed (lifetime),
-- failed (lifetime discarded), deadLetter (lifetime dead-lettered)},
-- deadLetters (stored), lag {time, offset}, throughput, timestamp, statsAge
-- (0: computed live).
CREATE OR REPLACE FUNCTION pgcursor.overview()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH life AS (
        SELECT coalesce(sum(t.pushed), 0) AS pushed, coalesce(sum(t.completed), 0) AS completed,
               coalesce(sum(t.dead_lettered), 0) AS dead_lettered, coalesce(sum(t.discarded), 0) AS discarded
        FROM pgcursor_internal.lifetime_totals() t
    ), live AS (
        SELECT coalesce(sum(s.pending), 0) AS pending, coalesce(sum(s.processing), 0) AS processing
        FROM pgcursor_internal.partition_stats(NULL) s
    )
    SELECT jsonb_build_object(
        'queues', (SELECT count(*) FROM pgcursor.queues),
        'partitions', (SELECT count(*) FROM pgcursor.partitions),
        'namespaces', (SELECT count(DISTINCT q.namespace) FROM pgcursor.queues q WHERE q.namespace <> ''),
        'tasks', (SELECT count(DISTINCT q.task) FROM pgcursor.queues q WHERE q.task <> ''),
        'messages', jsonb_build_object('total', life.pushed, 'pending', live.pending,
                                       'processing', live.processing, 'completed', life.completed,
                                       'failed', life.discarded, 'deadLetter', life.dead_lettered),
        'deadLetters', (SELECT count(*) FROM pgcursor.dead_letters),
        'lag', pgcursor_internal.lag_figures(),
        'throughput', pgcursor_internal.throughput(300),
        'timestamp', pgcursor_internal.rfc3339_utc(now()),
        'statsAge', 0)
    FROM life, live
$$;

-- The non-empty namespaces (label 'namespace') or tasks (label 'task'),
-- sorted: [{<label>, queues, partitions, messages {total, pending}}].
CREATE OR REPLACE FUNCTION pgcursor_internal.queues_by_label(label text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               label, x.name, 'queues', x.queues, 'partitions', x.partitions,
               'messages', jsonb_build_object('total', x.total, 'pending', x.pending))
             ORDER BY x.name), '[]'::jsonb)
    FROM (SELECT CASE label WHEN 'namespace' THEN q.namespace ELSE q.task END AS name,
                 count(*) AS queues, coalesce(sum(s.partitions), 0) AS partitions,
                 coalesce(sum(s.total), 0) AS total, coalesce(sum(s.pending), 0) AS pending
          FROM pgcursor.queues q LEFT JOIN pgcursor_internal.queue_stats() s ON s.queue = q.name
          WHERE CASE label WHEN 'namespace' THEN q.namespace ELSE q.task END <> ''
          GROUP BY 1) x
$$;

-- namespaces: {"namespaces":[{namespace, queues, partitions, messages {total, pending}}]}.
CREATE OR REPLACE FUNCTION pgcursor.namespaces()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('namespaces', pgcursor_internal.queues_by_label('namespace'))
$$;

-- tasks: {"tasks":[{task, queues, partitions, messages {total, pending}}]}.
CREATE OR REPLACE FUNCTION pgcursor.tasks()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('tasks', pgcursor_internal.queues_by_label('task'))
$$;

-- record_stats_snapshot: once per minute (later calls in the same minute
-- write nothing), every queue's lifetime totals into pgcursor.stats_snapshots,
-- and those of every queue that no longer exists in one row with a null
-- queue; snapshots older than `keep` are deleted. -> {"minute", "rows"
-- (written), "purged"}. pgcursor.housekeeping() calls it on every run.
CREATE OR REPLACE FUNCTION pgcursor.record_stats_snapshot(keep interval DEFAULT interval '24 hours')
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    this_minute timestamptz := to_timestamp(floor(extract(epoch FROM now()) / 60) * 60);
    written bigint := 0;
    one bigint;
    purged bigint;
    r record;
BEGIN
    keep := pgcursor_internal.keep_arg(keep);
    IF NOT EXISTS (SELECT 1 FROM pgcursor.stats_snapshots s WHERE s.minute = this_minute) THEN
        -- Read, then written row by row: Citus sends an INSERT ... SELECT
        -- into a reference table to a worker, where lifetime_totals' reads
        -- of the distributed tables may not run.
        FOR r IN SELECT q.name, sum(t.pushed) AS pushed, sum(t.completed) AS completed,
                        sum(t.dead_lettered) AS dead_lettered, sum(t.discarded) AS discarded
                   FROM pgcursor_internal.lifetime_totals() t LEFT JOIN pgcursor.queues q ON q.name = t.queue
                  GROUP BY q.name
        LOOP
            INSERT INTO pgcursor.stats_snapshots (minute, queue, taken_at, pushed, completed, dead_lettered, discarded)
            VALUES (this_minute, r.name, now(), r.pushed, r.completed, r.dead_lettered, r.discarded)
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS one = ROW_COUNT;
            written := written + one;
        END LOOP;
    END IF;
    DELETE FROM pgcursor.stats_snapshots s WHERE s.minute < now() - keep;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN jsonb_build_object('minute', pgcursor_internal.rfc3339_utc(this_minute),
                              'rows', written, 'purged', purged);
END $$;
