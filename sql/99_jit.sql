-- No JIT compilation in pgcursor's API. PostgreSQL compiles a statement
-- to machine code when its estimated cost passes jit_above_cost (100,000
-- by default), and every statement of a listing, a status page or the
-- metrics snapshot passes it once the tables are large: with 100,000
-- cursor rows and 1.2 million messages, compiling took 0.8 s of a 1.1 s
-- queue detail, and 1.6 s of the metrics snapshot's 2.1 s (0.5 s
-- without), so the scrape ran out of time and went out without its
-- database figures. The pop's claim, planned for hundreds of rows, passed
-- it too: 10-40 ms of compiling for a 1 ms pop. Compiling pays for
-- queries that run for many seconds over millions of rows; pgcursor's
-- read a bounded part of its tables and are planned again and again.
-- Setting it per function costs about 0.6 µs a call, and psql users get
-- what the gateway gets. sql/citus/functions.sql, which replaces some of
-- these functions, calls this again.
--
-- Not on IMMUTABLE functions: they read no table, so there is nothing to
-- compile, and a SQL function with a SET clause is never inlined. Run
-- through the executor instead, its body is parsed and planned again in
-- every transaction: normalise_status so cost an ack 30-55 of 270-300 us.
-- Earlier installs gave them the setting; it is taken off here.
CREATE OR REPLACE FUNCTION pgcursor_internal.turn_off_jit_for_api()
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    f regprocedure;
    immutable boolean;
BEGIN
    FOR f, immutable IN SELECT p.oid::regprocedure, p.provolatile = 'i' FROM pg_proc p
                         WHERE p.pronamespace = 'pgcursor'::regnamespace AND p.prokind = 'f'
    LOOP
        EXECUTE format(CASE WHEN immutable THEN 'ALTER FUNCTION %s RESET jit'
                            ELSE 'ALTER FUNCTION %s SET jit = off' END, f);
    END LOOP;
END $$;

SELECT pgcursor_internal.turn_off_jit_for_api();
