-- Helpers several function families share: timestamps and ids as answers
-- show them, the live-lease test, the dead-lettering switch, a queue's
-- options, and the locked cursor row.

-- A timestamp as RFC 3339 text in UTC ("2025-01-31T09:30:00.123456Z"),
-- whatever the session's TimeZone: answers must not depend on who asks.
CREATE OR REPLACE FUNCTION pgcursor_internal.rfc3339_utc(ts timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$  -- STABLE like to_char(), so it inlines
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- A time-ordered UUID (version 7): 48-bit Unix milliseconds, then random bits.
CREATE OR REPLACE FUNCTION pgcursor_internal.uuidv7()
RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

-- When a UUIDv7 was made (its first 48 bits, Unix milliseconds); null for
-- any other version.
CREATE OR REPLACE FUNCTION pgcursor_internal.uuidv7_time(u uuid)
RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN substr(u::text, 15, 1) = '7' THEN
        to_timestamp(('x' || left(u::text, 8) || substr(u::text, 10, 4))::bit(48)::bigint / 1000.0) END
$$;

-- UUIDv7 number i of a run that one uuidv7() starts (RFC 9562 §6.2,
-- method 2: a random start, incremented): head is the start's first 16
-- hex digits (timestamp, version, rand_a; uuidv7_head), rand_b its last 16
-- read as a bigint (uuidv7_rand_b), of which the 62 under the variant bits
-- count up by i. A push draws one random UUID, not one per message: the
-- draws cost a third of the messages' insert. (The start is split once per
-- run, by its caller: split per message, it cost as much as the draws.)
CREATE OR REPLACE FUNCTION pgcursor_internal.uuidv7_step(head text, rand_b bigint, i bigint)
RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT (head || to_hex(((rand_b + i) & x'3fffffffffffffff'::bigint) | x'8000000000000000'::bigint))::uuid
$$;

CREATE OR REPLACE FUNCTION pgcursor_internal.uuidv7_head(start uuid)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT left(replace(start::text, '-', ''), 16)
$$;

CREATE OR REPLACE FUNCTION pgcursor_internal.uuidv7_rand_b(start uuid)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT ('x' || right(replace(start::text, '-', ''), 16))::bit(64)::bigint
$$;

-- Is a lease that expires at expires_at still live (docs/ack-contract.md §1)? The
-- one test of liveness: pop, ack, extension, transactions and inspection
-- all ask here. (SQL and STABLE, so it inlines into their queries. No
-- COALESCE: Citus refuses now() inside CASE or COALESCE in an UPDATE.)
CREATE OR REPLACE FUNCTION pgcursor_internal.lease_is_live(expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT expires_at IS NOT NULL AND expires_at > now()
$$;

-- The oldest createdAt whose transactionId the queue still remembers
-- (dedup on push, resolution on ack): transactionIndexRetentionSeconds ago
-- (0: forever), never before the last explicit purge_transaction_index
-- cutoff. -infinity when nothing limits it. Given the queue's two columns
-- (transaction_index_from, transaction_index_retention_seconds), not its
-- row: on Citus a row passed to a function in a query sent to a shard has
-- the shard's row type, and no such function exists.
DROP FUNCTION IF EXISTS pgcursor_internal.transaction_index_horizon(pgcursor.queues);
CREATE OR REPLACE FUNCTION pgcursor_internal.transaction_index_horizon(
    index_from timestamptz, retention_seconds integer)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT coalesce(greatest(index_from,
                             CASE WHEN retention_seconds > 0
                                  THEN now() - retention_seconds * interval '1 second' END),
                    '-infinity')
$$;

-- What a transactionId names in a partition, through the transaction
-- index: the newest stored message pushed under it since the horizon, else
-- the entry retention left when it deleted such a message (message_id
-- null: the message is gone). No row: the partition does not remember it.
-- (SQL and STABLE, so it inlines; LIMIT 1 skips the second probe when the
-- first finds the message.) The horizon is tested with IS TRUE, which no
-- index can serve, so that both probes go by transactionId: in a cached
-- generic plan, with statistics from when partitions were small, the
-- (partition_id, created_at) indexes looked as cheap, and a probe then read
-- every message of the partition since the horizon (an ack 0.07 -> 1.2 ms).
CREATE OR REPLACE FUNCTION pgcursor_internal.indexed_message(pid uuid, txid text, horizon timestamptz)
RETURNS TABLE (msg_offset bigint, message_id uuid) LANGUAGE sql STABLE AS $$
    (SELECT m.msg_offset, m.message_id
       FROM (SELECT m.msg_offset, m.message_id FROM pgcursor.messages m
              WHERE m.partition_id = pid AND m.transaction_id = txid AND (m.created_at >= horizon) IS TRUE
             OFFSET 0) m
      ORDER BY m.msg_offset DESC LIMIT 1)
    UNION ALL
    (SELECT x.msg_offset, NULL::uuid FROM pgcursor.transaction_index x
      WHERE x.partition_id = pid AND x.transaction_id = txid AND (x.created_at >= horizon) IS TRUE)
    LIMIT 1
$$;

-- The offset a transactionId names in a partition (message, delete_message):
-- what the index remembers (indexed_message), else, past its horizon, the
-- newest message stored under it, as the index named it while it
-- remembered (pushed again once the index forgot it, a transactionId is
-- stored twice). NULL: neither knows it. One statement naming messages:
-- Citus routes it, the inlined indexed_message with it, to the partition's
-- shard.
CREATE OR REPLACE FUNCTION pgcursor_internal.named_offset(pid uuid, txid text, horizon timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT x.msg_offset FROM pgcursor_internal.indexed_message(pid, txid, horizon) x),
                    (SELECT max(m.msg_offset) FROM pgcursor.messages m
                      WHERE m.partition_id = pid AND m.transaction_id = txid))
$$;

-- docs/ack-contract.md §9: dead-lettering is off only when both flags are explicitly false.
CREATE OR REPLACE FUNCTION pgcursor_internal.dead_lettering_enabled(queue pgcursor.queues)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT NOT (queue.dead_letter_queue IS FALSE AND queue.dlq_after_max_retries IS FALSE)
$$;

-- The options object of a queue, camelCase, every option with its value.
CREATE OR REPLACE FUNCTION pgcursor_internal.queue_options(q pgcursor.queues)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'leaseTime', q.lease_time,
        'retryLimit', q.retry_limit,
        'deadLetterQueue', q.dead_letter_queue,
        'dlqAfterMaxRetries', q.dlq_after_max_retries,
        'transactionIndexRetentionSeconds', q.transaction_index_retention_seconds,
        'retentionSeconds', q.retention_seconds,
        'completedRetentionSeconds', q.completed_retention_seconds,
        'delayedProcessing', q.delayed_processing,
        'maxSize', q.max_size,
        'priority', q.priority,
        'windowBuffer', q.window_buffer,
        'maxWaitTimeSeconds', q.max_wait_time_seconds,
        'retentionEnabled', q.retention_enabled,
        'encryptionEnabled', q.encryption_enabled)
$$;

-- The ids of the partitions a pop of `queues` may claim (`pname`: that one
-- only), at most `most` of them (NULL: all). claim_batches reads cursor
-- rows by these ids.
CREATE OR REPLACE FUNCTION pgcursor_internal.pop_partition_ids(queues text[], pname text, most integer DEFAULT NULL)
RETURNS uuid[] LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(SELECT p.id FROM pgcursor.partitions p
                  WHERE p.queue = ANY (queues) AND (pname IS NULL OR p.name = pname) LIMIT most);
END $$;

-- A partition's head: the highest offset pushed there (0: none yet).
-- PL/pgSQL, not SQL: Citus cannot plan a SQL function with parameters that
-- reads a distributed table.
CREATE OR REPLACE FUNCTION pgcursor_internal.partition_head(pid uuid)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT h.head FROM pgcursor.partition_heads h WHERE h.partition_id = pid);
END $$;

-- The lowest offset above `after` of a message of partition pid created at
-- or after `since`, or NULL when there is none. A push stamps its messages
-- no earlier than the partition's newest one (push_write), so createdAt
-- never decreases with the offset, and this is a binary search over the
-- primary key: messages keep no index by time (that third index cost a
-- push an eighth of its time). Each step reads the first stored message at
-- or after an offset (retention and deletes leave gaps); the usual cases,
-- since before the first message or after the last, take two reads.
-- enable_seqscan = off: its plans are cached for the session, and planned
-- while messages was empty (a fresh database, or just vacuumed to nothing)
-- they read the whole table at every step once it had filled.
CREATE OR REPLACE FUNCTION pgcursor_internal.first_offset_at(pid uuid, since timestamptz, after bigint DEFAULT 0)
RETURNS bigint LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
DECLARE
    lo     bigint;  -- a stored message older than since
    hi     bigint;  -- the first stored message at or after hi is not older: answer
    answer bigint;
    probe  bigint;
    found  bigint;
    at     timestamptz;
BEGIN
    SELECT m.msg_offset, m.created_at INTO found, at FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.msg_offset > after ORDER BY m.msg_offset LIMIT 1;
    IF found IS NULL OR at >= since THEN
        RETURN found;
    END IF;
    lo := found;
    SELECT m.msg_offset, m.created_at INTO found, at FROM pgcursor.messages m
     WHERE m.partition_id = pid ORDER BY m.msg_offset DESC LIMIT 1;
    IF at < since THEN
        RETURN NULL;
    END IF;
    hi := found;
    answer := found;
    WHILE hi - lo > 1 LOOP
        probe := lo + (hi - lo) / 2;
        SELECT m.msg_offset, m.created_at INTO found, at FROM pgcursor.messages m
         WHERE m.partition_id = pid AND m.msg_offset >= probe ORDER BY m.msg_offset LIMIT 1;
        IF at >= since THEN
            hi := probe;
            answer := found;
        ELSE
            lo := found;
        END IF;
    END LOOP;
    RETURN answer;
END $$;

-- The offsets of partition pid's messages created in [since, upto): from
-- first to last, both NULL when there is none (one offset range, as
-- createdAt never decreases with the offset). The listing and the status
-- analytics read their windows through it.
CREATE OR REPLACE FUNCTION pgcursor_internal.created_offsets(
    pid uuid, since timestamptz, upto timestamptz, OUT first bigint, OUT last bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    first := pgcursor_internal.first_offset_at(pid, since);
    IF first IS NOT NULL THEN
        last := coalesce(pgcursor_internal.first_offset_at(pid, upto, first - 1) - 1, 9223372036854775807);
    END IF;
END $$;

-- The cursor that makes the first message created AT OR AFTER `since` the
-- next one delivered (one boundary rule for a seek to T and for
-- subscriptionFrom=T): just below the lowest such offset, or the head when
-- there is none.
CREATE OR REPLACE FUNCTION pgcursor_internal.cursor_before(p pgcursor.partitions, since timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(pgcursor_internal.first_offset_at(p.id, since) - 1, pgcursor_internal.partition_head(p.id))
$$;

-- Where a cursor at `at` must stand so that its next offset exists: just
-- below the first retained message above it, or the head when none is left
-- (retention deletes pending messages too: sql/80_retention.sql).
CREATE OR REPLACE FUNCTION pgcursor_internal.retained_cursor(pid uuid, at bigint)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$  -- plpgsql: its plans are cached (it runs per cursor row)
DECLARE
    next_at bigint;
BEGIN
    SELECT m.msg_offset INTO next_at FROM pgcursor.messages m
     WHERE m.partition_id = pid AND m.msg_offset > at ORDER BY m.msg_offset LIMIT 1;
    IF next_at IS NOT NULL THEN
        RETURN greatest(at, next_at - 1);
    END IF;
    RETURN greatest(at, pgcursor_internal.partition_head(pid));
END $$;

-- Where a group's cursor row on partition p starts when it is written, by
-- its subscription on the queue (docs/http-api.md "Consumer groups"): from
-- the beginning (since null), or just before the first message created at or
-- after `since` (as cursor_before; mode new: the time of the group's first
-- pop there); past any range retention deleted, as the cursors table's insert
-- trigger puts every new row (sql/80_retention.sql).
CREATE OR REPLACE FUNCTION pgcursor_internal.start_cursor(p pgcursor.partitions, s pgcursor.subscriptions)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT pgcursor_internal.retained_cursor(
        p.id, CASE WHEN s.since IS NULL THEN 0 ELSE pgcursor_internal.cursor_before(p, s.since) END)
$$;

-- The second key of an advisory lock on `name`: one of 256 buckets, 0..255.
-- Advisory locks take entries of PostgreSQL's shared lock table
-- (max_locks_per_transaction x connections), which every session of the
-- database needs. With a lock per name, one push to 3,000 new queues
-- filled it on a small cluster, and every session then failed with "out
-- of shared memory". Bucketed, a transaction holds at most 256 locks of a
-- class; names of one bucket share a lock, which only ever makes someone
-- wait or skip a little more. (The long-poll waits keep a lock per queue,
-- sql/03_wakeups.sql: a shared one would make pushes notify.)
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_bucket(name text)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext(name) & 255 $$;

-- The advisory lock class (first key) of lock_partition_sets ("pgcp").
CREATE OR REPLACE FUNCTION pgcursor_internal.partition_set_class()
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1885823856 $$;

-- Serialises a change to which partitions a queue has (a push creating
-- one, shared: pushes do not wait for each other) with a change to which
-- groups are subscribed there (a pop recording or renewing a subscription,
-- exclusive), for the queues given, bucket by bucket (lock_bucket) in
-- bucket order: exclusive for the buckets of `exclusive`, shared for the
-- other buckets of `shared`. Without it each can miss the other: a pop
-- that sees no new partition writes its rows and marks its new
-- subscription complete while the push, not seeing that subscription,
-- cannot mark it pending, and the group never gets a row on the
-- partition. With it the later one starts after the earlier commits, and
-- sees it. delete_queue holds its queue's bucket exclusive too, and every
-- writer of rows that refer to a queue or its partitions (partitions,
-- subscriptions, cursor rows) holds it shared at least: such a writer then
-- never finds the queue deleted under it (a foreign-key error), as its
-- statements after the lock see the delete committed, or the delete waits.
-- With skip_busy, a bucket another session holds is passed over instead
-- of waited for. Answers the queues whose buckets it locked.
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_partition_sets(
    exclusive text[], shared text[], skip_busy boolean DEFAULT false)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    class  integer := pgcursor_internal.partition_set_class();
    b      record;
    locked integer[] := '{}';
BEGIN
    FOR b IN SELECT pgcursor_internal.lock_bucket(x.queue) AS bucket, bool_or(x.sole) AS sole
               FROM (SELECT q, true FROM unnest(exclusive) q
                     UNION ALL SELECT q, false FROM unnest(shared) q) x(queue, sole)
              GROUP BY 1 ORDER BY 1 LOOP
        IF NOT skip_busy AND b.sole THEN
            PERFORM pg_advisory_xact_lock(class, b.bucket);
        ELSIF NOT skip_busy THEN
            PERFORM pg_advisory_xact_lock_shared(class, b.bucket);
        ELSIF b.sole THEN
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(class, b.bucket);
        ELSE
            CONTINUE WHEN NOT pg_try_advisory_xact_lock_shared(class, b.bucket);
        END IF;
        locked := locked || b.bucket;
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT x FROM unnest(exclusive || shared) x
                  WHERE pgcursor_internal.lock_bucket(x) = ANY (locked));
END $$;
DROP FUNCTION IF EXISTS pgcursor_internal.lock_partition_set(text[], boolean);

-- Every cursor row, and the rows pending subscriptions do not have yet (a
-- group's first pop on a queue writes rows only on the partitions it claims,
-- sql/30_pop.sql), as they will be written: where the subscription starts,
-- no lease, no totals. Readers of cursor figures (lag, depth, retention's
-- "consumed by every group") read this, so a group counts on every
-- partition of a queue it subscribed to from its first pop on. Nothing
-- pending (the usual case) adds one probe of a partial index.
CREATE OR REPLACE FUNCTION pgcursor_internal.cursor_rows()
RETURNS SETOF pgcursor.cursors LANGUAGE sql STABLE AS $$
    SELECT * FROM pgcursor.cursors
    UNION ALL
    SELECT p.id, s.consumer_group, pgcursor_internal.start_cursor(p, s), NULL, NULL, NULL, NULL,
           0, 0, 0, 0, 0, NULL, s.created_at, 0
      FROM pgcursor.subscriptions s
      JOIN pgcursor.partitions p ON p.queue = s.queue
     WHERE s.cursor_rows = 'pending'
       AND NOT EXISTS (SELECT 1 FROM pgcursor.cursors c
                        WHERE c.partition_id = p.id AND c.consumer_group = s.consumer_group)
$$;

-- Locks subscriptions in (group, queue) order, their queues' partition
-- sets first (shared, lock_partition_sets: no delete_queue can then remove
-- a partition a cursor row is being written on): those of group grp (every
-- group when null) on queue qname (every queue when null), or only the
-- pending ones among them; answers them as (groups[i], queues[i]). With
-- skip_locked, those another session holds (subscription or partition set)
-- are left out. A call that changes subscriptions and cursor rows
-- (materialize_cursors, update_subscription, the deletes of a group and of
-- a queue) takes them this way before the rows: taking them after, as the
-- last three did, a subscription update and a delete deadlocked.
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_subscriptions(
    grp text, qname text, pending_only boolean, skip_locked boolean DEFAULT false,
    OUT groups text[], OUT queues text[])
LANGUAGE plpgsql AS $$
BEGIN
    queues := ARRAY(SELECT DISTINCT s.queue FROM pgcursor.subscriptions s
                     WHERE (NOT pending_only OR s.cursor_rows = 'pending')
                       AND (grp IS NULL OR s.consumer_group = grp) AND (qname IS NULL OR s.queue = qname));
    IF cardinality(queues) = 0 THEN
        RETURN;
    END IF;
    queues := pgcursor_internal.lock_partition_sets('{}', queues, skip_busy => skip_locked);
    EXECUTE format(
        'SELECT array_agg(x.consumer_group), array_agg(x.queue)
           FROM (SELECT s.consumer_group, s.queue FROM pgcursor.subscriptions s
                  WHERE (NOT $1 OR s.cursor_rows = ''pending'') AND ($2 IS NULL OR s.consumer_group = $2)
                    AND s.queue = ANY ($3)
                  ORDER BY s.consumer_group, s.queue
                    FOR UPDATE %s) x',
        CASE WHEN skip_locked THEN 'SKIP LOCKED' ELSE '' END)
    INTO groups, queues USING pending_only, grp, queues;
END $$;
DROP FUNCTION IF EXISTS pgcursor_internal.lock_pending_subscriptions(text, boolean);

-- Writes the rows cursor_rows() shows for pending subscriptions (of group
-- grp, or all) and marks the subscriptions complete. Housekeeping runs it
-- for all, a seek and a delete for their group (they move or count rows), a
-- pop that looked at every partition of a queue for its group (so the next
-- pops need not look again). The subscriptions are locked first and only
-- those are written: a push that creates a partition meanwhile marks them
-- pending again once this commits, so no partition is missed. With
-- skip_locked, subscriptions another session is writing are left to it (a
-- pop must not wait on a writer that may be waiting on the pop's own rows).
CREATE OR REPLACE FUNCTION pgcursor_internal.materialize_cursors(
    grp text DEFAULT NULL, skip_locked boolean DEFAULT false)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    groups text[];
    queues text[];
    made   bigint;
BEGIN
    SELECT l.groups, l.queues INTO groups, queues
      FROM pgcursor_internal.lock_subscriptions(grp, NULL, true, skip_locked) l;
    IF groups IS NULL THEN
        RETURN 0;
    END IF;
    INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor)
    SELECT p.id, s.consumer_group, pgcursor_internal.start_cursor(p, s)
      FROM unnest(groups, queues) k(consumer_group, queue)
      JOIN pgcursor.subscriptions s ON s.consumer_group = k.consumer_group AND s.queue = k.queue
      JOIN pgcursor.partitions p ON p.queue = s.queue
     WHERE NOT EXISTS (SELECT 1 FROM pgcursor.cursors c
                        WHERE c.partition_id = p.id AND c.consumer_group = s.consumer_group)
     ORDER BY p.id, s.consumer_group  -- partition order, as every writer of new rows
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS made = ROW_COUNT;
    UPDATE pgcursor.subscriptions s SET cursor_rows = 'complete'
      FROM unnest(groups, queues) k(consumer_group, queue)
     WHERE s.consumer_group = k.consumer_group AND s.queue = k.queue;
    RETURN made;
END $$;

-- Messages still stored and pending in a partition for its slowest group
-- (all those stored when no group has a cursor there yet): the offsets from
-- the first stored one past the lowest cursor to the head. What retention
-- or eviction deleted below that counts no more, cursor or not; a single
-- message deleted amid stored ones still does. maxSize's measure
-- (queue_room). Given the partition's id, not its row, as
-- transaction_index_horizon.
CREATE OR REPLACE FUNCTION pgcursor_internal.partition_depth(pid uuid)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT pgcursor_internal.partition_head(pid)
           - pgcursor_internal.retained_cursor(pid, coalesce(min(c.cursor), 0))
    FROM pgcursor_internal.cursor_rows() c WHERE c.partition_id = pid
$$;

-- The cursor row of (partition, group), locked; created where the group's
-- subscription on the queue starts (start_cursor), or at cursor 0 when the
-- group has none (docs/ack-contract.md §3), and then `created`: a caller
-- that ends up changing nothing deletes it again. A group name too long
-- for the row's key is a 22023 naming consumerGroup. Concurrent calls for
-- one (partition, group) serialise here; other partitions never wait on it.
-- All nulls when the partition is gone: deleted with its queue, maybe
-- while this waited for the row. Creating one takes the queue's partition
-- set (shared, lock_partition_sets), as every writer of rows that refer to
-- a partition does, and looks for the partition again after.
SELECT pgcursor_internal.drop_version_without('pgcursor_internal.lock_cursor(uuid, text)', 'created');
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_cursor(
    partition_id uuid, consumer_group text, OUT cursor_row pgcursor.cursors, OUT created boolean)
LANGUAGE plpgsql AS $$
DECLARE
    part pgcursor.partitions;
    sub pgcursor.subscriptions;
    start bigint;
    made bigint;
BEGIN
    created := false;
    SELECT * INTO cursor_row FROM pgcursor.cursors c
     WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
       FOR UPDATE;
    IF NOT FOUND THEN
        SELECT p.queue INTO part.queue FROM pgcursor.partitions p WHERE p.id = lock_cursor.partition_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        PERFORM pgcursor_internal.lock_partition_sets('{}', ARRAY[part.queue]);
        -- The rows into variables first, then start_cursor on those: Citus
        -- refuses a sub-select inside INSERT ... VALUES, and a table row
        -- passed to a function inside a query there has the shard's type.
        SELECT * INTO part FROM pgcursor.partitions p WHERE p.id = lock_cursor.partition_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        SELECT * INTO sub FROM pgcursor.subscriptions s
         WHERE s.queue = part.queue AND s.consumer_group = lock_cursor.consumer_group;
        IF FOUND THEN
            start := pgcursor_internal.start_cursor(part, sub);
        END IF;
        PERFORM pgcursor_internal.refuse_long_key('consumerGroup', lock_cursor.consumer_group);
        INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor)
        VALUES (lock_cursor.partition_id, lock_cursor.consumer_group, coalesce(start, 0))
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS made = ROW_COUNT;
        created := made = 1;
        SELECT * INTO cursor_row FROM pgcursor.cursors c
         WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
           FOR UPDATE;
    END IF;
END
$$;

-- The queue named qname; an unknown one is P0002 (a 404 over HTTP).
CREATE OR REPLACE FUNCTION pgcursor_internal.known_queue(qname text)
RETURNS pgcursor.queues LANGUAGE plpgsql STABLE AS $$
DECLARE
    q pgcursor.queues;
BEGIN
    SELECT * INTO q FROM pgcursor.queues WHERE name = qname;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue not found: %', qname USING ERRCODE = 'P0002';
    END IF;
    RETURN q;
END $$;
