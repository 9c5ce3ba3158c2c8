-- pgcursor.push into queues with encryptionEnabled: only envelopes are stored
-- (docs/http-api.md "Encrypted queues"; the gateway seals,
-- gateway/src/encryption.rs).
BEGIN;
SELECT plan(11);

SELECT pgcursor.configure('{"queue":"t12-enc","options":{"encryptionEnabled":true}}');
SELECT pgcursor.configure('{"queue":"t12-open"}');

SELECT throws_ok($$SELECT pgcursor.push('{"items":[{"queue":"t12-open","payload":1},
                                                   {"queue":"t12-enc","payload":{"card":"4111"}}]}')$$,
                 'PCENC', NULL, 'a plaintext payload for an encrypted queue is refused');
SELECT is((SELECT count(*)::int FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
            WHERE p.queue IN ('t12-enc', 't12-open')), 0, '... and nothing of that push is written');

-- The detail names the refused queues as a JSON array (the gateway reads it).
CREATE FUNCTION pg_temp.refusal(req jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    PERFORM pgcursor.push(req);
    RETURN NULL;
EXCEPTION WHEN SQLSTATE 'PCENC' THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN d;
END $$;
SELECT is(pg_temp.refusal('{"items":[{"queue":"t12-enc","payload":"x"},{"queue":"t12-enc","payload":null}]}')::jsonb,
          '["t12-enc"]', 'the detail lists each refused queue once');

SELECT is(pgcursor.push('{"items":[{"queue":"t12-enc","payload":{"encrypted":"AA==","iv":"AA==","authTag":"AA=="}},
                                   {"queue":"t12-open","payload":{"plain":true}}]}') -> 0 ->> 'status',
          'queued', 'an envelope is accepted, beside plaintext for an unencrypted queue');
SELECT is(pg_temp.refusal('{"items":[{"queue":"t12-enc","payload":{"encrypted":"AA==","iv":"AA==","authTag":"AA==","x":1}}]}'),
          '["t12-enc"]', 'a fourth key is not an envelope');
SELECT is(pg_temp.refusal('{"items":[{"queue":"t12-enc","payload":{"encrypted":1,"iv":"AA==","authTag":"AA=="}}]}'),
          '["t12-enc"]', 'a non-string field is not an envelope');

SELECT throws_ok($$SELECT pgcursor.transaction('{"operations":[{"type":"push","items":[{"queue":"t12-enc","payload":2}]}]}')$$,
                 'PCENC', NULL, 'a transaction push is refused the same way');

SELECT is(pgcursor.push('{"items":[{"queue":"t12-new","payload":3}]}') -> 0 ->> 'status', 'queued',
          'an auto-created queue is not encrypted');

-- What the gateway asks before a push holding a payload shaped like an envelope.
SELECT is(pgcursor_internal.encrypted_among('{t12-open,t12-enc,t12-none,t12-enc}'), '{t12-enc}',
          'encrypted_among: the encrypted queues among those named, once each');

SELECT pgcursor.configure('{"queue":"t12-enc","options":{"encryptionEnabled":false}}');
SELECT is(pgcursor.push('{"items":[{"queue":"t12-enc","payload":4}]}') -> 0 ->> 'status', 'queued',
          'plaintext is taken again once encryption is off');
SELECT is((SELECT count(*)::int FROM pgcursor.messages m JOIN pgcursor.partitions p ON p.id = m.partition_id
            WHERE p.queue = 't12-enc'), 2, 'the envelope and the later plaintext are stored');

SELECT * FROM finish();
ROLLBACK;
