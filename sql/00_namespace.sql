-- A gateway's start applies these files, in file-name order, in one
-- transaction under an advisory lock, unless the same files are applied
-- already and no function changed since (gateway/src/db.rs):
--
--   00 namespace       this file: the schema of the helpers
--   01 arguments       parsers for jsonb request fields (22023 naming the field)
--   02 shared          helpers several families use (leases, cursors, timestamps)
--   10 queues … 90     one file per family, each after what it calls
--   98 sweep           drops what no file defines any more
--   99 jit             jit = off on the API (after the sweep: see there)
--
-- Schema pgcursor holds the tables and the public API, exactly the functions
-- documented in docs/sql-api.md (tests/sql/00_schema.sql checks it);
-- pgcursor_internal holds the helpers and types behind them.
--
-- Functions are CREATE OR REPLACE: a function keeps its identity across
-- starts, so a gateway starting beside running ones never pulls a function
-- from under their cached plans. CREATE OR REPLACE cannot rename a
-- parameter or change a return type: such a change takes a new function
-- name (the sweep drops the old one), or, when the name should stay (an
-- API function, or columns only added), drop_version_without drops the old
-- version just before the new one is created. A composite type is created
-- once; changing one means dropping it (CASCADE) in the file that defines it.

CREATE SCHEMA IF NOT EXISTS pgcursor_internal;

-- Drops function `fn` (as to_regprocedure reads it) when none of its
-- parameter or result column names is `name`: the version from before
-- `name` was added, which CREATE OR REPLACE cannot change into the new one.
-- Nothing when there is no such function or it has `name` already.
CREATE OR REPLACE FUNCTION pgcursor_internal.drop_version_without(fn text, name text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT name = ANY (coalesce((SELECT p.proargnames FROM pg_proc p WHERE p.oid = to_regprocedure(fn)),
                                ARRAY[name])) THEN
        EXECUTE format('DROP FUNCTION %s', fn);
    END IF;
END $$;
