-- Traces (wire-admin.md §3): events a consumer records against a message,
-- each with any number of names, and lookups of dead letters by message.
--
-- Keyed by partition_id first like every hot table, so the tables
-- distribute by partition_id with the messages they describe. Unlike
-- messages (V2), they keep their foreign key to the partition: traces are
-- written by consumers now and then, not on every push, and the cascade
-- removes them with their queue. The functions delete them with their
-- message (pgcursor.delete_message, retention and eviction).
CREATE TABLE pgcursor.trace_events (
    partition_id   uuid NOT NULL REFERENCES pgcursor.partitions (id) ON DELETE CASCADE,
    id             uuid NOT NULL,
    transaction_id text NOT NULL,
    consumer_group text NOT NULL,
    event_type     text NOT NULL,
    data           jsonb NOT NULL,
    worker_id      text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, id)
);
-- By message, oldest first (GET /api/v1/traces/{partitionId}/{transactionId}).
CREATE INDEX trace_events_message ON pgcursor.trace_events (partition_id, transaction_id, created_at);

-- The names of an event (a set: duplicates collapse). created_at is the
-- event's, copied so that the by-name listing is one ordered index scan.
CREATE TABLE pgcursor.trace_names (
    partition_id uuid NOT NULL,
    trace_id     uuid NOT NULL,
    name         text NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (partition_id, trace_id, name),
    FOREIGN KEY (partition_id, trace_id) REFERENCES pgcursor.trace_events (partition_id, id) ON DELETE CASCADE
);
-- By name ordered by time (GET /api/v1/traces/by-name/{name}), and the names
-- with their counts (GET /api/v1/traces/names).
CREATE INDEX trace_names_by_name ON pgcursor.trace_names (name, created_at, trace_id);

-- A message's dead letters, by its offset (the status of a message in the
-- browser and its detail) and by its transactionId (deleting a message and
-- retrying it also find dead letters whose message retention removed).
CREATE INDEX dead_letters_message_offset ON pgcursor.dead_letters (partition_id, msg_offset);
CREATE INDEX dead_letters_transaction_id ON pgcursor.dead_letters (partition_id, transaction_id);
