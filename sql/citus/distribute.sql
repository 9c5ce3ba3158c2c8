-- pgcursor's tables on Citus: applied on the coordinator by
-- `scripts/citus.sh distribute`, after `gateway migrate`. Not a migration:
-- a plain PostgreSQL never runs it. Safe to run again (what is already
-- distributed is left as it is).
--
-- Hot tables are distributed by partition_id and colocated with messages,
-- so every statement about one partition is routed to the one worker that
-- holds that partition's shards. Small, rarely written tables that those
-- statements join against are reference tables (a copy on every node,
-- coordinator included).
\set ON_ERROR_STOP on
-- The helpers live in pg_temp, which Citus does not propagate: say so once, not per helper.
SET client_min_messages = error;
-- Citus refuses to distribute a table with triggers unless told (see below).
SET citus.enable_unsafe_triggers = on;
-- Shards per distributed table (scripts/citus.sh distribute passes
-- CITUS_SHARD_COUNT, default 8). A pop of a whole queue reads every shard
-- of cursors once (sql/citus/functions.sql, claim_batches), so each shard
-- costs every such pop a task: Citus's default of 32 made a pop on two
-- workers 32 remote queries. Fix it before distributing: a table keeps
-- the count it was made with.
\if :{?shard_count}
\else
\set shard_count 8
\endif
SET citus.shard_count = :shard_count;

-- What Citus made of a table so far: 'reference', 'distributed', 'local'
-- (a Citus local table: Citus adds the tables a reference table's foreign
-- keys reach to its metadata by itself, so "in pg_dist_partition" does not
-- mean done), or NULL (a plain table).
CREATE OR REPLACE FUNCTION pg_temp.citus_kind(t regclass) RETURNS text LANGUAGE sql AS $$
    SELECT citus_table_type FROM citus_tables WHERE table_name = t
$$;

CREATE OR REPLACE FUNCTION pg_temp.make_reference(t regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF pg_temp.citus_kind(t) IS DISTINCT FROM 'reference' THEN
        PERFORM create_reference_table(t);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION pg_temp.make_distributed(t regclass, colocate_with text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF pg_temp.citus_kind(t) IS DISTINCT FROM 'distributed' THEN
        PERFORM create_distributed_table(t, 'partition_id', colocate_with => colocate_with);
    END IF;
END $$;

-- Every foreign key is dropped first and made again last. Otherwise
-- making queues a reference table turns every table its foreign keys reach
-- into a "Citus local table" on its own, and making such a table a
-- reference or distributed table afterwards rebuilds it: PostgreSQL then
-- drops, without a word, every function taking or returning its row type
-- (lock_cursor, decide_ack, write_ack, cursor_rows, start_cursor,
-- dead_letter_json, ... were gone and every ack failed). Each statement commits on its own: in one transaction (a DO
-- block) create_distributed_table waited forever on a connection of its own
-- for a lock that transaction held.
SELECT pg_temp.citus_kind('pgcursor.trace_names') IS DISTINCT FROM 'distributed' AS to_do \gset
\if :to_do
ALTER TABLE pgcursor.partitions DROP CONSTRAINT IF EXISTS partitions_queue_fkey;
ALTER TABLE pgcursor.subscriptions DROP CONSTRAINT IF EXISTS subscriptions_queue_fkey;
ALTER TABLE pgcursor.partition_heads DROP CONSTRAINT IF EXISTS partition_heads_partition_id_fkey;
ALTER TABLE pgcursor.cursors DROP CONSTRAINT IF EXISTS cursors_partition_id_fkey;
ALTER TABLE pgcursor.dead_letters DROP CONSTRAINT IF EXISTS dead_letters_partition_id_fkey;
ALTER TABLE pgcursor.trace_events DROP CONSTRAINT IF EXISTS trace_events_partition_id_fkey;
ALTER TABLE pgcursor.trace_names DROP CONSTRAINT IF EXISTS trace_names_partition_id_trace_id_fkey;
\endif

-- Reference tables: a queue's options, its partitions' directory (name ->
-- id), the subscriptions and the maintenance switches are read by every
-- push, pop and ack and written rarely.
SELECT pg_temp.make_reference('pgcursor.queues');
SELECT pg_temp.make_reference('pgcursor.partitions');
SELECT pg_temp.make_reference('pgcursor.subscriptions');
SELECT pg_temp.make_reference('pgcursor.maintenance');

-- Written on the side, read by the resource and status views: reference
-- tables too, so that any node can read them (a plain table would exist on
-- the coordinator only). retired_totals is written by the delete triggers
-- of cursors and partitions; stats_snapshots and gateway_minutes once a
-- minute (gateway_totals with the latter, and the gateway_process_* tables
-- beside it), retention_minutes by the purges.
SELECT pg_temp.make_reference('pgcursor.retired_totals');
SELECT pg_temp.make_reference('pgcursor.stats_snapshots');
SELECT pg_temp.make_reference('pgcursor.gateway_minutes');
SELECT pg_temp.make_reference('pgcursor.gateway_totals');
SELECT pg_temp.make_reference('pgcursor.retention_minutes');
SELECT pg_temp.make_reference('pgcursor.gateway_process_minutes');
SELECT pg_temp.make_reference('pgcursor.gateway_process_samples');
SELECT pg_temp.make_reference('pgcursor.gateway_process_parked');

-- Distributed by partition_id, colocated: each partition's head, messages,
-- transaction index, cursors, dead letters and traces in the same shard
-- group on the same worker. (Every primary key already starts with
-- partition_id, as Citus requires.) The head is what every push locks and
-- bumps: distributed, a push to a partition locks one row on one worker,
-- where in the reference table partitions it locked that table on every
-- node (docs/operations.md).
SELECT pg_temp.make_distributed('pgcursor.messages', 'default');
SELECT pg_temp.make_distributed('pgcursor.partition_heads', 'pgcursor.messages');
SELECT pg_temp.make_distributed('pgcursor.transaction_index', 'pgcursor.messages');
SELECT pg_temp.make_distributed('pgcursor.cursors', 'pgcursor.messages');
SELECT pg_temp.make_distributed('pgcursor.dead_letters', 'pgcursor.messages');
SELECT pg_temp.make_distributed('pgcursor.trace_events', 'pgcursor.messages');
SELECT pg_temp.make_distributed('pgcursor.trace_names', 'pgcursor.messages');

-- The foreign keys again, as the migrations made them: distributed to
-- reference, reference to reference, and between colocated tables on
-- partition_id: all allowed.
\if :to_do
ALTER TABLE pgcursor.partitions ADD CONSTRAINT partitions_queue_fkey
    FOREIGN KEY (queue) REFERENCES pgcursor.queues (name) ON DELETE CASCADE;
ALTER TABLE pgcursor.subscriptions ADD CONSTRAINT subscriptions_queue_fkey
    FOREIGN KEY (queue) REFERENCES pgcursor.queues (name) ON DELETE CASCADE;
ALTER TABLE pgcursor.partition_heads ADD CONSTRAINT partition_heads_partition_id_fkey
    FOREIGN KEY (partition_id) REFERENCES pgcursor.partitions (id) ON DELETE CASCADE;
ALTER TABLE pgcursor.cursors ADD CONSTRAINT cursors_partition_id_fkey
    FOREIGN KEY (partition_id) REFERENCES pgcursor.partitions (id) ON DELETE CASCADE;
ALTER TABLE pgcursor.dead_letters ADD CONSTRAINT dead_letters_partition_id_fkey
    FOREIGN KEY (partition_id) REFERENCES pgcursor.partitions (id) ON DELETE CASCADE;
ALTER TABLE pgcursor.trace_events ADD CONSTRAINT trace_events_partition_id_fkey
    FOREIGN KEY (partition_id) REFERENCES pgcursor.partitions (id) ON DELETE CASCADE;
ALTER TABLE pgcursor.trace_names ADD CONSTRAINT trace_names_partition_id_trace_id_fkey
    FOREIGN KEY (partition_id, trace_id) REFERENCES pgcursor.trace_events (partition_id, id) ON DELETE CASCADE;
\endif

-- The statement triggers that keep deleted rows' totals (on cursors,
-- partitions and partition_heads; sql/61_resources.sql) cannot run on Citus: their INSERT reads the
-- transition table `gone`, and Citus 12.1 plans it as a distributed query
-- ("unrecognized RTE kind: 7", or "executor could not find named
-- tuplestore "gone"" once sent to another node); on the reference table
-- partitions it would also fire once per node. So every delete of cursor
-- rows, heads or partitions failed. They are disabled here (the gateway's
-- bootstrap only creates them when missing, so this stays), and the
-- deleting functions write the totals themselves (sql/citus/functions.sql:
-- delete_queue, delete_consumer_group).
ALTER TABLE pgcursor.cursors DISABLE TRIGGER cursors_retire_totals;
ALTER TABLE pgcursor.partitions DISABLE TRIGGER partitions_retire_totals;
ALTER TABLE pgcursor.partition_heads DISABLE TRIGGER partition_heads_retire_totals;

-- The same holds for the statement trigger that keeps the transactionIds of
-- deleted messages (sql/80_retention.sql, remember_deleted_ids): it reads
-- `gone`, and on a worker it would also need the helpers it calls there.
-- Disabled, so on Citus a deleted message's id is forgotten with it (the
-- index's window shrinks to the message's life) until the retention
-- functions copy the ids themselves, as the totals above are written.
ALTER TABLE pgcursor.messages DISABLE TRIGGER messages_remember_deleted_ids;

-- One connection per worker for a statement's tasks (Citus's default opens
-- up to 16 to run a multi-shard statement's tasks in parallel). pgcursor's
-- multi-shard statements are small reads, chiefly a pop's look at the
-- group's cursor rows on every shard, and opening and driving more
-- connections for them cost more than it saved: bench-citus at 8 shards,
-- 3,510 / 3,154 msgs/s on one / two workers before, 3,874 / 3,794 and
-- 3,754 / 3,614 after, with less worker CPU. (A new session reads it.)
ALTER DATABASE pgcursor SET citus.max_adaptive_executor_pool_size = 1;
