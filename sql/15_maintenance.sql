-- Maintenance mode, cluster-wide and at once for every gateway: while push
-- maintenance is on, push writes nothing and raises PC503 (the gateway's 503
-- with Retry-After); while pop maintenance is on, pop answers at once with
-- no messages and "paused": true. Acks, lease extension and transactions go on.
--
--   SELECT pgcursor.maintenance();
--   SELECT pgcursor.set_maintenance('push', true);

-- maintenance: {"maintenanceMode", "popMaintenanceMode", "bufferedMessages": 0,
-- "bufferHealthy": true, "bufferStats"}. pgcursor buffers nothing (a paused
-- push is refused), so Queen's disk-buffer figures are zeros, there because
-- its dashboard reads failedCount and totalMB (wire-admin §8.2, §11.18).
CREATE OR REPLACE FUNCTION pgcursor.maintenance()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'maintenanceMode', coalesce(bool_or(enabled) FILTER (WHERE mode = 'push'), false),
        'popMaintenanceMode', coalesce(bool_or(enabled) FILTER (WHERE mode = 'pop'), false),
        'bufferedMessages', 0, 'bufferHealthy', true,
        'bufferStats', jsonb_build_object(
            'pendingCount', 0, 'failedCount', 0, 'dbHealthy', true,
            'failedFiles', jsonb_build_object('count', 0, 'totalBytes', 0, 'totalMB', 0,
                                              'failoverCount', 0, 'qos0Count', 0)))
      FROM pgcursor.maintenance
$$;

-- set_maintenance: turns push or pop maintenance on or off; answers
-- maintenance() as it now stands, with a message.
CREATE OR REPLACE FUNCTION pgcursor.set_maintenance(mode text, enabled boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    IF mode IS NULL OR mode NOT IN ('push', 'pop') THEN
        RAISE EXCEPTION 'mode must be "push" or "pop"' USING ERRCODE = '22023';
    ELSIF enabled IS NULL THEN
        RAISE EXCEPTION 'enabled (boolean) is required' USING ERRCODE = '22023';
    END IF;
    UPDATE pgcursor.maintenance m SET enabled = set_maintenance.enabled, changed_at = now()
     WHERE m.mode = set_maintenance.mode;
    RETURN pgcursor.maintenance() || jsonb_build_object('message', format('%s maintenance mode %s',
        initcap(mode), CASE WHEN enabled THEN 'enabled' ELSE 'disabled' END));
END $$;
