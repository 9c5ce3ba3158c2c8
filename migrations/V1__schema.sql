-- pgcursor schema: tables and indexes only. Stored functions live in sql/.
-- Every hot table is keyed by partition_id first so each ack, pop and push
-- is an index lookup on one partition (and the tables can be distributed by
-- partition_id with Citus, colocated, without changing a function).

CREATE SCHEMA IF NOT EXISTS pgcursor;

-- A queue and its options. Defaults are those of wire.md. The two
-- dead-letter flags are nullable on purpose: dead-lettering is off only when
-- both are explicitly false.
CREATE TABLE pgcursor.queues (
    name                                text PRIMARY KEY,
    namespace                           text,
    task                                text,
    lease_time                          integer NOT NULL DEFAULT 300,
    retry_limit                         integer NOT NULL DEFAULT 3,
    dead_letter_queue                   boolean,
    dlq_after_max_retries               boolean,
    transaction_index_retention_seconds integer NOT NULL DEFAULT 86400,
    retention_seconds                   integer NOT NULL DEFAULT 0,
    completed_retention_seconds         integer NOT NULL DEFAULT 0,
    delayed_processing                  integer NOT NULL DEFAULT 0,
    max_size                            integer NOT NULL DEFAULT 0,
    priority                            integer NOT NULL DEFAULT 0,
    created_at                          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queues_namespace_task ON pgcursor.queues (namespace, task);

-- An ordered partition of a queue. head is the highest offset pushed;
-- pushes lock this row to hand out dense offsets.
CREATE TABLE pgcursor.partitions (
    id         uuid PRIMARY KEY,
    queue      text NOT NULL REFERENCES pgcursor.queues (name) ON DELETE CASCADE,
    name       text NOT NULL,
    head       bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (queue, name)
);

-- Messages, dense offsets from 1 per partition.
CREATE TABLE pgcursor.messages (
    partition_id   uuid NOT NULL REFERENCES pgcursor.partitions (id) ON DELETE CASCADE,
    msg_offset     bigint NOT NULL,
    transaction_id text NOT NULL,
    payload        jsonb,
    trace_id       uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, msg_offset)
);
CREATE INDEX messages_created_at ON pgcursor.messages (partition_id, created_at);

-- The transaction index: (partition, transactionId) -> offset. Kept apart
-- from messages so it is purged on its own clock.
CREATE TABLE pgcursor.transaction_index (
    partition_id   uuid NOT NULL REFERENCES pgcursor.partitions (id) ON DELETE CASCADE,
    transaction_id text NOT NULL,
    msg_offset     bigint NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, transaction_id)
);
CREATE INDEX transaction_index_created_at ON pgcursor.transaction_index (partition_id, created_at);

-- One cursor per (partition, consumer group): the whole consumption state.
-- cursor = highest completed offset; the lease and the retry counter live here.
CREATE TABLE pgcursor.cursors (
    partition_id               uuid NOT NULL REFERENCES pgcursor.partitions (id) ON DELETE CASCADE,
    consumer_group             text NOT NULL,
    cursor                     bigint NOT NULL DEFAULT 0,
    lease_id                   uuid,
    lease_expires_at           timestamptz,
    batch_start                bigint,
    batch_end                  bigint,
    retry_count                integer NOT NULL DEFAULT 0,
    completed_total            bigint NOT NULL DEFAULT 0,
    implicitly_completed_total bigint NOT NULL DEFAULT 0,
    dead_lettered_total        bigint NOT NULL DEFAULT 0,
    discarded_total            bigint NOT NULL DEFAULT 0,
    last_ack_at                timestamptz,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group)
);
CREATE INDEX cursors_lease_id ON pgcursor.cursors (lease_id) WHERE lease_id IS NOT NULL;

-- Dead letters carry a snapshot of the payload so they survive message retention.
CREATE TABLE pgcursor.dead_letters (
    id             uuid NOT NULL DEFAULT gen_random_uuid(),
    partition_id   uuid NOT NULL REFERENCES pgcursor.partitions (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    msg_offset     bigint NOT NULL,
    transaction_id text NOT NULL,
    payload        jsonb,
    error          text NOT NULL,
    retry_count    integer NOT NULL,
    created_at     timestamptz,
    failed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, id)
);
CREATE INDEX dead_letters_id ON pgcursor.dead_letters (id);
CREATE INDEX dead_letters_failed_at ON pgcursor.dead_letters (failed_at);
