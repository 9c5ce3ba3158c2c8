-- Metrics: the database-derived figures behind GET /metrics/prometheus
-- (docs/http-api.md "Metrics"), in one call a scrape makes with a short
-- timeout.
--
--   SELECT pgcursor.metrics_snapshot();
--
-- Cheap by construction: it reads the queues, partitions, cursors,
-- retired-totals and dead-letter tables, and touches messages only through
-- one primary-key probe per cursor row that is behind its partition's head
-- (the oldest unconsumed message's age). No scan of messages.

-- Per (queue, consumer group), over where the group stands (cursor_rows()).
-- (Named group_figures since lease_expiries was added: a changed return type
-- needs a new name, the sweep drops the old one.)
--   partitions         cursor rows the group has on the queue
--   depth              messages after its cursors (head - cursor, summed)
--   lag_seconds        age of its oldest unconsumed message (0 when caught up;
--                      offsets deleted by retention are skipped)
--   leased_partitions  cursor rows holding a live lease
--   expired_leases     cursor rows whose lease expired and nobody has leased
--                      again yet (an expiry itself changes nothing: the next
--                      pop takes the partition over)
--   lease_expiries     leases that expired and a pop took over, lifetime of
--                      the rows (cursors.lease_expiries)
CREATE OR REPLACE FUNCTION pgcursor_internal.group_figures()
RETURNS TABLE (queue text, consumer_group text, partitions bigint, depth bigint, lag_seconds numeric,
               leased_partitions bigint, expired_leases bigint, lease_expiries bigint)
LANGUAGE sql STABLE AS $$
    SELECT p.queue, c.consumer_group, count(*), sum(greatest(h.head - c.cursor, 0))::bigint,
           round(coalesce(max(extract(epoch FROM now() - o.created_at)), 0), 3),
           count(*) FILTER (WHERE pgcursor_internal.lease_is_live(c.lease_expires_at)),
           count(*) FILTER (WHERE c.lease_id IS NOT NULL
                              AND NOT pgcursor_internal.lease_is_live(c.lease_expires_at)),
           sum(c.lease_expiries)::bigint
    FROM pgcursor_internal.cursor_rows() c
    JOIN pgcursor.partitions p ON p.id = c.partition_id
    JOIN pgcursor.partition_heads h ON h.partition_id = c.partition_id
    LEFT JOIN LATERAL (
        SELECT m.created_at FROM pgcursor.messages m
        WHERE c.cursor < h.head AND m.partition_id = c.partition_id AND m.msg_offset > c.cursor
        ORDER BY m.msg_offset LIMIT 1) o ON true
    GROUP BY p.queue, c.consumer_group
$$;

-- Dead letters stored now, per queue.
CREATE OR REPLACE FUNCTION pgcursor_internal.dead_letter_counts()
RETURNS TABLE (queue text, dead_letters bigint)
LANGUAGE sql STABLE AS $$
    SELECT p.queue, count(*)
    FROM pgcursor.dead_letters d JOIN pgcursor.partitions p ON p.id = d.partition_id
    GROUP BY p.queue
$$;

-- Per queue, the newest minute of the last 5 that the gateways flushed
-- figures for (pgcursor.gateway_minutes, every gateway added up), and its
-- age in whole seconds: Queen's queen_queue_*_per_minute gauges. A queue
-- with no such minute has no row.
CREATE OR REPLACE FUNCTION pgcursor_internal.newest_queue_minutes()
RETURNS SETOF pgcursor.gateway_minutes
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (g.queue) g.*
    FROM pgcursor.gateway_minutes g
    WHERE g.minute >= now() - interval '5 minutes' AND g.queue IS NOT NULL
    ORDER BY g.queue, g.minute DESC
$$;

-- Per gateway process, its newest minute of the last 5 (gateway_process_minutes)
-- with that minute's pool samples: Queen's queen_worker_* gauges.
CREATE OR REPLACE FUNCTION pgcursor_internal.newest_process_minutes()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'hostname', g.hostname, 'pid', g.pid,
               'ageSeconds', greatest(floor(extract(epoch FROM now() - g.minute)), 0)::bigint,
               'pushRequests', g.push_requests, 'popRequests', g.pop_requests, 'ackRequests', g.ack_requests,
               'transactions', g.transactions, 'pushMessages', g.push_messages, 'popMessages', g.pop_messages,
               'ackMessages', g.ack_messages, 'ackSuccess', greatest(g.ack_messages - g.ack_failed, 0),
               'ackFailed', g.ack_failed, 'lagAvgMs', pgcursor_internal.average_age(g.age_sum_ms, g.pop_messages),
               'lagMaxMs', g.age_max_ms, 'dbErrors', g.db_errors, 'deadLettered', g.dead_lettered,
               'dbConnections', coalesce(size.last, 0), 'freeSlotsAvg', coalesce(idle.avg, 0),
               'freeSlotsMin', coalesce(idle.min, 0))
             ORDER BY g.hostname, g.pid), '[]'::jsonb)
    FROM (SELECT DISTINCT ON (m.hostname, m.pid) m.*
          FROM pgcursor.gateway_process_minutes m
          WHERE m.minute >= now() - interval '5 minutes'
          ORDER BY m.hostname, m.pid, m.minute DESC) g
    LEFT JOIN pgcursor.gateway_process_samples size
           ON (size.minute, size.hostname, size.pid, size.gauge) = (g.minute, g.hostname, g.pid, 'database.pool_size')
    LEFT JOIN pgcursor.gateway_process_samples idle
           ON (idle.minute, idle.hostname, idle.pid, idle.gauge) = (g.minute, g.hostname, g.pid, 'database.pool_idle')
$$;

-- metrics_snapshot: {"maintenanceMode", "popMaintenanceMode", "deadLetters",
-- "totals": lifetime {pushed, completed, deadLettered, discarded} over every
-- queue ever (deleted ones included), "queues": [{queue, partitions, depth,
-- deadLetters, pushed, completed, deadLettered, discarded}] for the live
-- queues, "groups": [{queue, consumerGroup, partitions, depth, lagSeconds,
-- leasedPartitions, expiredLeases, leaseExpiries}], "gatewayTotals": lifetime
-- {pushRequests, popRequests, popMessages, ackRequests, ackMessages,
-- ackFailed, transactions, dbErrors} as every gateway counted them
-- (pgcursor.gateway_totals), "queueMinutes": [{queue, ageSeconds,
-- pushRequests, pushMessages, popMessages, popEmpty, ackSuccess, ackFailed,
-- transactions, lagAvgMs, lagMaxMs, parked}] of each queue's newest minute
-- (newest_queue_minutes; parked: long-polls waiting, the minute's average),
-- "processMinutes": [{hostname, pid, ageSeconds, pushRequests, popRequests,
-- ackRequests, transactions, pushMessages, popMessages, ackMessages,
-- ackSuccess, ackFailed, lagAvgMs, lagMaxMs, dbErrors, deadLettered,
-- dbConnections, freeSlotsAvg, freeSlotsMin}] of each gateway process's
-- newest minute (newest_process_minutes)}.
-- Lists are sorted by name; every figure is ≥ 0.
CREATE OR REPLACE FUNCTION pgcursor.metrics_snapshot()
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH life AS (SELECT * FROM pgcursor_internal.lifetime_totals()),
    stats AS (SELECT * FROM pgcursor_internal.queue_stats()),
    dead AS (SELECT * FROM pgcursor_internal.dead_letter_counts())
    SELECT jsonb_build_object(
        'maintenanceMode', (m ->> 'maintenanceMode')::boolean,
        'popMaintenanceMode', (m ->> 'popMaintenanceMode')::boolean,
        'deadLetters', (SELECT coalesce(sum(dead_letters), 0)::bigint FROM dead),
        'totals', (SELECT jsonb_build_object(
                       'pushed', coalesce(sum(pushed), 0)::bigint,
                       'completed', coalesce(sum(completed), 0)::bigint,
                       'deadLettered', coalesce(sum(dead_lettered), 0)::bigint,
                       'discarded', coalesce(sum(discarded), 0)::bigint) FROM life),
        'queues', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'queue', q.name, 'partitions', coalesce(s.partitions, 0),
                       'depth', greatest(coalesce(s.depth, 0), 0),
                       'deadLetters', coalesce(d.dead_letters, 0),
                       'pushed', coalesce(l.pushed, 0), 'completed', coalesce(l.completed, 0),
                       'deadLettered', coalesce(l.dead_lettered, 0),
                       'discarded', coalesce(l.discarded, 0)) ORDER BY q.name), '[]'::jsonb)
                   FROM pgcursor.queues q
                   LEFT JOIN stats s ON s.queue = q.name
                   LEFT JOIN dead d ON d.queue = q.name
                   LEFT JOIN life l ON l.queue = q.name),
        'groups', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'queue', g.queue, 'consumerGroup', g.consumer_group,
                       'partitions', g.partitions, 'depth', g.depth,
                       'lagSeconds', greatest(g.lag_seconds, 0),
                       'leasedPartitions', g.leased_partitions, 'expiredLeases', g.expired_leases,
                       'leaseExpiries', g.lease_expiries)
                       ORDER BY g.queue, g.consumer_group), '[]'::jsonb)
                   FROM pgcursor_internal.group_figures() g),
        'gatewayTotals', (SELECT jsonb_build_object(
                              'pushRequests', t.push_requests, 'popRequests', t.pop_requests,
                              'popMessages', t.pop_messages, 'ackRequests', t.ack_requests,
                              'ackMessages', t.ack_messages, 'ackFailed', t.ack_failed,
                              'transactions', t.transactions, 'dbErrors', t.db_errors)
                          FROM pgcursor.gateway_totals t),
        'queueMinutes', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                             'queue', g.queue,
                             'ageSeconds', greatest(floor(extract(epoch FROM now() - g.minute)), 0)::bigint,
                             'pushRequests', g.push_requests, 'pushMessages', g.push_messages,
                             'popMessages', g.pop_messages, 'popEmpty', g.pop_empty,
                             'ackSuccess', greatest(g.ack_messages - g.ack_failed, 0), 'ackFailed', g.ack_failed,
                             'transactions', g.transactions,
                             'lagAvgMs', pgcursor_internal.average_age(g.age_sum_ms, g.pop_messages),
                             'lagMaxMs', g.age_max_ms,
                             'parked', pgcursor_internal.parked_average(g.parked_ms, 1))
                             ORDER BY g.queue), '[]'::jsonb)
                         FROM pgcursor_internal.newest_queue_minutes() g),
        'processMinutes', pgcursor_internal.newest_process_minutes())
    FROM pgcursor.maintenance() m
$$;
