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

-- One batch of 100 pushed into queue ab.
CREATE OR REPLACE PROCEDURE ab_push_batch() LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count(*) FROM pgcursor.push_items(array_fill('ab'::text, ARRAY[100]),
                                             array_fill('{"payload": "0123456789abcdef0123456789abcdef"}'::jsonb, ARRAY[100]));
END $$;

-- Adds the microseconds since t0 to a (even i) or b (odd i).
CREATE OR REPLACE PROCEDURE ab_count(i int, t0 timestamptz, INOUT a numeric, INOUT b numeric) LANGUAGE plpgsql AS $$
BEGIN
    IF i % 2 = 0 THEN
        a := a + extract(epoch FROM clock_timestamp() - t0) * 1e6;
    ELSE
        b := b + extract(epoch FROM clock_timestamp() - t0) * 1e6;
    END IF;
END $$;

CREATE OR REPLACE PROCEDURE ab_report(n int, a_fn text, b_fn text, a numeric, b numeric) LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE '% % us, % % us', a_fn, round(a / (n / 2)), b_fn, round(b / (n / 2));
END $$;

-- push_items(queues, payloads, partitions) versions, a batch of 100 each call.
CREATE OR REPLACE PROCEDURE ab_push(n int, a_fn text, b_fn text) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    a numeric := 0;
    b numeric := 0;
    last record;
BEGIN
    FOR i IN 1 .. n LOOP
        t0 := clock_timestamp();
        EXECUTE format('SELECT count(*) FROM %s($1, $2, NULL)', CASE WHEN i % 2 = 0 THEN a_fn ELSE b_fn END)
          USING array_fill('ab'::text, ARRAY[100]),
                array_fill('{"payload": "0123456789abcdef0123456789abcdef"}'::jsonb, ARRAY[100]);
        CALL ab_count(i, t0, a, b);
        COMMIT;
        -- consume what was pushed, untimed
        SELECT * INTO last FROM pgcursor.pop_messages('{"queue": "ab", "batch": 100}') WITH ORDINALITY m
         ORDER BY m.ordinality DESC LIMIT 1;
        PERFORM pgcursor.ack_group(jsonb_build_object('partitionId', last.partition_id, 'leaseId', last.lease_id,
                                   'items', jsonb_build_array(jsonb_build_object('transactionId', last.transaction_id))));
        COMMIT;
    END LOOP;
    CALL ab_report(n, a_fn, b_fn, a, b);
END $$;

-- pop_messages(req) versions, popping the batch of 100 pushed before each call.
CREATE OR REPLACE PROCEDURE ab_pop(n int, a_fn text, b_fn text) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    a numeric := 0;
    b numeric := 0;
    last record;
BEGIN
    FOR i IN 1 .. n LOOP
        CALL ab_push_batch();
        COMMIT;
        t0 := clock_timestamp();
        EXECUTE format('SELECT m.partition_id, m.lease_id, m.transaction_id, m.ordinality
                          FROM %s(''{"queue": "ab", "batch": 100}'') WITH ORDINALITY m
                         ORDER BY m.ordinality DESC LIMIT 1', CASE WHEN i % 2 = 0 THEN a_fn ELSE b_fn END)
           INTO last;
        CALL ab_count(i, t0, a, b);
        IF last.ordinality IS DISTINCT FROM 100 THEN
            RAISE EXCEPTION 'a pop returned % rows, not 100', last.ordinality;
        END IF;
        COMMIT;
        PERFORM pgcursor.ack_group(jsonb_build_object('partitionId', last.partition_id, 'leaseId', last.lease_id,
                                   'items', jsonb_build_array(jsonb_build_object('transactionId', last.transaction_id))));
        COMMIT;
    END LOOP;
    CALL ab_report(n, a_fn, b_fn, a, b);
END $$;

-- ack_group(request) versions, acking the last message of a batch of 100.
CREATE OR REPLACE PROCEDURE ab_ack(n int, a_fn text, b_fn text) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    a numeric := 0;
    b numeric := 0;
    last record;
    answer jsonb;
BEGIN
    FOR i IN 1 .. n LOOP
        CALL ab_push_batch();
        COMMIT;
        SELECT * INTO last FROM pgcursor.pop_messages('{"queue": "ab", "batch": 100}') WITH ORDINALITY m
         ORDER BY m.ordinality DESC LIMIT 1;
        COMMIT;
        t0 := clock_timestamp();
        EXECUTE format('SELECT %s($1)', CASE WHEN i % 2 = 0 THEN a_fn ELSE b_fn END) INTO answer
          USING jsonb_build_object('partitionId', last.partition_id, 'leaseId', last.lease_id,
                                   'items', jsonb_build_array(jsonb_build_object('transactionId', last.transaction_id)));
        CALL ab_count(i, t0, a, b);
        IF NOT (answer -> 0 ->> 'success')::boolean THEN
            RAISE EXCEPTION 'an ack failed: %', answer;
        END IF;
        COMMIT;
    END LOOP;
    CALL ab_report(n, a_fn, b_fn, a, b);
END $$;
