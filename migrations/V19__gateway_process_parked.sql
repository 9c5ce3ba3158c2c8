-- The time each gateway process's long-polls waited per queue and minute
-- (divided by 60,000: the minute's average of its waiting long-polls), for
-- the queue-parked-replicas analytics. Written with the process's minute
-- (pgcursor.record_process_minutes), kept 24 hours.
CREATE TABLE pgcursor.gateway_process_parked (
    minute    timestamptz NOT NULL,
    hostname  text NOT NULL,
    pid       integer NOT NULL,
    queue     text NOT NULL,
    parked_ms bigint NOT NULL,
    PRIMARY KEY (minute, hostname, pid, queue)
);
