-- Interleaved A/B timing of two versions of push_items, pop_messages or
-- ack_group, one transaction per call, as the broker makes them (see
-- bench/README.md, "Profiling"). Load the candidate under another name,
-- e.g. in a schema `alt`, then:
--
--   psql "$DATABASE_URL" -f bench/ab.sql
--   SET synchronous_commit = off;
--   CALL ab_ack(600, 'pgcursor.ack_group', 'alt.ack_group');
--   NOTICE:  pgcursor.ack_group 794 us, alt.ack_group 744 us
--
-- Each call pushes its own batches of 100 into queue `ab` (created here)
-- and consumes them, so nothing is left waiting. A and B take turns, so
-- the machine's drift falls on both alike; run each comparison three
-- times all the same.

SELECT pgcursor.configure('{"queue": "ab"}') \g /dev/null

-- Pushes one batch of 100 into queue ab through push_items version fn.
CREATE OR REPLACE FUNCTION ab_push_with(fn text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    pushed bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s($1, $2, NULL)', fn) INTO pushed
      USING array_fill('ab'::text, ARRAY[100]),
            array_fill('{"payload": "0123456789abcdef0123456789abcdef"}'::jsonb, ARRAY[100]);
    RETURN pushed;
END $$;

-- Pops the waiting batch of queue ab through pop_messages version fn: the
-- last message's partition, lease and transactionId, and how many came.
CREATE OR REPLACE FUNCTION ab_pop_with(fn text, OUT partition_id uuid, OUT lease_id uuid,
                                       OUT transaction_id text, OUT popped bigint) LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT m.partition_id, m.lease_id, m.transaction_id, m.ordinality
                      FROM %s(''{"queue": "ab", "batch": 100}'') WITH ORDINALITY m
                     ORDER BY m.ordinality DESC LIMIT 1', fn)
       INTO partition_id, lease_id, transaction_id, popped;
    IF popped IS DISTINCT FROM 100 THEN
        RAISE EXCEPTION 'a pop returned % messages, not 100', coalesce(popped, 0);
    END IF;
END $$;

-- Acks a popped batch by its last message through ack_group version fn.
CREATE OR REPLACE FUNCTION ab_ack_with(fn text, partition_id uuid, lease_id uuid, transaction_id text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    answer jsonb;
BEGIN
    EXECUTE format('SELECT %s($1)', fn) INTO answer
      USING jsonb_build_object('partitionId', partition_id, 'leaseId', lease_id,
                               'items', jsonb_build_array(jsonb_build_object('transactionId', transaction_id)));
    IF NOT (answer -> 0 ->> 'success')::boolean THEN
        RAISE EXCEPTION 'an ack failed: %', answer;
    END IF;
END $$;

-- Times n calls of step ('push', 'pop' or 'ack'), versions a_fn and b_fn
-- in turns, and the rest of each cycle through pgcursor's own functions,
-- untimed, every step committed on its own.
CREATE OR REPLACE PROCEDURE ab_time(step text, n int, a_fn text, b_fn text) LANGUAGE plpgsql AS $$
DECLARE
    fn text;
    t0 timestamptz;
    us numeric;
    a_us numeric := 0;
    b_us numeric := 0;
    last record;
BEGIN
    FOR i IN 1 .. n LOOP
        fn := CASE WHEN i % 2 = 0 THEN a_fn ELSE b_fn END;
        t0 := clock_timestamp();
        PERFORM ab_push_with(CASE step WHEN 'push' THEN fn ELSE 'pgcursor.push_items' END);
        us := extract(epoch FROM clock_timestamp() - t0) * 1e6;
        COMMIT;
        t0 := clock_timestamp();
        last := ab_pop_with(CASE step WHEN 'pop' THEN fn ELSE 'pgcursor.pop_messages' END);
        us := CASE step WHEN 'push' THEN us ELSE extract(epoch FROM clock_timestamp() - t0) * 1e6 END;
        COMMIT;
        t0 := clock_timestamp();
        PERFORM ab_ack_with(CASE step WHEN 'ack' THEN fn ELSE 'pgcursor.ack_group' END,
                            last.partition_id, last.lease_id, last.transaction_id);
        us := CASE step WHEN 'ack' THEN extract(epoch FROM clock_timestamp() - t0) * 1e6 ELSE us END;
        COMMIT;
        IF i % 2 = 0 THEN
            a_us := a_us + us;
        ELSE
            b_us := b_us + us;
        END IF;
    END LOOP;
    RAISE NOTICE '% % us, % % us', a_fn, round(a_us / (n / 2)), b_fn, round(b_us / (n / 2));
END $$;

-- (PL/pgSQL: a CALL from a SQL procedure could not commit.)
CREATE OR REPLACE PROCEDURE ab_push(n int, a_fn text, b_fn text) LANGUAGE plpgsql AS $$
BEGIN
    CALL ab_time('push', n, a_fn, b_fn);
END $$;
CREATE OR REPLACE PROCEDURE ab_pop(n int, a_fn text, b_fn text) LANGUAGE plpgsql AS $$
BEGIN
    CALL ab_time('pop', n, a_fn, b_fn);
END $$;
CREATE OR REPLACE PROCEDURE ab_ack(n int, a_fn text, b_fn text) LANGUAGE plpgsql AS $$
BEGIN
    CALL ab_time('ack', n, a_fn, b_fn);
END $$;
