-- Shared by the pgTAP files that need a second (or ninth) session: \ir'd
-- inside their transaction. A dblink session sees only committed data, so
-- each file creates and removes what its sessions use itself.

CREATE EXTENSION IF NOT EXISTS dblink;

-- A libpq connection string to this very database, over the server's own socket.
CREATE FUNCTION pg_temp.connstr() RETURNS text LANGUAGE sql AS $$
    SELECT format('dbname=%s user=%s port=%s host=%s', current_database(), current_user, current_setting('port'),
                  coalesce(nullif(split_part(current_setting('unix_socket_directories'), ',', 1), ''), 'localhost'))
$$;

-- Opens the named dblink sessions.
CREATE FUNCTION pg_temp.open_sessions(VARIADIC names text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n text;
BEGIN
    FOREACH n IN ARRAY names LOOP
        PERFORM dblink_connect(n, pg_temp.connstr());
    END LOOP;
END $$;

-- Closes them.
CREATE FUNCTION pg_temp.close_sessions(VARIADIC names text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n text;
BEGIN
    FOREACH n IN ARRAY names LOOP
        PERFORM dblink_disconnect(n);
    END LOOP;
END $$;
