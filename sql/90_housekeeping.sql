-- Housekeeping: every purge and the eviction of sql/80_retention.sql in one
-- transaction, at most one run at a time across every gateway and psql session.
--
--   SELECT pgcursor.housekeeping();                          -- per-queue rules, now
--   SELECT pgcursor.housekeeping(now() - interval '1 hour'); -- everything older than an hour

-- The advisory lock a run holds ("pgcu_hk1" in ASCII). Holding it from psql
-- (SELECT pg_advisory_lock(8099551810612128561)) pauses every run.
CREATE OR REPLACE FUNCTION pgcursor_internal.housekeeping_lock()
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT 8099551810612128561::bigint
$$;

-- housekeeping: writes the cursor rows pending subscriptions lack, runs
-- every purge and the eviction, then deletes idle partitions, and answers
-- what each did: {"skipped": false, "completedMessages", "messages",
-- "evictedMessages", "deadLetters", "transactionIndex", "partitions",
-- "statsSnapshots", "cursorRows"}; with a cutoff, each purge gets it (see
-- each for its rule). Partitions go when idle for idle_days (null: the
-- default of purge_idle_partitions; 0: never, unless a cutoff is given;
-- the gateway passes PGCURSOR_PARTITION_CLEANUP_DAYS). statsSnapshots: the
-- rows pgcursor.record_stats_snapshot() wrote (0 when this minute has its
-- snapshot already); cursorRows: the rows materialize_cursors() wrote.
-- Retention runs before eviction, so a message past both counts as
-- retention's; idle partitions go last, once the purges have emptied them.
-- When another run holds the lock it does nothing and answers
-- {"skipped": true, "reason": ...}. The lock is the transaction's: it is
-- released at commit or rollback, never left behind.
DROP FUNCTION IF EXISTS pgcursor.housekeeping(timestamptz);
CREATE OR REPLACE FUNCTION pgcursor.housekeeping(cutoff timestamptz DEFAULT NULL, idle_days integer DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    completed bigint;
    messages bigint;
    evicted bigint;
    dead bigint;
    index bigint;
    partitions bigint;
    cursors bigint;
BEGIN
    IF idle_days < 0 THEN
        RAISE EXCEPTION 'idle_days must be a non-negative integer' USING ERRCODE = '22023';
    END IF;
    IF NOT pg_try_advisory_xact_lock(pgcursor_internal.housekeeping_lock()) THEN
        RETURN jsonb_build_object('skipped', true,
                                  'reason', 'another housekeeping run holds the lock');
    END IF;
    cursors := pgcursor_internal.materialize_cursors();
    completed := pgcursor.purge_completed_messages(cutoff);
    messages := pgcursor.purge_messages(cutoff);
    evicted := pgcursor.evict_expired_messages(cutoff);
    dead := pgcursor.purge_dead_letters(cutoff);
    index := pgcursor.purge_transaction_index(cutoff);
    IF cutoff IS NOT NULL OR idle_days IS NULL THEN
        partitions := pgcursor.purge_idle_partitions(cutoff);
    ELSIF idle_days > 0 THEN
        partitions := pgcursor.purge_idle_partitions(now() - idle_days * interval '1 day');
    ELSE
        partitions := 0;
    END IF;
    RETURN jsonb_build_object(
        'skipped', false,
        'completedMessages', completed,
        'messages', messages,
        'evictedMessages', evicted,
        'deadLetters', dead,
        'transactionIndex', index,
        'partitions', partitions,
        'statsSnapshots', (pgcursor.record_stats_snapshot() ->> 'rows')::bigint,
        'cursorRows', cursors);
END $$;
