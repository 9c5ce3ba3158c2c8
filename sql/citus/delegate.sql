-- Hot functions with the partition as a typed first argument, distributed
-- by it (create_distributed_function, colocated with messages): a call
-- from the coordinator, outside a transaction block, is sent whole to the
-- worker that holds the partition's shards and runs there, every statement
-- on local shards and local reference-table copies (one round trip instead
-- of one per statement). Applied by `scripts/citus.sh distribute` after
-- distribute.sql; schema pgcursor_citus, so the gateway's re-applying of
-- sql/*.sql at start leaves it alone.
--
-- Only ack so far. The gateway still calls pgcursor.ack_group(jsonb) and
-- would have to call this instead. A nack's wake-up (pg_notify in
-- wake_waiters) then happens on the worker, where no gateway listens: a
-- long-poll waiting on that queue only sees the redelivery at its own 5 s
-- re-check. Push and pop name partitions by queue and name, not id (and a
-- push may create the partition), so they need a different entry point
-- before they can be delegated this way.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE SCHEMA IF NOT EXISTS pgcursor_citus;

-- pgcursor.ack_group with the partition taken out of the request.
CREATE OR REPLACE FUNCTION pgcursor_citus.ack_group(partition_id uuid, request jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    RETURN pgcursor.ack_group(request || jsonb_build_object('partitionId', partition_id));
END $$;

SELECT create_distributed_function('pgcursor_citus.ack_group(uuid, jsonb)', 'partition_id',
                                   colocate_with => 'pgcursor.messages');
