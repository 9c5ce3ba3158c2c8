-- Queue configuration: configure (create or update), the camelCase options
-- view of a queue row, and delete_queue.
--
--   SELECT pgcursor.configure('{"queue":"orders","options":{"leaseTime":60,"retryLimit":5}}');
--   SELECT pgcursor.delete_queue('orders');

-- The options object of a queue, camelCase, every option with its value.
CREATE OR REPLACE FUNCTION pgcursor.queue_options(q pgcursor.queues)
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
        'priority', q.priority)
$$;

-- An integer option: absent or null keeps the current value; anything that is
-- not an integer >= min_value (or out of int range) is a 22023 naming it.
CREATE OR REPLACE FUNCTION pgcursor.option_int(
    opts jsonb, key text, current_value integer, min_value integer DEFAULT 0)
RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := opts -> key;
    what text := CASE min_value WHEN 0 THEN 'a non-negative integer'
                                WHEN 1 THEN 'a positive integer'
                                ELSE 'an integer' END;
    n numeric;
BEGIN
    IF v IS NULL OR v = 'null'::jsonb THEN
        RETURN current_value;
    END IF;
    IF jsonb_typeof(v) = 'number' THEN
        n := v::numeric;
        IF n = trunc(n) AND n >= coalesce(min_value, -2147483648) AND n <= 2147483647 THEN
            RETURN n::integer;
        END IF;
    END IF;
    RAISE EXCEPTION 'options.% must be %', key, what USING ERRCODE = '22023';
END $$;

-- A nullable boolean option: absent keeps the current value, null clears it
-- (null is meaningful: "unset", which counts as on for dead-lettering).
CREATE OR REPLACE FUNCTION pgcursor.option_bool(opts jsonb, key text, current_value boolean)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := opts -> key;
BEGIN
    IF v IS NULL THEN
        RETURN current_value;
    END IF;
    IF v = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) <> 'boolean' THEN
        RAISE EXCEPTION 'options.% must be a boolean or null', key USING ERRCODE = '22023';
    END IF;
    RETURN v::boolean;
END $$;

-- A string field of a request that may be absent or null; otherwise it must be a string.
CREATE OR REPLACE FUNCTION pgcursor.optional_text(req jsonb, key text, label text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF req -> key IS NULL OR req -> key = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(req -> key) <> 'string' THEN
        RAISE EXCEPTION '% must be a string', coalesce(label, key) USING ERRCODE = '22023';
    END IF;
    RETURN req ->> key;
END $$;

-- A timestamp as RFC 3339 text in UTC ("2025-01-31T09:30:00.123456Z"),
-- whatever the session's TimeZone: answers must not depend on who asks.
CREATE OR REPLACE FUNCTION pgcursor.rfc3339_utc(ts timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$  -- STABLE like to_char(), so it inlines
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- configure: {"queue","namespace"?,"task"?,"options"?} -> {"configured":true,...}.
-- Creates the queue with the defaults, then applies the options given; options
-- not given (and a namespace/task that is absent or null) keep their value.
CREATE OR REPLACE FUNCTION pgcursor.configure(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    qname text := pgcursor.optional_text(req, 'queue');
    ns    text := pgcursor.optional_text(req, 'namespace');
    tk    text := pgcursor.optional_text(req, 'task');
    opts  jsonb := coalesce(nullif(req -> 'options', 'null'::jsonb), '{}'::jsonb);
    q     pgcursor.queues;
BEGIN
    IF coalesce(qname, '') = '' THEN
        RAISE EXCEPTION 'queue is required and must be a non-empty string' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(opts) <> 'object' THEN
        RAISE EXCEPTION 'options must be an object' USING ERRCODE = '22023';
    END IF;
    INSERT INTO pgcursor.queues (name) VALUES (qname) ON CONFLICT DO NOTHING;
    UPDATE pgcursor.queues SET
        namespace = coalesce(ns, namespace),
        task = coalesce(tk, task),
        lease_time = pgcursor.option_int(opts, 'leaseTime', lease_time, 1),
        retry_limit = pgcursor.option_int(opts, 'retryLimit', retry_limit),
        dead_letter_queue = pgcursor.option_bool(opts, 'deadLetterQueue', dead_letter_queue),
        dlq_after_max_retries = pgcursor.option_bool(opts, 'dlqAfterMaxRetries', dlq_after_max_retries),
        transaction_index_retention_seconds =
            pgcursor.option_int(opts, 'transactionIndexRetentionSeconds', transaction_index_retention_seconds),
        retention_seconds = pgcursor.option_int(opts, 'retentionSeconds', retention_seconds),
        completed_retention_seconds =
            pgcursor.option_int(opts, 'completedRetentionSeconds', completed_retention_seconds),
        delayed_processing = pgcursor.option_int(opts, 'delayedProcessing', delayed_processing),
        max_size = pgcursor.option_int(opts, 'maxSize', max_size),
        priority = pgcursor.option_int(opts, 'priority', priority, NULL)
    WHERE name = qname
    RETURNING * INTO q;
    RETURN jsonb_build_object('configured', true, 'queue', q.name, 'namespace', q.namespace,
                              'task', q.task, 'options', pgcursor.queue_options(q));
END $$;

-- delete_queue: removes the queue, its partitions, messages and transaction
-- index, and by cascade its cursors and dead letters. (messages and
-- transaction_index carry no foreign key: it would cost every push a lookup
-- per row.) The partitions are locked first so that no push still writing to
-- them can commit rows after they are deleted.
CREATE OR REPLACE FUNCTION pgcursor.delete_queue(qname text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    gone boolean;
    ids uuid[];
BEGIN
    ids := ARRAY(SELECT id FROM pgcursor.partitions WHERE queue = qname ORDER BY id FOR UPDATE);
    DELETE FROM pgcursor.messages WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.transaction_index WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.queues WHERE name = qname;
    gone := FOUND;
    RETURN jsonb_build_object('deleted', gone, 'queue', qname);
END $$;
