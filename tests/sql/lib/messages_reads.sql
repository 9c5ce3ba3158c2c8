-- How much of pgcursor.messages this transaction has read so far (\ir'd
-- inside the test's transaction). Rows by sequential and bitmap scans (the
-- table's own tuples_fetched counts bitmap scans only), plus, through any
-- of its indexes, either every index entry returned (what = 'entries':
-- index and index-only scans alike) or only the rows visited (what =
-- 'rows': an index-only scan counts only where it had to visit the row).
CREATE FUNCTION pg_temp.messages_read(what text) RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_stat_get_xact_tuples_returned('pgcursor.messages'::regclass)
           + pg_stat_get_xact_tuples_fetched('pgcursor.messages'::regclass)
           + (SELECT sum(CASE what WHEN 'entries' THEN pg_stat_get_xact_tuples_returned(i.indexrelid)
                                   WHEN 'rows' THEN pg_stat_get_xact_tuples_fetched(i.indexrelid) END)::bigint
                FROM pg_index i WHERE i.indrelid = 'pgcursor.messages'::regclass)
$$;
SET LOCAL max_parallel_workers_per_gather = 0;  -- a worker's reads are not counted here
