-- Long-poll wake-ups: NOTIFY pgcursor_push, queue, only when a session
-- waits for pushes to that queue.
--
-- A NOTIFY makes its transaction commit under a lock all notifying
-- transactions share (PostgreSQL keeps the notification queue in commit
-- order), so every push that notified committed, WAL flush and all, one at
-- a time: with four producers and four consumers, pushes ran at half
-- speed. So a push notifies only the queues someone waits on:
--
--   SELECT pgcursor.wait_for_pushes('orders');         -- after LISTEN pgcursor_push
--   ... look for messages; wait for a notification ...
--   SELECT pgcursor.stop_waiting_for_pushes('orders');
--
-- (queue NULL: pushes to every queue, as a namespace or task pop waits.)
-- The gateway's LISTEN connection does this for its waiting pops.
--
-- How no wake-up is lost, with two kinds of advisory lock:
--   waiting(queue)  (waiting_class(), waiting_key(queue)): held shared,
--                   session-long, by each session waiting on the queue;
--   drain           (drain_class(), 1): held shared by a waking transaction
--                   from before it looks for waiters until it commits.
-- wake_pops takes drain, then looks at waiting(queue). wait_for_pushes
-- takes waiting(queue), then drain exclusively, which waits until every
-- transaction that looked before it has committed, and lets go at once.
-- So when wait_for_pushes answers, every push that found no waiter has
-- committed, and a look from then on sees its messages; every later push
-- finds the waiter. (The gateway looks at once, and looks again when the
-- wait is in place.)

-- The two advisory lock classes above (first key of each lock).
CREATE OR REPLACE FUNCTION pgcursor_internal.waiting_class()
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1885823863 $$;
CREATE OR REPLACE FUNCTION pgcursor_internal.drain_class()
RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1885823864 $$;

-- The advisory key of a queue's waiters (NULL: waiters on every queue).
-- One per queue, so a push to a queue nobody waits on never notifies. Each
-- takes an entry of PostgreSQL's shared lock table, which every session
-- needs: a session waiting on thousands of queues fills it, and every
-- session of the database then fails with "out of shared memory" (4,000 on
-- a small cluster). So the gateway's listener waits on at most 1,000
-- queues of its own, and on every queue beyond (gateway/src/notify.rs).
CREATE OR REPLACE FUNCTION pgcursor_internal.waiting_key(queue text)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN queue IS NULL THEN 0 ELSE hashtext(queue) END
$$;

-- Does another session hold waiting(key) in any mode?
-- (Taken and given back at once; another waking transaction doing the same
-- at that instant makes it answer yes: one notification too many, no harm.)
CREATE OR REPLACE FUNCTION pgcursor_internal.waiting_key_held(key integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF pg_try_advisory_lock(pgcursor_internal.waiting_class(), key) THEN
        PERFORM pg_advisory_unlock(pgcursor_internal.waiting_class(), key);
        RETURN false;
    END IF;
    RETURN true;
END $$;

-- Notifies pgcursor_push for each of `queues` a session waits on; answers
-- those queues. Called by every change that can make messages deliverable
-- (push, a nack, a seek back).
CREATE OR REPLACE FUNCTION pgcursor_internal.wake_pops(queues text[])
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    woken text[];
    every boolean;  -- notify every queue, without looking at each
BEGIN
    -- drain, shared till commit, before looking; when a new wait holds
    -- it or asks for it right now, notify without looking.
    every := NOT pg_try_advisory_xact_lock_shared(pgcursor_internal.drain_class(), 1);
    IF NOT every THEN  -- (drain first: only then may it look)
        every := pgcursor_internal.waiting_key_held(pgcursor_internal.waiting_key(NULL));
    END IF;
    woken := ARRAY(SELECT DISTINCT q FROM unnest(queues) q
                    WHERE every OR pgcursor_internal.waiting_key_held(pgcursor_internal.waiting_key(q))
                    ORDER BY q);
    IF cardinality(woken) > 0 THEN  -- (the usual push: no statement more)
        PERFORM pg_notify('pgcursor_push', q) FROM unnest(woken) q;
    END IF;
    RETURN woken;
END $$;

-- This session waits for pushes to `queue` (NULL: to every queue) from now
-- on; answers once every push that could have missed it has committed
-- (await_pushes_in_flight). Call it after LISTEN pgcursor_push and before
-- looking for messages. Nests: each call needs its stop_waiting_for_pushes.
-- The wait is taken first and kept even when the await then fails (a
-- lock_timeout): await_pushes_in_flight again before relying on the look.
CREATE OR REPLACE FUNCTION pgcursor.wait_for_pushes(queue text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock_shared(pgcursor_internal.waiting_class(), pgcursor_internal.waiting_key(queue));
    PERFORM pgcursor.await_pushes_in_flight();
END $$;

-- Answers once every transaction that has looked for waiters (wake_pops)
-- before this call has committed or rolled back: drain, taken exclusively
-- and let go at once. Waking transactions that start meanwhile do not
-- hold it up (they find drain asked for, and notify without looking).
-- Under lock_timeout it gives up with 55P03 when one of them runs longer.
CREATE OR REPLACE FUNCTION pgcursor.await_pushes_in_flight()
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock(pgcursor_internal.drain_class(), 1);
    PERFORM pg_advisory_unlock(pgcursor_internal.drain_class(), 1);
END $$;

-- Undoes one wait_for_pushes(queue).
CREATE OR REPLACE FUNCTION pgcursor.stop_waiting_for_pushes(queue text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_unlock_shared(pgcursor_internal.waiting_class(), pgcursor_internal.waiting_key(queue));
END $$;
