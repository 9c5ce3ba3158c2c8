-- The sweep: every function the files above define was created or replaced
-- by this transaction, so a function of either schema that this transaction
-- did not write is one no file defines any more (a helper renamed or
-- removed by a release). It goes, so that \df pgcursor.* stays the
-- documented API. (Before sql/99_jit.sql: its ALTER FUNCTION rewrites every
-- API function's row, so after it every function looks written here.)
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace IN ('pgcursor'::regnamespace, 'pgcursor_internal'::regnamespace)
                AND p.xmin <> pg_current_xact_id()::xid
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END $$;
