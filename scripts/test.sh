#!/usr/bin/env bash
# The whole test suite on a throwaway PostgreSQL cluster, removed afterwards
# whatever happens: pgTAP (pg_prove), cargo test, rustfmt, clippy.
# Expects `make deps build` to have run (the Makefile's `test` does).
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
cleanup() {
    scripts/pg.sh stop "$tmp/pg" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n==> %s\n' "$*"; }

step "throwaway cluster in $tmp"
DATABASE_URL=$(scripts/pg.sh start "$tmp/pg" | tail -n1)
PGCURSOR_PG_BINDIR=$(scripts/pg.sh bindir)
GATEWAY_BIN=$(pwd)/target/debug/gateway
export DATABASE_URL PGCURSOR_PG_BINDIR GATEWAY_BIN

step "gateway migrate"
"$GATEWAY_BIN" migrate

step "pgTAP"
psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c 'CREATE EXTENSION IF NOT EXISTS pgtap'
port=${DATABASE_URL##*:}; port=${port%%/*}
pg_prove --host 127.0.0.1 --port "$port" --username postgres --dbname pgcursor tests/sql/*.sql

step "cargo test"
cargo test --workspace

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "all tests passed"
