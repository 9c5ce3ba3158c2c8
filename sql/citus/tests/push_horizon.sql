-- make test-citus: the Citus push_write (sql/citus/functions.sql) answers a
-- repeated transactionId as a duplicate only while its queue remembers it
-- (transaction_index_horizon), as sql/'s push does. Values are read with
-- \gset and compared as literals: a query about one partition is sent to
-- its worker whole, where pgTAP has no plan.
SELECT plan(3);
SELECT pgcursor.delete_queue('citus_horizon') IS NOT NULL AS deleted \gset
SELECT pgcursor.push('{"items": [{"queue": "citus_horizon", "payload": 1, "transactionId": "t1"}]}')
       -> 0 ->> 'status' AS first \gset
SELECT pgcursor.push('{"items": [{"queue": "citus_horizon", "payload": 2, "transactionId": "t1"}]}')
       -> 0 ->> 'status' AS again \gset
-- What purge_transaction_index records: nothing created before now is remembered.
UPDATE pgcursor.queues SET transaction_index_from = now() + interval '1 second' WHERE name = 'citus_horizon';
SELECT pgcursor.push('{"items": [{"queue": "citus_horizon", "payload": 3, "transactionId": "t1"}]}')
       -> 0 ->> 'status' AS past \gset
SELECT is(:'first'::text, 'queued', 'a new transactionId is queued');
SELECT is(:'again'::text, 'duplicate', 'the same one again is a duplicate');
SELECT is(:'past'::text, 'queued', 'past the queue''s horizon it is new again');
SELECT pgcursor.delete_queue('citus_horizon') IS NOT NULL AS deleted \gset
SELECT * FROM finish();
