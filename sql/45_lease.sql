-- Lease extension: a worker that needs longer keeps its partitions.
--
--   SELECT pgcursor.extend_lease('{"leaseId":"0190...","seconds":60}');

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
    renewed    integer;
    expires    timestamptz;
BEGIN
    IF NOT pgcursor_internal.is_uuid_value(req -> 'leaseId', false) THEN
        RAISE EXCEPTION 'leaseId is required and must be a UUID string' USING ERRCODE = '22023';
    END IF;
    lease := lease_text::uuid;
    -- A scan of the cursors (no index on lease_id: it would stop every pop
    -- and ack from updating cursor rows in place; see migrations/V2).
    WITH extended AS (
        UPDATE pgcursor.cursors c
        SET lease_expires_at = greatest(c.lease_expires_at, until)
        -- lease_is_live written out: Citus refuses a STABLE function of a
        -- column in an UPDATE of its tables (now() alone it evaluates first).
        WHERE c.lease_id = lease AND c.lease_expires_at > now()
        RETURNING c.lease_expires_at
    )
    SELECT count(*), max(lease_expires_at) INTO renewed, expires FROM extended;
    RETURN jsonb_build_object(
        'leaseId', lease, 'success', renewed > 0, 'newExpiresAt', pgcursor_internal.rfc3339_utc(expires),
        'renewed', renewed,
        'error', CASE WHEN renewed = 0 THEN 'invalid or expired lease' END);
END $$;
