-- Shared by the pgTAP files that need a second (or ninth) session: \ir'd
-- inside their transaction. A dblink session sees only committed data, so
-- each file creates and removes what its sessions use itself.

CREATE EXTENSION IF NOT EXISTS dblink;

-- A libpq connection string to this very database, over the server's own socket.
CREATE FUNCTION pg_temp.connstr() RETURNS text LANGUAGE sql AS $$
    SELECT format('dbname=%s user=%s port=%s host=%s', current_database(), current_user, current_setting('port'),
                  coalesce(nullif(split_part(current_setting('unix_socket_directories'), ',', 1), ''), 'localhost'))
$$;

-- The sessions' backend pids, for until_blocked.
CREATE TEMP TABLE session_pids (name text PRIMARY KEY, pid integer) ON COMMIT DROP;

-- Opens the named dblink sessions.
CREATE FUNCTION pg_temp.open_sessions(VARIADIC names text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n text;
BEGIN
    FOREACH n IN ARRAY names LOOP
        PERFORM dblink_connect(n, pg_temp.connstr());
        INSERT INTO session_pids SELECT n, x FROM dblink(n, 'SELECT pg_backend_pid()') AS t(x integer);
    END LOOP;
END $$;

-- Waits (up to 10 s) until the named session's call (sent with
-- dblink_send_query) waits for a lock; false if it never does.
CREATE FUNCTION pg_temp.until_blocked(name text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    who integer := (SELECT p.pid FROM session_pids p WHERE p.name = until_blocked.name);
BEGIN
    FOR i IN 1 .. 1000 LOOP
        PERFORM pg_stat_clear_snapshot();
        IF EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = who AND a.wait_event_type IN ('Lock', 'Advisory')) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN false;
END $$;

-- The one text column a session's call (sent with dblink_send_query)
-- answered, or its error as 'error: ' and the message.
CREATE FUNCTION pg_temp.answer(name text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    x text;
BEGIN
    BEGIN
        SELECT t.x INTO x FROM dblink_get_result(name) AS t(x text);
    EXCEPTION WHEN others THEN
        x := 'error: ' || SQLERRM;
    END;
    PERFORM FROM dblink_get_result(name) AS t(x text);  -- the end of the results
    RETURN x;
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
