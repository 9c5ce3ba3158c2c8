-- A seek and an ack of the same (partition, group) serialise on the cursor
-- row (docs/http-api.md "Consumer groups", the seek): whichever comes second
-- waits, then sees the first's outcome; a seek or a subscription update
-- that a delete overtakes neither fails nor brings back what it deleted.
-- Three dblink sessions work on committed data (cleaned up at the end).
BEGIN;
SELECT plan(33);
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
    PERFORM pg_temp.open_sessions('t66a', 't66b', 't66c');
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

-- A subscription update racing a delete of the group or of the queue. The
-- group subscribes at the head (mode new) and gets rows that have consumed
-- nothing on the queue's two partitions, the rows an update moves. Session
-- C holds the group's row on the last partition; the delete (A) is sent,
-- then the update (B); then C lets go. Both deletes used to lock the rows
-- before the subscriptions and the update the other way round: one of the
-- two was cancelled, "deadlock detected".
CREATE FUNCTION pg_temp.stand_on_both(grp text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM dblink('t66a', format($q$SELECT pgcursor.pop(jsonb_build_object(
        'queue', 't66', 'consumerGroup', %L, 'subscriptionMode', 'new'))$q$, grp)) AS t(x jsonb);
    PERFORM FROM dblink('t66a', format($q$SELECT pgcursor_internal.materialize_cursors(%L)$q$, grp)) AS t(x bigint);
    RETURN pg_temp.never_consumed(grp);
END $$;
CREATE FUNCTION pg_temp.never_consumed(grp text) RETURNS text LANGUAGE sql AS $$
    SELECT x FROM dblink('t66b', format($q$SELECT count(*)::text FROM pgcursor.cursors c
                                    JOIN pgcursor.partitions p ON p.id = c.partition_id
                                   WHERE p.queue = 't66' AND c.consumer_group = %L
                                     AND c.completed_total = 0 AND c.last_ack_at IS NULL AND c.lease_id IS NULL$q$, grp))
        AS t(x text)
$$;
-- C holds the group's row on the queue's last partition (in id order).
CREATE FUNCTION pg_temp.hold_last_row(grp text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dblink_exec('t66c', 'BEGIN');
    PERFORM FROM dblink('t66c', format($q$SELECT 1 FROM pgcursor.cursors c
                                          WHERE c.consumer_group = %L AND c.partition_id =
                                                (SELECT max(p.id::text)::uuid FROM pgcursor.partitions p WHERE p.queue = 't66')
                                            FOR UPDATE$q$, grp)) AS t(x integer);
END $$;
-- With a row held by C: session `first` sends first_call, then `second`
-- second_call; each must wait; then C lets go. "first's answer / second's
-- answer", or which did not wait.
CREATE FUNCTION pg_temp.queued_behind_c(first text, first_call text, second text, second_call text)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dblink_send_query(first, first_call);
    IF NOT pg_temp.until_blocked(first) THEN
        RETURN first || ' did not wait for C';
    END IF;
    PERFORM dblink_send_query(second, second_call);
    IF NOT pg_temp.until_blocked(second) THEN
        RETURN second || ' did not wait';
    END IF;
    PERFORM dblink_exec('t66c', 'COMMIT');
    RETURN pg_temp.answer(first) || ' / ' || pg_temp.answer(second);
END $$;
-- With group grp's row on the last partition held by C: A sends
-- `deletion`, then B the group's subscription update.
CREATE FUNCTION pg_temp.update_behind(grp text, deletion text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_temp.hold_last_row(grp);
    RETURN pg_temp.queued_behind_c('t66a', deletion, 't66b',
                                   format($q$SELECT pgcursor.update_subscription(%L, now() - interval '1 hour')
                                             ->> 'rowsUpdated'$q$, grp));
END $$;
SELECT dblink_exec('t66b', 'RESET lock_timeout');
SELECT FROM dblink('t66a', $q$SELECT pgcursor.push('{"items": [{"queue": "t66", "partition": "b", "payload": 4}]}')$q$)
    AS t(x jsonb);

SELECT is(pg_temp.stand_on_both('h'), '2', 'group h stands on both partitions, consuming nothing yet');
SELECT is(pg_temp.update_behind('h', $q$SELECT pgcursor.delete_consumer_group('h', 't66', false)
                                              ->> 'deletedPartitions'$q$),
          '2 / 1', 'the group''s delete goes through, then the update of the subscription it kept');
SELECT is(pg_temp.never_consumed('h'), '0', '... making no deleted row again');

-- A group with a row but no subscription (as a lease-less nack leaves one,
-- at cursor 0): an update has no subscription to change and moves no row,
-- so it does not wait for the row the group's delete (held) removes.
SELECT is((SELECT x FROM dblink('t66a', $q$INSERT INTO pgcursor.cursors (partition_id, consumer_group, cursor)
               SELECT id, 'm', 0 FROM pgcursor.partitions WHERE queue = 't66' AND name <> 'b'
               RETURNING consumer_group$q$) AS t(x text)),
          'm', 'group m has a row and no subscription');
SELECT is(pg_temp.never_consumed('m'), '1', '... never consumed');
SELECT dblink_exec('t66a', 'BEGIN');
SELECT is((SELECT x FROM dblink('t66a', $q$SELECT pgcursor.delete_consumer_group('m') ->> 'deletedPartitions'$q$)
             AS t(x text)), '1', 'A deletes it (held)');
SELECT is((SELECT x FROM dblink('t66b', $q$SELECT pgcursor.update_subscription('m', now() - interval '1 hour') ->> 'rowsUpdated'$q$)
             AS t(x text)), '0', 'an update of group m changes no subscription and waits for no row');
SELECT dblink_exec('t66a', 'COMMIT');
SELECT is(pg_temp.never_consumed('m'), '0', '... and does not make the row again');

SELECT is(pg_temp.stand_on_both('k'), '2', 'group k stands on both partitions, consuming nothing yet');
SELECT is(pg_temp.update_behind('k', $q$SELECT pgcursor.delete_queue('t66') ->> 'deleted'$q$),
          'true / 0', 'the queue''s delete goes through, then the update, finding no subscription left');

-- Calls that lock several rows of a group lock them in partition order, as
-- a seek does; in the order a scan met them, a lease renewal or the
-- housekeeping move past deleted messages took the group's row on the
-- later partition, then waited for the earlier one, which a seek held
-- while waiting for the later: "deadlock detected". Group e's rows are
-- arranged so a scan meets the later partition's first; C holds the row
-- on the earlier one; B's seek is sent, then A's call; then C lets go.
CREATE FUNCTION pg_temp.partition_ids() RETURNS uuid[] LANGUAGE sql AS $$
    SELECT x FROM dblink('t66b', $q$SELECT array_agg(id ORDER BY id) FROM pgcursor.partitions WHERE queue = 't66'$q$)
        AS t(x uuid[])
$$;
-- Writes group e's row on the earlier partition again until its visible
-- version lies after the later one's in the heap; whether it does.
CREATE FUNCTION pg_temp.later_row_first() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[] := pg_temp.partition_ids();
BEGIN
    FOR i IN 1 .. 20 LOOP
        IF (SELECT x FROM dblink('t66b', format($q$SELECT (SELECT ctid FROM pgcursor.cursors
                                                          WHERE consumer_group = 'e' AND partition_id = %L)
                                                        < (SELECT ctid FROM pgcursor.cursors
                                                          WHERE consumer_group = 'e' AND partition_id = %L)$q$,
                                                ids[2], ids[1])) AS t(x boolean)) THEN
            RETURN true;
        END IF;
        PERFORM dblink_exec('t66b', format($q$UPDATE pgcursor.cursors SET cursor = cursor
                                              WHERE consumer_group = 'e' AND partition_id = %L$q$, ids[1]));
    END LOOP;
    RETURN false;
END $$;
-- With group e's row on the earlier partition held by C: B seeks the
-- group to the end, then A sends `call`.
CREATE FUNCTION pg_temp.behind_a_seek(call text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dblink_exec('t66c', 'BEGIN');
    PERFORM FROM dblink('t66c', format($q$SELECT 1 FROM pgcursor.cursors
                                          WHERE consumer_group = 'e' AND partition_id = %L FOR UPDATE$q$,
                                       (pg_temp.partition_ids())[1])) AS t(x integer);
    RETURN pg_temp.queued_behind_c('t66b', $q$SELECT pgcursor.seek_consumer_group('e', 't66', NULL, true)
                                                 ->> 'partitionsUpdated'$q$, 't66a', call);
END $$;
-- A message on each partition, then one pop of group e over both: the
-- lease goes into table lease; answers how many rows hold it.
CREATE FUNCTION pg_temp.lease_both() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM dblink('t66a', $q$SELECT pgcursor.push('{"items": [{"queue": "t66", "partition": "a", "payload": 1},
                                                                  {"queue": "t66", "partition": "b", "payload": 2}]}')$q$)
        AS t(x jsonb);
    UPDATE lease SET l = (SELECT x FROM dblink('t66a', $q$SELECT pgcursor.pop(
        '{"queue": "t66", "consumerGroup": "e", "partitions": 2, "batch": 10}') ->> 'leaseId'$q$) AS t(x text));
    RETURN (SELECT x FROM dblink('t66b', format($q$SELECT count(*)::text FROM pgcursor.cursors WHERE lease_id = %L$q$,
                                               (SELECT l FROM lease))) AS t(x text));
END $$;
SELECT is(pg_temp.lease_both(), '2', 'group e leases both partitions at once');
SELECT ok(pg_temp.later_row_first(), 'a scan meets its row on the later partition first');
SELECT is(pg_temp.behind_a_seek(format($q$SELECT pgcursor.extend_lease(jsonb_build_object('leaseId', %L))
                                          ->> 'renewed'$q$, l)),
          '2 / 0', 'a renewal of the lease waits behind a seek of the group, then finds it released') FROM lease;

-- A lease the gateway gives back (its pop's client hung up).
SELECT is(pg_temp.lease_both(), '2', 'group e leases both partitions again');
SELECT ok(pg_temp.later_row_first(), 'a scan meets its row on the later partition first');
SELECT is(pg_temp.behind_a_seek(format($q$SELECT pgcursor_internal.give_back_lease(%L, 'e', %L)::text$q$,
                                       l, pg_temp.partition_ids())),
          '2 / 0', 'a lease given back waits behind a seek of the group, then finds it released') FROM lease;

-- Both rows behind a deleted message, as retention or a delete leaves them.
SELECT FROM dblink('t66a', $q$SELECT pgcursor.push('{"items": [
    {"queue": "t66", "partition": "a", "payload": 3}, {"queue": "t66", "partition": "a", "payload": 4},
    {"queue": "t66", "partition": "b", "payload": 5}, {"queue": "t66", "partition": "b", "payload": 6}]}')$q$)
    AS t(x jsonb);
SELECT is((SELECT x FROM dblink('t66a', $q$WITH gone AS (
               DELETE FROM pgcursor.messages m USING pgcursor.cursors c
                WHERE c.consumer_group = 'e' AND m.partition_id = c.partition_id AND m.msg_offset = c.cursor + 1
                  AND m.partition_id IN (SELECT id FROM pgcursor.partitions WHERE queue = 't66') RETURNING 1)
               SELECT count(*)::text FROM gone$q$) AS t(x text)),
          '2', 'the next message of each of group e''s rows is deleted');
SELECT ok(pg_temp.later_row_first(), 'a scan meets its row on the later partition first');
SELECT is(pg_temp.behind_a_seek(format($q$SELECT pgcursor_internal.move_cursors_past_deleted(%L)::text$q$,
                                       pg_temp.partition_ids())),
          '2 / 0', 'a move past deleted messages waits behind a seek of the group, then has nothing to move');

DO $$ BEGIN
    PERFORM pg_temp.drop_queue();
    PERFORM pg_temp.close_sessions('t66a', 't66b', 't66c');
END $$;
SELECT * FROM finish();
ROLLBACK;
