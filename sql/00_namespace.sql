-- Every start re-applies these files, in file-name order, in one transaction
-- under an advisory lock (gateway/src/db.rs):
--
--   00 namespace       this file: the schema of the helpers
--   01 arguments       parsers for jsonb request fields (22023 naming the field)
--   02 shared          helpers several families use (leases, cursors, timestamps)
--   10 queues … 90     one file per family, each after what it calls
--   99 sweep           drops what no file defines any more
--
-- Schema pgcursor holds the tables and the public API, exactly the functions
-- documented in docs/sql-api.md (tests/sql/00_schema.sql checks it);
-- pgcursor_internal holds the helpers and types behind them.
--
-- Functions are CREATE OR REPLACE: a function keeps its identity across
-- starts, so a gateway starting beside running ones never pulls a function
-- from under their cached plans. A composite type is created once; changing
-- one means dropping it (CASCADE) in the file that defines it.

CREATE SCHEMA IF NOT EXISTS pgcursor_internal;
