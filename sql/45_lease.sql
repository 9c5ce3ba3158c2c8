-- Lease extension: a worker that needs longer keeps its partitions.
--
--   SELECT pgcursor.extend_lease('{"leaseId":"0190...","seconds":60}');
--   SELECT pgcursor.leases('{"queue":"orders","limit":10}');

-- extend_lease: {"leaseId","seconds"?} -> {leaseId, success, newExpiresAt, renewed, error}.
-- Every LIVE cursor row holding the lease is pushed to
-- greatest(current expiry, now + seconds); seconds defaults to 60, as
-- Queen's clients expect (a renewal of a 2-second lease asks for the 60).
-- An expired, released or unknown lease renews nothing.
CREATE OR REPLACE FUNCTION pgcursor.extend_lease(req jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    lease_text text := pgcursor_internal.optional_text(req, 'leaseId');
    secs       integer := pgcursor_internal.positive_int_arg(req, 'seconds', 60);
    until      timestamptz := now() + secs * interval '1 second';
    lease      uuid;
    pid        uuid;
    grp        text;
    expiry     timestamptz;
    renewed    integer := 0;
    expires    timestamptz;
BEGIN
    IF NOT pgcursor_internal.is_uuid_value(req -> 'leaseId', false) THEN
        RAISE EXCEPTION 'leaseId is required and must be a UUID string' USING ERRCODE = '22023';
    END IF;
    lease := lease_text::uuid;
    -- A scan of the cursors (no index on lease_id: it would stop every pop
    -- and ack from updating cursor rows in place; see migrations/V2), then
    -- each row by key in partition order, the order seeks and deletes lock
    -- a group's rows in: in the scan's order, a lease over several
    -- partitions deadlocked with a seek (tests/sql/66_seek_concurrency.sql).
    FOR pid, grp IN SELECT c.partition_id, c.consumer_group FROM pgcursor.cursors c
                     WHERE c.lease_id = lease AND c.lease_expires_at > now()
                     ORDER BY c.partition_id, c.consumer_group
    LOOP
        UPDATE pgcursor.cursors c
        SET lease_expires_at = greatest(c.lease_expires_at, until)
        -- lease_is_live written out: Citus refuses a STABLE function of a
        -- column in an UPDATE of its tables (now() alone it evaluates first).
        WHERE c.partition_id = pid AND c.consumer_group = grp
          AND c.lease_id = lease AND c.lease_expires_at > now()
        RETURNING c.lease_expires_at INTO expiry;
        IF FOUND THEN
            renewed := renewed + 1;
            expires := greatest(expires, expiry);
        END IF;
    END LOOP;
    RETURN jsonb_build_object(
        'leaseId', lease, 'success', renewed > 0, 'newExpiresAt', pgcursor_internal.rfc3339_utc(expires),
        'renewed', renewed,
        'error', CASE WHEN renewed = 0 THEN 'invalid or expired lease' END);
END $$;

-- leases: {"queue"?, "consumerGroup"?, "limit"? (100, at most 1000)} ->
-- {"leases": [{leaseId, takenAt, expiresAt, consumerGroup, queue,
-- partition, partitionId, batchStart, batchEnd}], "total"}: the cursor rows
-- holding a live lease, one per partition a lease covers, longest held
-- first (a leaseId is a UUIDv7: it sorts by the millisecond it was taken).
-- total counts every matching row, listed or not.
CREATE OR REPLACE FUNCTION pgcursor.leases(req jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    qname text := nullif(pgcursor_internal.optional_text(req, 'queue'), '');
    grp   text := nullif(pgcursor_internal.optional_text(req, 'consumerGroup'), '');
    lim   integer := least(pgcursor_internal.positive_int_arg(req, 'limit', 100), 1000);
    answer jsonb;
BEGIN
    WITH held AS (
        SELECT c.lease_id, c.lease_expires_at, c.consumer_group, c.batch_start, c.batch_end,
               p.queue, p.name AS partition, p.id AS partition_id,
               row_number() OVER (ORDER BY c.lease_id, p.queue, p.name) AS pos
          FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
         WHERE c.lease_id IS NOT NULL AND pgcursor_internal.lease_is_live(c.lease_expires_at)
           AND (qname IS NULL OR p.queue = qname) AND (grp IS NULL OR c.consumer_group = grp)
    )
    SELECT jsonb_build_object(
               'leases', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                      'leaseId', h.lease_id,
                                      'takenAt', pgcursor_internal.rfc3339_utc(pgcursor_internal.uuidv7_time(h.lease_id)),
                                      'expiresAt', pgcursor_internal.rfc3339_utc(h.lease_expires_at),
                                      'consumerGroup', h.consumer_group, 'queue', h.queue,
                                      'partition', h.partition, 'partitionId', h.partition_id,
                                      'batchStart', h.batch_start, 'batchEnd', h.batch_end) ORDER BY h.pos)
                                     FROM held h WHERE h.pos <= lim), '[]'),
               'total', (SELECT count(*) FROM held))
      INTO answer;
    RETURN answer;
END $$;
