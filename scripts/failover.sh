#!/usr/bin/env bash
# `make test-failover`: a failover that loses nothing.
#
# A primary and a synchronous streaming standby (PostgreSQL's own
# replication: pg_basebackup -R, a physical slot, synchronous_standby_names,
# synchronous_commit = on), two gateways given both hosts with
# target_session_attrs=read-write, and the soak (tests/soak) in failover
# mode: at 40 % of FAILOVER_SECONDS (default 60) of producing, the primary is
# stopped -m immediate and, FAILOVER_PROMOTE_DELAY seconds later (default 5),
# the standby promoted; the gateways keep running.
# The soak's checker then proves that everything answered before the crash
# is on the promoted standby, that nothing was lost at all, and that push,
# pop and ack succeed again within 60 s through the same gateway processes.
# The timings go to target/failover/report.txt, the soak's output to
# target/failover/soak.log.
#
# FAILOVER_CONTROL=1 is the control run, which must FAIL: asynchronous
# replication, and the standby's WAL receiver frozen 3 s before the crash and
# killed after it, so the standby misses the last commits; the checker must
# report them missing (it shows the check is not vacuous).
#
# Everything lives under one temp dir; the clusters, the soak and its
# gateways are stopped and the dir removed whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

tmp=$(mktemp -d)
chmod 755 "$tmp" # as root, the postgres user must reach the clusters inside
primary=$tmp/primary/pg
standby=$tmp/standby/pg
log=$tmp/soak.log
soak_pid=
cleanup() {
    # The soak runs in its own process group (setsid): that takes its
    # gateways too, even if it could not drop them itself.
    if [[ -n $soak_pid ]]; then kill -- -"$soak_pid" 2>/dev/null || true; fi
    scripts/pg.sh stop "$standby" >/dev/null 2>&1 || true
    scripts/pg.sh stop "$primary" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BIN=$(scripts/pg.sh bindir)
# initdb, pg_basebackup and pg_ctl refuse to run as root.
as_owner=()
if [[ $EUID -eq 0 ]]; then as_owner=(runuser -u postgres --); fi
port_of() { cat "$(dirname "$1")/port"; }
sql() { # sql DATADIR QUERY...: one psql -c per query (ALTER SYSTEM needs its own)
    local dir=$1; shift
    local args=()
    for q in "$@"; do args+=(-c "$q"); done
    "$BIN/psql" -X -q -tA -h 127.0.0.1 -p "$(port_of "$dir")" -U postgres -d pgcursor "${args[@]}"
}

step "build (gateway and the soak, debug)"
nice cargo build -p gateway
nice cargo test -p pgcursor-tests --test soak --no-run

step "primary in $tmp/primary"
scripts/pg.sh start "$primary" >/dev/null
# The standby's slot: the primary keeps the WAL it has not received yet.
sql "$primary" "SELECT pg_create_physical_replication_slot('standby1')" >/dev/null

step "standby in $tmp/standby (pg_basebackup -R, slot standby1)"
mkdir -p "$standby"
chmod 700 "$standby"
if [[ $EUID -eq 0 ]]; then chown -R postgres: "$tmp/standby"; fi
"${as_owner[@]}" "$BIN/pg_basebackup" -h 127.0.0.1 -p "$(port_of "$primary")" -U postgres \
    -D "$standby" -R -S standby1 -X stream -c fast
# -R wrote primary_conninfo; add the name synchronous_standby_names refers
# to, and a socket directory of its own (postgresql.conf came from the primary).
cat >>"$standby/postgresql.auto.conf" <<EOF
primary_conninfo = 'host=127.0.0.1 port=$(port_of "$primary") user=postgres application_name=standby1'
unix_socket_directories = '$tmp/standby/sock'
EOF
scripts/pg.sh start "$standby" >/dev/null

control=${FAILOVER_CONTROL:-0}
want=sync
if [[ $control == 1 ]]; then
    step "CONTROL RUN: asynchronous replication (this run must fail)"
    want=async
else
    step "synchronous replication: synchronous_standby_names = 'FIRST 1 (standby1)'"
    # Set on the primary only, after the base backup: the promoted standby
    # then commits on its own (it has no standby to wait for).
    sql "$primary" "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby1)'" \
        "ALTER SYSTEM SET synchronous_commit = on" "SELECT pg_reload_conf()" >/dev/null
fi
for _ in $(seq 1 100); do
    state=$(sql "$primary" "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")
    [[ $state == "$want" ]] && break
    sleep 0.1
done
[[ $state == "$want" ]] || { echo "failover.sh: the standby is not $want (state: '$state')" >&2; exit 1; }
sql "$primary" "SELECT 'primary: ' || application_name || ' ' || state || ', ' || sync_state FROM pg_stat_replication"
echo "standby: in recovery = $(sql "$standby" "SELECT pg_is_in_recovery()")"

url="postgres://postgres@127.0.0.1:$(port_of "$primary"),127.0.0.1:$(port_of "$standby")/pgcursor?target_session_attrs=read-write"
echo "DATABASE_URL=$url"

step "gateway migrate (through the two-host URL)"
DATABASE_URL=$url RUST_LOG=warn target/debug/gateway migrate

step "soak in failover mode (${FAILOVER_SECONDS:-60} s producing, then the drain and the check)"
export TMPDIR=$tmp
export GATEWAY_BIN=$PWD/target/debug/gateway
export PGCURSOR_PG_BINDIR=$BIN
export PGCURSOR_SOAK_SECONDS=${FAILOVER_SECONDS:-60}
export PGCURSOR_SOAK_DATABASE_URL=$url
export PGCURSOR_SOAK_CRASH_COMMAND="'$PWD/scripts/pg.sh' crash '$primary'"
if [[ $control == 1 ]]; then
    # SIGKILL also drops what the frozen receiver had not read off its socket.
    receiver=$(sql "$standby" "SELECT pid FROM pg_stat_wal_receiver")
    PGCURSOR_SOAK_CRASH_COMMAND="kill -STOP $receiver; sleep 3; $PGCURSOR_SOAK_CRASH_COMMAND; kill -KILL $receiver"
fi
# The promotion comes FAILOVER_PROMOTE_DELAY seconds (default 5) after the
# crash, as it would from an operator or a failover manager: meanwhile the
# only server left is a read-only standby, which the gateways must refuse.
export PGCURSOR_SOAK_PROMOTE_COMMAND="sleep ${FAILOVER_PROMOTE_DELAY:-5} && ${as_owner[*]} '$BIN/pg_ctl' promote -w -t 60 -D '$standby'"
: >"$log"
setsid cargo test -p pgcursor-tests --test soak -- --nocapture >"$log" 2>&1 &
soak_pid=$!
tail -n +1 -f --pid="$soak_pid" "$log" &
rc=0
wait "$soak_pid" || rc=$?
soak_pid=
sleep 0.3 # the tail's last lines

out=target/failover
if [[ $control == 1 ]]; then out=target/failover-control; fi
mkdir -p "$out"
cp "$log" "$out/soak.log"
{
    echo "# make test-failover, $(date -u +%FT%TZ), FAILOVER_CONTROL=$control, exit $rc"
    grep -E '^soak: (Settings|.*fault at|.*failover|.*lost|.*pushed \(answered)' "$log" || true
    grep -m 5 '^failover lost' "$log" || true
} >"$out/report.txt"
step "report ($out/report.txt)"
cat "$out/report.txt"
echo "promoted standby: in recovery = $(sql "$standby" "SELECT pg_is_in_recovery()")"

if [[ $rc -ne 0 ]]; then
    for pg in "$primary" "$standby"; do
        echo "--- $(dirname "$pg")/log/postgres.log (last lines)"
        tail -n 20 "$(dirname "$pg")/log/postgres.log" || true
    done
    echo "failover.sh: FAILED" >&2
    exit "$rc"
fi
step "failover test passed"
