-- The seed: consumption state is one cursor per (partition, group); there is
-- no per-message delivery state to store, clean up or leak. So an ack writes
-- one cursor row, however many messages it completes, and nothing else
-- (pg_stat_xact_user_tables: this transaction's row writes, per table).
-- Not run on Citus (files 50-55 are): there the writes happen on workers.
BEGIN;
SELECT plan(4);
\ir lib/ack_fixture.sql

-- This transaction's row writes so far, per table of the broker: (inserted, updated, deleted).
CREATE FUNCTION pg_temp.writes()
RETURNS TABLE (relname name, ins bigint, upd bigint, del bigint) LANGUAGE sql AS $$
    SELECT s.relname, s.n_tup_ins, s.n_tup_upd, s.n_tup_del FROM pg_stat_xact_user_tables s
     WHERE s.schemaname = 'pgcursor'
$$;
-- What `call` wrote, "table:inserted/updated/deleted" for each table it wrote to.
CREATE FUNCTION pg_temp.written_by(call text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    CREATE TEMP TABLE before ON COMMIT DROP AS SELECT * FROM pg_temp.writes();
    EXECUTE call;
    RETURN (SELECT coalesce(string_agg(format('%s:%s/%s/%s', a.relname, a.ins - coalesce(b.ins, 0),
                                              a.upd - coalesce(b.upd, 0), a.del - coalesce(b.del, 0)),
                                       ' ' ORDER BY a.relname), '')
              FROM pg_temp.writes() a LEFT JOIN before b USING (relname)
             WHERE (a.ins, a.upd, a.del) IS DISTINCT FROM (b.ins, b.upd, b.del));
END $$;
CREATE FUNCTION pg_temp.forget_before() RETURNS void LANGUAGE sql AS $$ DROP TABLE before $$;

SELECT pg_temp.setup() AS p \gset
SELECT written_by AS v FROM pg_temp.written_by(format(
    $$SELECT pg_temp.ack(%L, 'L', pg_temp.items('completed:19'))$$, :'p')) \gset
SELECT pg_temp.forget_before();
SELECT is(:'v'::text, 'cursors:0/1/0', 'completing a batch of ten writes one cursor row update, nothing else');
SELECT is(pg_temp.state(:'p'), 'cursor=19 lease=none counter=0', '... and the ten are completed');

SELECT pg_temp.setup() AS p \gset
SELECT written_by AS v FROM pg_temp.written_by(format(
    $$SELECT pg_temp.ack(%L, 'L', pg_temp.items('completed:11', 'completed:13', 'failed:15'))$$, :'p')) \gset
SELECT pg_temp.forget_before();
SELECT is(:'v'::text, 'cursors:0/1/0', 'completed items and a nack within the budget: one cursor row update, nothing else');
SELECT is(pg_temp.state(:'p'), 'cursor=13 lease=none counter=1', '... which holds it all');

SELECT * FROM finish();
ROLLBACK;
