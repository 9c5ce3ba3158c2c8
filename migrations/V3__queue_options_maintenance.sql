-- The queue options Queen's clients send that pgcursor stored nowhere, each
-- enforced by the functions (docs/http-api.md, Queue options):
--   window_buffer          seconds a partition must be quiet before it is served
--   max_wait_time_seconds  messages older than this are evicted by housekeeping
--   retention_enabled      NULL (unset) or true: retention runs; false: it does not
--   encryption_enabled     payloads stored as an AES-256-GCM envelope (the gateway)
ALTER TABLE pgcursor.queues
    ADD COLUMN window_buffer         integer NOT NULL DEFAULT 0,
    ADD COLUMN max_wait_time_seconds integer NOT NULL DEFAULT 0,
    ADD COLUMN retention_enabled     boolean,
    ADD COLUMN encryption_enabled    boolean NOT NULL DEFAULT false;

-- A UUID per stored message, shown on push (message_id), pop and message
-- detail. Nullable so that adding it does not rewrite the table: messages
-- pushed before this release have none.
ALTER TABLE pgcursor.messages ADD COLUMN message_id uuid;

-- Maintenance mode, cluster-wide: while push is on, pushes write nothing and
-- answer 503; while pop is on, pops answer empty with "paused".
CREATE TABLE pgcursor.maintenance (
    mode       text PRIMARY KEY CHECK (mode IN ('push', 'pop')),
    enabled    boolean NOT NULL DEFAULT false,
    changed_at timestamptz
);
INSERT INTO pgcursor.maintenance (mode) VALUES ('push'), ('pop');
