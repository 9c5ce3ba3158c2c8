-- The message browser (docs/http-api.md "Message browser"): the listing with
-- each message's status, and deleting one message with everything that names
-- it. The detail (pgcursor.message) is in sql/60_inspect.sql and uses the
-- status helpers here.
--
--   SELECT pgcursor.list_messages('{"queue":"orders","status":"pending","limit":"50"}');
--   SELECT pgcursor.delete_message('0190...'::uuid, 'order-42');

-- Where the consumers of a partition stand, as the statuses need it:
-- has_queue_mode: a __QUEUE_MODE__ cursor row exists; queue_cursor its
-- cursor; lease_from..lease_to its leased batch while the lease is live
-- (exactly those offsets are processing), lease_expires_at its lease expiry,
-- live or not; bus_groups the named groups with a cursor row; bus_done_to the
-- lowest of their cursors (what every one has consumed).
CREATE OR REPLACE FUNCTION pgcursor_internal.partition_consumption(
    pid uuid, OUT has_queue_mode boolean, OUT queue_cursor bigint, OUT lease_from bigint,
    OUT lease_to bigint, OUT lease_expires_at timestamptz, OUT bus_groups integer, OUT bus_done_to bigint)
RETURNS record LANGUAGE sql STABLE AS $$
    SELECT coalesce(bool_or(c.consumer_group = '__QUEUE_MODE__'), false),
           max(c.cursor) FILTER (WHERE c.consumer_group = '__QUEUE_MODE__'),
           max(c.batch_start) FILTER (WHERE c.consumer_group = '__QUEUE_MODE__'
                                        AND pgcursor_internal.lease_is_live(c.lease_expires_at)),
           max(c.batch_end) FILTER (WHERE c.consumer_group = '__QUEUE_MODE__'
                                      AND pgcursor_internal.lease_is_live(c.lease_expires_at)),
           max(c.lease_expires_at) FILTER (WHERE c.consumer_group = '__QUEUE_MODE__'),
           (count(*) FILTER (WHERE c.consumer_group <> '__QUEUE_MODE__'))::integer,
           min(c.cursor) FILTER (WHERE c.consumer_group <> '__QUEUE_MODE__')
      FROM pgcursor_internal.cursor_rows() c WHERE c.partition_id = pid
$$;

-- The status of the message at `off` (docs/http-api.md "Message browser";
-- first match wins): dead_letter when it has a dead letter; completed up to
-- done_to; processing inside the live leased batch; else pending.
CREATE OR REPLACE FUNCTION pgcursor_internal.message_status(
    off bigint, dead boolean, done_to bigint, lease_from bigint, lease_to bigint)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN dead THEN 'dead_letter'
        WHEN off <= coalesce(done_to, 0) THEN 'completed'
        WHEN off BETWEEN lease_from AND lease_to THEN 'processing'
        ELSE 'pending'
    END
$$;

-- Up to which offset a message counts as completed (docs/http-api.md "Message
-- browser", status rules 2 and 3): the __QUEUE_MODE__ cursor when that group
-- has one; else, when named groups do, the lowest of their cursors; else
-- nothing (0).
CREATE OR REPLACE FUNCTION pgcursor_internal.completed_to(
    has_queue_mode boolean, queue_cursor bigint, bus_groups integer, bus_done_to bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN has_queue_mode THEN queue_cursor WHEN bus_groups > 0 THEN bus_done_to ELSE 0 END
$$;

-- bus, queue, hybrid or none: which kinds of group consume.
CREATE OR REPLACE FUNCTION pgcursor_internal.consumption_type(has_queue_mode boolean, bus_groups bigint)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN has_queue_mode AND bus_groups > 0 THEN 'hybrid' WHEN has_queue_mode THEN 'queue'
                WHEN bus_groups > 0 THEN 'bus' ELSE 'none' END
$$;

-- The offsets first..past of partition pid narrowed to where a message of
-- status `want` (message_status; null: any) can stand: completed ones at
-- or below done_to, processing ones in the live lease's batch above it,
-- pending ones above it, dead letters at or below the newest dead letter
-- there. Without this a status few messages have read every message of
-- the window (2,000 partitions of 600 messages: 3.0 s to find no
-- completed one). Empty: past below first.
CREATE OR REPLACE FUNCTION pgcursor_internal.status_offsets(
    pid uuid, want text, lo bigint, hi bigint, done_to bigint, lease_from bigint, lease_to bigint,
    OUT first bigint, OUT past bigint)
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
BEGIN
    first := lo;
    past := hi;
    CASE want
    WHEN 'completed' THEN
        past := least(hi, coalesce(done_to, 0));
    WHEN 'pending' THEN
        first := greatest(lo, coalesce(done_to, 0) + 1);
    WHEN 'processing' THEN
        first := greatest(lo, coalesce(done_to, 0) + 1, lease_from);
        past := CASE WHEN lease_from IS NULL THEN 0 ELSE least(hi, lease_to) END;
    WHEN 'dead_letter' THEN
        past := coalesce((SELECT max(d.msg_offset) FROM pgcursor.dead_letters d
                           WHERE d.partition_id = pid AND d.msg_offset BETWEEN lo AND hi), 0);
    ELSE
        NULL;  -- any status: the window as it is
    END CASE;
END $$;

-- Offsets [low, high] (null: unbounded) narrowed to those of partition
-- pid's stored messages whose transactionId is txid; none: an empty range
-- (low past every offset). A transactionId is unique in a partition while
-- the index remembers it; once forgotten it may be pushed again, so the
-- range can hold other messages between its copies.
CREATE OR REPLACE FUNCTION pgcursor_internal.narrowed_to_transaction(
    pid uuid, txid text, INOUT low bigint, INOUT high bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    first bigint;
    last  bigint;
BEGIN
    SELECT min(m.msg_offset), max(m.msg_offset) INTO first, last FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.transaction_id = txid;
    low := greatest(low, coalesce(first, 9223372036854775807));
    high := least(high, last);
END $$;

-- Does partition pid hold a message whose transactionId is txid? The
-- listing's first question to each partition when given one: a quarter of
-- the cost of asking newest_listed_at (10,000 partitions: 93 against 393
-- ms). A function of the id, as listed_messages, for Citus.
CREATE OR REPLACE FUNCTION pgcursor_internal.holds_transaction(pid uuid, txid text)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM pgcursor.messages m WHERE m.partition_id = pid AND m.transaction_id = txid);
END $$;

-- A partition's messages for a listing, newest first: created in [since,
-- upto), offsets in [low, high] (null: unbounded), transactionId txid
-- (null: any), of status `want` (null: any; by message_status with
-- done_to and the live lease's range; dead:
-- the message has a dead letter, of any group; queue_dead: of
-- __QUEUE_MODE__, for queueStatus), at most n. The window is
-- an offset range (created_offsets), read newest first along the primary
-- key, and narrowed to where messages of status `want` can be
-- (status_offsets). Its own function of the partition's id, so that on
-- Citus the listing's statement over the partitions names no distributed
-- table and this one goes to the partition's shard. (enable_seqscan = off:
-- as first_offset_at.)
CREATE OR REPLACE FUNCTION pgcursor_internal.listed_messages(
    pid uuid, since timestamptz, upto timestamptz, low bigint, high bigint, txid text, done_to bigint,
    lease_from bigint, lease_to bigint, want text, n bigint)
RETURNS TABLE (msg_offset bigint, transaction_id text, trace_id uuid, message_id uuid, created_at timestamptz,
               dead boolean, queue_dead boolean, status text)
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    unbounded bigint := 9223372036854775807;  -- no offset bound
    created record := pgcursor_internal.created_offsets(pid, since, upto);
    first bigint := greatest(coalesce(created.first, unbounded), low);
    past  bigint := least(coalesce(created.last, unbounded), high);
    kept  record;
BEGIN
    IF txid IS NOT NULL THEN
        SELECT * INTO first, past FROM pgcursor_internal.narrowed_to_transaction(pid, txid, first, past);
    END IF;
    kept := pgcursor_internal.status_offsets(pid, want, first, past, done_to, lease_from, lease_to);
    first := kept.first;
    past := kept.past;
    RETURN QUERY
    SELECT m.msg_offset, m.transaction_id, m.trace_id, m.message_id, m.created_at, coalesce(s.dead, false),
           coalesce(s.queue_dead, false),
           pgcursor_internal.message_status(m.msg_offset, coalesce(s.dead, false), done_to, lease_from, lease_to)
      FROM pgcursor.messages m
      -- A join, not an EXISTS sub-select: Citus routes this form to the shard.
      -- (dead: some group dead-lettered it; queue_dead: __QUEUE_MODE__ did)
      LEFT JOIN LATERAL (SELECT true AS dead, bool_or(d.consumer_group = '__QUEUE_MODE__') AS queue_dead
                           FROM pgcursor.dead_letters d
                          WHERE d.partition_id = m.partition_id AND d.msg_offset = m.msg_offset
                         HAVING count(*) > 0) s ON true
     WHERE m.partition_id = pid AND m.msg_offset BETWEEN first AND past
       AND (txid IS NULL OR m.transaction_id = txid)
       AND (want IS NULL OR pgcursor_internal.message_status(m.msg_offset, coalesce(s.dead, false), done_to,
                                                             lease_from, lease_to) = want)
     ORDER BY m.msg_offset DESC
     LIMIT n;
END $$;

-- When the newest message of partition pid that a listing of [since, upto),
-- offsets [low, high] (null: unbounded) and transactionId txid (null: any)
-- shows was created; null when it shows none. createdAt never decreases
-- with the offset, so the newest message at or below high answers, unless
-- the window ends before it (a `to` in the past): then the window's own
-- offsets do. (enable_seqscan = off: as first_offset_at.)
CREATE OR REPLACE FUNCTION pgcursor_internal.newest_listed_at(
    pid uuid, since timestamptz, upto timestamptz, low bigint, high bigint, txid text)
RETURNS timestamptz LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
DECLARE
    newest bigint;
    at     timestamptz;
    created record;
BEGIN
    IF txid IS NOT NULL THEN
        SELECT * INTO low, high FROM pgcursor_internal.narrowed_to_transaction(pid, txid, low, high);
    END IF;
    SELECT m.msg_offset, m.created_at INTO newest, at FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.msg_offset <= coalesce(high, 9223372036854775807)
     ORDER BY m.msg_offset DESC LIMIT 1;
    IF newest IS NULL OR newest < coalesce(low, 0) OR at < since THEN
        RETURN NULL;
    ELSIF at < upto THEN
        RETURN at;
    END IF;
    created := pgcursor_internal.created_offsets(pid, since, upto);
    SELECT m.created_at INTO at FROM pgcursor.messages m
     WHERE m.partition_id = pid
       AND m.msg_offset BETWEEN greatest(created.first, low) AND least(created.last, high)
     ORDER BY m.msg_offset DESC LIMIT 1;
    RETURN at;
END $$;

-- The end of a listing window: `to` is inclusive to the end of its minute
-- (Queen truncates it to the minute and adds one, exclusive); default now.
-- A `to` in the calendar's last year ends at infinity (its minute's end
-- would be past the last time PostgreSQL holds).
CREATE OR REPLACE FUNCTION pgcursor_internal.window_end(upto timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN upto >= '294276-01-01T00:00:00Z' THEN 'infinity'
                ELSE (date_trunc('minute', coalesce(upto, now()) AT TIME ZONE 'UTC') + interval '1 minute')
                     AT TIME ZONE 'UTC' END
$$;

-- Does partition pid hold a message created in [since, upto)? A function
-- of the id, as listed_messages, so that on Citus the statements over the
-- partitions that ask it (the purges) name no distributed table. (The
-- listing asks newest_listed_at, one read where the window reaches the
-- newest message; this is two where it starts before the first, the
-- purges' case. enable_seqscan = off: as first_offset_at.)
CREATE OR REPLACE FUNCTION pgcursor_internal.holds_messages_created(pid uuid, since timestamptz, upto timestamptz)
RETURNS boolean LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
DECLARE
    first bigint := pgcursor_internal.first_offset_at(pid, since);
BEGIN
    RETURN first IS NOT NULL
       AND EXISTS (SELECT 1 FROM pgcursor.messages m
                    WHERE m.partition_id = pid AND m.msg_offset = first AND m.created_at < upto);
END $$;

-- The listing's `mode`: over the partitions of the queue (all queues without
-- one) that hold a message created in [since, upto).
CREATE OR REPLACE FUNCTION pgcursor_internal.listing_mode(qname text, since timestamptz, upto timestamptz)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('hasQueueMode', coalesce(bool_or(c.consumer_group = '__QUEUE_MODE__'), false),
                              'busGroupsCount', count(DISTINCT c.consumer_group)
                                                FILTER (WHERE c.consumer_group <> '__QUEUE_MODE__'),
                              'type', pgcursor_internal.consumption_type(
                                          coalesce(bool_or(c.consumer_group = '__QUEUE_MODE__'), false),
                                          count(DISTINCT c.consumer_group)
                                          FILTER (WHERE c.consumer_group <> '__QUEUE_MODE__')))
      FROM pgcursor.partitions p
      JOIN pgcursor_internal.cursor_rows() c ON c.partition_id = p.id
     WHERE (qname IS NULL OR p.queue = qname)
       AND pgcursor_internal.newest_listed_at(p.id, since, upto, NULL, NULL, NULL) IS NOT NULL
$$;

-- A request object without its empty-string values: from a query string,
-- an empty value counts as absent.
CREATE OR REPLACE FUNCTION pgcursor_internal.without_empty_values(req jsonb)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(req) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'the filter must be a JSON object' USING ERRCODE = '22023';
    END IF;
    RETURN coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(req) e WHERE e.value <> '""'), '{}');
END $$;

-- list_messages: {queue?, partition? (a name), ns?, task?, status?, from?,
-- to?, fromOffset?, toOffset?, transactionId?, limit? (200, at most 1000),
-- offset? (0)},
-- values possibly strings (a query string), empty = not given ->
-- {"messages": [...], "mode": {...}}. Messages created in [from (default
-- now - 1 hour), end of to's minute (default now)] whose offset (in its
-- partition) is in [fromOffset, toOffset], newest first (then by partition
-- and offset, descending),
-- the status filter applied before limit and offset; no payload. A status
-- other than pending, processing, completed or dead_letter matches nothing.
-- Each partition gives at most offset + limit rows, its newest in the
-- window (listed_messages), so a big queue costs a window, not a scan.
-- Only the offset + limit partitions whose newest listed message is newest
-- are read: each of them shows at least that message, so no other
-- partition's message can rank among the first offset + limit (2,000
-- partitions: 1.7 s -> 0.2 s). With a status filter that is the newest
-- message of that status, one row read first from each partition
-- (listed_messages with n = 1; 2,000 partitions, pending: 1.7 -> 0.37 s).
-- Each of those is read from page_floor on (below; limit 1000 over 2,000
-- partitions: 1.0-1.4 -> 0.35 s). With an offset bound the time window is
-- open on the sides from/to leave out: browsing offsets N..M means those
-- messages, however old. So with a transactionId: the messages carrying it,
-- found through the (partition_id, transaction_id) index in each selected
-- partition, in any window unless from/to narrow it.
CREATE OR REPLACE FUNCTION pgcursor.list_messages(filter jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    given  jsonb := pgcursor_internal.without_empty_values(filter);
    qname  text := pgcursor_internal.optional_text(given, 'queue');
    part   text := pgcursor_internal.optional_text(given, 'partition');
    ns     text := pgcursor_internal.optional_text(given, 'ns');
    tsk    text := pgcursor_internal.optional_text(given, 'task');
    want   text := pgcursor_internal.optional_text(given, 'status');
    low    bigint := pgcursor_internal.non_negative_bigint_arg(given, 'fromOffset');
    high   bigint := pgcursor_internal.non_negative_bigint_arg(given, 'toOffset');
    txid   text := pgcursor_internal.optional_text(given, 'transactionId');
    ranged boolean := low IS NOT NULL OR high IS NOT NULL OR txid IS NOT NULL;
    -- Without a status or transactionId filter a partition's newest message
    -- in the window is what it shows first.
    newest_shown boolean := want IS NULL AND txid IS NULL;
    since  timestamptz := coalesce(pgcursor_internal.timestamp_arg(given, 'from'),
                                   CASE WHEN ranged THEN '-infinity' ELSE now() - interval '1 hour' END);
    upto   timestamptz := CASE WHEN ranged AND pgcursor_internal.timestamp_arg(given, 'to') IS NULL THEN 'infinity'
                               ELSE pgcursor_internal.window_end(pgcursor_internal.timestamp_arg(given, 'to')) END;
    lim    integer := least(pgcursor_internal.positive_int_arg(given, 'limit', 200), 1000);
    skip   integer := pgcursor_internal.non_negative_int_arg(given, 'offset', 0);
    msgs   jsonb;
BEGIN
    IF low > high THEN
        RAISE EXCEPTION 'toOffset must not be below fromOffset' USING ERRCODE = '22023';
    END IF;
    IF want IS NULL OR want IN ('pending', 'processing', 'completed', 'dead_letter') THEN
        -- (Each step is named once, so PostgreSQL plans the chain as one query.)
        WITH candidates AS (  -- the selected partitions with a listed message, newest first
            SELECT * FROM (
                SELECT p.id AS pid, p.queue, p.name AS partition, q.namespace, q.task, q.priority,
                       pgcursor_internal.newest_listed_at(p.id, since, upto, low, high, txid) AS newest
                  FROM pgcursor.partitions p
                  JOIN pgcursor.queues q ON q.name = p.queue
                 WHERE (qname IS NULL OR p.queue = qname) AND (part IS NULL OR p.name = part)
                   AND (ns IS NULL OR q.namespace = ns) AND (tsk IS NULL OR q.task = tsk)
                   AND (txid IS NULL OR pgcursor_internal.holds_transaction(p.id, txid))) n
             WHERE n.newest IS NOT NULL
             ORDER BY n.newest DESC, n.pid DESC
             LIMIT CASE WHEN newest_shown THEN skip::bigint + lim END
        ), consumed AS (
            SELECT c.*, f.*,
                   pgcursor_internal.completed_to(f.has_queue_mode, f.queue_cursor, f.bus_groups, f.bus_done_to)
                       AS done_to
              FROM candidates c
             CROSS JOIN LATERAL pgcursor_internal.partition_consumption(c.pid) f
        ), ranked AS (
            SELECT pc.*, s.shown
              FROM consumed pc
             -- With a status or transactionId filter, the partition's newest message
             -- that passes it (OFFSET 0: computed once, not once per place that names it).
             CROSS JOIN LATERAL (
                   SELECT CASE WHEN newest_shown THEN pc.newest ELSE
                              (SELECT l.created_at
                                 FROM pgcursor_internal.listed_messages(
                                          pc.pid, since, upto, low, high, txid, pc.done_to, pc.lease_from,
                                          pc.lease_to, want, 1) l) END AS shown
                   OFFSET 0) s
             WHERE s.shown IS NOT NULL
             ORDER BY s.shown DESC, pc.pid DESC
             LIMIT skip::bigint + lim
        ), floored AS (
            -- page_floor: when offset + limit partitions are ranked, the oldest of
            -- their newest messages. Each shows its newest, so offset + limit
            -- messages at least that new exist, and nothing older can reach the
            -- page: each partition is read from page_floor on. (Fewer ranked: no
            -- floor, the page may need their older messages.)
            SELECT ranked.*,
                   CASE WHEN count(*) OVER () = skip::bigint + lim THEN min(ranked.shown) OVER () END AS page_floor
              FROM ranked
        ), r AS (
            SELECT pc.*, m.*
              FROM floored pc
             CROSS JOIN LATERAL pgcursor_internal.listed_messages(
                       pc.pid, greatest(since, pc.page_floor), upto, low, high, txid, pc.done_to,
                       pc.lease_from, pc.lease_to, want, skip::bigint + lim) m
             ORDER BY m.created_at DESC, pc.pid DESC, m.msg_offset DESC
             OFFSET skip LIMIT lim
        )
        SELECT jsonb_agg(jsonb_build_object(
                   'id', coalesce(r.message_id::text, r.pid || ':' || r.msg_offset),
                   'transactionId', r.transaction_id, 'partitionId', r.pid,
                   'queue', r.queue, 'partition', r.partition, 'queuePath', r.queue || '/' || r.partition,
                   'namespace', r.namespace, 'task', r.task, 'offset', r.msg_offset,
                   'status', r.status,
                   'queueStatus', pgcursor_internal.message_status(
                                      r.msg_offset, r.queue_dead, CASE WHEN r.has_queue_mode THEN r.queue_cursor END,
                                      r.lease_from, r.lease_to),
                   'busStatus', jsonb_build_object(
                       'consumedBy', (SELECT count(*) FROM pgcursor_internal.cursor_rows() c
                                       WHERE c.partition_id = r.pid AND c.consumer_group <> '__QUEUE_MODE__'
                                         AND c.cursor >= r.msg_offset),
                       'totalGroups', r.bus_groups),
                   'traceId', r.trace_id, 'producerSub', NULL, 'queuePriority', r.priority,
                   'createdAt', pgcursor_internal.rfc3339_utc(r.created_at),
                   'leaseExpiresAt', pgcursor_internal.rfc3339_utc(r.lease_expires_at))
                 ORDER BY r.created_at DESC, r.pid DESC, r.msg_offset DESC)
          INTO msgs
          FROM r;
    END IF;
    RETURN jsonb_build_object('messages', coalesce(msgs, '[]'::jsonb),
                              'mode', pgcursor_internal.listing_mode(qname, since, upto));
END $$;

-- After a delete of offset `off`: a live leased batch that held it ends at
-- its last message still stored, and one with none left above its cursor is
-- released (retry counter reset, as an ack reaching the end releases it).
-- Else its holder could never ack to the end (the deleted message answers
-- transaction not found), and the partition would wait out the lease. A
-- release wakes long-polling pops, as a nack's does: what follows the
-- batch is theirs now.
DROP FUNCTION IF EXISTS pgcursor_internal.trim_leases_after_delete(uuid, bigint);
CREATE OR REPLACE FUNCTION pgcursor_internal.trim_leases_after_delete(pid uuid, qname text, off bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r    record;
    last bigint;
BEGIN
    FOR r IN SELECT c.consumer_group, c.cursor, c.batch_start, c.batch_end FROM pgcursor.cursors c
              WHERE c.partition_id = pid AND pgcursor_internal.lease_is_live(c.lease_expires_at)
                AND off BETWEEN c.batch_start AND c.batch_end
              ORDER BY c.consumer_group
    LOOP
        SELECT max(m.msg_offset) INTO last FROM pgcursor.messages m
         WHERE m.partition_id = pid AND m.msg_offset BETWEEN r.batch_start AND r.batch_end;
        IF last IS NULL OR last <= r.cursor THEN
            UPDATE pgcursor.cursors c
               SET lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL, retry_count = 0
             WHERE c.partition_id = pid AND c.consumer_group = r.consumer_group;
            PERFORM pgcursor_internal.wake_waiters(pid, qname, r.cursor);
        ELSIF last < r.batch_end THEN
            UPDATE pgcursor.cursors c SET batch_end = last
             WHERE c.partition_id = pid AND c.consumer_group = r.consumer_group;
        END IF;
    END LOOP;
END $$;

-- delete_message: deletes, in a partition, the message a transactionId
-- names (named_offset: the one message() shows; a transactionId pushed
-- again once the index forgot it keeps its other copy), its transaction index entry (so the transactionId may be pushed
-- again), its dead letters of every group (matched on their own
-- transactionId, also when retention already removed the message) and its
-- traces. Cursors stay where they are: a cursor standing just before the
-- deleted offset steps over the gap as after retention, never past a
-- stored message (sql/80_retention.sql); a leased batch holding it is
-- trimmed (trim_leases_after_delete). Answer: {"success": <anything
-- deleted>, "partitionId", "transactionId", "message"}.
CREATE OR REPLACE FUNCTION pgcursor.delete_message(pid uuid, txid text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    q       pgcursor.queues;
    off     bigint;
    deleted bigint := 0;
    n       bigint;
BEGIN
    SELECT x.* INTO q FROM pgcursor.queues x JOIN pgcursor.partitions p ON p.queue = x.name WHERE p.id = pid;
    off := pgcursor_internal.named_offset(pid, txid, pgcursor_internal.transaction_index_horizon(
               q.transaction_index_from, q.transaction_index_retention_seconds));
    IF off IS NOT NULL THEN
        DELETE FROM pgcursor.messages m WHERE m.partition_id = pid AND m.msg_offset = off;
        GET DIAGNOSTICS deleted = ROW_COUNT;
    END IF;
    -- What the index remembers of it goes too, with what that delete left there.
    DELETE FROM pgcursor.transaction_index t WHERE t.partition_id = pid AND t.transaction_id = txid;
    GET DIAGNOSTICS n = ROW_COUNT;
    deleted := deleted + n;
    DELETE FROM pgcursor.dead_letters d WHERE d.partition_id = pid AND d.transaction_id = txid;
    GET DIAGNOSTICS n = ROW_COUNT;
    deleted := deleted + n;
    DELETE FROM pgcursor.trace_events e WHERE e.partition_id = pid AND e.transaction_id = txid;
    GET DIAGNOSTICS n = ROW_COUNT;
    deleted := deleted + n;
    PERFORM pgcursor_internal.move_cursors_past_deleted(ARRAY[pid]);
    IF off IS NOT NULL THEN
        PERFORM pgcursor_internal.trim_leases_after_delete(pid, q.name, off);
    END IF;
    RETURN jsonb_build_object('success', deleted > 0, 'partitionId', pid, 'transactionId', txid,
                              'message', CASE WHEN deleted > 0 THEN 'Message deleted successfully'
                                              ELSE 'Message not found' END);
END $$;
