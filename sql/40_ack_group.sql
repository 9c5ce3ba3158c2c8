-- The ack contract (docs/ack-contract.md, cited below by §) for one group of items sharing
-- (partitionId, leaseId): one call, one transaction, one locked cursor row.
--
--   SELECT pgcursor.ack_group('{"partitionId":"0190...","consumerGroup":"billing","leaseId":"0190...",
--                               "items":[{"index":0,"transactionId":"t1","status":"completed"}]}');
--
-- ack_group() only sequences named steps: check and resolve the items
-- (resolve_ack_items), refuse what cannot be acked (refuse_all), tally what
-- the items say against the cursor (tally_ack_items), decide the outcome
-- (decide_ack), write it (write_ack) and answer per item (ack_results).

-- §2: exact, case-sensitive; absent or null means completed; anything else
-- (wrong case, unknown word, a number, an object) is an explicit failure.
CREATE OR REPLACE FUNCTION pgcursor.normalise_status(status jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN status IS NULL OR jsonb_typeof(status) = 'null' THEN 'completed'
        WHEN jsonb_typeof(status) = 'string'
             AND status #>> '{}' IN ('completed', 'failed', 'retry', 'dlq') THEN status #>> '{}'
        ELSE 'failed'
    END
$$;

-- §4: precedence at one offset: dlq > failed > retry > completed.
CREATE OR REPLACE FUNCTION pgcursor_internal.status_strength(status text)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE status WHEN 'dlq' THEN 3 WHEN 'failed' THEN 2 WHEN 'retry' THEN 1 ELSE 0 END
$$;

-- One item of a group call, checked, normalised and resolved; and what one
-- group call decides, before anything is written. (Created once: see
-- sql/00_namespace.sql.)
DO $$
BEGIN
    IF to_regtype('pgcursor_internal.ack_item') IS NULL THEN
        CREATE TYPE pgcursor_internal.ack_item AS (
            ord            integer,  -- position in this call's items, from 1
            index          integer,  -- echoed: the item's place in the request (§10)
            transaction_id text,
            status         text,     -- normalised (§2)
            error          text,     -- the nack reason; an empty string is none (§9)
            msg_offset     bigint    -- through the transaction index; NULL: not found (§3)
        );
    END IF;
    IF to_regtype('pgcursor_internal.ack_tally') IS NULL THEN
        CREATE TYPE pgcursor_internal.ack_tally AS (
            nack_at         bigint,   -- N, the lowest nacked offset (§5); NULL when none
            nack_status     text,     -- the effective status at N (§4)
            prefix          bigint,   -- P, the completed prefix (§6)
            completed_named bigint    -- distinct offsets in (cursor, P] named completed
        );
    END IF;
    IF to_regtype('pgcursor_internal.ack_decision') IS NULL THEN
        CREATE TYPE pgcursor_internal.ack_decision AS (
            nack_at         bigint,   -- N, the lowest nacked offset (§5); NULL when none
            nack_status     text,     -- the effective status at N (§4)
            prefix          bigint,   -- P, the completed prefix (§6)
            new_cursor      bigint,
            new_retry_count integer,
            lease_released  boolean,  -- the row holds no lease after the call (§10)
            terminal        boolean,  -- N is dead-lettered or discarded (§7)
            dead_lettered   boolean,
            reason          text      -- the dead-letter reason (§9), when dead_lettered
        );
    END IF;
END $$;

-- §13: what is wrong with one acknowledgement's own fields, named under
-- `path` (acknowledgments[3], operations[0]), or NULL. status is never wrong (§2).
CREATE OR REPLACE FUNCTION pgcursor_internal.ack_item_error(item jsonb, path text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN jsonb_typeof(item) IS DISTINCT FROM 'object' THEN path || ' must be an object'
        WHEN jsonb_typeof(item -> 'transactionId') IS DISTINCT FROM 'string' THEN
            path || '.transactionId must be a string'
        WHEN coalesce(jsonb_typeof(item -> 'error'), 'null') NOT IN ('null', 'string') THEN
            path || '.error must be a string'
    END
$$;

-- §13: what is wrong with the fields naming the cursor (partitionId,
-- leaseId, consumerGroup), each name after `prefix`, or NULL.
CREATE OR REPLACE FUNCTION pgcursor_internal.ack_target_error(req jsonb, prefix text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN NOT pgcursor_internal.is_uuid_value(req -> 'partitionId', false) THEN
            prefix || 'partitionId must be a UUID string'
        WHEN NOT pgcursor_internal.is_uuid_value(req -> 'leaseId', true) THEN
            prefix || 'leaseId must be a UUID string'
        WHEN coalesce(jsonb_typeof(req -> 'consumerGroup'), 'null') NOT IN ('null', 'string') THEN
            prefix || 'consumerGroup must be a string'
    END
$$;

-- §13 for a whole group request: raises 22023 with the gateway's message.
CREATE OR REPLACE FUNCTION pgcursor_internal.check_ack_request(request jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    problem text;
BEGIN
    IF jsonb_typeof(request) IS DISTINCT FROM 'object' THEN
        problem := 'request must be a JSON object';
    ELSIF jsonb_typeof(request -> 'items') IS DISTINCT FROM 'array' THEN
        problem := 'items must be an array';
    ELSIF jsonb_array_length(request -> 'items') = 0 THEN
        problem := 'items must not be empty';
    ELSE
        problem := pgcursor_internal.ack_target_error(request, '');
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION '%', problem USING ERRCODE = '22023';
    END IF;
END
$$;

-- An item's `index` (the gateway always sends one): absent or null is its
-- position; otherwise a non-negative integer, else NULL (a 22023 below).
CREATE OR REPLACE FUNCTION pgcursor_internal.ack_item_index(item jsonb, ord bigint)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN item -> 'index' IS NULL OR item -> 'index' = 'null' THEN ord::integer - 1
        WHEN jsonb_typeof(item -> 'index') = 'number'
             AND (item -> 'index')::numeric BETWEEN 0 AND 2147483647
             AND (item -> 'index')::numeric = trunc((item -> 'index')::numeric)
            THEN (item -> 'index')::integer
    END
$$;

-- §13 for the items, the slow path: only once an item is known to be bad,
-- raises 22023 naming the first one as the gateway does.
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_bad_ack_item(items jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    problem text;
BEGIN
    SELECT CASE WHEN x.index IS NULL THEN format('items[%s].index must be a non-negative integer', e.ord - 1)
                ELSE pgcursor_internal.ack_item_error(e.item, format('acknowledgments[%s]', x.index)) END
      INTO problem
      FROM jsonb_array_elements(items) WITH ORDINALITY AS e(item, ord),
           LATERAL (SELECT pgcursor_internal.ack_item_index(e.item, e.ord) AS index) x
     WHERE x.index IS NULL OR pgcursor_internal.ack_item_error(e.item, '') IS NOT NULL
     ORDER BY e.ord LIMIT 1;
    RAISE EXCEPTION '%', problem USING ERRCODE = '22023';
END
$$;

-- The highest offset a cursor row's group has been delivered and not yet
-- given back: its live leased batch's end, else its cursor (0 for none).
CREATE OR REPLACE FUNCTION pgcursor_internal.delivered_to(c pgcursor.cursors)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(coalesce(c.cursor, 0),
                    CASE WHEN pgcursor_internal.lease_is_live(c.lease_expires_at) THEN c.batch_end END)
$$;

-- The group's items in request order, each checked (§13: a bad one is a
-- 22023 naming it), normalised (§2) and resolved through the transaction
-- index (§3). The checks here are plain expressions, cheap per item; only a
-- request that fails them takes the slow path that words the error.
-- enable_seqscan = off: a generic plan made while messages was empty read
-- the whole table at every ack once it had filled.
SELECT pgcursor_internal.drop_version_without(
    'pgcursor_internal.resolve_ack_items(uuid, timestamptz, jsonb)', 'cursor_at');
CREATE OR REPLACE FUNCTION pgcursor_internal.resolve_ack_items(
    partition_id uuid, horizon timestamptz, items jsonb, cursor_at bigint, delivered_to bigint)
RETURNS pgcursor_internal.ack_item[] LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
DECLARE
    resolved pgcursor_internal.ack_item[];
    any_bad boolean;
BEGIN
    SELECT array_agg(ROW(i.ord, i.index, i.item ->> 'transactionId',
                         pgcursor.normalise_status(i.item -> 'status'),
                         nullif(i.item ->> 'error', ''), t.msg_offset)::pgcursor_internal.ack_item
                     ORDER BY i.ord),
           bool_or(i.bad)
      INTO resolved, any_bad
      FROM (SELECT e.item, e.ord::integer AS ord, x.index,
                   x.index IS NULL
                   OR jsonb_typeof(e.item) IS DISTINCT FROM 'object'
                   OR jsonb_typeof(e.item -> 'transactionId') IS DISTINCT FROM 'string'
                   OR coalesce(jsonb_typeof(e.item -> 'error'), 'null') NOT IN ('null', 'string') AS bad
              FROM jsonb_array_elements(items) WITH ORDINALITY AS e(item, ord),
                   LATERAL (SELECT pgcursor_internal.ack_item_index(e.item, e.ord) AS index) x
            OFFSET 0) i  -- OFFSET 0: each item's checks are computed once
      -- LATERAL keeps these index probes per item even in a cached generic
      -- plan (a join may pick another index instead). The stored messages
      -- first, whatever their age: a message replayed after the horizon
      -- passed it (a seek back, an old subscriptionFrom) resolves all the
      -- same. A transactionId stored twice (pushed again once the index
      -- forgot it) names the copy the group was delivered, as far as the
      -- row tells (delivered_to: its live leased batch's end, else its
      -- cursor): the lowest delivered one above the cursor, which completes
      -- the least; else the newest at or below it (a no-op: a retried or
      -- stale ack of the consumed copy); else the lowest never delivered.
      -- Not the lowest overall (the ack of a delivered second copy would
      -- be a no-op for ever), nor the newest (a retried ack of the first
      -- copy would complete every offset up to the second, undelivered).
      -- Then the index's entries for messages retention deleted since the
      -- horizon.
      LEFT JOIN LATERAL (
          SELECT coalesce(
                     (SELECT m.msg_offset FROM pgcursor.messages m
                       WHERE m.partition_id = resolve_ack_items.partition_id
                         AND m.transaction_id = i.item ->> 'transactionId'
                       ORDER BY CASE WHEN m.msg_offset <= cursor_at THEN 1
                                     WHEN m.msg_offset <= delivered_to THEN 0 ELSE 2 END,
                                CASE WHEN m.msg_offset <= cursor_at THEN -m.msg_offset ELSE m.msg_offset END
                       LIMIT 1),
                     (SELECT x.msg_offset FROM pgcursor.transaction_index x
                       WHERE x.partition_id = resolve_ack_items.partition_id
                         AND x.transaction_id = i.item ->> 'transactionId'
                         AND (x.created_at >= horizon) IS TRUE)) AS msg_offset
           WHERE NOT i.bad) t ON true;
    IF any_bad THEN
        PERFORM pgcursor_internal.refuse_bad_ack_item(items);
    END IF;
    RETURN resolved;
END
$$;

-- §4-§6 in one pass over the items that still decide something (resolved
-- and above the cursor, §3): N, the lowest offset whose effective status
-- is a nack; the effective (strongest) status at N; P = max(cursor,
-- highest completed offset below N, or overall when no nack); and how many
-- distinct offsets in (cursor, P] the call names as completed (the rest of
-- what the cursor passes over are silent gaps, §6). Every completed offset
-- below N is at most P, so "below N" counts them. (One statement: as four
-- helpers, one per value, they were a twentieth of an ack. PL/pgSQL, so
-- its plan is cached per session, where a SQL function that cannot be
-- inlined is planned anew in every transaction.)
CREATE OR REPLACE FUNCTION pgcursor_internal.tally_ack_items(items pgcursor_internal.ack_item[], cursor_at bigint)
RETURNS pgcursor_internal.ack_tally LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    t pgcursor_internal.ack_tally;
BEGIN
    WITH live AS (SELECT i.msg_offset, i.status FROM unnest(items) i WHERE i.msg_offset > cursor_at),
         nack AS (SELECT min(l.msg_offset) AS at FROM live l WHERE l.status <> 'completed')
    SELECT nack.at,
           (SELECT l.status FROM live l WHERE l.msg_offset = nack.at
             ORDER BY pgcursor_internal.status_strength(l.status) DESC LIMIT 1),
           greatest(cursor_at, max(c.msg_offset)),
           count(DISTINCT c.msg_offset)
      INTO t.nack_at, t.nack_status, t.prefix, t.completed_named
      FROM nack
      LEFT JOIN live c ON c.status = 'completed' AND (nack.at IS NULL OR c.msg_offset < nack.at)
     GROUP BY nack.at;
    RETURN t;
END
$$;

-- §9: a nack reason given on the poison message itself, else the first nack
-- reason in request order, else the default.
CREATE OR REPLACE FUNCTION pgcursor_internal.dead_letter_reason(items pgcursor_internal.ack_item[], nack_at bigint)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN coalesce(
        (SELECT error FROM unnest(items)
          WHERE msg_offset = nack_at AND status <> 'completed' AND error IS NOT NULL
          ORDER BY ord LIMIT 1),
        (SELECT error FROM unnest(items)
          WHERE status <> 'completed' AND error IS NOT NULL
          ORDER BY ord LIMIT 1),
        'Retries exhausted');
END
$$;

-- §9: snapshot the poison message into the dead-letter table, so it
-- survives message retention.
CREATE OR REPLACE FUNCTION pgcursor_internal.dead_letter(
    partition_id uuid, consumer_group text, msg_offset bigint, reason text, retry_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.dead_letters
           (partition_id, consumer_group, msg_offset, transaction_id, payload, error, retry_count, created_at)
    SELECT dead_letter.partition_id, dead_letter.consumer_group, dead_letter.msg_offset,
           coalesce(m.transaction_id, t.transaction_id, ''), m.payload, reason, dead_letter.retry_count, m.created_at
      FROM (SELECT 1) AS one
      LEFT JOIN pgcursor.messages m
             ON m.partition_id = dead_letter.partition_id AND m.msg_offset = dead_letter.msg_offset
      LEFT JOIN LATERAL (SELECT ti.transaction_id FROM pgcursor.transaction_index ti
                          WHERE ti.partition_id = dead_letter.partition_id
                            AND ti.msg_offset = dead_letter.msg_offset LIMIT 1) t ON m.transaction_id IS NULL;
END
$$;

-- One per-item answer (§10).
CREATE OR REPLACE FUNCTION pgcursor_internal.ack_result(
    item pgcursor_internal.ack_item, success boolean, error text, lease_released boolean,
    dlq boolean, noop boolean)
RETURNS jsonb LANGUAGE sql STABLE AS $$  -- STABLE like jsonb_build_object, so it inlines
    SELECT jsonb_build_object('index', item.index, 'transactionId', item.transaction_id,
                              'success', success, 'error', error, 'leaseReleased', lease_released,
                              'dlq', dlq, 'noop', noop)
$$;

-- §3, §11: every item refused with the same error (unknown partition,
-- refused lease); nothing moved.
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_all(
    items pgcursor_internal.ack_item[], error text, lease_released boolean)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_agg(pgcursor_internal.ack_result(i, false, refuse_all.error, lease_released, false, true)
                             ORDER BY i.ord)
              FROM unnest(items) AS i);
END
$$;

-- §7: the outcome of the resolved items (and their tally t) against the
-- locked cursor row. Decides only; write_ack applies it.
CREATE OR REPLACE FUNCTION pgcursor_internal.decide_ack(
    queue pgcursor.queues, cur pgcursor.cursors, items pgcursor_internal.ack_item[],
    t pgcursor_internal.ack_tally)
RETURNS pgcursor_internal.ack_decision LANGUAGE plpgsql STABLE AS $$
DECLARE
    d pgcursor_internal.ack_decision;
    release boolean := true;
BEGIN
    d.nack_at := t.nack_at;
    d.nack_status := t.nack_status;
    d.prefix := t.prefix;
    d.new_cursor := d.prefix;
    d.new_retry_count := cur.retry_count;
    d.terminal := false;
    d.dead_lettered := false;
    IF d.nack_at IS NULL THEN
        -- No nack: the lease goes (and the budget resets) only at the batch's end.
        release := cur.batch_end IS NOT NULL AND d.prefix >= cur.batch_end;
        IF release THEN
            d.new_retry_count := 0;
        END IF;
    ELSIF d.nack_status = 'failed' AND cur.retry_count < queue.retry_limit THEN
        d.new_retry_count := cur.retry_count + 1;  -- §8: once per call
    ELSIF d.nack_status IN ('failed', 'dlq') THEN
        d.terminal := true;
        d.dead_lettered := d.nack_status = 'dlq' OR pgcursor_internal.dead_lettering_enabled(queue);
        IF d.dead_lettered THEN
            d.reason := pgcursor_internal.dead_letter_reason(items, d.nack_at);
        END IF;
        d.new_cursor := d.nack_at;
        d.new_retry_count := 0;
    END IF;
    -- 'retry' at N keeps the defaults: cursor at P, lease released, counter untouched.
    d.lease_released := release OR cur.lease_id IS NULL;
    RETURN d;
END
$$;

-- Applies a decision to the cursor row: cursor, counter, lease, the
-- per-cursor totals (the tally t names the offsets completed explicitly),
-- the dead letter; and wakes waiting pops after a nack.
CREATE OR REPLACE FUNCTION pgcursor_internal.write_ack(
    queue pgcursor.queues, cur pgcursor.cursors, t pgcursor_internal.ack_tally,
    d pgcursor_internal.ack_decision)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    passed bigint := d.new_cursor - cur.cursor - d.terminal::integer;  -- offsets completed by this call
BEGIN
    IF d.dead_lettered THEN
        PERFORM pgcursor_internal.dead_letter(cur.partition_id, cur.consumer_group, d.nack_at,
                                              d.reason, cur.retry_count);
    END IF;
    UPDATE pgcursor.cursors c
       SET cursor = d.new_cursor,
           retry_count = d.new_retry_count,
           lease_id = CASE WHEN d.lease_released THEN NULL ELSE c.lease_id END,
           lease_expires_at = CASE WHEN d.lease_released THEN NULL ELSE c.lease_expires_at END,
           batch_start = CASE WHEN d.lease_released THEN NULL ELSE c.batch_start END,
           batch_end = CASE WHEN d.lease_released THEN NULL ELSE c.batch_end END,
           completed_total = c.completed_total + passed,
           implicitly_completed_total = c.implicitly_completed_total + passed - t.completed_named,
           dead_lettered_total = c.dead_lettered_total + d.dead_lettered::integer,
           discarded_total = c.discarded_total + (d.terminal AND NOT d.dead_lettered)::integer,
           last_ack_at = now()
     WHERE c.partition_id = cur.partition_id AND c.consumer_group = cur.consumer_group;
    IF d.nack_at IS NOT NULL THEN
        PERFORM pgcursor_internal.wake_waiters(cur.partition_id, queue.name, d.new_cursor);
    END IF;
END
$$;

-- Whether decision d leaves the cursor row as it is: cursor and counter
-- unchanged, nothing dead-lettered or discarded, no lease released.
CREATE OR REPLACE FUNCTION pgcursor_internal.ack_changes_nothing(
    cur pgcursor.cursors, d pgcursor_internal.ack_decision)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT d.new_cursor = cur.cursor AND d.new_retry_count = cur.retry_count AND NOT d.terminal
           AND NOT (d.lease_released AND cur.lease_id IS NOT NULL)
$$;

-- A cursor row this call created (lock_cursor) for a group that had never
-- touched the partition, and that the call leaves unused: deleted, so that
-- an ack answered with noops and refusals changes nothing. Kept, the row
-- would hold the partition's messages for a group that never consumed
-- there (depth, maxSize, retention) and would fix where that group's later
-- subscription starts.
CREATE OR REPLACE FUNCTION pgcursor_internal.forget_new_cursor(cur pgcursor.cursors, created boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF created THEN
        DELETE FROM pgcursor.cursors c
         WHERE c.partition_id = cur.partition_id AND c.consumer_group = cur.consumer_group;
    END IF;
END
$$;

-- §10–§11 per item, once the outcome is known.
CREATE OR REPLACE FUNCTION pgcursor_internal.ack_results(
    items pgcursor_internal.ack_item[], cursor_before bigint, d pgcursor_internal.ack_decision)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_agg(
        CASE
        WHEN i.msg_offset IS NULL THEN
            pgcursor_internal.ack_result(i, false, 'transaction not found', d.lease_released, false, true)
        WHEN i.msg_offset <= cursor_before AND i.status = 'completed' THEN
            pgcursor_internal.ack_result(i, true, NULL, d.lease_released, false, true)
        WHEN i.msg_offset <= cursor_before THEN
            pgcursor_internal.ack_result(i, false, 'already completed', d.lease_released, false, true)
        WHEN d.nack_at IS NULL OR i.msg_offset < d.nack_at THEN
            pgcursor_internal.ack_result(i, true, NULL, d.lease_released, false, false)
        WHEN i.msg_offset = d.nack_at AND i.status = d.nack_status THEN
            pgcursor_internal.ack_result(i, true, NULL, d.lease_released, d.dead_lettered, false)
        ELSE
            pgcursor_internal.ack_result(i, false, 'superseded by an earlier nack', d.lease_released, false, true)
        END ORDER BY i.ord)
      FROM unnest(items) AS i);
END
$$;

-- A nack releases the lease and leaves messages pending past the cursor:
-- wake long-polling pops the way a push does, so the tail redelivers at once.
-- (Not on a completed batch end: its consumer pops again by itself, and each
-- NOTIFY serialises commits cluster-wide, which costs throughput.)
-- (The head is read first and pg_notify called on its own: inside a query on
-- partition_heads, Citus would run it on the worker holding the head, where
-- no gateway listens, and the worker could not then commit its part.)
CREATE OR REPLACE FUNCTION pgcursor_internal.wake_waiters(partition_id uuid, queue text, cursor_at bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF pgcursor_internal.partition_head(wake_waiters.partition_id) > cursor_at THEN
        PERFORM pgcursor_internal.wake_pops(ARRAY[wake_waiters.queue]);
    END IF;
END
$$;

-- The one entry point: {partitionId, consumerGroup?, leaseId?, items:[{index?,
-- transactionId, status?, error?}]} -> [{index, transactionId, success,
-- error, leaseReleased, dlq, noop}]. A malformed request is a 22023 naming
-- the field (§13) and changes nothing.
CREATE OR REPLACE FUNCTION pgcursor.ack_group(request jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    partition_id uuid;
    lease_id uuid;
    consumer_group text;
    items pgcursor_internal.ack_item[];
    queue pgcursor.queues;
    locked record;
    cur pgcursor.cursors;
    t pgcursor_internal.ack_tally;
    d pgcursor_internal.ack_decision;
BEGIN
    PERFORM pgcursor_internal.check_ack_request(request);
    partition_id := request ->> 'partitionId';
    lease_id := request ->> 'leaseId';
    consumer_group := pgcursor_internal.group_arg(request);
    SELECT q.* INTO queue FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
     WHERE p.id = partition_id;
    IF queue.name IS NOT NULL THEN
        locked := pgcursor_internal.lock_cursor(partition_id, consumer_group);
        cur := locked.cursor_row;
    END IF;
    -- Resolved once the cursor is locked: a transactionId stored twice
    -- resolves by where the cursor stands and what it has leased.
    items := pgcursor_internal.resolve_ack_items(
        partition_id, pgcursor_internal.transaction_index_horizon(
            queue.transaction_index_from, queue.transaction_index_retention_seconds),
        request -> 'items', coalesce(cur.cursor, 0), pgcursor_internal.delivered_to(cur));
    IF cur.partition_id IS NULL THEN  -- unknown, or deleted with its queue since it was looked up
        RETURN pgcursor_internal.refuse_all(items, 'partition not found', false);
    END IF;
    IF lease_id IS NOT NULL
       AND NOT (cur.lease_id IS NOT DISTINCT FROM lease_id AND pgcursor_internal.lease_is_live(cur.lease_expires_at)) THEN
        PERFORM pgcursor_internal.forget_new_cursor(cur, locked.created);
        RETURN pgcursor_internal.refuse_all(items, 'invalid or expired lease', cur.lease_id IS NULL);
    END IF;
    t := pgcursor_internal.tally_ack_items(items, cur.cursor);
    d := pgcursor_internal.decide_ack(queue, cur, items, t);
    -- A call that changes nothing writes nothing (not even last_ack_at: a
    -- refused ack is no consumption), and leaves no row it made.
    IF pgcursor_internal.ack_changes_nothing(cur, d) THEN
        PERFORM pgcursor_internal.forget_new_cursor(cur, locked.created);
    ELSE
        PERFORM pgcursor_internal.write_ack(queue, cur, t, d);
    END IF;
    RETURN pgcursor_internal.ack_results(items, cur.cursor, d);
END
$$;
