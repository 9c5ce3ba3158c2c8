#!/usr/bin/env bash
# The whole test suite on a throwaway PostgreSQL cluster, removed afterwards
# whatever happens: pgTAP (pg_prove), the bench's A/B procedures (bench/ab.sql,
# and bench/what-if-one-statement.sql with them),
# cargo test, the docs-check, the queen-mq compatibility suite, rustfmt,
# clippy (run beside the rest).
# Expects `make deps` and a build of every crate but the bench to have run
# (the Makefile's `test` does both).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/throwaway.sh

# Each step says when it starts, in seconds since the script did: where
# the suite's time goes, read off any run's log.
step() { printf '\n==> [%ss] %s\n' "$SECONDS" "$*"; }

# Jobs run beside the rest (`in_background NAME command...`), each logging
# to $tmp/NAME.log; `verdict NAME` waits for one, prints its log and fails
# when it failed.
declare -A background=()
in_background() {
    local name=$1
    shift
    "$@" >"$tmp/$name.log" 2>&1 &
    background[$name]=$!
}
verdict() {
    local status=0
    wait "${background[$1]}" || status=$?
    cat "$tmp/$1.log"
    return "$status"
}
# (`|| true`: the jobs have mostly ended by then, and a failing kill would
# stop the trap, under set -e, before cleanup stops the cluster.)
trap 'kill "${background[@]}" 2>/dev/null || true; cleanup' EXIT

# clippy checks every crate anew (check mode shares nothing with the
# build): 250 s of CPU, more than the build. The tests leave about a third
# of the CPU idle while they wait on timeouts, sockets and the database, so
# clippy runs beside them at the lowest priority and its verdict is read at
# the end. It has a target directory of its own: cargo locks one for the
# whole of a build, and `cargo test` would wait for clippy's. Not the bench
# (`make lint` and `make bench` check it): its sqlx and plotters add 70 s
# of CPU, and the suite must stay under 10 minutes on 2 cores.
step "cargo clippy, in the background until the end"
in_background clippy nice -n 19 \
    cargo clippy --workspace --exclude bench --all-targets --target-dir target/clippy -- -D warnings

step "throwaway cluster in $tmp"
start_throwaway_cluster
PGCURSOR_PG_BINDIR=$(scripts/pg.sh bindir)
GATEWAY_BIN=$(pwd)/target/debug/gateway
export PGCURSOR_PG_BINDIR GATEWAY_BIN

step "gateway migrate"
"$GATEWAY_BIN" migrate

step "pgTAP"
psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c 'CREATE EXTENSION IF NOT EXISTS pgtap'
port=${DATABASE_URL##*:}; port=${port%%/*}
pg_prove --host 127.0.0.1 --port "$port" --username postgres --dbname pgcursor tests/sql/*.sql

step "bench/ab.sql and bench/what-if-one-statement.sql (the A/B timing procedures of bench/README.md run, in a database of their own)"
ab_url=${DATABASE_URL%/*}/ab_smoke
psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c 'CREATE DATABASE ab_smoke'
DATABASE_URL=$ab_url RUST_LOG=warn "$GATEWAY_BIN" migrate
psql -X -q -v ON_ERROR_STOP=1 "$ab_url" -f bench/ab.sql \
    -c "CALL ab_push(4, 'pgcursor.push_items', 'pgcursor.push_items')" \
    -c "CALL ab_pop(4, 'pgcursor.pop_messages', 'pgcursor.pop_messages')" \
    -c "CALL ab_ack(4, 'pgcursor.ack_group', 'pgcursor.ack_group')"
# (last: it replaces pop_messages and ack_group in that database)
psql -X -q -v ON_ERROR_STOP=1 "$ab_url" -f bench/what-if-one-statement.sql \
    -c "CALL ab_pop(4, 'pgcursor.pop_messages', 'pgcursor.pop_messages_full')" \
    -c "CALL ab_ack(4, 'pgcursor.ack_group', 'pgcursor.ack_group_full')"
psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c 'DROP DATABASE ab_smoke'

# Three tests at a time on two cores: many of them wait (on a lease, a
# timeout, a client that stops reading, a browser's refresh) more than they
# compute; at two, the HTTP tests left a third of the CPU idle. The soak
# (a minute, on a cluster of its own, using about half a core) runs beside
# them rather than after them.
step "cargo test (the soak in the background)"
in_background soak cargo test --workspace --exclude bench --test soak -- --exact soak
cargo test --workspace --exclude bench -- --test-threads=3 --skip soak --exact

step "the soak's verdict"
verdict soak

step "docs-check (docs/sql-api.md examples against their recorded output)"
scripts/docs-check.sh

step "queen-mq compatibility (tests/compat)"
start_gateway
PGCURSOR_URL=$GATEWAY_URL tests/compat/run.sh || { cat "$tmp/gateway.log"; exit 1; }
stop_gateway

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy's verdict"
verdict clippy

step "all tests passed"
