-- Lifetime figures for the resource views (wire-admin.md §6, §11.15). The
-- live ones cost the hot path nothing: pushed = partitions.head (offsets are
-- dense from 1), completed / dead-lettered / discarded = the counters of the
-- cursor rows. These two tables keep what those rows cannot.

-- What deleted rows had counted, one row per partition: the counters of its
-- deleted cursor rows (a consumer group deleted) and, once the partition
-- itself is deleted (with its queue), its head as pushed. Written only by
-- statement-level AFTER DELETE triggers (sql/61_resources.sql), never on the
-- hot path. queue is null only between the two triggers of one queue
-- deletion, whichever fires first.
CREATE TABLE pgcursor.retired_totals (
    partition_id  uuid PRIMARY KEY,
    queue         text,
    pushed        bigint NOT NULL DEFAULT 0,
    completed     bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    discarded     bigint NOT NULL DEFAULT 0,
    retired_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX retired_totals_queue ON pgcursor.retired_totals (queue);

-- Per queue and minute, its lifetime totals at that minute (live + retired),
-- written by housekeeping at most once a minute and kept for a bounded time.
-- The difference of two snapshots is what happened between them: the
-- throughput of the overview, and per-queue, per-minute series. queue is
-- null for one row per minute: the totals of every queue that no longer
-- exists, so the rows of a minute always add up to the grand totals, while
-- deleted queues cost no row each.
CREATE TABLE pgcursor.stats_snapshots (
    minute        timestamptz NOT NULL,
    queue         text,
    taken_at      timestamptz NOT NULL,
    pushed        bigint NOT NULL,
    completed     bigint NOT NULL,
    dead_lettered bigint NOT NULL,
    discarded     bigint NOT NULL,
    CONSTRAINT stats_snapshots_minute_queue UNIQUE NULLS NOT DISTINCT (minute, queue)
);
