-- plpgsql_check (Debian postgresql-15-plpgsql-check) reads every PL/pgSQL
-- function of pgcursor without running it: a misspelt column or record
-- field, a wrong argument count, a statement that cannot be planned, in a
-- branch no other test reaches, fails here. (Trigger functions are checked
-- by their triggers' tests: plpgsql_check needs the table to read them.)
BEGIN;
SELECT plan(2);
CREATE EXTENSION IF NOT EXISTS plpgsql_check;

-- The errors plpgsql_check finds in the PL/pgSQL functions of `schemas`.
CREATE FUNCTION pg_temp.plpgsql_errors(schemas text[]) RETURNS TABLE (fn regprocedure, line integer, message text)
LANGUAGE sql AS $$
    SELECT p.oid::regprocedure, c.lineno, c.message
      FROM pg_proc p
      JOIN pg_namespace n ON n.oid = p.pronamespace
      JOIN pg_language l ON l.oid = p.prolang AND l.lanname = 'plpgsql'
     CROSS JOIN LATERAL plpgsql_check_function_tb(p.oid, fatal_errors => false) c
     WHERE n.nspname = ANY (schemas) AND p.prorettype <> 'trigger'::regtype AND c.level = 'error'
$$;

-- A control: a record field that does not exist, in a branch never run.
CREATE SCHEMA t01_control;
CREATE FUNCTION t01_control.misspelt(flag boolean) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    r := (SELECT x FROM (SELECT 1 AS a, 2 AS b) x);
    IF flag THEN
        RETURN r.c = 1;
    END IF;
    RETURN false;
END $$;
SELECT isnt_empty($$SELECT * FROM pg_temp.plpgsql_errors('{t01_control}')$$,
                  'the check finds an unknown record field in a branch no call reaches');

SELECT is_empty($$SELECT * FROM pg_temp.plpgsql_errors('{pgcursor,pgcursor_internal}')$$,
                'no PL/pgSQL function of pgcursor has an error plpgsql_check can find');

SELECT * FROM finish();
ROLLBACK;
