-- Queues: configure (create or update) and delete_queue. (A queue's options
-- as answers show them: queue_options, sql/02_shared.sql.)
--
--   SELECT pgcursor.configure('{"queue":"orders","options":{"leaseTime":60,"retryLimit":5}}');
--   SELECT pgcursor.delete_queue('orders');

-- The options configure knows (docs/http-api.md, Queue options); any other
-- name is a 22023 naming it, never silently ignored.
CREATE OR REPLACE FUNCTION pgcursor_internal.check_option_names(opts jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    unknown text;
BEGIN
    SELECT k INTO unknown FROM jsonb_object_keys(opts) k
     WHERE k NOT IN ('leaseTime', 'retryLimit', 'deadLetterQueue', 'dlqAfterMaxRetries',
                     'transactionIndexRetentionSeconds', 'retentionSeconds', 'completedRetentionSeconds',
                     'retentionEnabled', 'delayedProcessing', 'windowBuffer', 'maxSize',
                     'maxWaitTimeSeconds', 'priority', 'encryptionEnabled')
     ORDER BY k LIMIT 1;
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'options.% is not a queue option', unknown USING ERRCODE = '22023';
    END IF;
END $$;

-- configure: {"queue","namespace"?,"task"?,"options"?} -> {"configured":true,...}.
-- Creates the queue with the defaults, then applies the options given; options
-- not given (and a namespace/task that is absent or null) keep their value.
CREATE OR REPLACE FUNCTION pgcursor.configure(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    qname text := pgcursor_internal.optional_text(req, 'queue');
    ns    text := pgcursor_internal.optional_text(req, 'namespace');
    tk    text := pgcursor_internal.optional_text(req, 'task');
    opts  jsonb := coalesce(nullif(req -> 'options', 'null'::jsonb), '{}'::jsonb);
    q     pgcursor.queues;
BEGIN
    IF qname IS NULL THEN
        RAISE EXCEPTION 'queue is required and must be a string' USING ERRCODE = '22023';
    END IF;
    PERFORM pgcursor_internal.refuse_long_key('queue', qname);
    PERFORM pgcursor_internal.refuse_long_key('namespace', ns);
    PERFORM pgcursor_internal.refuse_long_key('task', tk);
    IF jsonb_typeof(opts) <> 'object' THEN
        RAISE EXCEPTION 'options must be an object' USING ERRCODE = '22023';
    END IF;
    PERFORM pgcursor_internal.check_option_names(opts);
    INSERT INTO pgcursor.queues (name) VALUES (qname) ON CONFLICT DO NOTHING;
    UPDATE pgcursor.queues SET
        namespace = coalesce(ns, namespace),
        task = coalesce(tk, task),
        lease_time = pgcursor_internal.option_int(opts, 'leaseTime', lease_time, 1),
        retry_limit = pgcursor_internal.option_int(opts, 'retryLimit', retry_limit),
        dead_letter_queue = pgcursor_internal.option_bool(opts, 'deadLetterQueue', dead_letter_queue),
        dlq_after_max_retries = pgcursor_internal.option_bool(opts, 'dlqAfterMaxRetries', dlq_after_max_retries),
        transaction_index_retention_seconds =
            pgcursor_internal.option_int(opts, 'transactionIndexRetentionSeconds', transaction_index_retention_seconds),
        retention_seconds = pgcursor_internal.option_int(opts, 'retentionSeconds', retention_seconds),
        completed_retention_seconds =
            pgcursor_internal.option_int(opts, 'completedRetentionSeconds', completed_retention_seconds),
        delayed_processing = pgcursor_internal.option_int(opts, 'delayedProcessing', delayed_processing),
        max_size = pgcursor_internal.option_int(opts, 'maxSize', max_size),
        priority = pgcursor_internal.option_int(opts, 'priority', priority, NULL),
        window_buffer = pgcursor_internal.option_int(opts, 'windowBuffer', window_buffer),
        max_wait_time_seconds = pgcursor_internal.option_int(opts, 'maxWaitTimeSeconds', max_wait_time_seconds),
        retention_enabled = pgcursor_internal.option_bool(opts, 'retentionEnabled', retention_enabled),
        encryption_enabled = coalesce(pgcursor_internal.option_bool(opts, 'encryptionEnabled', encryption_enabled),
                                      false)
    WHERE name = qname
    RETURNING * INTO q;
    RETURN jsonb_build_object('configured', true, 'queue', q.name, 'namespace', q.namespace,
                              'task', q.task, 'options', pgcursor_internal.queue_options(q));
END $$;

-- Which of `names` are queues with encryptionEnabled. The gateway asks only
-- before a push holding a payload shaped like an envelope, which the push's
-- guard (refuse_plaintext_payloads) would take for one.
CREATE OR REPLACE FUNCTION pgcursor_internal.encrypted_among(names text[])
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(q.name ORDER BY q.name), '{}') FROM pgcursor.queues q
     WHERE q.name = ANY (names) AND q.encryption_enabled
$$;

-- delete_queue: removes the queue, its partitions, messages and transaction
-- index, and by cascade its cursors and dead letters. (messages and
-- transaction_index carry no foreign key: it would cost every push a lookup
-- per row.) First it waits for the writers of rows that refer to the queue
-- (pushes creating partitions, pops writing subscriptions or cursor rows:
-- lock_partition_sets), which after it find the queue gone. Then it locks
-- the queue's subscriptions (lock_subscriptions, as a subscription update
-- takes them before the rows it moves), the cursor rows, before the
-- partitions, in the order an ack takes them (its cursor row, then the
-- partition a dead letter refers to); the heads in id order, as pushes lock
-- them (the cascade would delete them in no particular order); then the
-- partitions, so that no push still writing to them can commit rows after
-- they are deleted. Taken in other orders, these locks deadlocked a delete
-- with concurrent acks, pushes and subscription updates. The queue and its
-- partitions go before the messages: deleted messages of a partition that
-- still exists would first have their ids copied into the transaction index
-- (remember_deleted_ids), only to be deleted next.
CREATE OR REPLACE FUNCTION pgcursor.delete_queue(qname text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    gone boolean;
    ids uuid[];
BEGIN
    PERFORM pgcursor_internal.lock_partition_sets(ARRAY[qname], '{}');
    PERFORM pgcursor_internal.lock_subscriptions(NULL, qname, false);
    ids := ARRAY(SELECT id FROM pgcursor.partitions WHERE queue = qname ORDER BY id);
    PERFORM 1 FROM pgcursor.cursors WHERE partition_id = ANY (ids) ORDER BY partition_id, consumer_group FOR UPDATE;
    PERFORM pgcursor_internal.lock_heads(ids);
    PERFORM 1 FROM pgcursor.partitions WHERE id = ANY (ids) ORDER BY id FOR UPDATE;
    DELETE FROM pgcursor.queues WHERE name = qname;
    gone := FOUND;
    DELETE FROM pgcursor.messages WHERE partition_id = ANY (ids);
    DELETE FROM pgcursor.transaction_index WHERE partition_id = ANY (ids);
    RETURN jsonb_build_object('deleted', gone, 'queue', qname);
END $$;
