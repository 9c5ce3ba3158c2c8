-- Lease expiries, counted where they are noticed: a pop that takes over a
-- partition whose lease was never released (neither acked through nor
-- extended in time) counts one on that cursor row. Summed per (queue,
-- group) by metrics_snapshot() as a Prometheus counter; deleting a group's
-- rows resets it, as a counter may.
ALTER TABLE pgcursor.cursors ADD COLUMN lease_expiries bigint NOT NULL DEFAULT 0;
