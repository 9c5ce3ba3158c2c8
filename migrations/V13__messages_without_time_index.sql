-- messages loses its (partition_id, created_at) index: a third index entry
-- per message was an eighth of a push (bench (f), 2026-12-04: push_items
-- 1,305 -> 1,131 µs per 100 messages without it). Lookups by time become
-- binary searches over the primary key (pgcursor_internal.first_offset_at),
-- which rely on createdAt never decreasing with the offset in a partition:
-- pushes now stamp their messages no earlier than the partition's newest
-- (pgcursor_internal.push_stamps). Messages stored before this migration by
-- concurrent pushes may be a few milliseconds out of that order; they are
-- raised to the latest createdAt below them, so the rule holds for them too.
UPDATE pgcursor.messages m
   SET created_at = r.running
  FROM (SELECT x.partition_id, x.msg_offset,
               max(x.created_at) OVER (PARTITION BY x.partition_id ORDER BY x.msg_offset) AS running
          FROM pgcursor.messages x) r
 WHERE r.partition_id = m.partition_id AND r.msg_offset = m.msg_offset AND m.created_at < r.running;
DROP INDEX pgcursor.messages_created_at;
