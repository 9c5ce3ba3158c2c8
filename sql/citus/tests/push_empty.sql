-- make test-citus: a push of no items answers none, as sql/'s push does
-- (the Citus lock_heads failed on the push's empty list of partitions, and
-- the gateway answered 500).
SELECT plan(2);
SELECT is((SELECT count(*) FROM pgcursor.push_items('{}'::text[], '{}'::jsonb[])), 0::bigint,
          'push_items of no items answers no rows');
SELECT is(pgcursor.push('{"items": []}'), '[]'::jsonb, 'push of no items answers []');
SELECT * FROM finish();
