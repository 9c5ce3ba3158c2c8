-- Per minute and per gateway process (wire-admin.md §4 "Counters these
-- routes need": the per-queue totals, DB errors, dead-lettered messages and
-- process samples, per gateway): the system-metrics and worker-metrics
-- analytics, /status's workers and process figures and the scrape's
-- queen_worker_* gauges read them. A process is (hostname, pid); only that
-- process writes its rows (pgcursor.record_process_minutes). Kept 24 hours,
-- as gateway_minutes.
CREATE TABLE pgcursor.gateway_process_minutes (
    minute        timestamptz NOT NULL,
    hostname      text NOT NULL,
    pid           integer NOT NULL,
    port          integer NOT NULL,
    push_requests bigint NOT NULL DEFAULT 0,
    pop_requests  bigint NOT NULL DEFAULT 0,
    ack_requests  bigint NOT NULL DEFAULT 0,
    transactions  bigint NOT NULL DEFAULT 0,
    push_messages bigint NOT NULL DEFAULT 0,
    pop_messages  bigint NOT NULL DEFAULT 0,
    ack_messages  bigint NOT NULL DEFAULT 0,
    ack_failed    bigint NOT NULL DEFAULT 0,
    age_sum_ms    bigint NOT NULL DEFAULT 0,
    age_max_ms    bigint NOT NULL DEFAULT 0,
    db_errors     bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, hostname, pid)
);

-- The process's samples of the minute, one row per gauge (cpu.user_us,
-- cpu.system_us: CPU percent x 100 since the previous sample;
-- memory.rss_bytes, memory.virtual_bytes; database.pool_size, pool_idle,
-- pool_active): how many, their average, least, largest and last value.
CREATE TABLE pgcursor.gateway_process_samples (
    minute   timestamptz NOT NULL,
    hostname text NOT NULL,
    pid      integer NOT NULL,
    gauge    text NOT NULL,
    samples  integer NOT NULL,
    avg      float8 NOT NULL,
    min      float8 NOT NULL,
    max      float8 NOT NULL,
    last     float8 NOT NULL,
    PRIMARY KEY (minute, hostname, pid, gauge)
);
