-- Small predicates shared by several function families. This file sorts
-- before the LANGUAGE sql functions that call it, which PostgreSQL checks
-- at creation.

-- Is v absent/null (when optional) or a UUID string?
CREATE OR REPLACE FUNCTION pgcursor.is_uuid_value(v jsonb, optional boolean)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN optional
        ELSE jsonb_typeof(v) = 'string'
             AND (v #>> '{}') ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
    END
$$;
