-- Housekeeping: the transaction index purge. (Message and dead-letter
-- retention come later.) The gateway's clock calls it under an advisory lock;
-- psql can call it with an explicit cutoff.
--
--   SELECT pgcursor.purge_transaction_index();                        -- per-queue retention
--   SELECT pgcursor.purge_transaction_index(now() - interval '1 hour'); -- everything older

-- Deletes transaction index rows created before cutoff or, with no cutoff,
-- older than their queue's transactionIndexRetentionSeconds (0 = keep
-- forever). Returns how many rows went. Once purged, a transactionId can be
-- pushed again and is no longer ackable.
CREATE OR REPLACE FUNCTION pgcursor.purge_transaction_index(cutoff timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    purged bigint;
BEGIN
    IF cutoff IS NOT NULL THEN
        DELETE FROM pgcursor.transaction_index WHERE created_at < cutoff;
    ELSE
        -- Per partition, so each delete is a range scan of (partition_id, created_at).
        DELETE FROM pgcursor.transaction_index t
        USING (SELECT p.id, now() - q.transaction_index_retention_seconds * interval '1 second' AS before
               FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
               WHERE q.transaction_index_retention_seconds > 0) r
        WHERE t.partition_id = r.id AND t.created_at < r.before;
    END IF;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END $$;
