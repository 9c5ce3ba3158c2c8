-- Parsers for the fields of jsonb requests. Each answers the field's value
-- (or a default when it is absent or null) and raises 22023 naming the field
-- otherwise, the gateway's 400 rule, so psql callers get it too.

-- Is v absent/null (when optional) or a UUID string?
CREATE OR REPLACE FUNCTION pgcursor_internal.is_uuid_value(v jsonb, optional boolean)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN optional
        ELSE jsonb_typeof(v) = 'string'
             AND (v #>> '{}') ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
    END
$$;

-- A string field that may be absent or null; otherwise it must be a string.
CREATE OR REPLACE FUNCTION pgcursor_internal.optional_text(req jsonb, key text, label text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF req -> key IS NULL OR req -> key = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(req -> key) <> 'string' THEN
        RAISE EXCEPTION '% must be a string', coalesce(label, key) USING ERRCODE = '22023';
    END IF;
    RETURN req ->> key;
END $$;

-- The consumer group a request names (consumerGroup): absent, null or ""
-- mean queue mode, __QUEUE_MODE__, as an empty consumerGroup query
-- parameter does (a group named "" could never pop); otherwise a string.
CREATE OR REPLACE FUNCTION pgcursor_internal.group_arg(req jsonb)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(nullif(pgcursor_internal.optional_text(req, 'consumerGroup'), ''), '__QUEUE_MODE__')
$$;

-- A retention span `keep` (the minute and snapshot recorders): above 0 and
-- at most 100 years, else 22023 naming it. Null, zero or negative would
-- write nothing and purge everything; a span past the calendar overflows.
CREATE OR REPLACE FUNCTION pgcursor_internal.keep_arg(keep interval)
RETURNS interval LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF keep IS NULL OR keep <= interval '0' OR keep > interval '100 years' THEN
        RAISE EXCEPTION 'keep must be an interval above 0 and at most 100 years' USING ERRCODE = '22023';
    END IF;
    RETURN keep;
END $$;

-- An object field that may be absent or null (NULL then); otherwise it must
-- be an object: 22023 "<label> must be an object".
CREATE OR REPLACE FUNCTION pgcursor_internal.optional_object(req jsonb, key text, label text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF req -> key IS NULL OR req -> key = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(req -> key) <> 'object' THEN
        RAISE EXCEPTION '% must be an object', label USING ERRCODE = '22023';
    END IF;
    RETURN req -> key;
END $$;

-- Names that become index keys (queue, partition, consumer group, namespace,
-- task, trace name) and transactionIds are at most 1024 bytes. PostgreSQL
-- refuses a btree key past about 2,700 bytes, and some keys hold two names:
-- an INSERT failing there names no field (on Citus, an internal error), so
-- a name is checked where one is created. (SQL, so it inlines.)
CREATE OR REPLACE FUNCTION pgcursor_internal.too_long_for_a_key(name text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT octet_length(name) > 1024
$$;

-- "<label> must be at most 1024 bytes" for a name too long for a key; NULL
-- when it fits.
CREATE OR REPLACE FUNCTION pgcursor_internal.long_key_error(label text, name text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN pgcursor_internal.too_long_for_a_key(name) THEN label || ' must be at most 1024 bytes' END
$$;

-- Raises that error as a 22023.
CREATE OR REPLACE FUNCTION pgcursor_internal.refuse_long_key(label text, name text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    err text := pgcursor_internal.long_key_error(label, name);
BEGIN
    IF err IS NOT NULL THEN
        RAISE EXCEPTION '%', err USING ERRCODE = '22023';
    END IF;
END $$;

-- An integer field (JSON number or digit string) from lowest to highest;
-- absent or null = NULL. Anything else raises 22023 "<label> must be <what>",
-- or "<label> must be at most <highest>" for an integer past highest.
CREATE OR REPLACE FUNCTION pgcursor_internal.integer_arg(
    req jsonb, key text, lowest numeric, highest numeric, label text, what text)
RETURNS numeric LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := req -> key;
    n numeric;
BEGIN
    IF v IS NULL OR v = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) = 'number' THEN
        n := v::numeric;
    ELSIF jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^\s*[0-9]{1,255}\s*$' THEN
        n := (v #>> '{}')::numeric;
    END IF;
    IF n IS NULL OR n <> trunc(n) OR n < lowest THEN
        RAISE EXCEPTION '% must be %', label, what USING ERRCODE = '22023';
    ELSIF n > highest THEN  -- what it must be, it is: say the bound
        RAISE EXCEPTION '% must be at most %', label, highest USING ERRCODE = '22023';
    END IF;
    RETURN n;
END $$;

-- A positive integer (JSON number or digit string); absent or null = dflt.
CREATE OR REPLACE FUNCTION pgcursor_internal.positive_int_arg(req jsonb, key text, dflt integer)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(pgcursor_internal.integer_arg(req, key, 1, 2147483647, key, 'a positive integer')::integer,
                    dflt)
$$;

-- A non-negative integer (JSON number or digit string); absent or null = dflt.
CREATE OR REPLACE FUNCTION pgcursor_internal.non_negative_int_arg(req jsonb, key text, dflt integer)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(pgcursor_internal.integer_arg(req, key, 0, 2147483647, key, 'a non-negative integer')::integer,
                    dflt)
$$;

-- A non-negative bigint (JSON number or digit string), such as an offset or
-- a count; absent or null = NULL. The error names `label` (default key).
CREATE OR REPLACE FUNCTION pgcursor_internal.non_negative_bigint_arg(req jsonb, key text, label text DEFAULT NULL)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT pgcursor_internal.integer_arg(req, key, 0, 9223372036854775807, coalesce(label, key),
                                         'a non-negative integer')::bigint
$$;

-- One count of a gateway's minute (a figure, ms waited): a non-negative
-- integer of at most 10^12 (a minute of one process counts far less), so
-- the sums it is added to never overflow a bigint; absent or null = NULL.
CREATE OR REPLACE FUNCTION pgcursor_internal.figure_arg(r jsonb, key text, label text)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT pgcursor_internal.integer_arg(r, key, 0, 1000000000000, label, 'a non-negative integer')::bigint
$$;

-- The counts named `figure` of r, in that order (absent = 0), such as a
-- per-minute row's figures; a bad one raises 22023 naming <at><name>.
CREATE OR REPLACE FUNCTION pgcursor_internal.figure_args(r jsonb, at text, figure text[])
RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY(SELECT coalesce(pgcursor_internal.figure_arg(r, f, at || f), 0)
                   FROM unnest(figure) WITH ORDINALITY u(f, k) ORDER BY k)
$$;

-- A boolean (JSON boolean or "true"/"false"); absent or null = dflt.
CREATE OR REPLACE FUNCTION pgcursor_internal.bool_arg(req jsonb, key text, dflt boolean)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := req -> key;
BEGIN
    IF v IS NULL OR v = 'null'::jsonb THEN
        RETURN dflt;
    ELSIF jsonb_typeof(v) = 'boolean' THEN
        RETURN v::boolean;
    ELSIF v IN ('"true"'::jsonb, '"false"'::jsonb) THEN
        RETURN (v #>> '{}')::boolean;
    END IF;
    RAISE EXCEPTION '% must be a boolean', key USING ERRCODE = '22023';
END $$;

-- `t`, given as `key`, if it lies from `earliest` to `latest`. Answers show
-- times as RFC 3339, whose years run from 0000 to 9999: by default a time
-- outside AD 1 to 9999 (BC, 'infinity', a fifth digit) is refused, since it
-- would come back wrong. NULL stays NULL.
CREATE OR REPLACE FUNCTION pgcursor_internal.time_within(
    t timestamptz, key text,
    earliest timestamptz DEFAULT '0001-01-01 00:00:00Z',
    latest timestamptz DEFAULT '9999-12-31 23:59:59.999999Z')
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT t BETWEEN earliest AND latest THEN
        RAISE EXCEPTION '% must be a time from % to %', key,
            to_char(earliest AT TIME ZONE 'UTC', 'YYYY-MM-DD'), to_char(latest AT TIME ZONE 'UTC', 'YYYY-MM-DD')
            USING ERRCODE = '22023';
    END IF;
    RETURN t;
END $$;

-- The time `v` (ISO 8601, or anything timestamptz reads, e.g. 'now') given
-- as `key`, within `earliest` and `latest` (time_within).
CREATE OR REPLACE FUNCTION pgcursor_internal.time_arg(
    v text, key text,
    earliest timestamptz DEFAULT '0001-01-01 00:00:00Z',
    latest timestamptz DEFAULT '9999-12-31 23:59:59.999999Z')
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    t timestamptz;
BEGIN
    BEGIN  -- an EXCEPTION block costs a subtransaction: only when there is a value
        t := v::timestamptz;
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION '% must be an ISO timestamp', key USING ERRCODE = '22023';
    END;
    RETURN pgcursor_internal.time_within(t, key, earliest, latest);
END $$;

-- A timestamp (time_arg) at `key` of the request; absent, null or empty = NULL.
DROP FUNCTION IF EXISTS pgcursor_internal.timestamp_arg(jsonb, text);
CREATE OR REPLACE FUNCTION pgcursor_internal.timestamp_arg(
    req jsonb, key text,
    earliest timestamptz DEFAULT '0001-01-01 00:00:00Z',
    latest timestamptz DEFAULT '9999-12-31 23:59:59.999999Z')
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := nullif(pgcursor_internal.optional_text(req, key), '');
BEGIN
    IF v IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN pgcursor_internal.time_arg(v, key, earliest, latest);
END $$;

-- An integer queue option: absent or null keeps the current value; anything
-- that is not an integer >= min_value (or out of int range) is a 22023.
CREATE OR REPLACE FUNCTION pgcursor_internal.option_int(
    opts jsonb, key text, current_value integer, min_value integer DEFAULT 0)
RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := opts -> key;
    what text := CASE min_value WHEN 0 THEN 'a non-negative integer'
                                WHEN 1 THEN 'a positive integer'
                                ELSE 'an integer' END;
    n numeric;
BEGIN
    IF v IS NULL OR v = 'null'::jsonb THEN
        RETURN current_value;
    END IF;
    IF jsonb_typeof(v) = 'number' THEN
        n := v::numeric;
        IF n = trunc(n) AND n >= coalesce(min_value, -2147483648) AND n <= 2147483647 THEN
            RETURN n::integer;
        ELSIF n = trunc(n) AND n > 2147483647 THEN  -- what it must be, it is: say the bound
            RAISE EXCEPTION 'options.% must be at most 2147483647', key USING ERRCODE = '22023';
        END IF;
    END IF;
    RAISE EXCEPTION 'options.% must be %', key, what USING ERRCODE = '22023';
END $$;

-- A nullable boolean queue option: absent keeps the current value, null
-- clears it (null is meaningful: "unset", which counts as on for dead-lettering).
CREATE OR REPLACE FUNCTION pgcursor_internal.option_bool(opts jsonb, key text, current_value boolean)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := opts -> key;
BEGIN
    IF v IS NULL THEN
        RETURN current_value;
    END IF;
    IF v = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) <> 'boolean' THEN
        RAISE EXCEPTION 'options.% must be a boolean or null', key USING ERRCODE = '22023';
    END IF;
    RETURN v::boolean;
END $$;
