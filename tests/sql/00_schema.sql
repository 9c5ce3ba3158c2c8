-- The schema bootstrap: migrations applied by refinery, tables in place.
BEGIN;
SELECT plan(19);

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
SELECT is(ARRAY(SELECT i.indexrelid::regclass::text FROM pg_index i
                 WHERE i.indrelid = 'pgcursor.messages'::regclass ORDER BY 1),
          ARRAY['pgcursor.messages_pkey', 'pgcursor.messages_transaction_id'],
          'a message costs two index entries, by offset and by transactionId (lookups by time: first_offset_at)');
SELECT hasnt_index('pgcursor', 'cursors', 'cursors_lease_id',
                   'cursors.lease_id is not indexed, so pop and ack update cursor rows in place');
SELECT is((SELECT reloptions FROM pg_class WHERE oid = 'pgcursor.cursors'::regclass),
          ARRAY['fillfactor=50'], 'cursor pages keep room for in-place updates');

-- The public surface: schema pgcursor holds the documented API and nothing
-- else; helpers live in pgcursor_internal. docs/sql-api.md is read by psql
-- (pg_prove runs from the repository's top directory).
\set sql_api `cat docs/sql-api.md`
SELECT has_schema('pgcursor_internal');
SELECT is(ARRAY(SELECT DISTINCT p.proname::text FROM pg_proc p
                 WHERE p.pronamespace = 'pgcursor'::regnamespace
                   AND position(E'\n### ' || p.proname || E'\n' IN :'sql_api') = 0
                 ORDER BY 1),
          '{}'::text[], 'every function in schema pgcursor has a section in docs/sql-api.md');
SELECT is(ARRAY(SELECT s[1] FROM regexp_matches(:'sql_api', E'\n### ([a-z_0-9]+)\n', 'g') AS m(s)
                 WHERE NOT EXISTS (SELECT 1 FROM pg_proc p
                                    WHERE p.pronamespace = 'pgcursor'::regnamespace AND p.proname = s[1])
                 ORDER BY 1),
          '{}'::text[], 'every function docs/sql-api.md documents exists in schema pgcursor');
SELECT cmp_ok((SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgcursor_internal'::regnamespace), '>', 0::bigint,
              'the helpers are in pgcursor_internal');
SELECT is(ARRAY(SELECT t.typname::text FROM pg_type t
                 WHERE t.typnamespace = 'pgcursor'::regnamespace AND t.typtype = 'c'
                   AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind = 'r')),
          '{}'::text[], 'schema pgcursor has no types of its own beside its tables''');

SELECT * FROM finish();
ROLLBACK;
