-- A pushed message costs one heap row: a stored message is its own entry of
-- the transaction index (messages carries its transactionId, indexed on
-- (partition_id, transaction_id) since V4), and transaction_index keeps only
-- the ids of messages that retention deleted while their queue still
-- remembers them (sql/80_retention.sql writes those at delete time).
-- A queue remembers transactionIds created at or after its horizon:
-- transactionIndexRetentionSeconds ago, and no earlier than the cutoff of
-- the last explicit purge_transaction_index(cutoff), kept here.
ALTER TABLE pgcursor.queues ADD COLUMN transaction_index_from timestamptz;

-- Entries of messages still stored are the messages themselves now.
DELETE FROM pgcursor.transaction_index t
 USING pgcursor.messages m
 WHERE m.partition_id = t.partition_id AND m.msg_offset = t.msg_offset
   AND m.transaction_id = t.transaction_id;
