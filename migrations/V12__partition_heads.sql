-- Each partition's head (the highest offset pushed there) moves out of
-- pgcursor.partitions into a table of its own, keyed by the partition.
-- Every push locks and bumps its partitions' heads. On Citus, partitions is
-- a reference table (its name -> id directory is read by every node), and
-- each write or row lock of a reference table locks the whole table on
-- every node with a two-phase commit: every push in the cluster waited for
-- every other, and pushes deadlocked with pops (docs/operations.md). Here
-- the heads can be distributed by partition_id, colocated with the
-- partition's messages, so a push locks one row on one worker. On plain
-- PostgreSQL a push now updates a narrow row instead of the directory's.
CREATE TABLE pgcursor.partition_heads (
    partition_id uuid PRIMARY KEY REFERENCES pgcursor.partitions (id) ON DELETE CASCADE,
    head         bigint NOT NULL DEFAULT 0
);
INSERT INTO pgcursor.partition_heads (partition_id, head)
SELECT id, head FROM pgcursor.partitions;
ALTER TABLE pgcursor.partitions DROP COLUMN head;
