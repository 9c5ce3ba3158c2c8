-- The schema bootstrap: migrations applied by refinery, tables in place.
BEGIN;
SELECT plan(8);

SELECT has_schema('pgcursor');
SELECT has_table('pgcursor', 'queues', 'pgcursor.queues exists');
SELECT has_table('pgcursor', 'partitions', 'pgcursor.partitions exists');
SELECT has_table('pgcursor', 'messages', 'pgcursor.messages exists');
SELECT has_table('pgcursor', 'transaction_index', 'pgcursor.transaction_index exists');
SELECT has_table('pgcursor', 'cursors', 'pgcursor.cursors exists');
SELECT has_table('pgcursor', 'dead_letters', 'pgcursor.dead_letters exists');
SELECT is(
    (SELECT count(*) FROM public.refinery_schema_history WHERE version = 1 AND name = 'schema'),
    1::bigint,
    'refinery''s history lists V1__schema'
);

SELECT * FROM finish();
ROLLBACK;
