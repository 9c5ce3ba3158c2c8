-- Retention: the purges of messages, completed messages, dead letters and
-- the transaction index, and the eviction of messages waiting too long,
-- each by its queue's rule or an explicit cutoff. housekeeping()
-- (sql/90_housekeeping.sql) runs them all.
--
--   SELECT pgcursor.purge_messages(now() - interval '1 day'); -- retention-on queues, older than a day
--   SELECT pgcursor.evict_expired_messages();                 -- per-queue maxWaitTimeSeconds
--   SELECT pgcursor.purge_transaction_index();                -- per-queue transaction index retention
--
-- The switch retentionEnabled (queues.retention_enabled): explicitly false
-- turns message and completed-message retention off; NULL (never set) and
-- true leave them on (docs/http-api.md "Housekeeping"). Dead letters keep
-- their own retention, by retentionSeconds whatever the switch, and eviction
-- (maxWaitTimeSeconds) is an option of its own, not retention.
--
-- Deleting pending messages must never wedge a partition: a pop leases
-- cursor+1.. by offset, so a cursor whose next offsets are all gone would be
-- handed empty batches forever. So every cursor is kept off deleted ranges:
-- purge_messages() and evict_expired_messages() move existing cursors past
-- them, and a cursor row created later (a new group, or a group new to this
-- partition) starts past them.
--
-- Traces (sql/68_traces.sql) go with their message: each purge and the
-- eviction delete the trace events of the messages they delete.

-- Moves every cursor on partitions `parts` whose next offset was deleted
-- past the deleted range. The callers pass every partition their rule
-- covers, not only those they just deleted from, so a cursor row that raced
-- an earlier run is repaired by the next. The skipped offsets count in no
-- total; the retry counter belonged to a message that is gone, so it
-- restarts at 0. A lease is left alone: its acks still resolve through the
-- transaction index.
--
-- The rows to move are read first, then each is moved by key in partition
-- order, the order seeks and deletes lock a group's rows in: one UPDATE
-- moved them in the order its scan met them and deadlocked with a seek
-- (tests/sql/66_seek_concurrency.sql). On Citus each UPDATE goes to one
-- shard, with retained_cursor computed on the coordinator (it reads
-- messages, which no statement sent to a shard can).
CREATE OR REPLACE FUNCTION pgcursor_internal.move_cursors_past_deleted(parts uuid[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    behind record;
    target bigint;
    one    bigint;
    moved  bigint := 0;
BEGIN
    FOR behind IN SELECT c.partition_id, c.consumer_group, c.cursor
                    FROM pgcursor.cursors c
                    JOIN pgcursor.partition_heads h ON h.partition_id = c.partition_id
                   WHERE c.partition_id = ANY (parts) AND c.cursor < h.head
                     AND NOT EXISTS (SELECT 1 FROM pgcursor.messages m
                                      WHERE m.partition_id = c.partition_id AND m.msg_offset = c.cursor + 1)
                   ORDER BY c.partition_id, c.consumer_group
    LOOP
        target := pgcursor_internal.retained_cursor(behind.partition_id, behind.cursor);
        UPDATE pgcursor.cursors c SET cursor = target, retry_count = 0
         WHERE c.partition_id = behind.partition_id AND c.consumer_group = behind.consumer_group
           AND target > c.cursor;  -- re-checked on the locked row: never moves a cursor back
        GET DIAGNOSTICS one = ROW_COUNT;
        moved := moved + one;
    END LOOP;
    RETURN moved;
END $$;

-- A new cursor row starts past any range already deleted (see the header).
CREATE OR REPLACE FUNCTION pgcursor_internal.start_past_deleted()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.cursor := pgcursor_internal.retained_cursor(NEW.partition_id, NEW.cursor);
    RETURN NEW;
END $$;

-- Created once: re-creating it at every start would lock the cursors table.
-- A database from before pgcursor_internal has it on pgcursor.start_past_deleted:
-- moved over once, and the old function dropped.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger
                WHERE tgrelid = 'pgcursor.cursors'::regclass AND tgname = 'cursors_start_past_deleted'
                  AND tgfoid <> 'pgcursor_internal.start_past_deleted()'::regprocedure) THEN
        DROP TRIGGER cursors_start_past_deleted ON pgcursor.cursors;
        DROP FUNCTION pgcursor.start_past_deleted();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgrelid = 'pgcursor.cursors'::regclass AND tgname = 'cursors_start_past_deleted') THEN
        CREATE TRIGGER cursors_start_past_deleted BEFORE INSERT ON pgcursor.cursors
            FOR EACH ROW EXECUTE FUNCTION pgcursor_internal.start_past_deleted();
    END IF;
END $$;

-- A stored message is its own transaction index entry (V11): when one is
-- deleted while its queue still remembers its transactionId (created at or
-- after the horizon), the id moves to transaction_index, so a push of it
-- stays a duplicate and an ack of it still resolves. (One place for every
-- delete: retention, eviction, a delete by hand. delete_message and
-- delete_queue remove these entries again, as they mean to forget.)
CREATE OR REPLACE FUNCTION pgcursor_internal.remember_deleted_ids()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcursor.transaction_index AS x (partition_id, transaction_id, msg_offset, created_at)
    SELECT DISTINCT ON (g.partition_id, g.transaction_id)
           g.partition_id, g.transaction_id, g.msg_offset, g.created_at
      FROM gone g
      JOIN pgcursor.partitions p ON p.id = g.partition_id
      JOIN pgcursor.queues q ON q.name = p.queue
     WHERE g.created_at >= pgcursor_internal.transaction_index_horizon(q.transaction_index_from,
                                                                       q.transaction_index_retention_seconds)
     ORDER BY g.partition_id, g.transaction_id, g.msg_offset DESC
    ON CONFLICT (partition_id, transaction_id) DO UPDATE
       SET msg_offset = excluded.msg_offset, created_at = excluded.created_at
     WHERE x.msg_offset < excluded.msg_offset;
    RETURN NULL;
END $$;

-- Created once, like the trigger above.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgrelid = 'pgcursor.messages'::regclass AND tgname = 'messages_remember_deleted_ids') THEN
        CREATE TRIGGER messages_remember_deleted_ids AFTER DELETE ON pgcursor.messages
            REFERENCING OLD TABLE AS gone
            FOR EACH STATEMENT EXECUTE FUNCTION pgcursor_internal.remember_deleted_ids();
    END IF;
END $$;

-- Per partition of a queue with retentionSeconds > 0: what is older than
-- this goes (the queue's retention, or the explicit cutoff). Shared by the
-- message purge (of_messages: only where retentionEnabled is not false) and
-- the dead-letter purge (every such queue: dead letters keep their own
-- retention, see the header).
-- Answers each partition's queue too, for record_deletions.
SELECT pgcursor_internal.drop_version_without('pgcursor_internal.retention_cutoffs(timestamptz, boolean)', 'queue');
CREATE OR REPLACE FUNCTION pgcursor_internal.retention_cutoffs(cutoff timestamptz, of_messages boolean)
RETURNS TABLE (id uuid, queue text, before timestamptz) LANGUAGE sql STABLE AS $$
    SELECT p.id, p.queue, coalesce(cutoff, now() - q.retention_seconds * interval '1 second')
      FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
     WHERE q.retention_seconds > 0 AND (NOT of_messages OR q.retention_enabled IS NOT false)
$$;

-- Deletes partition pid's messages with an offset in (above, upto] created
-- before `before`, and their trace events (traces go with their message);
-- returns how many messages went. One partition per call: each delete is a
-- range scan of one partition's rows, and on Citus a statement routed to
-- the partition's shard. Every purge and the eviction delete through it.
CREATE OR REPLACE FUNCTION pgcursor_internal.delete_partition_messages(
    pid uuid, above bigint, upto bigint, before timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    gone bigint;
BEGIN
    DELETE FROM pgcursor.trace_events e USING pgcursor.messages m
     WHERE e.partition_id = pid AND m.partition_id = pid AND e.transaction_id = m.transaction_id
       AND m.msg_offset > above AND m.msg_offset <= upto AND m.created_at < before;
    DELETE FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.msg_offset > above AND m.msg_offset <= upto AND m.created_at < before;
    GET DIAGNOSTICS gone = ROW_COUNT;
    RETURN gone;
END $$;

-- retention_minutes keeps 24 hours (docs/http-api.md, analytics).
CREATE OR REPLACE FUNCTION pgcursor_internal.drop_old_retention_minutes()
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgcursor.retention_minutes t WHERE t.minute < now() - interval '24 hours';
END $$;

-- Adds what one purge deleted (deleted[i] messages of queues[i]) to this
-- minute's rows of pgcursor.retention_minutes, in the column of `kind`
-- (retention, completed or eviction), and one run for each queue that lost
-- any; drops rows older than a day. Answers the total deleted. Row by row:
-- Citus sends an INSERT ... SELECT into a reference table to a worker.
CREATE OR REPLACE FUNCTION pgcursor_internal.record_deletions(kind text, queues text[], deleted bigint[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    this_minute timestamptz := date_trunc('minute', now());
    total bigint := 0;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(queues), 0) LOOP
        CONTINUE WHEN deleted[i] = 0;
        INSERT INTO pgcursor.retention_minutes AS t
               (minute, queue, retention_messages, completed_retention_messages, eviction_messages, runs)
        VALUES (this_minute, queues[i], CASE WHEN kind = 'retention' THEN deleted[i] ELSE 0 END,
                CASE WHEN kind = 'completed' THEN deleted[i] ELSE 0 END,
                CASE WHEN kind = 'eviction' THEN deleted[i] ELSE 0 END, 1)
        ON CONFLICT (minute, queue) DO UPDATE SET
            retention_messages = t.retention_messages + excluded.retention_messages,
            completed_retention_messages = t.completed_retention_messages + excluded.completed_retention_messages,
            eviction_messages = t.eviction_messages + excluded.eviction_messages,
            runs = t.runs + 1;
        total := total + deleted[i];
    END LOOP;
    PERFORM pgcursor_internal.drop_old_retention_minutes();
    RETURN total;
END $$;

-- purge_messages: in queues with retentionSeconds > 0 (and retentionEnabled
-- not false), deletes messages older than that (or, given a cutoff, created
-- before it), pending or not, then moves cursors off what went. The
-- transactionIds their queue still remembers stay in the transaction index
-- (remember_deleted_ids): acks of deleted messages still resolve.
CREATE OR REPLACE FUNCTION pgcursor.purge_messages(cutoff timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    queues  text[];
    deleted bigint[];
    purged  bigint;
BEGIN
    SELECT array_agg(d.queue), array_agg(d.n) INTO queues, deleted
      FROM (SELECT r.queue, sum(pgcursor_internal.delete_partition_messages(r.id, 0, 9223372036854775807,
                                                                           r.before))::bigint AS n
              FROM pgcursor_internal.retention_cutoffs(cutoff, true) r
             WHERE pgcursor_internal.holds_messages_created(r.id, '-infinity', r.before)  -- one probe where nothing is due
             GROUP BY r.queue) d;
    purged := pgcursor_internal.record_deletions('retention', queues, deleted);
    PERFORM pgcursor_internal.move_cursors_past_deleted(
        ARRAY(SELECT r.id FROM pgcursor_internal.retention_cutoffs(cutoff, true) r));
    RETURN purged;
END $$;

-- Per partition of a queue with maxWaitTimeSeconds > 0: messages created
-- before `before` (the queue's maxWaitTimeSeconds ago, or the explicit
-- cutoff) with an offset above `consumed_to` (the lowest cursor of the
-- partition: what every group has consumed; 0 without cursors) are evicted.
SELECT pgcursor_internal.drop_version_without('pgcursor_internal.eviction_cutoffs(timestamptz)', 'queue');
CREATE OR REPLACE FUNCTION pgcursor_internal.eviction_cutoffs(cutoff timestamptz)
RETURNS TABLE (id uuid, queue text, before timestamptz, consumed_to bigint) LANGUAGE sql STABLE AS $$
    SELECT p.id, p.queue, coalesce(cutoff, now() - q.max_wait_time_seconds * interval '1 second'),
           coalesce((SELECT min(c.cursor) FROM pgcursor_internal.cursor_rows() c WHERE c.partition_id = p.id), 0)
      FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
     WHERE q.max_wait_time_seconds > 0
$$;

-- evict_expired_messages: in queues with maxWaitTimeSeconds > 0, deletes
-- (does not dead-letter) the messages created longer ago than that (or,
-- given a cutoff, before it) that at least one group with a cursor on the
-- partition has not consumed (offset above the lowest cursor), and every
-- old message of a partition no group has a cursor on. The deletion hits
-- every group. What every group has consumed is left to retention. Then
-- moves cursors off what went, as purge_messages does; the transaction
-- index keeps their ids as after purge_messages. Not gated by
-- retentionEnabled: it is not retention.
CREATE OR REPLACE FUNCTION pgcursor.evict_expired_messages(cutoff timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    queues  text[];
    deleted bigint[];
    evicted bigint;
BEGIN
    SELECT array_agg(d.queue), array_agg(d.n) INTO queues, deleted
      FROM (SELECT r.queue, sum(pgcursor_internal.delete_partition_messages(r.id, r.consumed_to, 9223372036854775807,
                                                                           r.before))::bigint AS n
              FROM pgcursor_internal.eviction_cutoffs(cutoff) r
             WHERE pgcursor_internal.holds_messages_created(r.id, '-infinity', r.before)
             GROUP BY r.queue) d;
    evicted := pgcursor_internal.record_deletions('eviction', queues, deleted);
    PERFORM pgcursor_internal.move_cursors_past_deleted(
        ARRAY(SELECT p.id FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
               WHERE q.max_wait_time_seconds > 0));
    RETURN evicted;
END $$;

-- purge_completed_messages: in queues with completedRetentionSeconds > 0
-- (and retentionEnabled not false), deletes messages every group with a cursor on the partition has completed
-- (offset <= the lowest cursor; a partition without cursors keeps all) and
-- older than that retention (or, given a cutoff, created before it).
CREATE OR REPLACE FUNCTION pgcursor.purge_completed_messages(cutoff timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    queues  text[];
    deleted bigint[];
BEGIN
    SELECT array_agg(d.queue), array_agg(d.n) INTO queues, deleted
      FROM (SELECT r.queue, sum(pgcursor_internal.delete_partition_messages(r.id, 0, r.completed_to, r.before))::bigint AS n
              FROM (SELECT p.id, p.queue, min(c.cursor) AS completed_to,
                           coalesce(cutoff, now() - q.completed_retention_seconds * interval '1 second') AS before
                      FROM pgcursor.partitions p
                      JOIN pgcursor.queues q ON q.name = p.queue
                      JOIN pgcursor_internal.cursor_rows() c ON c.partition_id = p.id
                     WHERE q.completed_retention_seconds > 0 AND q.retention_enabled IS NOT false
                     GROUP BY p.id, p.queue, q.completed_retention_seconds) r
             WHERE pgcursor_internal.holds_messages_created(r.id, '-infinity', r.before)
             GROUP BY r.queue) d;
    RETURN pgcursor_internal.record_deletions('completed', queues, deleted);
END $$;

-- purge_dead_letters: dead letters follow their queue's retentionSeconds:
-- in queues with retentionSeconds > 0, those that failed longer ago than
-- that (or, given a cutoff, before it). retentionSeconds 0 keeps them
-- forever. retentionEnabled false does not stop it (see the header).
CREATE OR REPLACE FUNCTION pgcursor.purge_dead_letters(cutoff timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r      record;
    one    bigint;
    purged bigint := 0;
BEGIN
    -- Per partition, as delete_partition_messages.
    FOR r IN SELECT * FROM pgcursor_internal.retention_cutoffs(cutoff, false) LOOP
        DELETE FROM pgcursor.dead_letters d WHERE d.partition_id = r.id AND d.failed_at < r.before;
        GET DIAGNOSTICS one = ROW_COUNT;
        purged := purged + one;
    END LOOP;
    RETURN purged;
END $$;

-- purge_transaction_index: forgets the transactionIds created before cutoff
-- or, with no cutoff, older than their queue's
-- transactionIndexRetentionSeconds (0 = keep forever). Once forgotten, a
-- transactionId can be pushed again, and an ack of it resolves only while
-- its message is stored. Stored messages pass their queue's horizon by the
-- clock alone (a cutoff moves every queue's horizon to it); what is deleted
-- here are the entries of deleted messages. Returns how many went. A cutoff
-- still to come counts as now (the clock's, so that ids pushed earlier in
-- the same transaction go too): the horizon it leaves would otherwise
-- forget, until then, the ids pushed after the call, and a push would store
-- a duplicate.
CREATE OR REPLACE FUNCTION pgcursor.purge_transaction_index(cutoff timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r      record;
    one    bigint;
    purged bigint := 0;
BEGIN
    IF cutoff IS NOT NULL THEN
        cutoff := least(cutoff, clock_timestamp());
        UPDATE pgcursor.queues q SET transaction_index_from = cutoff
         WHERE q.transaction_index_from IS NULL OR q.transaction_index_from < cutoff;
        DELETE FROM pgcursor.transaction_index WHERE created_at < cutoff;
        GET DIAGNOSTICS purged = ROW_COUNT;
        RETURN purged;
    END IF;
    -- Per partition, so each delete is a range scan of (partition_id, created_at)
    -- (and on Citus a statement routed to the partition's shard).
    FOR r IN SELECT p.id, now() - q.transaction_index_retention_seconds * interval '1 second' AS before
               FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
              WHERE q.transaction_index_retention_seconds > 0
    LOOP
        DELETE FROM pgcursor.transaction_index t WHERE t.partition_id = r.id AND t.created_at < r.before;
        GET DIAGNOSTICS one = ROW_COUNT;
        purged := purged + one;
    END LOOP;
    RETURN purged;
END $$;

-- How long a partition stays after it went idle (Queen's
-- PARTITION_CLEANUP_DAYS): purge_idle_partitions' default.
CREATE OR REPLACE FUNCTION pgcursor_internal.idle_partition_days()
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 30 $$;

-- The partitions among `ids` idle since `since`: they hold no message,
-- dead letter or remembered transactionId (a push of a remembered id must
-- stay a duplicate, an ack of one must still resolve), no push stored a
-- message there since (partition_heads.pushed_at), and no group acked
-- there or held a lease expiring since. One statement over those
-- partitions' rows (anti-joins: an index probe each; on Citus one query per
-- shard holding some of them, the tables being colocated by partition_id,
-- and for one id, one routed query): 30,000 partitions that hold a message
-- took 1.0 s asked one by one, 150-200 ms so. (An id list, not a join with the
-- heads no push reached: on Citus a set-returning SQL function is not
-- inlined, and a caller's filter on its answer would read every shard.)
DROP FUNCTION IF EXISTS pgcursor_internal.partition_is_idle(uuid, timestamptz);
CREATE OR REPLACE FUNCTION pgcursor_internal.idle_partitions(ids uuid[], since timestamptz)
RETURNS SETOF uuid LANGUAGE sql STABLE AS $$
    SELECT h.partition_id FROM pgcursor.partition_heads h
     WHERE h.partition_id = ANY (ids) AND h.pushed_at < since
       AND NOT EXISTS (SELECT 1 FROM pgcursor.messages m WHERE m.partition_id = h.partition_id)
       AND NOT EXISTS (SELECT 1 FROM pgcursor.dead_letters d WHERE d.partition_id = h.partition_id)
       AND NOT EXISTS (SELECT 1 FROM pgcursor.transaction_index t WHERE t.partition_id = h.partition_id)
       AND NOT EXISTS (SELECT 1 FROM pgcursor.cursors c
                        WHERE c.partition_id = h.partition_id
                          AND (c.last_ack_at >= since OR c.lease_expires_at >= since))
$$;

-- Locks idle partition pid's head and cursor rows without waiting, and
-- answers whether it got them all and the partition is idle still. A push,
-- pop or ack busy there keeps it for the next run; one that comes after
-- waits for the delete, and then finds the partition gone (a push creates
-- it anew, as after delete_queue).
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_idle_partition(pid uuid, since timestamptz)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    locked integer;
BEGIN
    PERFORM 1 FROM pgcursor.partition_heads h WHERE h.partition_id = pid FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT count(*) INTO locked
      FROM (SELECT 1 FROM pgcursor.cursors c WHERE c.partition_id = pid
             ORDER BY c.consumer_group FOR UPDATE SKIP LOCKED) x;
    IF locked < (SELECT count(*) FROM pgcursor.cursors c WHERE c.partition_id = pid) THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pgcursor_internal.idle_partitions(ARRAY[pid], since));
END $$;

-- Deletes partitions `ids` (locked by the caller) with every row that
-- refers to them. Their lifetime figures stay in retired_totals (the
-- delete triggers of sql/61_resources.sql).
CREATE OR REPLACE FUNCTION pgcursor_internal.delete_partitions(ids uuid[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgcursor.partitions p WHERE p.id = ANY (ids);
END $$;

-- purge_idle_partitions: deletes the partitions idle (idle_partitions)
-- since cutoff, or with none for idle_partition_days(), and created
-- before it; answers how many went. Each queue's partition set is taken
-- exclusive (lock_partition_sets) while its partitions go, so no push
-- creates, and no pop or ack writes a cursor row on, one of them
-- meanwhile; a queue whose set another session holds, and a partition
-- busy now, wait for the next run. A push to a deleted partition's name
-- creates it again, at offset 1, and every group stands at its start
-- there. Recorded per queue and minute for the queue-ops analytics
-- (partitionsDeleted).
CREATE OR REPLACE FUNCTION pgcursor.purge_idle_partitions(cutoff timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    since  timestamptz := coalesce(cutoff, now() - pgcursor_internal.idle_partition_days() * interval '1 day');
    stale  uuid[];
    idle   uuid[];
    owners text[];
    qname  text;
    doomed uuid[];
    queues text[] := '{}';
    counts bigint[] := '{}';
BEGIN
    -- Candidates first, without locks: the partitions no push reached since
    -- (one read of the narrow heads table), those of them idle, and of those
    -- the ones created before `since`, by queue (on Citus each a query per
    -- worker, not one per partition).
    stale := ARRAY(SELECT h.partition_id FROM pgcursor.partition_heads h WHERE h.pushed_at < since);
    SELECT coalesce(array_agg(x.id ORDER BY x.queue, x.id), '{}'),
           coalesce(array_agg(x.queue ORDER BY x.queue, x.id), '{}')
      INTO idle, owners
      FROM pgcursor_internal.idle_partitions(stale, since) i JOIN pgcursor.partitions x ON x.id = i
     WHERE x.created_at < since;
    FOR qname IN SELECT DISTINCT o FROM unnest(owners) o ORDER BY 1 LOOP
        CONTINUE WHEN cardinality(pgcursor_internal.lock_partition_sets(ARRAY[qname], '{}', true)) = 0;
        doomed := ARRAY(SELECT u.id FROM unnest(idle, owners) u(id, q)
                         WHERE u.q = qname AND pgcursor_internal.lock_idle_partition(u.id, since)
                         ORDER BY u.id);
        CONTINUE WHEN cardinality(doomed) = 0;
        PERFORM pgcursor_internal.delete_partitions(doomed);
        queues := queues || qname;
        counts := counts || cardinality(doomed)::bigint;
    END LOOP;
    RETURN pgcursor_internal.record_partition_deletions(queues, counts);
END $$;

-- Adds partitions deleted, per queue, to this minute's retention_minutes
-- row (not a retention run: runs stays), and answers the total.
CREATE OR REPLACE FUNCTION pgcursor_internal.record_partition_deletions(queues text[], deleted bigint[])
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(queues) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO pgcursor.retention_minutes AS t (minute, queue, partitions_deleted)
    SELECT date_trunc('minute', now()), u.q, u.n FROM unnest(queues, deleted) u(q, n)
    ON CONFLICT (minute, queue) DO UPDATE SET partitions_deleted = t.partitions_deleted + excluded.partitions_deleted;
    PERFORM pgcursor_internal.drop_old_retention_minutes();
    RETURN (SELECT sum(n) FROM unnest(deleted) n);
END $$;
