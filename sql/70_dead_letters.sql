-- Dead letters: listing (GET /api/v1/dlq) and requeue. A dead letter holds a
-- snapshot of the payload, so it outlives the message's retention.
--
--   SELECT pgcursor.dead_letters('{"queue":"orders","consumerGroup":"billing","limit":"20"}');
--   SELECT pgcursor.requeue_dead_letter('0190...'::uuid);

-- One dead letter as the listing shows it; data is the payload snapshot,
-- or, when the listing has no room left for it (with_data false), null,
-- with "dataOmitted": true.
CREATE OR REPLACE FUNCTION pgcursor_internal.dead_letter_json(
    d pgcursor.dead_letters, p pgcursor.partitions, with_data boolean)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', d.id, 'queue', p.queue, 'partition', p.name, 'partitionId', p.id,
        'offset', d.msg_offset, 'transactionId', d.transaction_id, 'consumerGroup', d.consumer_group,
        'data', CASE WHEN with_data THEN d.payload END, 'errorMessage', d.error, 'retryCount', d.retry_count,
        'createdAt', pgcursor_internal.rfc3339_utc(d.created_at), 'failedAt', pgcursor_internal.rfc3339_utc(d.failed_at))
        || CASE WHEN with_data THEN '{}'::jsonb ELSE '{"dataOmitted": true}'::jsonb END
$$;

-- dead_letters: {queue?, consumerGroup?, partition? (name), from?, to? (on
-- failedAt, inclusive), limit? (100, at most 1000), offset? (0), maxBytes?
-- (16777216)} -> {"messages":[...], "total": <matches before
-- limit/offset>}, newest first. Query-string values may come as strings;
-- empty strings mean "not given". Every dead letter of the page is listed,
-- but its payload only while the page's payloads weigh at most maxBytes
-- (payload_weight; the first one in any case): the rest answer data null
-- and "dataOmitted": true, and a smaller page shows them. A page of large
-- payloads was otherwise a jsonb too large to build ("total size of jsonb
-- array elements exceeds the maximum", 256 MB) and an answer of as much
-- in the gateway's memory.
CREATE OR REPLACE FUNCTION pgcursor.dead_letters(req jsonb)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    qname text := nullif(pgcursor_internal.optional_text(req, 'queue'), '');
    grp   text := nullif(pgcursor_internal.optional_text(req, 'consumerGroup'), '');
    part  text := nullif(pgcursor_internal.optional_text(req, 'partition'), '');
    since timestamptz := pgcursor_internal.timestamp_arg(req, 'from');
    upto  timestamptz := pgcursor_internal.timestamp_arg(req, 'to');
    lim   integer := least(pgcursor_internal.positive_int_arg(req, 'limit', 100), 1000);
    skip  integer := pgcursor_internal.non_negative_int_arg(req, 'offset', 0);
    budget integer := pgcursor_internal.positive_int_arg(req, 'maxBytes', 16777216);
    answer jsonb;
BEGIN
    WITH matching AS (
        SELECT d, p,
               -- newest first; ties (one transaction) by position, never at random
               row_number() OVER (ORDER BY d.failed_at DESC, p.queue, p.name, d.consumer_group,
                                           d.msg_offset, d.id) AS pos
          FROM pgcursor.dead_letters d JOIN pgcursor.partitions p ON p.id = d.partition_id
         WHERE (qname IS NULL OR p.queue = qname) AND (part IS NULL OR p.name = part)
           AND (grp IS NULL OR d.consumer_group = grp)
           AND (since IS NULL OR d.failed_at >= since) AND (upto IS NULL OR d.failed_at <= upto)
    ), page AS (  -- upto: the page's payloads up to this one, weighed
        SELECT m.*, coalesce(sum(pgcursor_internal.payload_weight((m.d).payload)) OVER (ORDER BY m.pos), 0) AS upto
          FROM matching m WHERE m.pos > skip AND m.pos <= skip::bigint + lim
    )
    SELECT jsonb_build_object(
               'messages', coalesce((SELECT jsonb_agg(pgcursor_internal.dead_letter_json(
                                                          pg.d, pg.p, pg.upto <= budget OR pg.pos = skip + 1)
                                                      ORDER BY pg.pos)
                                       FROM page pg), '[]'),
               'total', (SELECT count(*) FROM matching))
      INTO answer;
    RETURN answer;
END $$;

-- Pushes a dead letter's payload snapshot back onto its partition as a new
-- message with a fresh transactionId (through push_rows: dense offsets, NOTIFY):
-- the one way a dead letter goes back, shared by requeue_dead_letter and
-- retry_message. Push maintenance does not stop it (as it does not stop a
-- transaction); a queue at its maxSize does: PC409 (the gateway's 409),
-- raised so that the caller's delete of the dead letter is undone.
-- Answer: {queue, partition, partitionId, transactionId, offset}.
CREATE OR REPLACE FUNCTION pgcursor_internal.push_back(d pgcursor.dead_letters)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    p pgcursor.partitions;
    pushed record;
BEGIN
    SELECT * INTO p FROM pgcursor.partitions WHERE id = d.partition_id;
    SELECT r.* INTO pushed
      FROM pgcursor_internal.push_rows(ARRAY[p.queue], ARRAY[d.payload], ARRAY[p.name], NULL, NULL,
                                       through_maintenance => true) r;
    IF pushed.status <> 'queued' THEN  -- the queue is full (maxSize): the dead letter stays
        RAISE EXCEPTION 'queue % cannot take dead letter %: %', p.queue, d.id, pushed.error
            USING ERRCODE = 'PC409';
    END IF;
    RETURN jsonb_build_object('queue', p.queue, 'partition', p.name, 'partitionId', p.id,
                              'transactionId', pushed.transaction_id, 'offset', pushed.msg_offset);
END $$;

-- requeue_dead_letter: pushes the snapshot back onto its partition as a new
-- message with a fresh transactionId (through push: dense offsets, NOTIFY)
-- and removes the dead letter, in one transaction. Every group of the
-- partition will see the new message. Unknown id -> P0002.
-- Answer: {"requeued": true, "id", "queue", "partition", "partitionId",
-- "transactionId", "offset"}.
CREATE OR REPLACE FUNCTION pgcursor.requeue_dead_letter(dead_letter_id uuid)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    d pgcursor.dead_letters;
BEGIN
    -- Deleting first makes a concurrent second requeue of the same id a 404.
    DELETE FROM pgcursor.dead_letters x WHERE x.id = dead_letter_id RETURNING * INTO d;
    IF d.id IS NULL THEN
        RAISE EXCEPTION 'dead letter not found: %', dead_letter_id USING ERRCODE = 'P0002';
    END IF;
    RETURN jsonb_build_object('requeued', true, 'id', d.id) || pgcursor_internal.push_back(d);
END $$;

-- retry_message (docs/sql-api.md "retry_message"): requeues the dead letters
-- of the message a transactionId names in a partition (every group's, matched
-- on their own transactionId, so also after retention removed the message)
-- as ONE new message, the first dead letter's snapshot, and removes them all,
-- in one transaction: every group of the partition sees the new message, so a
-- copy per dead letter would give each group as many. None -> P0002.
-- Answer: {"success": true, "partitionId", "transactionId", "requeued":
-- [{id, queue, partition, partitionId, transactionId (the new one), offset}]},
-- one entry per dead letter removed, all naming the one new message.
CREATE OR REPLACE FUNCTION pgcursor.retry_message(pid uuid, txid text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    ids    uuid[];
    first_ jsonb;  -- the first dead letter's row
    pushed jsonb;
BEGIN
    -- Deleting first makes a concurrent second retry of the message a 404.
    WITH gone AS (DELETE FROM pgcursor.dead_letters x
                   WHERE x.partition_id = pid AND x.transaction_id = txid RETURNING *)
    SELECT array_agg(g.id ORDER BY g.failed_at, g.consumer_group, g.id),
           (array_agg(to_jsonb(g) ORDER BY g.failed_at, g.consumer_group, g.id))[1]
      INTO ids, first_ FROM gone g;
    IF ids IS NULL THEN
        RAISE EXCEPTION 'no dead letter for message % in partition %', txid, pid USING ERRCODE = 'P0002';
    END IF;
    pushed := pgcursor_internal.push_back(jsonb_populate_record(NULL::pgcursor.dead_letters, first_));
    RETURN jsonb_build_object('success', true, 'partitionId', pid, 'transactionId', txid,
                              'requeued', (SELECT jsonb_agg(jsonb_build_object('id', i) || pushed ORDER BY n)
                                             FROM unnest(ids) WITH ORDINALITY u(i, n)));
END $$;
