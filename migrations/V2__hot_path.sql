-- The hot path: what every push, pop and ack writes, made cheaper.
--
-- messages and transaction_index get two rows per pushed message; their
-- foreign keys to partitions cost one trigger and one row lookup per row,
-- about 30% of a 100-item push. Partitions are only ever deleted with their
-- queue, by pgcursor.delete_queue, which deletes these rows itself.
ALTER TABLE pgcursor.messages DROP CONSTRAINT messages_partition_id_fkey;
ALTER TABLE pgcursor.transaction_index DROP CONSTRAINT transaction_index_partition_id_fkey;

-- Every pop sets a cursor row's lease and every completing ack clears it.
-- With lease_id indexed those updates cannot be HOT: each one added index
-- entries, and the few hot cursor rows dragged chains of dead versions
-- until vacuum (pop+ack throughput with 4 clients: 460-700 -> ~880 per
-- second). Finding a cursor by lease (lease extension, a transaction's
-- requiredLeases) now scans the cursors table, one row per (partition,
-- group). fillfactor leaves each page room for its rows' new versions.
DROP INDEX pgcursor.cursors_lease_id;
ALTER TABLE pgcursor.cursors SET (fillfactor = 50);
