-- ack-contract §2: status normalisation, in normalise_status() and through
-- ack_group() (a psql caller gets the gateway's rule).
BEGIN;
SELECT plan(21);
\ir lib/ack_fixture.sql

SELECT is(pgcursor.normalise_status('"completed"'), 'completed', '"completed" stays completed');
SELECT is(pgcursor.normalise_status('"failed"'), 'failed', '"failed" stays failed');
SELECT is(pgcursor.normalise_status('"retry"'), 'retry', '"retry" stays retry');
SELECT is(pgcursor.normalise_status('"dlq"'), 'dlq', '"dlq" stays dlq');
SELECT is(pgcursor.normalise_status(NULL), 'completed', 'absent becomes completed');
SELECT is(pgcursor.normalise_status('null'), 'completed', 'JSON null becomes completed');
SELECT is(pgcursor.normalise_status('"success"'), 'failed', '"success" becomes failed');
SELECT is(pgcursor.normalise_status('"Completed"'), 'failed', '"Completed" (wrong case) becomes failed');
SELECT is(pgcursor.normalise_status('"FAILED"'), 'failed', '"FAILED" becomes failed');
SELECT is(pgcursor.normalise_status('""'), 'failed', 'empty string becomes failed');
SELECT is(pgcursor.normalise_status('" dlq"'), 'failed', '" dlq" (leading space) becomes failed');
SELECT is(pgcursor.normalise_status('1'), 'failed', 'a number becomes failed');
SELECT is(pgcursor.normalise_status('{"s": "completed"}'), 'failed', 'an object becomes failed');
SELECT is(pgcursor.normalise_status('true'), 'failed', 'a boolean becomes failed');

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
