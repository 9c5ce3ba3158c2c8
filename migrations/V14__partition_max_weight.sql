-- The largest payload pushed into each partition, in bytes as the push
-- handed it over (pg_column_size of the jsonb). A pop capped by maxBytes
-- (PGCURSOR_MAX_ANSWER_BYTES) weighs the messages it claimed only when
-- their count times this could exceed the cap, so a queue of small
-- messages pays nothing for the cap (sql/30_pop.sql, fit_claims_to_bytes).
-- It only grows. It covers the offsets from weighed_from on: a partition
-- made before this migration holds messages of unknown size up to its
-- head now, and pops claiming any of those always weigh them.
ALTER TABLE pgcursor.partition_heads ADD COLUMN max_weight integer NOT NULL DEFAULT 0;
ALTER TABLE pgcursor.partition_heads ADD COLUMN weighed_from bigint NOT NULL DEFAULT 1;
UPDATE pgcursor.partition_heads SET weighed_from = head + 1;
