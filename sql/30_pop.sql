-- Pop: lease, for one consumer group, the next batch of one or more
-- partitions: cursor+1 .. min(cursor+batch, head), skipping partitions whose
-- lease for that group is live. All partitions claimed by one call share one
-- leaseId and the total number of messages is capped at batch (and, with
-- maxBytes, their payloads' bytes: fit_claims_to_bytes).
--
--   SELECT pgcursor.pop('{"queue":"orders","batch":10}');
--   SELECT pgcursor.pop('{"namespace":"shop","partitions":4,"batch":100,"consumerGroup":"billing"}');
--   SELECT pgcursor.pop('{"queue":"orders","consumerGroup":"audit","subscriptionMode":"new","autoAck":true}');
--   SELECT pgcursor.pop('{"queue":"scans","batch":1000,"maxBytes":1048576}');

-- subscriptionMode, Queen's rule: "new" and "new-only" mean new; any other
-- string (absent: all) means all.
CREATE OR REPLACE FUNCTION pgcursor_internal.subscription_mode(req jsonb)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN pgcursor_internal.optional_text(req, 'subscriptionMode') IN ('new', 'new-only')
                THEN 'new' ELSE 'all' END
$$;

-- subscriptionFrom: a time (time_arg), or null.
-- A time still to come counts as now: a cursor row cannot wait for a time,
-- and a row written at a partition's head then would deliver what is
-- pushed before that time, where a partition made later would not.
CREATE OR REPLACE FUNCTION pgcursor_internal.subscription_from(req jsonb)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    since text := pgcursor_internal.optional_text(req, 'subscriptionFrom');
BEGIN
    IF since IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN least(pgcursor_internal.time_arg(since, 'subscriptionFrom'), now());
END $$;

-- The queues a pop may draw from: `queue`, or every queue matching
-- `namespace` and/or `task` (`partition` narrows a queue's pop to one of its
-- partitions).
CREATE OR REPLACE FUNCTION pgcursor_internal.pop_queues(req jsonb)
RETURNS text[] LANGUAGE plpgsql STABLE AS $$
DECLARE
    qname text := pgcursor_internal.optional_text(req, 'queue');
    ns    text := pgcursor_internal.optional_text(req, 'namespace');
    tk    text := pgcursor_internal.optional_text(req, 'task');
BEGIN
    IF qname IS NOT NULL THEN
        RETURN ARRAY[(pgcursor_internal.known_queue(qname)).name];
    ELSIF pgcursor_internal.optional_text(req, 'partition') IS NOT NULL THEN
        RAISE EXCEPTION 'partition requires queue' USING ERRCODE = '22023';
    ELSIF ns IS NULL AND tk IS NULL THEN
        RAISE EXCEPTION 'queue, or namespace and/or task, is required' USING ERRCODE = '22023';
    END IF;
    RETURN ARRAY(SELECT q.name FROM pgcursor.queues q
                 WHERE (ns IS NULL OR q.namespace = ns) AND (tk IS NULL OR q.task = tk)
                 ORDER BY q.name);
END $$;

-- Records the group's subscription on each queue it has none on (from the
-- request's subscriptionMode/subscriptionFrom; docs/http-api.md "Popping"),
-- and marks a subscription whose rows a delete removed (cursor_rows 'none')
-- pending again. A group's start is fixed for the whole queue at its first
-- pop: partitions it reaches later start where the subscription says. Answers
-- the queues whose subscription is pending (partitions there may
-- lack the group's row), by priority, then name: those add_claimable_cursors
-- looks at. Not those subscribed here in mode new: nothing in them can be
-- new to the group yet. The usual case (subscribed, rows complete) costs
-- one primary-key probe per queue and answers none. Recording a
-- subscription first waits for pushes creating partitions of the queue
-- (lock_partition_sets), so that the pop sees those partitions.
CREATE OR REPLACE FUNCTION pgcursor_internal.subscribe(queues text[], grp text, mode text, since timestamptz)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    unsubscribed text[];  -- no subscription yet
    emptied text[];       -- a subscription whose rows a delete removed
    waiting text[];       -- a subscription whose rows are still being written
    fresh_new text[] := '{}';
BEGIN
    -- The usual case first, as a bare probe: the aggregates below, run
    -- for it, cost a pop about 3% more.
    IF NOT EXISTS (SELECT 1 FROM unnest(queues) x(queue)
                     LEFT JOIN pgcursor.subscriptions s ON s.consumer_group = grp AND s.queue = x.queue
                    WHERE s.cursor_rows IS DISTINCT FROM 'complete') THEN
        RETURN '{}';
    END IF;
    SELECT coalesce(array_agg(x.queue) FILTER (WHERE s.cursor_rows IS NULL), '{}'),
           coalesce(array_agg(x.queue) FILTER (WHERE s.cursor_rows = 'none'), '{}'),
           coalesce(array_agg(x.queue) FILTER (WHERE s.cursor_rows = 'pending'), '{}')
      INTO unsubscribed, emptied, waiting
      FROM unnest(queues) x(queue)
      LEFT JOIN pgcursor.subscriptions s ON s.consumer_group = grp AND s.queue = x.queue;
    IF cardinality(unsubscribed) + cardinality(emptied) > 0 THEN
        PERFORM pgcursor_internal.refuse_long_key('consumerGroup', grp);  -- the group's first rows
    END IF;
    -- Exclusive where the subscription changes; shared where rows will be
    -- written on it (add_claimable_cursors): a queue deleted since it was
    -- looked up is then gone from every statement below.
    PERFORM pgcursor_internal.lock_partition_sets(unsubscribed || emptied, waiting);
    -- Writes only when there is something to write, and each statement
    -- only when it has something to do: on Citus every statement modifying
    -- a reference table takes that table's one lock, whatever it changes.
    -- Pops taking it for nothing deadlocked with pushes creating
    -- partitions, and two first pops deadlocked when each, holding the lock
    -- of its INSERT, asked for the UPDATE's stronger one (so the UPDATE,
    -- when there is one, comes first).
    IF cardinality(emptied) > 0 THEN
        UPDATE pgcursor.subscriptions s SET cursor_rows = 'pending'
         WHERE s.consumer_group = grp AND s.queue = ANY (emptied) AND s.cursor_rows = 'none';
    END IF;
    IF cardinality(unsubscribed) > 0 THEN
        WITH made AS (
            INSERT INTO pgcursor.subscriptions AS s (consumer_group, queue, mode, since, cursor_rows)
            SELECT grp, x.queue,
                   CASE WHEN since IS NOT NULL THEN 'timestamp' ELSE mode END,
                   CASE WHEN since IS NOT NULL THEN since WHEN mode = 'new' THEN now() END,
                   'pending'
              FROM unnest(unsubscribed) x(queue)
             WHERE EXISTS (SELECT 1 FROM pgcursor.queues q WHERE q.name = x.queue)  -- not deleted meanwhile
             ORDER BY x.queue  -- one order everywhere: concurrent first pops wait, never deadlock
            ON CONFLICT DO NOTHING
            RETURNING s.queue, s.mode)
        SELECT coalesce(array_agg(made.queue) FILTER (WHERE made.mode = 'new'), '{}') INTO fresh_new FROM made;
    END IF;
    RETURN ARRAY(SELECT s.queue FROM pgcursor.subscriptions s JOIN pgcursor.queues q ON q.name = s.queue
                  WHERE s.consumer_group = grp AND s.queue = ANY (queues) AND s.cursor_rows = 'pending'
                    AND NOT (s.queue = ANY (fresh_new))
                  ORDER BY q.priority DESC, q.name);
END $$;

-- Writes the group's cursor rows on up to n partitions of `pending` (queues
-- whose subscription is pending, in the order subscribe() answers) that it
-- has none on yet and that hold a message past where the subscription
-- starts, for claim_batches to lease. Partitions are read in id order and
-- looked at one by one, in PL/pgSQL, only until enough are found: a group
-- new to a queue of thousands of partitions pays for what it looks at, not
-- for the queue's size (in one SQL statement the planner may run the
-- per-partition checks on every partition before ordering them: 600 ms at
-- 5,000 when the statistics are stale). A partition another pop of the
-- group is writing a row on right now is passed over, as claim_batches
-- skips locked rows: each takes a transaction advisory lock on (group,
-- partition) first, and only tries. Its keys are the group's hash and one
-- of 256 buckets of partitions (lock_bucket), so a pop holds at most 256
-- of them, and pops of different groups never pass over each other's
-- partitions. Rows are written in partition order, as every writer of new
-- cursor rows does: writers wait, never deadlock.
CREATE OR REPLACE FUNCTION pgcursor_internal.add_claimable_cursors(
    pending text[], pname text, grp text, n integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    sub   pgcursor.subscriptions;
    p     pgcursor.partitions;
    chunk pgcursor.partitions[];
    after uuid;
    head  bigint;
    start bigint;
    made  integer;
    left_ integer := n;
    looked_at_all boolean := false;
BEGIN
    <<queues>>
    FOR sub IN SELECT s.* FROM unnest(pending) WITH ORDINALITY x(queue, ord)
                 JOIN pgcursor.subscriptions s ON s.consumer_group = grp AND s.queue = x.queue
                ORDER BY x.ord
    LOOP
        -- The partitions 64 at a time, each read after the last one's id
        -- (the (queue, id) index, in order): as one query over all of them
        -- the cached generic plan scanned and sorted every partition of
        -- every queue first (1 ms at 5,000). The head is read per
        -- partition, in the loop: a join made the planner read every
        -- partition of the queue before the first (5,000: 7 -> 18 ms).
        after := '00000000-0000-0000-0000-000000000000';
        LOOP
            chunk := ARRAY(SELECT x FROM pgcursor.partitions x
                            WHERE x.queue = sub.queue AND x.id > after AND (pname IS NULL OR x.name = pname)
                            ORDER BY x.id LIMIT 64);
            EXIT WHEN cardinality(chunk) = 0;
            after := chunk[cardinality(chunk)].id;
            FOREACH p IN ARRAY chunk LOOP
                head := pgcursor_internal.partition_head(p.id);
                CONTINUE WHEN head = 0 OR EXISTS (SELECT 1 FROM pgcursor.cursors c
                                                   WHERE c.partition_id = p.id AND c.consumer_group = grp);
                start := pgcursor_internal.start_cursor(p, sub);
                CONTINUE WHEN start >= head
                           OR NOT pg_try_advisory_xact_lock(hashtext(grp), pgcursor_internal.lock_bucket(p.id::text));
                INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor)
                VALUES (p.id, grp, start)
                ON CONFLICT DO NOTHING;
                GET DIAGNOSTICS made = ROW_COUNT;
                left_ := left_ - made;
                EXIT queues WHEN left_ <= 0;
            END LOOP;
        END LOOP;
        looked_at_all := true;
    END LOOP;
    -- Every partition of a queue looked at: write the group's remaining rows
    -- now (set-based), or every later pop would look at them all again
    -- until housekeeping does (a quiet queue, a group in mode new).
    IF looked_at_all THEN
        PERFORM pgcursor_internal.materialize_cursors(grp, skip_locked => true);
    END IF;
    RETURN n - left_;
END $$;

-- delayedProcessing: the last offset a pop may hand out now from partition
-- pid, whose group's cursor is at cursor_at. Every message younger than
-- the delay is held back, and all after it (order is kept): ready is just
-- below the first one still too young, else the head. As createdAt never
-- decreases with the offset (push_stamps), that is the first message past
-- the last one old enough, found by reading the young ones from the newest
-- down (the primary key, backwards).
CREATE OR REPLACE FUNCTION pgcursor_internal.delayed_ready(
    pid uuid, cursor_at bigint, head bigint, delay_seconds integer)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce(
        (SELECT min(y.msg_offset) - 1 FROM pgcursor.messages y
          WHERE y.partition_id = pid AND y.msg_offset > coalesce(
              (SELECT max(o.msg_offset) FROM pgcursor.messages o
                WHERE o.partition_id = pid AND o.msg_offset > cursor_at
                  AND o.created_at <= now() - delay_seconds * interval '1 second'),
              cursor_at)),
        head);
END $$;

-- windowBuffer: a partition is served only once quiet that long, its newest
-- stored message created at least `seconds` ago. Usually the one at head;
-- below it when that one was deleted by hand (createdAt never decreases
-- with the offset, so the highest offset stored is the newest).
CREATE OR REPLACE FUNCTION pgcursor_internal.quiet_for(pid uuid, head bigint, seconds integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM (SELECT m.created_at FROM pgcursor.messages m
                                       WHERE m.partition_id = pid AND m.msg_offset <= head
                                       ORDER BY m.msg_offset DESC LIMIT 1) newest
                        WHERE newest.created_at > now() - seconds * interval '1 second');
END $$;

-- One claim of claim_batches: a partition's batch batch_start..batch_end,
-- rank its place in the pop. (Created once: see sql/00_namespace.sql.)
DO $$
BEGIN
    IF to_regtype('pgcursor_internal.pop_claim') IS NULL THEN
        CREATE TYPE pgcursor_internal.pop_claim AS (
            rank bigint, partition_id uuid, queue text, partition text,
            batch_start bigint, batch_end bigint, retry_count integer);
    END IF;
END $$;

-- claim_batches answered a table of pop_claim's columns before it answered
-- pop_claim rows: a function's result type is replaced only by dropping it.
DO $$
BEGIN
    IF (SELECT p.prorettype FROM pg_proc p
         WHERE p.oid = to_regprocedure('pgcursor_internal.claim_batches(text[], text, text, integer, integer, uuid)'))
       IS DISTINCT FROM 'pgcursor_internal.pop_claim'::regtype THEN
        DROP FUNCTION IF EXISTS pgcursor_internal.claim_batches(text[], text, text, integer, integer, uuid);
    END IF;
END $$;

-- Claims up to nparts partitions with deliverable messages (pending, past
-- delayedProcessing, in a partition quiet for windowBuffer) and no live
-- lease for the group, fairest first (queue priority, then least recently acked or
-- leased), giving each min(pending, what is left of batch). Rows are locked
-- SKIP LOCKED and the lease condition is re-checked on the locked version, so
-- no two pops of one group ever hold one partition. With lease_id null
-- (autoAck) the batch is completed on the spot instead of leased.
--
-- Always the generic plan (plan_cache_mode): planning this statement costs
-- about 1 ms, more than its run. With the default mode PostgreSQL compares
-- the generic plan's estimate with custom plans', and once groups of very
-- different sizes skew the statistics (a queue of 5,000 partitions with
-- groups on each) it judged the generic plan dearer and planned anew on
-- every pop: 0.6 -> 1.8 ms a pop. A generic plan must be right whatever
-- the statistics say, so which cursor rows it reads is decided here, not
-- by it: those on the queues' partitions when they are at most 64; else
-- the group's rows when it has at most 64 (a group new to a queue of
-- thousands of partitions has a few: they are written lazily); else those
-- on every partition of the queues (never all the group's rows: queue
-- mode is one group on every queue). Each row is read by key, its
-- partition, head and queue looked up by key (LIMIT 1 keeps a lookup a
-- probe), and no table is scanned whole (enable_seqscan: a generic
-- estimate of thousands of rows a group chose that, 2 ms).
CREATE OR REPLACE FUNCTION pgcursor_internal.claim_batches(
    queues text[], pname text, grp text, batch integer, nparts integer, lease uuid)
RETURNS SETOF pgcursor_internal.pop_claim
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
AS $$  -- plpgsql, not sql, only so the plan is cached (planning cost 3x the run)
#variable_conflict use_column
DECLARE
    part_ids uuid[];
    -- part_ids are the pop's partitions, none of another queue's: then the
    -- query need not check each row's queue, which costs a comparison with
    -- every queue of a namespace pop (3,000 queues: 54 of a 77 ms claim)
    exact boolean := true;
BEGIN
    part_ids := pgcursor_internal.pop_partition_ids(queues, pname, 65);
    IF cardinality(part_ids) > 64 THEN
        part_ids := ARRAY(SELECT c.partition_id FROM pgcursor.cursors c WHERE c.consumer_group = grp LIMIT 65);
        exact := false;
    END IF;
    IF cardinality(part_ids) > 64 THEN
        part_ids := pgcursor_internal.pop_partition_ids(queues, pname);
        exact := true;
    END IF;
    RETURN QUERY
    WITH locked AS (
        SELECT c.partition_id, c.cursor, c.retry_count, r.ready AS head, p.queue, p.name, q.lease_time,
               q.priority, greatest(c.last_ack_at, c.lease_expires_at) AS last_served
        FROM pgcursor.cursors c
        CROSS JOIN LATERAL (SELECT x.queue, x.name FROM pgcursor.partitions x
                             WHERE x.id = c.partition_id LIMIT 1) p
        CROSS JOIN LATERAL (SELECT x.head FROM pgcursor.partition_heads x
                             WHERE x.partition_id = c.partition_id LIMIT 1) h
        CROSS JOIN LATERAL (SELECT x.* FROM pgcursor.queues x WHERE x.name = p.queue LIMIT 1) q
        -- ready: the last offset a pop may hand out now (delayed_ready). The
        -- options' reads are helpers, called only for a queue that sets the
        -- option: as sub-selects of this query they were set up at every
        -- pop, used or not, a fifth of the claim's time. (OFFSET 0: pulled
        -- up, the lateral's expression was copied to both places that name
        -- r.ready, and delayed_ready ran twice per row.)
        CROSS JOIN LATERAL (SELECT CASE WHEN q.delayed_processing = 0 THEN h.head ELSE
                                pgcursor_internal.delayed_ready(c.partition_id, c.cursor, h.head,
                                                                q.delayed_processing) END AS ready
                            OFFSET 0) r
        WHERE c.partition_id = ANY (part_ids) AND c.consumer_group = grp
          AND (exact OR (p.queue = ANY (queues) AND (pname IS NULL OR p.name = pname)))
          AND c.cursor < h.head AND c.cursor < r.ready
          AND NOT pgcursor_internal.lease_is_live(c.lease_expires_at)
          AND CASE WHEN q.window_buffer = 0 THEN true
                   ELSE pgcursor_internal.quiet_for(c.partition_id, h.head, q.window_buffer) END
        ORDER BY q.priority DESC, greatest(c.last_ack_at, c.lease_expires_at) NULLS FIRST, c.partition_id
        LIMIT nparts
        FOR UPDATE OF c SKIP LOCKED
    ), alloc AS (  -- rank: the claim's place; take: what is left of batch for it
        SELECT l.*, row_number() OVER fairest AS rank,
               least(l.head - l.cursor,
                     batch - coalesce(sum(l.head - l.cursor) OVER (
                         fairest ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::bigint AS take
        FROM locked l
        WINDOW fairest AS (ORDER BY l.priority DESC, l.last_served NULLS FIRST, l.partition_id)
    ), claimed AS (
        UPDATE pgcursor.cursors c SET
            lease_id         = lease,
            lease_expires_at = CASE WHEN lease IS NULL THEN NULL ELSE now() + a.lease_time * interval '1 second' END,
            batch_start      = CASE WHEN lease IS NULL THEN NULL ELSE a.cursor + 1 END,
            batch_end        = CASE WHEN lease IS NULL THEN NULL ELSE a.cursor + a.take END,
            cursor           = CASE WHEN lease IS NULL THEN a.cursor + a.take ELSE c.cursor END,
            completed_total  = c.completed_total + CASE WHEN lease IS NULL THEN a.take ELSE 0 END,
            last_ack_at      = CASE WHEN lease IS NULL THEN now() ELSE c.last_ack_at END,
            retry_count      = CASE WHEN lease IS NULL THEN 0 ELSE c.retry_count END,
            -- a lease still set here was never released: it expired (live ones are skipped)
            lease_expiries   = c.lease_expiries + CASE WHEN c.lease_id IS NOT NULL THEN 1 ELSE 0 END
        FROM alloc a
        WHERE a.take > 0 AND c.partition_id = a.partition_id AND c.consumer_group = grp
        RETURNING a.rank, a.partition_id, a.queue, a.name, a.cursor + 1, a.cursor + a.take, a.retry_count
    )
    SELECT * FROM claimed ORDER BY rank;
END $$;

-- maxBytes: what a stored payload weighs. Its size as stored, which is
-- about its size as text; but a compressed payload is weighed as text: its
-- stored size can be a hundredth of that.
CREATE OR REPLACE FUNCTION pgcursor_internal.payload_weight(payload jsonb)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN pg_column_compression(payload) IS NULL THEN pg_column_size(payload)
                ELSE octet_length(payload::text) END
$$;

-- maxBytes: how far one claim's messages, from its first, fit in what is
-- left of a pop's byte budget: while the payloads up to a message weigh at
-- most `budget` (the first message of the range fits in any case when
-- `first_of_pop`: a pop delivers at least one). Answers the last offset
-- that fits, the weight up to it, and whether every stored message fits
-- (null when retention deleted them all: nothing to weigh). The range is
-- weighed whole first: when it fits, as it mostly does, that is all; else
-- its messages are read in order only as far as they fit. Planned once
-- per session, as claimed_messages is. (Each a plain one-partition query:
-- Citus routes those with their parameters; a running sum in a subquery
-- it could not plan at all.)
CREATE OR REPLACE FUNCTION pgcursor_internal.claim_fit(
    pid uuid, first bigint, last bigint, budget bigint, first_of_pop boolean,
    OUT fit_end bigint, OUT fit_bytes bigint, OUT all_fit boolean)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    m record;
BEGIN
    SELECT max(x.msg_offset), sum(pgcursor_internal.payload_weight(x.payload))
      INTO fit_end, fit_bytes
      FROM pgcursor.messages x
     WHERE x.partition_id = pid AND x.msg_offset BETWEEN first AND last;
    IF fit_bytes IS NULL THEN
        fit_bytes := 0;
        RETURN;
    END IF;
    all_fit := fit_bytes <= budget;
    IF all_fit THEN
        RETURN;
    END IF;
    fit_end := NULL;
    fit_bytes := 0;
    FOR m IN SELECT x.msg_offset, pgcursor_internal.payload_weight(x.payload) AS weight
               FROM pgcursor.messages x
              WHERE x.partition_id = pid AND x.msg_offset BETWEEN first AND last
              ORDER BY x.msg_offset
    LOOP
        EXIT WHEN fit_bytes + m.weight > budget AND NOT (first_of_pop AND fit_end IS NULL);
        fit_end := m.msg_offset;
        fit_bytes := fit_bytes + m.weight;
    END LOOP;
END $$;

-- maxBytes: keeps a pop's claims, in claim order, to what fits in `budget`
-- bytes of payload (claim_fit), so that a large batch of large messages
-- cannot make an answer of gigabytes. The claim where the budget runs out
-- is cut after its last message that fits; later claims are given back,
-- as if never made. The first message is kept whatever its size. A leased
-- claim keeps a lease on what it delivers only; an autoAck claim completes
-- only that (its cursor and completed count go back to match; its
-- last_ack_at, which orders partitions for fairness, stays the pop's). The
-- messages are weighed only when they could outweigh the budget: when each
-- claim's count times twice the largest payload its partition ever got
-- (partition_heads.max_weight; twice, as text can take twice the bytes,
-- escapes and all) adds up to more, or when the claim reaches below
-- weighed_from (messages stored before max_weight was kept). A pop of
-- small messages so costs a key lookup per claim; weighing costs a read
-- of the claimed messages' sizes per claim, and cutting or giving back a
-- write.
CREATE OR REPLACE FUNCTION pgcursor_internal.fit_claims_to_bytes(
    claims pgcursor_internal.pop_claim[], grp text, lease uuid, budget bigint)
RETURNS pgcursor_internal.pop_claim[] LANGUAGE plpgsql AS $$
DECLARE
    claim pgcursor_internal.pop_claim;
    kept pgcursor_internal.pop_claim[] := '{}';
    bound bigint := 0;
    fit_end bigint;     -- claim_fit's answer for the claim
    fit_bytes bigint;
    all_fit boolean;
BEGIN
    FOREACH claim IN ARRAY claims LOOP  -- one key lookup each: routed on Citus
        bound := bound + 2 * (claim.batch_end - claim.batch_start + 1)
                           * (SELECT CASE WHEN claim.batch_start >= h.weighed_from THEN h.max_weight
                                          ELSE 2147483647 END  -- of unknown weight: weigh them
                                FROM pgcursor.partition_heads h WHERE h.partition_id = claim.partition_id);
    END LOOP;
    IF bound <= budget THEN
        RETURN claims;
    END IF;
    FOREACH claim IN ARRAY claims LOOP
        IF budget > 0 THEN
            SELECT f.fit_end, f.fit_bytes, f.all_fit INTO fit_end, fit_bytes, all_fit
              FROM pgcursor_internal.claim_fit(claim.partition_id, claim.batch_start, claim.batch_end,
                                               budget, cardinality(kept) = 0) f;
            budget := budget - fit_bytes;
        ELSE  -- nothing left: nothing fits
            fit_end := NULL;
            all_fit := false;
        END IF;
        IF all_fit IS DISTINCT FROM false THEN
            kept := kept || claim;
        ELSIF fit_end IS NULL AND lease IS NOT NULL THEN  -- give the claim back
            PERFORM pgcursor_internal.give_back_lease(lease, grp, ARRAY[claim.partition_id]);
        ELSIF fit_end IS NULL THEN  -- give the autoAck claim back: undo its completion
            UPDATE pgcursor.cursors c SET
                cursor = claim.batch_start - 1,
                completed_total = c.completed_total - (claim.batch_end - claim.batch_start + 1),
                retry_count = claim.retry_count
             WHERE c.partition_id = claim.partition_id AND c.consumer_group = grp;
        ELSE  -- cut it after fit_end
            UPDATE pgcursor.cursors c SET
                batch_end = CASE WHEN lease IS NULL THEN NULL ELSE fit_end END,
                cursor = CASE WHEN lease IS NULL THEN fit_end ELSE c.cursor END,
                completed_total = c.completed_total
                    - CASE WHEN lease IS NULL THEN claim.batch_end - fit_end ELSE 0 END
             WHERE c.partition_id = claim.partition_id AND c.consumer_group = grp;
            claim.batch_end := fit_end;
            kept := kept || claim;
        END IF;
    END LOOP;
    RETURN kept;
END $$;

-- A pop's lease given back, as if never taken, on the partitions it claimed
-- (the gateway, when the pop's client hung up while it ran: the messages
-- go to the next pop instead of waiting out a lease nobody holds). The
-- cursors did not move (a leased pop completes nothing), so this only
-- clears the lease. Answers the partitions given back. Row by row in
-- partition order, as seeks lock a group's rows: one UPDATE took them in
-- the order its scan met them and deadlocked with a seek
-- (tests/sql/66_seek_concurrency.sql).
CREATE OR REPLACE FUNCTION pgcursor_internal.give_back_lease(lease uuid, grp text, partition_ids uuid[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    pid uuid;
    n   integer := 0;
BEGIN
    FOR pid IN SELECT DISTINCT x FROM unnest(partition_ids) x ORDER BY x LOOP
        UPDATE pgcursor.cursors c
           SET lease_id = NULL, lease_expires_at = NULL, batch_start = NULL, batch_end = NULL
         WHERE c.partition_id = pid AND c.consumer_group = grp AND c.lease_id = lease;
        n := n + CASE WHEN FOUND THEN 1 ELSE 0 END;
    END LOOP;
    RETURN n;
END $$;

-- Whether partition `pname` of the queues is held back by its queue's
-- windowBuffer now: its newest message younger than that (Queen's
-- windowBufferActive, for a pop naming the partition that claimed nothing).
CREATE OR REPLACE FUNCTION pgcursor_internal.window_buffer_active(queues text[], pname text)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
                    WHERE p.queue = ANY (queues) AND p.name = pname AND q.window_buffer > 0
                      AND NOT pgcursor_internal.quiet_for(p.id, pgcursor_internal.partition_head(p.id),
                                                          q.window_buffer));
END $$;

-- What one pop claims, before pop_messages reads the messages: whether
-- pops are paused (maintenance mode; then nothing else), the lease, the
-- group, and the claims of claim_batches in claim order (empty: nothing
-- available; then window_active says whether the partition the pop named
-- is held back by its windowBuffer). The group's first pop on a queue
-- records its subscription here. (The claims as an array of rows: as a
-- JSON array, written here and read back by pop_messages, they cost up to
-- a twentieth of a pop.)
SELECT pgcursor_internal.drop_version_without('pgcursor_internal.claim_for_pop(jsonb)', 'window_active');
CREATE OR REPLACE FUNCTION pgcursor_internal.claim_for_pop(
    req jsonb, OUT paused boolean, OUT lease uuid, OUT grp text, OUT claims pgcursor_internal.pop_claim[],
    OUT window_active boolean)
LANGUAGE plpgsql AS $$
DECLARE
    -- (in this order, as pop always read them: the first bad one is named;
    -- the queues after the maintenance flag, so that a paused pop answers
    -- paused whatever queue it names, as Queen's does before any lookup)
    group_name text := pgcursor_internal.group_arg(req);
    batch  integer := pgcursor_internal.positive_int_arg(req, 'batch', 1);
    nparts integer := pgcursor_internal.positive_int_arg(req, 'partitions', 1);
    auto   boolean := pgcursor_internal.bool_arg(req, 'autoAck', false);
    mode   text := pgcursor_internal.subscription_mode(req);
    since  timestamptz := pgcursor_internal.subscription_from(req);
    queues text[];
    pname  text := pgcursor_internal.optional_text(req, 'partition');
    max_bytes integer := pgcursor_internal.positive_int_arg(req, 'maxBytes', NULL);
    pending text[];
    want   integer := nparts;
    made   integer;
BEGIN
    grp := group_name;
    window_active := false;
    paused := coalesce((SELECT m.enabled FROM pgcursor.maintenance m WHERE m.mode = 'pop'), false);
    IF paused THEN
        RETURN;
    END IF;
    queues := pgcursor_internal.pop_queues(req);
    lease := CASE WHEN auto THEN NULL ELSE pgcursor_internal.uuidv7() END;
    -- Queue mode has no subscription (as in Queen): a worker's first pop
    -- starts at the beginning, whatever subscriptionMode/From it sends;
    -- skipping the backlog would leave it consumed by nobody.
    IF grp = '__QUEUE_MODE__' THEN
        mode := 'all';
        since := NULL;
    END IF;
    pending := pgcursor_internal.subscribe(queues, grp, mode, since);
    -- New rows may all be held back (delayedProcessing, windowBuffer): then
    -- look further, twice as far each time, until a claim or no more rows.
    LOOP
        made := CASE WHEN cardinality(pending) = 0 THEN 0
                     ELSE pgcursor_internal.add_claimable_cursors(pending, pname, grp, want) END;
        claims := ARRAY(SELECT b FROM pgcursor_internal.claim_batches(queues, pname, grp, batch, nparts, lease) b
                         ORDER BY b.rank);
        EXIT WHEN cardinality(claims) > 0 OR made = 0;
        want := want * 2;
    END LOOP;
    IF max_bytes IS NOT NULL AND cardinality(claims) > 0 THEN
        claims := pgcursor_internal.fit_claims_to_bytes(claims, grp, lease, max_bytes);
    END IF;
    window_active := cardinality(claims) = 0 AND pname IS NOT NULL
                     AND pgcursor_internal.window_buffer_active(queues, pname);
END $$;

-- After a pop that claimed nothing: in how many seconds the same pop could
-- claim without a push, when time alone frees messages the group's rows on
-- its partitions hold: a live lease expiring, or delayedProcessing and
-- windowBuffer letting a partition's pending messages through. Null when
-- none does, and for a pop over more than 64 partitions (not worth reading
-- every row; nor are rows a pending subscription has not written read). A
-- waiting pop looks again then, and at the latest at its periodic re-look
-- (gateway/src/routes/pop.rs): without this, a message delayed 2 s reached
-- a waiting consumer 5 s after its push. Each row is read by key, as the
-- claim reads them.
CREATE OR REPLACE FUNCTION pgcursor_internal.pop_due_in(req jsonb)
RETURNS double precision LANGUAGE plpgsql STABLE AS $$
DECLARE
    grp      text := pgcursor_internal.group_arg(req);
    part_ids uuid[] := pgcursor_internal.pop_partition_ids(
                           pgcursor_internal.pop_queues(req), pgcursor_internal.optional_text(req, 'partition'), 65);
    pid      uuid;
    c        pgcursor.cursors;
    q        pgcursor.queues;
    head     bigint;
    at       timestamptz;
    due      timestamptz;
BEGIN
    IF cardinality(part_ids) > 64 THEN
        RETURN NULL;
    END IF;
    FOREACH pid IN ARRAY part_ids LOOP
        SELECT x.* INTO c FROM pgcursor.cursors x WHERE x.partition_id = pid AND x.consumer_group = grp;
        CONTINUE WHEN NOT FOUND;
        head := pgcursor_internal.partition_head(pid);
        CONTINUE WHEN c.cursor >= head;
        IF pgcursor_internal.lease_is_live(c.lease_expires_at) THEN
            at := c.lease_expires_at;
        ELSE
            SELECT x.* INTO q FROM pgcursor.queues x JOIN pgcursor.partitions p ON p.queue = x.name WHERE p.id = pid;
            -- (both options: served once both let it through)
            at := greatest(
                CASE WHEN q.delayed_processing > 0 THEN
                    (SELECT m.created_at FROM pgcursor.messages m
                      WHERE m.partition_id = pid AND m.msg_offset > c.cursor ORDER BY m.msg_offset LIMIT 1)
                    + q.delayed_processing * interval '1 second' END,
                CASE WHEN q.window_buffer > 0 THEN
                    (SELECT m.created_at FROM pgcursor.messages m WHERE m.partition_id = pid AND m.msg_offset = head)
                    + q.window_buffer * interval '1 second' END);
        END IF;
        IF at > now() AND (due IS NULL OR at < due) THEN
            due := at;
        END IF;
    END LOOP;
    RETURN extract(epoch FROM due - now());
END $$;

-- The stored messages of partition pid from offset first to last, in
-- offset order: one claim's batch. Planned once per session
-- (force_generic_plan): left to choose, PostgreSQL planned this read anew at
-- every pop, 70 us of a 700 us pop. enable_seqscan = off keeps that one plan
-- a range of the primary key even when it was made while messages was empty.
-- (A function of its own: settings given to pop_messages would hold for all
-- it calls, and Citus cannot plan subscribe's insert generically.)
CREATE OR REPLACE FUNCTION pgcursor_internal.claimed_messages(pid uuid, first bigint, last bigint)
RETURNS TABLE (message_id uuid, transaction_id text, msg_offset bigint, payload jsonb,
               created_at timestamptz, trace_id uuid)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT m.message_id, m.transaction_id, m.msg_offset, m.payload, m.created_at, m.trace_id
      FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.msg_offset BETWEEN first AND last
     ORDER BY m.msg_offset;
END $$;

-- pop_messages: the pop as rows, one per message delivered, in pop's order
-- (claim order, then offset), each with its claim: the gateway writes the
-- HTTP answer from them and psql shows a table. A claim whose messages
-- retention deleted shows as one row with the message columns null; so
-- does a pop that claims nothing (partitions_claimed 0; window_buffer_active
-- when it named a partition its windowBuffer holds back) or finds pops
-- paused (paused). queue, partition and partition_id are the message's
-- own; the first row's are the first claimed partition's.
--
-- Each claim's messages are read by a statement of their own, after the
-- claim: it sees every message the claim saw (one query around the claim
-- would read with the snapshot it started with, and miss messages pushed
-- while the claim waited). Rows, not JSON and not arrays: building the
-- batch as eleven arrays cost a third of a pop. (No JIT: 99_jit.sql.)
--
--   SELECT msg_offset, transaction_id, payload FROM pgcursor.pop_messages('{"queue":"orders","batch":10}');
SELECT pgcursor_internal.drop_version_without('pgcursor.pop_messages(jsonb)', 'window_buffer_active');
CREATE OR REPLACE FUNCTION pgcursor.pop_messages(req jsonb)
RETURNS TABLE (paused boolean, lease_id uuid, consumer_group text, partitions_claimed integer,
               queue text, partition text, partition_id uuid, retry_count integer,
               message_id uuid, transaction_id text, msg_offset bigint, payload jsonb,
               created_at timestamptz, trace_id uuid, window_buffer_active boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c record;
    claim pgcursor_internal.pop_claim;
    claimed integer;
BEGIN
    c := pgcursor_internal.claim_for_pop(req);
    claimed := coalesce(cardinality(c.claims), 0);
    -- What a row without a message says (RETURN NEXT: these, and nulls).
    -- No lease id when nothing was claimed: there is no lease to ack under.
    paused := c.paused;
    lease_id := CASE WHEN claimed > 0 THEN c.lease END;
    consumer_group := c.grp;
    partitions_claimed := claimed;
    window_buffer_active := c.window_active;
    IF claimed = 0 THEN
        RETURN NEXT;
        RETURN;
    END IF;
    FOREACH claim IN ARRAY c.claims
    LOOP
        RETURN QUERY
        SELECT false, c.lease, c.grp, claimed, claim.queue, claim.partition, claim.partition_id, claim.retry_count,
               m.message_id, m.transaction_id, m.msg_offset, m.payload, m.created_at, m.trace_id, false
          FROM pgcursor_internal.claimed_messages(claim.partition_id, claim.batch_start, claim.batch_end) m;
        IF NOT FOUND THEN
            queue := claim.queue;
            partition := claim.partition;
            partition_id := claim.partition_id;
            retry_count := claim.retry_count;
            RETURN NEXT;
        END IF;
    END LOOP;
END $$;

-- pop: see the header. Answers Queen's JSON: {"success": true, "queue",
-- "partition", "partitionId" (of the first claimed partition), "leaseId",
-- "consumerGroup", "partitionsClaimed", "messages": [...]}. Nothing
-- available: {"success": true, "messages": []}; paused: that with "paused":
-- true; a named partition its windowBuffer holds back: that with
-- "windowBufferActive": true, "leaseId": "" (Queen's).
-- The gateway writes the same answer from pop_messages' rows.
CREATE OR REPLACE FUNCTION pgcursor.pop(req jsonb)
RETURNS jsonb LANGUAGE sql AS $$
    WITH popped AS MATERIALIZED (SELECT * FROM pgcursor.pop_messages(req) WITH ORDINALITY)
    SELECT CASE
        WHEN first.paused THEN '{"success": true, "messages": [], "paused": true}'::jsonb
        WHEN first.partitions_claimed = 0 AND first.window_buffer_active
            THEN '{"success": true, "messages": [], "windowBufferActive": true, "leaseId": ""}'::jsonb
        WHEN first.partitions_claimed = 0 THEN '{"success": true, "messages": []}'::jsonb
        ELSE jsonb_build_object(
            'success', true, 'queue', first.queue, 'partition', first.partition,
            'partitionId', first.partition_id, 'leaseId', first.lease_id,
            'consumerGroup', first.consumer_group, 'partitionsClaimed', first.partitions_claimed,
            'messages', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                             'id', m.message_id, 'transactionId', m.transaction_id,
                             'partitionId', m.partition_id, 'partition', m.partition, 'queue', m.queue,
                             'offset', m.msg_offset, 'leaseId', m.lease_id, 'consumerGroup', m.consumer_group,
                             'data', m.payload, 'payload', m.payload,
                             'createdAt', pgcursor_internal.rfc3339_utc(m.created_at), 'traceId', m.trace_id,
                             'producerSub', NULL, 'retryCount', m.retry_count) ORDER BY m.ordinality), '[]'::jsonb)
                           FROM popped m WHERE m.msg_offset IS NOT NULL))
    END
    FROM popped first
    WHERE first.ordinality = 1
$$;
