-- A seek and an ack of the same (partition, group) serialise on the cursor
-- row (docs/http-api.md "Consumer groups", the seek): whichever comes second
-- waits, then sees the first's outcome. Two dblink sessions work on committed
-- data (cleaned up at the end).
BEGIN;
SELECT plan(14);
\ir lib/dblink.sql
CREATE FUNCTION pg_temp.ack_sql(lease text, tx text) RETURNS text LANGUAGE sql AS $$
    SELECT format($q$SELECT (pgcursor.ack_group(jsonb_build_object(
               'partitionId', (SELECT id FROM pgcursor.partitions WHERE queue = 't66'),
               'consumerGroup', 'g', 'leaseId', %L,
               'items', jsonb_build_array(jsonb_build_object('transactionId', %L)))) -> 0 ->> 'error')$q$, lease, tx)
$$;
CREATE FUNCTION pg_temp.seek_sql(to_end boolean) RETURNS text LANGUAGE sql AS $$
    SELECT format($q$SELECT (pgcursor.seek_consumer_group('g', 't66', now() - interval '1 hour', %L)
                             ->> 'partitionsUpdated')$q$, to_end)
$$;
CREATE FUNCTION pg_temp.pop_lease() RETURNS text LANGUAGE sql AS $$
    SELECT x FROM dblink('t66a', $q$SELECT pgcursor.pop('{"queue":"t66","consumerGroup":"g","batch":3}') ->> 'leaseId'$q$)
        AS t(x text)
$$;
-- The committed cursor row of group 'g' as "cursor leased?".
CREATE FUNCTION pg_temp.committed() RETURNS text LANGUAGE sql AS $$
    SELECT x FROM dblink('t66b', $q$SELECT c.cursor || ' ' || (c.lease_id IS NOT NULL)
                                    FROM pgcursor.cursors c JOIN pgcursor.partitions p ON p.id = c.partition_id
                                   WHERE p.queue = 't66' AND c.consumer_group = 'g'$q$) AS t(x text)
$$;
CREATE FUNCTION pg_temp.drop_queue() RETURNS void LANGUAGE sql AS $$
    SELECT FROM dblink('t66a', $q$SELECT pgcursor.delete_queue('t66')$q$) AS t(x jsonb)
$$;
CREATE TEMP TABLE lease (l text) ON COMMIT DROP;

DO $$ BEGIN
    PERFORM pg_temp.open_sessions('t66a', 't66b');
    PERFORM pg_temp.drop_queue();
    PERFORM * FROM dblink('t66a', $q$SELECT pgcursor.push('{"items": [
        {"queue": "t66", "payload": 1, "transactionId": "a1"}, {"queue": "t66", "payload": 2, "transactionId": "a2"},
        {"queue": "t66", "payload": 3, "transactionId": "a3"}]}')$q$) AS t(x jsonb);
    PERFORM dblink_exec('t66b', $q$SET lock_timeout = '300ms'$q$);
END $$;
INSERT INTO lease SELECT pg_temp.pop_lease();

-- An ack first: session A acks a1 and keeps its transaction open.
SELECT dblink_exec('t66a', 'BEGIN');
SELECT is((SELECT x FROM dblink('t66a', pg_temp.ack_sql(l, 'a1')) AS t(x text)), NULL, 'A acks a1 (row held)') FROM lease;
SELECT throws_like(format($q$SELECT * FROM dblink('t66b', %L) AS t(x text)$q$, pg_temp.seek_sql(true)),
                   '%lock timeout%', 'a seek of the same (partition, group) waits for the ack');
SELECT dblink_exec('t66a', 'COMMIT');
SELECT is(pg_temp.committed(), '1 true', 'A''s ack committed: cursor 1, lease still live');
SELECT is((SELECT x FROM dblink('t66b', pg_temp.seek_sql(true)) AS t(x text)), '1', 'then the seek goes through');
SELECT is(pg_temp.committed(), '3 false', '... on top of the ack: cursor at the head, lease released');

-- A seek first: back to the start, a new lease, then A seeks to the end and holds the row.
SELECT is((SELECT x FROM dblink('t66b', pg_temp.seek_sql(false)) AS t(x text)), '1', 'seek back to the start');
UPDATE lease SET l = pg_temp.pop_lease();
SELECT dblink_exec('t66a', 'BEGIN');
SELECT is((SELECT x FROM dblink('t66a', pg_temp.seek_sql(true)) AS t(x text)), '1', 'A seeks to the end (row held)');
SELECT throws_like(format($q$SELECT * FROM dblink('t66b', %L) AS t(x text)$q$, pg_temp.ack_sql(l, 'a1')),
                   '%lock timeout%', 'an ack of the same (partition, group) waits for the seek') FROM lease;
SELECT dblink_exec('t66a', 'COMMIT');
SELECT is((SELECT x FROM dblink('t66b', pg_temp.ack_sql(l, 'a1')) AS t(x text)), 'invalid or expired lease',
          'then the ack sees the released lease') FROM lease;
SELECT is(pg_temp.committed(), '3 false', '... and changes nothing');

-- A seek the group's delete overtakes (A deletes the group and holds its
-- transaction; B's seek, sent meanwhile, waits for the group's row): it
-- moves nothing and does not make the deleted row again (it made it at
-- cursor 0, so the group would have consumed the partition again).
SELECT dblink_exec('t66a', 'BEGIN');
SELECT is((SELECT x FROM dblink('t66a', $q$SELECT pgcursor.delete_consumer_group('g', 't66', false) ->> 'deletedPartitions'$q$)
             AS t(x text)), '1', 'A deletes the group''s row (held)');
SELECT dblink_send_query('t66b', pg_temp.seek_sql(true));
SELECT ok(pg_temp.until_blocked('t66b'), 'a seek of the group waits for the delete');
SELECT dblink_exec('t66a', 'COMMIT');
SELECT is((SELECT x FROM dblink_get_result('t66b') AS t(x text)), '0', 'then moves no row');
SELECT FROM dblink_get_result('t66b') AS t(x text);
SELECT is(pg_temp.committed(), NULL, '... and makes none again');

DO $$ BEGIN
    PERFORM pg_temp.drop_queue();
    PERFORM pg_temp.close_sessions('t66a', 't66b');
END $$;
SELECT * FROM finish();
ROLLBACK;
