#!/usr/bin/env bash
# The embedded PostgreSQL: a private cluster driven by the system's initdb/pg_ctl.
#
#   scripts/pg.sh start DATADIR   initdb if needed, start, create db pgcursor, print URL
#   scripts/pg.sh stop  DATADIR   stop (fast); fine if it is not running
#   scripts/pg.sh crash DATADIR   stop -m immediate, like a crash (the next start recovers)
#   scripts/pg.sh url   DATADIR   print the connection URL
#   scripts/pg.sh bindir          print the directory of the server binaries
#
# Next to DATADIR live its companions: ../port (the recorded TCP port),
# ../sock (the unix socket directory) and ../log/postgres.log.
# PGCURSOR_PG_BINDIR overrides where the server binaries are found.
set -euo pipefail

die() { echo "pg.sh: $*" >&2; exit 1; }
say() { echo "pg.sh: $*" >&2; }

usage() { die "usage: $0 start|stop|crash|url DATADIR | $0 bindir"; }

# The server binaries: explicit override, then Debian's PostgreSQL 15 (the
# version pgcursor is built for, whose pgTAP `make deps` installs), then
# pg_config, then the newest Debian install.
find_bindir() {
    if [[ -n "${PGCURSOR_PG_BINDIR:-}" ]]; then
        echo "$PGCURSOR_PG_BINDIR"; return
    fi
    if [[ -x /usr/lib/postgresql/15/bin/initdb ]]; then
        echo /usr/lib/postgresql/15/bin; return
    fi
    local dir
    if command -v pg_config >/dev/null; then
        dir=$(pg_config --bindir)
        if [[ -x "$dir/initdb" ]]; then echo "$dir"; return; fi
    fi
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
    [[ -n "$dir" && -x "$dir/initdb" ]] || die "PostgreSQL server binaries not found (run: make deps)"
    echo "$dir"
}

# initdb/postgres/pg_ctl refuse to run as root: use Debian's postgres user then.
as_owner() {
    if [[ $EUID -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A port nobody answers on: the kernel picks one, else probe at random.
free_port() {
    if command -v python3 >/dev/null; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
        return
    fi
    local p
    for _ in $(seq 1 100); do
        p=$((20000 + RANDOM % 40000))
        port_busy "$p" || { echo "$p"; return; }
    done
    die "no free port found"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

url() { echo "postgres://postgres@127.0.0.1:$(cat "$RUN/port")/pgcursor"; }

is_running() {
    [[ -f "$DATADIR/postmaster.pid" ]] && as_owner "$BIN/pg_ctl" status -D "$DATADIR" >/dev/null 2>&1
}

# A postmaster.pid whose process is gone (or is not a postgres) blocks a start.
remove_stale_pid() {
    local pidfile="$DATADIR/postmaster.pid" pid
    [[ -f "$pidfile" ]] || return 0
    pid=$(head -n1 "$pidfile")
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && grep -q postgres "/proc/$pid/comm" 2>/dev/null; then
        return 0
    fi
    say "removing stale $pidfile (pid $pid is not running)"
    rm -f "$pidfile"
}

prepare_dirs() {
    mkdir -p "$RUN" "$RUN/sock" "$RUN/log"
    if [[ $EUID -eq 0 ]]; then
        # The postgres user must reach DATADIR; a mktemp dir is 0700 root.
        chmod 755 "$RUN"
        chown postgres: "$RUN/sock" "$RUN/log"
        if [[ -d "$DATADIR" ]]; then chown -R postgres: "$DATADIR"; fi
        as_owner test -x "$RUN" || die "user postgres cannot reach $RUN (check the permissions of its parents)"
    fi
}

init_cluster() {
    [[ -f "$DATADIR/PG_VERSION" ]] && return 0
    say "initdb $DATADIR"
    mkdir -p "$DATADIR"
    if [[ $EUID -eq 0 ]]; then chown postgres: "$DATADIR"; fi
    as_owner "$BIN/initdb" -D "$DATADIR" -U postgres -E UTF8 --no-locale --auth=trust >"$RUN/log/initdb.log"
    cat >>"$DATADIR/postgresql.conf" <<EOF

# pgcursor embedded cluster
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUN/sock'
max_connections = 200
shared_buffers = 128MB
EOF
}

# Reuse the recorded port unless something else took it meanwhile.
choose_port() {
    if [[ -f "$RUN/port" ]] && ! port_busy "$(cat "$RUN/port")"; then return 0; fi
    if [[ -f "$RUN/port" ]]; then say "port $(cat "$RUN/port") is taken, picking another"; fi
    free_port >"$RUN/port"
}

create_database() {
    local psql=("$BIN/psql" -X -q -h 127.0.0.1 -p "$(cat "$RUN/port")" -U postgres -d postgres -tA)
    if [[ -z "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'pgcursor'")" ]]; then
        "${psql[@]}" -c "CREATE DATABASE pgcursor"
    fi
}

start() {
    prepare_dirs
    init_cluster
    if is_running; then
        say "already running"
        url; return
    fi
    remove_stale_pid
    choose_port
    say "starting on port $(cat "$RUN/port"), log $RUN/log/postgres.log"
    as_owner "$BIN/pg_ctl" start -w -t 60 -D "$DATADIR" -l "$RUN/log/postgres.log" \
        -o "-p $(cat "$RUN/port")" >/dev/null 9>&- \
        || die "start failed; see $RUN/log/postgres.log"
    create_database
    url
}

stop() {
    [[ -d "$DATADIR" ]] || return 0
    if is_running; then
        as_owner "$BIN/pg_ctl" stop -w -m fast -D "$DATADIR" >/dev/null
        say "stopped"
    else
        say "not running"
    fi
}

# Like a power cut for the server: no checkpoint, the next start replays the WAL.
crash() {
    if is_running; then
        as_owner "$BIN/pg_ctl" stop -w -m immediate -D "$DATADIR" >/dev/null
        say "stopped at once (immediate)"
    else
        say "not running"
    fi
}

if [[ $# -eq 1 && $1 == bindir ]]; then find_bindir; exit 0; fi
[[ $# -eq 2 ]] || usage
CMD=$1
if [[ ! -d "$(dirname "$2")" ]]; then
    [[ $CMD == start ]] || { [[ $CMD == stop || $CMD == crash ]] && exit 0; die "no cluster at $2"; }
    mkdir -p "$(dirname "$2")"
fi
DATADIR="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
RUN=$(dirname "$DATADIR")
BIN=$(find_bindir)

# One pg.sh at a time per cluster (the server must not inherit fd 9).
exec 9>>"$RUN/.pg.lock"
flock 9

case "$CMD" in
    start) start ;;
    stop) stop ;;
    crash) crash ;;
    url) [[ -f "$RUN/port" ]] || die "no cluster at $DATADIR"; url ;;
    *) usage ;;
esac
