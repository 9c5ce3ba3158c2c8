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

-- Is a lease that expires at expires_at still live (docs/ack-contract.md §1)? The
-- one test of liveness: pop, ack, extension, transactions and inspection
-- all ask here. (SQL and STABLE, so it inlines into their queries.)
CREATE OR REPLACE FUNCTION pgcursor_internal.lease_is_live(expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(expires_at > now(), false)
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

-- Messages still pending in a partition for its slowest group (all of them
-- when no group has a cursor there yet). Offsets, so retention gaps count.
CREATE OR REPLACE FUNCTION pgcursor_internal.partition_depth(p pgcursor.partitions)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT p.head - coalesce(min(c.cursor), 0)
    FROM pgcursor.cursors c WHERE c.partition_id = p.id
$$;

-- The cursor that makes the first message created AT OR AFTER `since` the
-- next one delivered (wire-admin.md §11.9: one boundary rule for a seek to T
-- and for subscriptionFrom=T): just below the lowest such offset, or the head
-- when there is none. A range scan of the (partition_id, created_at) index.
CREATE OR REPLACE FUNCTION pgcursor_internal.cursor_before(p pgcursor.partitions, since timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT min(m.msg_offset) - 1 FROM pgcursor.messages m
                     WHERE m.partition_id = p.id AND m.created_at >= since), p.head)
$$;

-- The cursor row of (partition, group), locked; created at cursor 0 when the
-- group never touched the partition (docs/ack-contract.md §3). Concurrent calls for
-- one (partition, group) serialise here; other partitions never wait on it.
CREATE OR REPLACE FUNCTION pgcursor_internal.lock_cursor(partition_id uuid, consumer_group text)
RETURNS pgcursor.cursors LANGUAGE plpgsql AS $$
DECLARE
    row pgcursor.cursors;
BEGIN
    SELECT * INTO row FROM pgcursor.cursors c
     WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
       FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pgcursor.cursors (partition_id, consumer_group)
        VALUES (lock_cursor.partition_id, lock_cursor.consumer_group)
        ON CONFLICT DO NOTHING;
        SELECT * INTO row FROM pgcursor.cursors c
         WHERE c.partition_id = lock_cursor.partition_id AND c.consumer_group = lock_cursor.consumer_group
           FOR UPDATE;
    END IF;
    RETURN row;
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
