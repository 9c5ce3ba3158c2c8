-- Hot functions with the partition as a typed first argument, distributed
-- by it (create_distributed_function, colocated with messages): a call
-- from the coordinator, outside a transaction block, is sent whole to the
-- worker that holds the partition's shards and runs there, every statement
-- on local shards and local copies of the reference tables (one round trip
-- instead of one per statement). Applied by `scripts/citus.sh distribute`
-- after distribute.sql; schema pgcursor_citus, so the gateway's re-applying
-- of sql/*.sql at start leaves it alone. The gateway calls these when it
-- finds them (gateway/src/db.rs, Deployment).
--
-- A call run on a worker sends its pg_notify there, where no gateway
-- listens: the gateway wakes long-polls itself after a delegated push, and
-- after a delegated ack that nacked (wake_queue, wake_partition below, run
-- on the coordinator).
--
-- Pops are not delegated: a pop of a queue claims across its partitions
-- (every shard), and a group's first pop writes its subscription, a
-- reference-table write, which a call running on one worker cannot make.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE SCHEMA IF NOT EXISTS pgcursor_citus;

-- A delegated call runs in a worker's session, which has none of the
-- calling session's settings (Citus carries SET LOCAL into a transaction
-- block's remote work, but these calls are delegated only outside one).
-- The gateway passes its sessions' lock_timeout (DATABASE_URL's options),
-- so a call waiting on the worker for a row lock gives up when the
-- gateway's own would. NULL: the worker's setting stands.
CREATE OR REPLACE FUNCTION pgcursor_citus.use_lock_timeout(lock_timeout text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF lock_timeout IS NOT NULL THEN
        PERFORM set_config('lock_timeout', lock_timeout, true);
    END IF;
END $$;

-- The calls before lock_timeout was an argument.
DROP FUNCTION IF EXISTS pgcursor_citus.ack_group(uuid, jsonb);
DROP FUNCTION IF EXISTS pgcursor_citus.push(uuid, jsonb);

-- pgcursor.ack_group with the partition taken out of the request.
CREATE OR REPLACE FUNCTION pgcursor_citus.ack_group(partition_id uuid, request jsonb,
                                                    lock_timeout text DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgcursor_citus.use_lock_timeout(lock_timeout);
    RETURN pgcursor.ack_group(request || jsonb_build_object('partitionId', partition_id));
END $$;

SELECT create_distributed_function('pgcursor_citus.ack_group(uuid, jsonb, text)', 'partition_id',
                                   colocate_with => 'pgcursor.messages');

-- pgcursor.push for a request whose items all go to one partition, which
-- exists: push_partition's answer.
CREATE OR REPLACE FUNCTION pgcursor_citus.push(on_partition uuid, request jsonb,
                                               lock_timeout text DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgcursor_citus.use_lock_timeout(lock_timeout);
    RETURN pgcursor.push(request);
END $$;

SELECT create_distributed_function('pgcursor_citus.push(uuid, jsonb, text)', 'on_partition',
                                   colocate_with => 'pgcursor.messages');

-- The partition a push of items to (queue, partition) can be delegated to,
-- or NULL: the partition does not exist yet (creating it writes the
-- reference table of partitions, on every node), or the queue has a
-- maxSize (its room is counted over all its partitions, on every shard).
-- Not distributed: run on the coordinator, from its copy of the tables.
CREATE OR REPLACE FUNCTION pgcursor_citus.push_partition(queue text, partition text)
RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT p.id FROM pgcursor.partitions p JOIN pgcursor.queues q ON q.name = p.queue
     WHERE p.queue = push_partition.queue AND p.name = coalesce(push_partition.partition, 'Default')
       AND NOT coalesce(q.max_size > 0, false)
$$;

-- Long-polls of a queue woken from the coordinator, where gateways listen
-- (what push_items does on plain PostgreSQL).
CREATE OR REPLACE FUNCTION pgcursor_citus.wake_queue(queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgcursor_internal.wake_pops(ARRAY[queue]);
END $$;

-- The same for the queue of a partition (after a nack: wake_waiters). The
-- queue is read first and notified on its own: inside a query on a Citus
-- table, pg_notify could be sent from the worker that runs it.
CREATE OR REPLACE FUNCTION pgcursor_citus.wake_partition(partition_id uuid)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    queue text := (SELECT p.queue FROM pgcursor.partitions p WHERE p.id = wake_partition.partition_id);
BEGIN
    IF queue IS NOT NULL THEN
        PERFORM pgcursor_citus.wake_queue(queue);
    END IF;
END $$;
