-- What the last application of the function files left (gateway/src/db.rs,
-- apply_functions): a gateway starts without applying them again when its
-- files are the ones applied and no function or trigger of pgcursor has
-- been created, replaced, altered or dropped since. Applying them again
-- would change nothing, yet CREATE OR REPLACE writes every function's
-- catalog row anew, and every session of every gateway then compiles each
-- function again on its next call.
CREATE SCHEMA IF NOT EXISTS pgcursor_internal;

CREATE TABLE pgcursor_internal.applied_functions (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),  -- a single row
    files      text NOT NULL,         -- md5 of the files applied (and whether for Citus)
    catalog    text NOT NULL,         -- md5 of their catalog rows as the application left them
    applied_at timestamptz NOT NULL DEFAULT now()
);
