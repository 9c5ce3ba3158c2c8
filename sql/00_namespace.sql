-- Every start re-creates the stored functions from these files, in file-name
-- order, in one transaction under an advisory lock (gateway/src/db.rs):
--
--   00 namespace       this file: the two schemas, a clean slate
--   01 arguments       parsers for jsonb request fields (22023 naming the field)
--   02 shared          helpers several families use (leases, cursors, timestamps)
--   10 queues … 90     one file per family, each after what it calls
--
-- Schema pgcursor holds the tables and the public API, exactly the functions
-- documented in docs/sql-api.md (tests/sql/00_schema.sql checks it);
-- pgcursor_internal holds the helpers and types behind them.
--
-- The clean slate: every function and type of both schemas is dropped
-- first, so a helper renamed or removed by a release does not linger. The
-- trigger function of the cursors table is the exception: dropping it would
-- drop the trigger, and re-creating that locks the table.

CREATE SCHEMA IF NOT EXISTS pgcursor_internal;

DO $$
DECLARE
    f regprocedure;
    t regtype;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace IN ('pgcursor'::regnamespace, 'pgcursor_internal'::regnamespace)
                AND p.prorettype <> 'trigger'::regtype
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
    FOR t IN SELECT y.oid::regtype FROM pg_type y
              WHERE y.typnamespace = 'pgcursor_internal'::regnamespace AND y.typtype = 'c'
                AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = y.typrelid AND c.relkind <> 'c')
    LOOP
        EXECUTE format('DROP TYPE %s', t);
    END LOOP;
END $$;
