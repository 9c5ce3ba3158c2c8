-- A consumer group's subscription on a queue (wire-admin.md §1, §11.10):
-- where its cursors start on partitions it has not positioned yet. Written
-- at the group's first pop on the queue, kept when cursor rows are deleted
-- without deleteMetadata, moved by an update of the subscription.
--   mode  'all' (since null: from the beginning), 'new' (since = the first
--         pop's time), 'timestamp' (since = subscriptionFrom or the update's
--         timestamp)
CREATE TABLE pgcursor.subscriptions (
    consumer_group text NOT NULL,
    queue          text NOT NULL REFERENCES pgcursor.queues (name) ON DELETE CASCADE,
    mode           text NOT NULL CHECK (mode IN ('all', 'new', 'timestamp')),
    since          timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, queue)
);
CREATE INDEX subscriptions_queue ON pgcursor.subscriptions (queue);

-- Groups present before this release subscribed as 'all' as far as anyone
-- can tell now: their cursors already sit on every partition they knew.
INSERT INTO pgcursor.subscriptions (consumer_group, queue, mode, created_at)
SELECT c.consumer_group, p.queue, 'all', min(c.created_at)
FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
GROUP BY c.consumer_group, p.queue;

-- An ack of a replayed message resolves through the messages table when
-- its transaction index entry is already purged (§11.8): this is the lookup.
CREATE INDEX messages_transaction_id ON pgcursor.messages (partition_id, transaction_id);
