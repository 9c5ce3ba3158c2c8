-- The largest payload pushed into each partition, in bytes as the push
-- handed it over (pg_column_size of the jsonb). A pop capped by maxBytes
-- (PGCURSOR_MAX_ANSWER_BYTES) weighs the messages it claimed only when their
-- count times this could exceed the cap, so a queue of small messages pays
-- nothing for the cap (sql/30_pop.sql, fit_claims_to_bytes). It only
-- grows. Partitions made before this migration hold messages of unknown
-- size: they start at the largest value, so their pops always weigh.
ALTER TABLE pgcursor.partition_heads ADD COLUMN max_weight integer NOT NULL DEFAULT 2147483647;
ALTER TABLE pgcursor.partition_heads ALTER COLUMN max_weight SET DEFAULT 0;
