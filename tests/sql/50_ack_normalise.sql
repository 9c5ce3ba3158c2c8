-- docs/ack-contract.md §2: status normalisation, in normalise_status() and through
-- ack_group() (a psql caller gets the gateway's rule).
BEGIN;
SELECT plan(30);
\ir lib/ack_fixture.sql

-- Every case of tests/fixtures/status_normalisation.json, the table the
-- gateway's normalise_status is tested against too (read by psql from the
-- repository's top directory, where pg_prove runs).
\set cases `cat tests/fixtures/status_normalisation.json`
SELECT is(pgcursor.normalise_status(c -> 'status'), c ->> 'becomes',
          coalesce((c -> 'status')::text, 'absent') || ' becomes ' || (c ->> 'becomes'))
  FROM jsonb_array_elements((:'cases'::jsonb) -> 'cases') WITH ORDINALITY AS x(c, n) ORDER BY n;
SELECT is((SELECT count(*)::int FROM jsonb_array_elements((:'cases'::jsonb) -> 'cases')), 22, 'the table has its 22 cases');

-- Through ack_group: an unrecognised status is a charged failure, never an error.
SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('success:15'))), 'ok rel', '"success" is accepted as a nack, no error');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=1', '"success" charged the retry budget like failed');

SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L',
          jsonb_build_array(jsonb_build_object('transactionId', 't15', 'status', 42)))), 'ok rel', 'numeric status accepted as a nack');
SELECT is(pg_temp.state(:'p'), 'cursor=9 lease=none counter=1', 'numeric status charged the budget');

SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('absent:19'))), 'ok rel', 'absent status completes');
SELECT is(pg_temp.state(:'p'), 'cursor=19 lease=none counter=0', 'absent status moved the cursor to 19');

SELECT pg_temp.setup() AS p \gset
SELECT is(pg_temp.brief(pg_temp.ack(:'p', 'L', pg_temp.items('null:14') || pg_temp.items('Completed:16'))),
          'ok rel; ok rel', 'null completes 14, "Completed" fails 16');

SELECT * FROM finish();
ROLLBACK;
