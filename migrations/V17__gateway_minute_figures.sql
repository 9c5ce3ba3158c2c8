-- Three more per-minute figures from the gateways (wire-admin.md §4 "Counters
-- these routes need", §5.2): messages stored by their pushes, the time
-- their long-polls spent waiting (a minute's sum of waits in ms: divided by
-- 60,000 it is the minute's average of waiting long-polls), and requests
-- that failed for the database's reason. db_errors is kept for life too,
-- for queen_cluster_db_errors_total.
ALTER TABLE pgcursor.gateway_minutes
    ADD COLUMN push_messages bigint NOT NULL DEFAULT 0,
    ADD COLUMN parked_ms     bigint NOT NULL DEFAULT 0,
    ADD COLUMN db_errors     bigint NOT NULL DEFAULT 0;
ALTER TABLE pgcursor.gateway_totals ADD COLUMN db_errors bigint NOT NULL DEFAULT 0;
