-- The schema bootstrap: migrations applied by refinery, tables in place.
BEGIN;
SELECT plan(13);

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

SELECT is(
    (SELECT count(*) FROM public.refinery_schema_history WHERE version = 2 AND name = 'hot_path'),
    1::bigint,
    'refinery''s history lists V2__hot_path'
);

-- V2's hot-path choices, guarded: undoing one silently costs every push or pop.
SELECT col_isnt_fk('pgcursor', 'messages', 'partition_id',
                   'messages carries no foreign key (a lookup per pushed row)');
SELECT col_isnt_fk('pgcursor', 'transaction_index', 'partition_id',
                   'transaction_index carries no foreign key (a lookup per pushed row)');
SELECT hasnt_index('pgcursor', 'cursors', 'cursors_lease_id',
                   'cursors.lease_id is not indexed, so pop and ack update cursor rows in place');
SELECT is((SELECT reloptions FROM pg_class WHERE oid = 'pgcursor.cursors'::regclass),
          ARRAY['fillfactor=50'], 'cursor pages keep room for in-place updates');

SELECT * FROM finish();
ROLLBACK;
