-- Before lock_partition_set (sql/02_shared.sql), a group's first pop racing
-- a push that created a partition could mark the group's subscription
-- complete without a row on that partition: the group never saw it, and
-- retention counted it as consumed there. Marking every subscription
-- pending again lets the next housekeeping run (or pop) write any row that
-- is missing; rows that exist are left as they are.
UPDATE pgcursor.subscriptions SET cursor_rows = 'pending' WHERE cursor_rows = 'complete';
